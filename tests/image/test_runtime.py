"""Runtime stage: the framework's virtual environment, labels, any-uid use; the
environment extended as users do (pip as the default user and as any uid in group 0, the
system left root's) and the framework's pins protected."""

from __future__ import annotations

import json
import re
import shlex

import docker
import pytest
from packaging.utils import canonicalize_name


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
    """The image's description is the one rendered from matrix.yaml, except what the
    build measured: the SASS and PTX of NVIDIA kernel sets (compared with matrix.yaml by
    the cuda suite) and the measurement itself."""
    f = host.file(spec["manifest_path"])
    assert f.is_file, f"{spec['tag']}: no {spec['manifest_path']}"

    def unmeasured(manifest):
        out = {k: v for k, v in manifest.items() if k != "measured"}
        out["kernel_sets"] = [
            {**ks, "requires": {k: v for k, v in ks.get("requires", {}).items() if k not in ("sass", "ptx")}}
            if ks.get("device") == "nvidia" else ks for ks in manifest["kernel_sets"]]
        return out

    found = json.loads(f.content_string)
    assert unmeasured(found) == unmeasured(spec["manifest"]), f"{spec['tag']}: manifest differs"
    if "measured" not in found:
        assert found == spec["manifest"], f"{spec['tag']}: SASS/PTX changed without a measurement"


def test_the_entrypoint_reads_the_manifest_from_its_twin_and_imports_no_json(host, spec):
    """The build wrote image.json's twin with the image's own Python (entrypoint/imagefile.py),
    root's and world-readable; it matches the file, so a start parses nothing and imports
    neither json nor re (3 to 4 ms of every start; BENCHMARKS.md), unless NVML is loaded."""
    twin = host.file(spec["manifest_path"] + ".marshal")
    assert twin.is_file and twin.user == "root" and twin.mode == 0o644, spec["tag"]
    code = ("import os, sys; sys.path.insert(0, '/opt/stagecraft'); sys.argv = ['e', 'true']\n"
            "def stop(*a): print(' '.join(sorted(sys.modules)), flush=True); os._exit(0)\n"
            "os.execve = stop\n"
            "from entrypoint.main import main; main()")
    # A report path of its own, as in a new container: a start that finds an earlier
    # report reads it (with json) to be sure that what it replaces is its own.
    out = host.check_output('d="$(mktemp -d)" && STAGECRAFT_REPORT="$d/report.json" STAGECRAFT_QUIET=1 '
                            "/opt/venv/bin/python3 -IS -c %s", code)
    mods = set(out.split())
    # pynvml (loaded only where an NVML library is found) brings ctypes and re with it
    unwanted = {"json"} if "pynvml" in mods else {"json", "re", "enum"}
    assert "entrypoint.imagefile" in mods and not mods & unwanted, (spec["tag"], mods & unwanted)


def test_no_nvidia_env_outside_nvidia_images(image_attrs, spec):
    env = dict(e.split("=", 1) for e in image_attrs["Config"].get("Env") or [])
    nvidia = sorted(k for k in env if k.startswith("NVIDIA_"))
    if spec["framework"]["device"] != "nvidia":
        assert nvidia == [], f"{spec['tag']}: NVIDIA container env on a non-NVIDIA image: {nvidia}"


def test_works_under_any_uid(spec, run_labels):
    import docker

    client = docker.from_env()
    out = client.containers.run(
        spec["image_id"], ["sh", "-c", "touch /workspace/x && echo $HOME && python -c 'import sys'"],
        user="12345", remove=True, environment={"STAGECRAFT_QUIET": "1"}, labels=run_labels)
    assert out.decode().strip().splitlines()[-1] == "/home/worker", f"{spec['tag']}: {out!r}"


