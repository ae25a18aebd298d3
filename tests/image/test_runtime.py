"""Runtime stage: the framework's virtual environment, labels, any-uid use."""

from __future__ import annotations

import json

import pytest


def test_venv_python_first_on_path(host, spec):
    for name in ("python", "python3"):
        path = host.check_output(f"command -v {name}")
        assert path == f"/opt/venv/bin/{name}", f"{spec['tag']}: {name} is {path}"
    prefix = host.check_output("python -c 'import sys; print(sys.prefix)'")
    assert prefix == "/opt/venv", f"{spec['tag']}: sys.prefix {prefix}"


def test_framework_version_installed(host, spec):
    fw = spec["framework"]
    pkg = host.pip.get_packages(pip_path="/opt/venv/bin/pip")
    found = {k.lower(): v for k, v in pkg.items()}
    assert found.get(fw["package"].lower(), {}).get("version") == fw["version"], (
        f"{spec['tag']}: {fw['package']} is {found.get(fw['package'].lower())}")


def test_constraints_hold(host, spec):
    pkg = {k.lower().replace("_", "-"): v["version"]
           for k, v in host.pip.get_packages(pip_path="/opt/venv/bin/pip").items()}
    for c in spec["framework"].get("constraints", []):
        if "==" in c:
            name, version = c.split("==")
            name = name.strip().lower().replace("_", "-")
            if name in pkg:
                assert pkg[name] == version.strip(), f"{spec['tag']}: {name} {pkg[name]}, want {version}"


def test_pip_check_is_clean(host, spec):
    cmd = host.run("/opt/venv/bin/pip check")
    assert cmd.rc == 0, f"{spec['tag']}: pip check: {cmd.stdout}{cmd.stderr}"


def test_labels(labels, spec):
    fw, base = spec["framework"], spec["base"]
    want = {
        "org.opencontainers.image.version": spec["tag"],
        "org.opencontainers.image.ref.name": spec["tag"],
        "io.stagecraft.framework": fw["package"],
        "io.stagecraft.framework.version": fw["version"],
        "io.stagecraft.python": base["python"],
        "io.stagecraft.os": base["os"],
        "io.stagecraft.os.version": base["version"],
        "io.stagecraft.device": fw["device"],
    }
    for key, value in want.items():
        assert labels.get(key) == value, f"{spec['tag']}: label {key}={labels.get(key)!r}, want {value!r}"
    for key in ("revision", "created", "source", "title", "description"):
        assert labels.get(f"org.opencontainers.image.{key}"), f"{spec['tag']}: no {key} label"


def test_manifest_for_the_entrypoint(host, spec):
    f = host.file(spec["manifest_path"])
    assert f.is_file, f"{spec['tag']}: no {spec['manifest_path']}"
    assert json.loads(f.content_string) == spec["manifest"], f"{spec['tag']}: manifest differs"


def test_no_nvidia_env_outside_nvidia_images(image_attrs, spec):
    env = dict(e.split("=", 1) for e in image_attrs["Config"].get("Env") or [])
    nvidia = sorted(k for k in env if k.startswith("NVIDIA_"))
    if spec["framework"]["device"] != "nvidia":
        assert nvidia == [], f"{spec['tag']}: NVIDIA container env on a non-NVIDIA image: {nvidia}"


def test_works_under_any_uid(spec):
    import docker

    client = docker.from_env()
    out = client.containers.run(
        spec["image_id"], ["sh", "-c", "touch /workspace/x && echo $HOME && python -c 'import sys'"],
        user="12345", remove=True, environment={"STAGECRAFT_QUIET": "1"})
    assert out.decode().strip().splitlines()[-1] == "/home/worker", f"{spec['tag']}: {out!r}"


def test_every_installed_package_is_pinned_by_the_matrix(host, spec):
    """One key, one set of packages: everything pip resolved is pinned in matrix.yaml
    (framework constraints, optional components' constraints, the entrypoint's needs).
    `python3 build.py freeze TAG` prints the pins to paste."""
    def names(reqs):
        return {r.split("==")[0].strip().lower().replace("_", "-") for r in reqs if "==" in r}

    pinned = names(spec["framework"].get("constraints", [])) | names(spec["entrypoint"]["requirements"])
    pinned.add(spec["framework"]["package"].lower())
    for comp in spec["components"].values():
        pinned |= names(comp.get("constraints", []) if isinstance(comp, dict) else [])
        if isinstance(comp, dict) and comp.get("jupyterlab"):
            pinned.add("jupyterlab")
    installed = {k.lower().replace("_", "-") for k in host.pip.get_packages(pip_path="/opt/venv/bin/pip")}
    unpinned = sorted(installed - pinned - {"pip", "setuptools", "wheel"})
    assert unpinned == [], f"{spec['tag']}: installed but not pinned in matrix.yaml: {unpinned}"


def _quiet_entrypoint(cmd: str) -> str:
    return f"STAGECRAFT_QUIET=1 /opt/stagecraft/entrypoint/stagecraft-entrypoint {cmd}"


def test_device_string_helper(host, spec):
    """`python -m stagecraft_device` answers in a process the entrypoint started (the
    variable) and in a `docker exec` (the start-up report), with the same string."""
    strings = spec["manifest"].get("device_strings")
    if not strings:
        pytest.skip(f"{spec['tag']}: the framework declares no device_strings")
    via_entry = host.run(_quiet_entrypoint("python -m stagecraft_device"))
    via_exec = host.run("python -m stagecraft_device")
    for cmd in (via_entry, via_exec):
        assert cmd.rc == 0, f"{spec['tag']}: stagecraft_device exited {cmd.rc}: {cmd.stderr}"
    assert via_entry.stdout.strip() == via_exec.stdout.strip(), f"{spec['tag']}: {via_entry.stdout} {via_exec.stdout}"
    allowed = {t.format(index=0, count=1) for t in strings.values()}
    assert via_exec.stdout.strip() in allowed, f"{spec['tag']}: {via_exec.stdout.strip()} not in {allowed}"


def test_healthcheck(image_attrs, host, spec):
    """Accelerator images declare a HEALTHCHECK that re-checks the chosen device without
    the framework; CPU-only images have nothing to re-check and declare none."""
    hc = image_attrs["Config"].get("Healthcheck") or {}
    if spec["framework"]["device"] == "cpu":
        assert not hc.get("Test"), f"{spec['tag']}: a CPU image declares {hc}"
        return
    assert hc.get("Test", [])[:2] == ["CMD", "/opt/stagecraft/entrypoint/stagecraft-health"], f"{spec['tag']}: {hc}"
    budget = float(hc["Test"][hc["Test"].index("--budget") + 1])
    assert budget > 0 and hc.get("Timeout", 0) > budget * 1e9, f"{spec['tag']}: {hc}"
    cmd = host.run("/opt/stagecraft/entrypoint/stagecraft-health --budget %s", str(budget))
    assert cmd.rc == 0 and cmd.stdout.startswith("healthy:"), f"{spec['tag']}: {cmd.rc} {cmd.stdout}{cmd.stderr}"
    imported = host.run("python3 -X importtime /opt/stagecraft/entrypoint/stagecraft-health 2>&1 >/dev/null")
    assert spec["framework"]["import"] not in {ln.split("|")[-1].strip() for ln in imported.stdout.splitlines()}, (
        f"{spec['tag']}: the health check imports the framework")
