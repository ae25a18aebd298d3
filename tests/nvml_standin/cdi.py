"""A CDI spec for the stand-in GPU, laid out as NVIDIA's generator lays one out.

The Container Device Interface (CDI, https://github.com/cncf-tags/container-device-interface,
SPEC.md) gives a container its devices from a spec file (/etc/cdi, /var/run/cdi, or a
directory the engine is told about): ``podman run --device nvidia.com/gpu=all``, and
Docker 25+ with CDI enabled. NVIDIA's ``nvidia-ctk cdi generate`` (nvidia-container-toolkit,
cmd/nvidia-ctk/cdi/generate and its generate_test.go, default ``nvml`` mode, device names
by index) writes:

- ``cdiVersion: 0.5.0``, ``kind: nvidia.com/gpu``;
- one device per GPU named by its index (``"0"``, ``"1"``; ``--device-name-strategy uuid``
  names them ``GPU-<uuid>`` instead), whose edits are that GPU's node ``/dev/nvidiaN``;
  and ``all``, the union of every device's edits;
- common ``containerEdits``: ``env`` with ``NVIDIA_VISIBLE_DEVICES=void`` (so a legacy
  NVIDIA runtime hook, should one run too, injects nothing more), the control nodes
  (``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``), the driver
  libraries mounted read-only at their host paths under their versioned names
  (``libnvidia-ml.so.<driver version>``, options ro, nosuid, nodev, rbind, rprivate), and
  ``createContainer`` hooks of ``nvidia-cdi-hook``, among them ``update-ldcache --folder
  <library dir>``, which runs ldconfig in the container so ``libnvidia-ml.so.1`` resolves.

The stand-in differs in these ways, each an option here:
- ``node_host``: the host has no /dev/nvidiaN, so every node stands for one real
  character device (``/dev/null``, as ``hostPath``): CDI runtimes refuse a node that is
  no device, and the probes only check that a node exists and may be opened. A rootful
  runtime makes the node from its type and numbers; a rootless one cannot and binds the
  host's node *at the container path* (runc: "error creating device nodes"), which the
  stand-in lacks, so ``node_mounts`` gives each node as a bind mount of ``node_host``
  instead: the bind a rootless runtime makes of a real node.
- ``hooks=False`` (``nvidia-ctk cdi generate --disable-hook all``): no nvidia-cdi-hook on
  a test host, so the library is mounted a second time at its soname, as the ldcache hook
  would make it resolve.
- ``config``: the stand-in's answers (its config file) mounted at
  /etc/stagecraft/nvml-standin.conf, where the stand-in reads them: the driver's state.

Pure logic (``gpus_from_config``, ``spec``, ``apply``'s plan) apart from the file writes of
``apply`` and ``write``. Command line: ``python tests/nvml_standin/cdi.py --config CONF
--library LIB [--node-host /dev/null] [--hooks] [-o OUT.json]``; bad input is one line on
stderr and exit 2, nothing written.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

CDI_VERSION = "0.5.0"
KIND = "nvidia.com/gpu"
SONAME = "libnvidia-ml.so.1"
LIBRARY_DIR = "/usr/lib/x86_64-linux-gnu"  # Debian multiarch, where the driver installs it
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
CONFIG_PATH = "/etc/stagecraft/nvml-standin.conf"  # nvml_standin.c's default config file
HOOK = "/usr/bin/nvidia-cdi-hook"
MOUNT_OPTIONS = ("ro", "nosuid", "nodev", "rbind", "rprivate")
NODE_MOUNT_OPTIONS = ("rw", "nosuid", "bind")
SCHEMA = Path(__file__).with_name("cdi.schema.json")
_STANDIN_UUID = "GPU-5fa1c0de-0000-4000-8000-{:012d}"  # nvml_standin.c's gpus= UUIDs


class Gpu(NamedTuple):
    """One GPU the spec gives: its NVML index and UUID (``""`` when unknown)."""

    index: int
    uuid: str = ""


class CdiError(ValueError):
    """Bad input for a spec: says what and where."""


def gpus_from_config(text: str, where: str = "config") -> list[Gpu]:
    """The GPUs a stand-in config describes, in NVML order, read as nvml_standin.c reads
    ``gpu=NAME|UUID|...`` and ``gpus=N|...`` lines (its generated UUIDs included).
    ``init_error``, ``error`` and ``hang`` lines change NVML's answers, not the hardware,
    so they are ignored. Raises CdiError for a ``gpus=`` count that is no number."""
    out: list[Gpu] = []
    for n, line in enumerate(text.splitlines(), 1):
        key, _, value = line.strip().partition("=")
        if key == "gpu":
            fields = value.split("|")
            out.append(Gpu(len(out), fields[1] if len(fields) > 1 else ""))
        elif key == "gpus":
            count = value.split("|")[0]
            if not count.isascii() or not count.isdigit():
                raise CdiError(f"{where}:{n}: gpus= needs a count first, got {count!r}")
            out += [Gpu(len(out) + i, _STANDIN_UUID.format(len(out) + i)) for i in range(int(count))]
    return out


def _node(path: str, node_host: str | None) -> dict[str, str]:
    return {"path": path} if node_host is None else {"path": path, "hostPath": node_host}


def _nodes(paths: Sequence[str], node_host: str | None, node_mounts: bool) -> dict[str, Any]:
    """The edits that give ``paths``: device nodes, or (``node_mounts``) bind mounts of
    ``node_host``, the bind a rootless runtime makes of a real node."""
    if node_mounts:
        return {"mounts": [{"hostPath": node_host, "containerPath": p, "options": list(NODE_MOUNT_OPTIONS)}
                           for p in paths]}
    return {"deviceNodes": [_node(p, node_host) for p in paths]}


def _mount(host: str, container: str) -> dict[str, Any]:
    return {"hostPath": host, "containerPath": container, "options": list(MOUNT_OPTIONS)}


def _hook(*args: str) -> dict[str, Any]:
    return {"hookName": "createContainer", "path": HOOK, "args": ["nvidia-cdi-hook", *args],
            "env": ["NVIDIA_CTK_DEBUG=false"]}


def _common(library: str, driver: str, *, node_host: str | None, node_mounts: bool, hooks: bool,
            config: str | None, library_dir: str) -> dict[str, Any]:
    versioned = f"{library_dir}/libnvidia-ml.so.{driver}"
    mounts = [_mount(library, versioned)]
    if not hooks:  # what update-ldcache would make resolve: the soname
        mounts.append(_mount(library, f"{library_dir}/{SONAME}"))
    if config is not None:
        mounts.append(_mount(config, CONFIG_PATH))
    nodes = _nodes(CONTROL_NODES, node_host, node_mounts)
    edits: dict[str, Any] = {"env": ["NVIDIA_VISIBLE_DEVICES=void"], "deviceNodes": nodes.get("deviceNodes", [])}
    if hooks:
        edits["hooks"] = [_hook("update-ldcache", "--folder", library_dir),
                          _hook("disable-device-node-modification")]
    edits["mounts"] = nodes.get("mounts", []) + mounts
    if not edits["deviceNodes"]:
        del edits["deviceNodes"]
    return edits


def spec(gpus: Sequence[Gpu], library: str, driver: str, *, names: str = "index",
         node_host: str | None = None, node_mounts: bool = False, hooks: bool = True,
         config: str | None = None, library_dir: str = LIBRARY_DIR) -> dict[str, Any]:
    """The CDI spec (a JSON-ready dict) giving ``gpus`` and the stand-in library.

    library: the host path of the stand-in libnvidia-ml.so.1; driver: the driver version
    its config reports (``550.54.15``), which names the mounted file as NVIDIA's generator
    names the real one. names: ``index`` or ``uuid`` (nvidia-ctk's device name strategies).
    node_host, node_mounts, hooks, config: the stand-in's differences (module docstring). Raises
    CdiError for no GPU (nvidia-ctk fails the same way), an unknown name strategy, a GPU
    without a UUID under ``uuid``, a relative path, or a driver version that is no
    ``digits(.digits)*``."""
    if not gpus:
        raise CdiError("no GPU to give: the stand-in config has no gpu= or gpus= line")
    if node_mounts and node_host is None:
        raise CdiError("node mounts need a node host (a real character device: /dev/null)")
    if names not in ("index", "uuid"):
        raise CdiError(f"device name strategy {names!r}: expected index or uuid")
    if not re.fullmatch(r"\d+(\.\d+)*", driver):
        raise CdiError(f"driver version {driver!r}: expected digits and dots (550.54.15)")
    for what, path in (("library", library), ("node host", node_host), ("config", config),
                       ("library dir", library_dir)):
        if path is not None and not path.startswith("/"):
            raise CdiError(f"{what} {path!r}: CDI paths must be absolute")
    devices = []
    for g in gpus:
        if names == "uuid" and not g.uuid:
            raise CdiError(f"GPU {g.index} has no UUID to name it by")
        name = str(g.index) if names == "index" else g.uuid
        devices.append({"name": name, "containerEdits": _nodes([f"/dev/nvidia{g.index}"], node_host, node_mounts)})
    key = "mounts" if node_mounts else "deviceNodes"
    every = [n for d in devices for n in d["containerEdits"][key]]
    devices.append({"name": "all", "containerEdits": {key: every}})
    common = _common(library, driver, node_host=node_host, node_mounts=node_mounts, hooks=hooks,
                     config=config, library_dir=library_dir)
    return {"cdiVersion": CDI_VERSION, "kind": KIND, "devices": devices, "containerEdits": common}


def edits_for(cdi: Mapping[str, Any], name: str) -> dict[str, list[Any]]:
    """The edits a runtime applies for ``<kind>=<name>``: the device's, then the spec's
    common ones (CDI SPEC.md: both apply), merged per field. Raises CdiError when the
    spec has no such device."""
    dev = next((d for d in cdi["devices"] if d["name"] == name), None)
    if dev is None:
        known = ", ".join(d["name"] for d in cdi["devices"])
        raise CdiError(f"{cdi['kind']}={name}: no such device in the spec (it has {known})")
    out: dict[str, list[Any]] = {"env": [], "deviceNodes": [], "mounts": [], "hooks": []}
    for edits in (dev["containerEdits"], cdi.get("containerEdits") or {}):
        for key in out:
            out[key] += edits.get(key) or []
    return out


def apply(cdi: Mapping[str, Any], name: str, root: Path) -> dict[str, str]:
    """Give a fixture root the device ``name`` as a runtime would: each device node an
    empty file (tests/fixtures/README.md: probes check existence and access only), each
    mount a copy of its host file at its container path. Hooks are not run. Returns the
    spec's environment (``{"NVIDIA_VISIBLE_DEVICES": "void"}``). Raises CdiError as
    ``edits_for`` does, OSError when a host file cannot be read."""
    edits = edits_for(cdi, name)
    for node in edits["deviceNodes"]:
        dest = root / node["path"].lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.touch()
    for mount in edits["mounts"]:
        dest = root / mount["containerPath"].lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        if mount["containerPath"].startswith("/dev/"):
            dest.touch()  # a node given as a bind mount: an empty file, as above
        else:
            shutil.copyfile(mount["hostPath"], dest)
    return dict(e.partition("=")[::2] for e in edits["env"])


def write(path: Path, cdi: Mapping[str, Any]) -> Path:
    """Write the spec as JSON (CDI reads .json and .yaml), mode 0644 as nvidia-ctk does."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(cdi, indent=2) + "\n")
    tmp.chmod(0o644)
    os.replace(tmp, path)
    return path


def _driver(text: str) -> str:
    """The driver version a stand-in config reports (nvml_standin.c's default otherwise)."""
    for line in text.splitlines():
        key, _, value = line.strip().partition("=")
        if key == "driver":
            return value
    return "550.54.15"


def main(argv: Sequence[str] | None = None) -> int:
    """``cdi.py --config CONF --library LIB [--node-host DEV] [--hooks] [--names index|uuid]
    [--mount-config] [-o OUT]``: the spec on stdout or in OUT. Exit 2 on bad input."""
    import argparse

    ap = argparse.ArgumentParser(prog="cdi.py", description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True, help="stand-in NVML config (tests/fixtures/nvml/*.conf)")
    ap.add_argument("--library", required=True, help="host path of the stand-in libnvidia-ml.so.1")
    ap.add_argument("--node-host", help="real character device every node binds (/dev/null)")
    ap.add_argument("--node-mounts", action="store_true",
                    help="give nodes as bind mounts of --node-host (rootless engines)")
    ap.add_argument("--hooks", action="store_true", help="nvidia-cdi-hook hooks, as NVIDIA writes them")
    ap.add_argument("--names", default="index", help="device names: index (default) or uuid")
    ap.add_argument("--mount-config", action="store_true", help=f"mount --config at {CONFIG_PATH}")
    ap.add_argument("-o", "--output", help="write here (JSON) instead of stdout")
    a = ap.parse_args(argv)
    try:
        if not Path(a.config).is_file():
            raise CdiError(f"--config {a.config}: no such file (see tests/fixtures/nvml/)")
        text = Path(a.config).read_text()
        if not Path(a.library).is_file():
            raise CdiError(f"--library {a.library}: no such file; build it with "
                           "`python tests/nvml_standin/standin.py build DIR`")
        cdi = spec(gpus_from_config(text, a.config), os.path.abspath(a.library), _driver(text),
                   names=a.names, node_host=a.node_host, node_mounts=a.node_mounts, hooks=a.hooks,
                   config=os.path.abspath(a.config) if a.mount_config else None)
    except (OSError, CdiError) as exc:
        print(f"cdi.py: {exc}", file=sys.stderr)
        return 2
    if a.output:
        write(Path(a.output), cdi)
    else:
        print(json.dumps(cdi, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