def test_every_installed_package_is_pinned_by_the_matrix(host, spec):
    """One key, one set of packages: everything pip resolved is pinned in matrix.yaml
    (framework constraints, optional components' constraints, the stages' NVIDIA wheels,
    the entrypoint's needs).
    `python3 build.py freeze TAG` prints the pins to paste."""
    def names(reqs):
        return {r.split("==")[0].strip().lower().replace("_", "-") for r in reqs if "==" in r}

    pinned = names(spec["framework"].get("constraints", [])) | names(spec["entrypoint"]["requirements"])
    pinned.add(spec["framework"]["package"].lower())
    for comp in spec["components"].values():
        pinned |= names(comp.get("constraints", []) if isinstance(comp, dict) else [])
        # NVIDIA's wheels the cuda and accel stages installed into the venv, pinned there.
        pinned |= {p.lower() for p in (comp.get("pypi", {}) if isinstance(comp, dict) else {})}
        if isinstance(comp, dict) and comp.get("jupyterlab"):
            pinned.add("jupyterlab")
        if isinstance(comp, dict) and comp.get("package"):  # a toolkit's own package
            pinned.add(comp["package"].lower().replace("_", "-"))
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
    the framework (a later stage's own check, Jupyter's server check, runs it first);
    CPU-only images have nothing to re-check: the runtime declares none for them."""
    hc = image_attrs["Config"].get("Healthcheck") or {}
    test = hc.get("Test") or []
    words = " ".join(test[1:]).split()
    runs = "/opt/stagecraft/entrypoint/stagecraft-health" in words
    if spec["framework"]["device"] == "cpu":
        assert not test or spec["chain"][-1] != "runtime", f"{spec['tag']}: a CPU image declares {hc}"
        return
    assert test[:1] in (["CMD"], ["CMD-SHELL"]) and runs, f"{spec['tag']}: {hc}"
    budget = float(words[words.index("--budget") + 1])
    assert budget > 0 and hc.get("Timeout", 0) > budget * 1e9, f"{spec['tag']}: {hc}"
    cmd = host.run("/opt/stagecraft/entrypoint/stagecraft-health --budget %s", str(budget))
    assert cmd.rc == 0 and cmd.stdout.startswith("healthy:"), f"{spec['tag']}: {cmd.rc} {cmd.stdout}{cmd.stderr}"
    imported = host.run("python3 -X importtime /opt/stagecraft/entrypoint/stagecraft-health 2>&1 >/dev/null")
    assert spec["framework"]["import"] not in {ln.split("|")[-1].strip() for ln in imported.stdout.splitlines()}, (
        f"{spec['tag']}: the health check imports the framework")


# ---------------------------------------------------------------------------------------
# Extending the image: the venv is group-0 writable, the system is not; the pins hold.

CONSTRAINTS = "/opt/stagecraft/constraints.txt"

# A wheel made in the container (no index needed): one module, a valid RECORD.
MAKE_WHEEL = r"""
import base64, hashlib, sys, zipfile
name, ver = "stagecraft_probe", "1.0"
files = {f"{name}/__init__.py": b"ANSWER = 42\n",
         f"{name}-{ver}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n".encode(),
         f"{name}-{ver}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: stagecraft-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
digest = lambda d: base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()
record = "".join(f"{p},sha256={digest(d)},{len(d)}\n" for p, d in files.items())
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for p, d in files.items():
        z.writestr(p, d)
    z.writestr(f"{name}-{ver}.dist-info/RECORD", record + f"{name}-{ver}.dist-info/RECORD,,\n")
"""
WHEEL = "/tmp/stagecraft_probe-1.0-py3-none-any.whl"


def test_system_stays_root_owned(host, spec):
    """Root owns the system, and no group can write to it: group 0 is every `--user`
    uid's group, so a group-writable system file would be anyone's."""
    py = spec["base"]["python"]
    for path in ("/usr", "/usr/bin", "/usr/lib", "/usr/local", "/usr/local/bin", "/etc",
                 "/opt", "/opt/stagecraft", "/etc/stagecraft", f"/usr/bin/python{py}",
                 f"/usr/lib/python{py}", "/usr/local/bin/fix-permissions", CONSTRAINTS):
        f = host.file(path)
        assert f.exists, f"{spec['tag']}: no {path}"
        assert f.uid == 0 and f.mode & 0o022 == 0, (
            f"{spec['tag']}: {path} is uid {f.uid}, mode {oct(f.mode)}; want root's, not group/other-writable")
    found = host.run("find /usr /etc /opt/stagecraft -xdev -group 0 -perm -g+w ! -type l "
                     "2>/dev/null | head -5").stdout.strip()
    assert not found, f"{spec['tag']}: group-0 writable system paths: {found}"


# The system libraries OpenCV's cv2 module links (`ldd cv2/cv2.abi3.so` of opencv-python
# 4.10); matrix.yaml's toolkit_apt installs their packages.
CV2_SYSTEM_LIBS = ("libGL.so.1", "libglib-2.0.so.0", "libgthread-2.0.so.0")


def test_cv2_system_libraries_load_as_the_default_user(host, spec):
    """What `import cv2` needs of the system loads: libGL.so.1 is glvnd's dispatcher,
    which loads without a GL vendor library (the base stands in for Mesa's)."""
    if "libgl1" not in (spec["base"].get("toolkit_apt") or {}):
        pytest.skip(f"{spec['tag']}: the base installs no toolkit libraries")
    code = f"import ctypes; [ctypes.CDLL(n) for n in {CV2_SYSTEM_LIBS!r}]; print('loaded')"
    out = host.run("python3 -c %s", code)
    assert out.rc == 0 and out.stdout.strip() == "loaded", f"{spec['tag']}: {out.stderr[-800:]}"


def test_venv_is_group0_writable(host, spec):
    """As jupyter/docker-stacks' fix-permissions: group 0, group-writable, directories
    setgid so new files stay in group 0. Owner root: only the group grants writing."""
    venv = host.file("/opt/venv")
    assert (venv.uid, venv.gid, venv.mode) == (0, 0, 0o2775), (
        f"{spec['tag']}: /opt/venv uid {venv.uid} gid {venv.gid} mode {oct(venv.mode)}")
    wrong = host.run("find /opt/venv ! -type l \\( ! -group 0 -o ! -perm -g+rw \\) | head -5").stdout.strip()
    assert not wrong, f"{spec['tag']}: not group-0 writable: {wrong}"
    unset = host.run("find /opt/venv -type d ! -perm -g+s | head -5").stdout.strip()
    assert not unset, f"{spec['tag']}: directories without setgid: {unset}"


def test_pip_installs_as_the_default_user_and_any_uid(spec, run_labels):
    """What the default user installs (a Dockerfile RUN step: bash, BASH_ENV's umask),
    another uid in group 0 can upgrade or remove, and the other way round. Through the
    entrypoint (what `docker run` starts) a non-root user's umask is 0002, root's stays
    0022. One container of its own (it changes the venv), every step an exec in it."""
    client = docker.from_env()
    c = client.containers.run(spec["image_id"], ["sleep", "infinity"], detach=True,
                              environment={"STAGECRAFT_QUIET": "1"}, network_mode="none",
                              labels=run_labels)
    try:
        def run(user: str, cmd: list[str]) -> str:
            for _ in range(3):  # the runtime failing to start the process (it never ran)
                rc, out = c.exec_run(cmd, user=user)
                text = out.decode(errors="replace")
                if not (rc == 126 and "OCI runtime exec failed" in text):
                    break
            assert rc == 0, f"{spec['tag']}: as {user}: {cmd!r} exited {rc}:\n{text[-2000:]}"
            return text

        def bash(user: str, script: str) -> str:
            return run(user, ["bash", "-c", script])

        bash("1000", f"python -c {shlex.quote(MAKE_WHEEL)} {WHEEL} && pip install --no-index {WHEEL}")
        mode = bash("1000", "python -c 'import os, stagecraft_probe as m; st = os.stat(m.__file__); "
                            "print(oct(st.st_mode & 0o777), st.st_uid, st.st_gid, m.ANSWER)'").split()[-4:]
        assert mode == ["0o664", "1000", "0", "42"], f"{spec['tag']}: installed file {mode}"
        bash("12345", "pip uninstall -y stagecraft-probe && pip install --no-index " + WHEEL)
        bash("1000", "pip uninstall -y stagecraft-probe")
        for user, want in (("1000", "0002"), ("12345", "0002"), ("0", "0022")):
            got = run(user, ["/opt/stagecraft/entrypoint/stagecraft-entrypoint", "sh", "-c", "umask"]).strip()
            assert got == want, f"{spec['tag']}: umask under the entrypoint as {user}: {got!r}"
    finally:
        c.remove(force=True)


def test_image_carries_its_constraints(host, spec):
    """Every pin resolved for the framework (matrix.lock's runtime set, or the matrix's
    constraints, the framework and the entrypoint's needs), root's; the venv's pip reads
    them by default (its pip.conf)."""
    def pins(lines):
        return {canonicalize_name(a.strip()): b.strip()
                for a, _, b in (ln.partition("==") for ln in lines if "==" in ln)}

    f = host.file(CONSTRAINTS)
    assert f.is_file and f.uid == 0, f"{spec['tag']}: no root-owned {CONSTRAINTS}"
    got, want = pins(f.content_string.split()), pins(spec["constraints"])
    assert got == want, f"{spec['tag']}: {CONSTRAINTS} differs: {sorted(set(got.items()) ^ set(want.items()))}"
    cfg = host.run("/opt/venv/bin/pip config list")
    assert f"global.constraint='{CONSTRAINTS}'" in cfg.stdout, f"{spec['tag']}: pip config: {cfg.stdout}"


def test_a_requirement_against_the_pins_fails_with_pips_conflict(host, spec):
    """Without an index (the with-index case is tests/integration/test_extending.py): the
    resolver refuses before touching anything, with pip's conflict message naming the
    constraint, and the environment is unchanged."""
    fw = spec["framework"]
    pins = dict(c.split("==", 1) for c in fw.get("constraints", []) if "==" in c)
    targets = [(fw["package"], fw["version"])] + ([("numpy", pins["numpy"])] if "numpy" in pins else [])
    before = host.run("/opt/venv/bin/pip freeze --all").stdout
    for name, version in targets:
        cmd = host.run(f"cd /tmp && /opt/venv/bin/pip install --no-index '{name}!={version}'")
        out = cmd.stdout + cmd.stderr
        assert cmd.rc == 1, f"{spec['tag']}: pip install {name}!={version} exited {cmd.rc}: {out[-1500:]}"
        assert re.search(rf"Cannot install {re.escape(name)}!={re.escape(version)} because these "
                         "package versions have conflicting dependencies", out), f"{spec['tag']}: {out[-1500:]}"
        assert f"(constraint) {name}=={version}" in out, f"{spec['tag']}: constraint not named: {out[-1500:]}"
    after = host.run("/opt/venv/bin/pip freeze --all").stdout
    assert after == before, f"{spec['tag']}: the environment changed"
