"""Rootless Podman for the integration tests (tests/integration/test_podman.py).

Podman runs as the non-root user that scripts/podman-setup.sh makes (subordinate id
ranges, /run/user/UID, overlay storage): from root through ``runuser``, or directly when
this process is that user. Images come from the host's Docker engine (``docker save |
podman load``), once: an image whose ID the rootless store has already is not loaded
again (a 1 GB image takes about 80 s to load on this project's 2-core machine).

CDI specs go to /etc/cdi for a test's duration only (Podman 4.3, Debian 12, reads
/etc/cdi and /var/run/cdi and has no --cdi-spec-dir), under a ``stagecraft-cditest-``
name, and are removed after.
"""
from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / "scripts" / "podman-setup.sh"
USER = os.environ.get("STAGECRAFT_PODMAN_USER", "stagecraft-podman")
PREFIX = "stagecraft-cditest"
CDI_DIRS = (Path("/etc/cdi"), Path("/var/run/cdi"))


def not_ready() -> str:
    """Why rootless Podman cannot run here ("" when it can): podman-setup.sh --check's
    lines, or that this process can neither be nor become the user."""
    cp = subprocess.run(["bash", str(SETUP), "--check"], capture_output=True, text=True, timeout=60, check=False)
    if cp.returncode != 0:
        return f"{cp.stderr.strip()}; run `scripts/podman-setup.sh` as root"
    import pwd

    if os.geteuid() != 0 and pwd.getpwuid(os.geteuid()).pw_name != USER:
        return f"rootless Podman runs as {USER}: run these tests as root or as {USER}"
    return ""


def argv(args: Sequence[str], env: Mapping[str, str] | None = None) -> list[str]:
    """The command line that runs ``podman ARGS`` as the rootless user, with ``env``
    (e.g. CONTAINERS_CONF) added to its environment."""
    import pwd

    pw = pwd.getpwnam(USER)
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    if os.geteuid() == pw.pw_uid:
        return ["env", *extra, "podman", *args] if extra else ["podman", *args]
    return ["runuser", "-u", USER, "--", "env", f"XDG_RUNTIME_DIR=/run/user/{pw.pw_uid}",
            f"HOME={pw.pw_dir}", *extra, "podman", *args]


def podman(*args: str, timeout: float = 120, check: bool = True,
           env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run podman as the rootless user (cwd /: the user may not read the caller's), with
    ``env`` added. Raises AssertionError naming the command and its stderr when ``check``
    and it fails."""
    cp = subprocess.run(argv(args, env), capture_output=True, text=True, timeout=timeout, check=False, cwd="/")
    if check and cp.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {cp.returncode}: {cp.stderr.strip()[-2000:]}")
    return cp


def shim(dest: Path) -> Path:
    """A directory holding a ``podman`` script that runs the real one as the rootless user:
    put first on PATH, testinfra's podman backend (``podman://NAME``) reaches its
    containers. Returns the directory."""
    dest.mkdir(parents=True, exist_ok=True)
    script = dest / "podman"
    words = " ".join(f"'{w}'" for w in argv([])[:-1])
    script.write_text(f"#!/bin/sh\ncd / && exec {words} /usr/bin/podman \"$@\"\n")
    script.chmod(0o755)
    return dest


def load_from_docker(ref: str) -> str:
    """Make the rootless store hold the Docker engine's image ``ref`` (its ID, unchanged
    by save and load): loaded only when that ID is not there yet, so a run reuses what an
    earlier run loaded. A load that moves ``ref`` to a new ID leaves the old image
    untagged; untagged images are then pruned from the rootless store (the tests' own:
    nobody else uses this user's store), so rebuilt images do not pile up there. Returns
    the image ID. Raises AssertionError when Docker lacks ``ref`` or the load fails."""
    cp = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref],
                        capture_output=True, text=True, timeout=60, check=False)
    if cp.returncode != 0:
        raise AssertionError(f"the Docker engine has no image {ref}: build it (python build.py --tag ...)")
    image_id = cp.stdout.strip()
    if podman("image", "exists", image_id, check=False).returncode != 0:
        save = subprocess.Popen(["docker", "save", ref], stdout=subprocess.PIPE)
        load = subprocess.run(argv(["load", "-q"]), stdin=save.stdout, capture_output=True, text=True,
                              timeout=900, check=False, cwd="/")
        save.wait(timeout=60)
        if load.returncode != 0 or save.returncode != 0:
            raise AssertionError(f"docker save {ref} | podman load failed: {load.stderr.strip()[-2000:]}")
        podman("image", "prune", "-f", timeout=300, check=False)
    return image_id


def name(what: str) -> str:
    """A unique name for something a test makes: ``stagecraft-cditest-WHAT-<8 hex>``."""
    return f"{PREFIX}-{what}-{uuid.uuid4().hex[:8]}"


@contextmanager
def container(*run_args: str, engine: Sequence[str] = ()) -> Iterator[str]:
    """A detached container (``run -d --name NAME RUN_ARGS``) on rootless Podman, or on
    the command ``engine`` names (``["docker"]``); removed on exit. Yields its name."""
    cname = name("c")
    cmd = list(engine) if engine else None
    run = ["run", "-d", "--name", cname, *run_args]
    try:
        if cmd:
            subprocess.run([*cmd, *run], capture_output=True, text=True, timeout=120, check=True)
        else:
            podman(*run)
        yield cname
    finally:
        if cmd:
            subprocess.run([*cmd, "rm", "-f", cname], capture_output=True, timeout=60, check=False)
        else:
            podman("rm", "-f", "-t", "0", cname, check=False)


@contextmanager
def cdi_spec(spec: dict) -> Iterator[Path]:
    """``spec`` in /etc/cdi for the duration. Raises AssertionError when a spec of the same
    kind is there already (a real NVIDIA host: the names would clash)."""
    for d in CDI_DIRS:
        for f in sorted(d.glob("*")) if d.is_dir() else []:
            if spec["kind"] in f.read_text(errors="replace"):
                raise AssertionError(f"{f} defines {spec['kind']} already; the stand-in's spec would clash "
                                     f"(one named {PREFIX}-* is left from a killed test run: remove it)")
    made = not CDI_DIRS[0].exists()
    CDI_DIRS[0].mkdir(parents=True, exist_ok=True)
    path = CDI_DIRS[0] / f"{name('spec')}.json"
    path.write_text(json.dumps(spec, indent=2))
    path.chmod(0o644)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
        if made:
            try:
                CDI_DIRS[0].rmdir()
            except OSError:
                pass
