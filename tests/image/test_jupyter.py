"""Jupyter stage: JupyterLab pinned in the framework's venv, its kernel the framework's
Python, a non-root server on 8888 with a health check, and no secret in the image.

The server itself (auth, health, a notebook run through its kernel, any uid) is exercised
by tests/integration/test_jupyter.py against a running container.
"""

from __future__ import annotations

import json
import re

from packaging.utils import canonicalize_name

CONSTRAINTS = "/opt/stagecraft/jupyter-constraints.txt"
SECRET_WORDS = re.compile(r"token|password|passwd|secret", re.IGNORECASE)


def _config(image_attrs):
    return image_attrs["Config"]


def test_jupyterlab_version_pinned(host, spec, labels):
    want = spec["components"]["jupyter"]["jupyterlab"]
    pkgs = {k.lower(): v["version"]
            for k, v in host.pip.get_packages(pip_path="/opt/venv/bin/pip").items()}
    assert pkgs.get("jupyterlab") == want, f"{spec['tag']}: jupyterlab {pkgs.get('jupyterlab')}, want {want}"
    assert labels.get("io.stagecraft.jupyterlab.version") == want, (
        f"{spec['tag']}: label io.stagecraft.jupyterlab.version={labels.get('io.stagecraft.jupyterlab.version')!r}")


def test_constraints_hold(host, spec):
    """Every installed package is at the version of the constraints the layer was built
    with: the runtime's own versions (unchanged by Jupyter) and the component's pins."""
    f = host.file(CONSTRAINTS)
    assert f.is_file, f"{spec['tag']}: no {CONSTRAINTS}"
    pins = dict(line.split("==", 1) for line in f.content_string.splitlines() if "==" in line)
    pins = {canonicalize_name(k): v.strip() for k, v in pins.items()}
    for pin in spec["components"]["jupyter"].get("constraints", []):
        name, _, version = pin.partition("==")
        assert canonicalize_name(name) in pins, f"{spec['tag']}: pin {pin} missing from {CONSTRAINTS}"
    pkgs = {canonicalize_name(k): v["version"]
            for k, v in host.pip.get_packages(pip_path="/opt/venv/bin/pip").items()}
    wrong = [f"{n} {pkgs[n]} (constrained {v})" for n, v in pins.items()
             if n in pkgs and pkgs[n] != v]
    assert not wrong, f"{spec['tag']}: {', '.join(wrong)}"


def test_server_runs_as_non_root(image_attrs, host, spec):
    user = _config(image_attrs).get("User") or "root"
    assert user not in ("", "0", "root") and not user.startswith(("0:", "root:")), (
        f"{spec['tag']}: image USER is {user!r}")
    assert host.user().uid != 0, f"{spec['tag']}: container runs as uid 0"


def test_command_port_and_entrypoint(image_attrs, spec):
    cfg = _config(image_attrs)
    cmd = cfg.get("Cmd") or []
    assert cmd[:2] == ["jupyter", "lab"], f"{spec['tag']}: CMD {cmd}"
    for arg in ("--ip=0.0.0.0", "--port=8888", "--no-browser", "--ServerApp.root_dir=/workspace"):
        assert arg in cmd, f"{spec['tag']}: CMD lacks {arg}: {cmd}"
    assert not any("allow_root" in a or "allow-root" in a for a in cmd), f"{spec['tag']}: {cmd}"
    assert "8888/tcp" in (cfg.get("ExposedPorts") or {}), f"{spec['tag']}: 8888 not exposed"
    assert cfg.get("WorkingDir") == "/workspace", f"{spec['tag']}: WORKDIR {cfg.get('WorkingDir')}"
    entry = cfg.get("Entrypoint") or []
    assert entry[:2] == ["/usr/bin/tini", "--"] and entry[-1].endswith("stagecraft-entrypoint"), (
        f"{spec['tag']}: the server must start under the probing entrypoint, not {entry}")


def test_healthcheck_needs_no_secret(image_attrs, spec):
    hc = _config(image_attrs).get("Healthcheck") or {}
    test = hc.get("Test") or []
    assert test and test[0] in ("CMD", "CMD-SHELL"), f"{spec['tag']}: no HEALTHCHECK"
    assert not SECRET_WORDS.search(" ".join(test)), f"{spec['tag']}: health check names a secret: {test}"


def test_kernel_is_the_framework_python(host, spec):
    code = ("import json, shutil, sys\n"
            "from jupyter_client.kernelspec import KernelSpecManager\n"
            "from jupyter_client.manager import KernelManager\n"
            "specs = KernelSpecManager().get_all_specs()\n"
            "argv = KernelManager(kernel_name='python3').format_kernel_cmd()\n"
            "print(json.dumps({'kernels': sorted(specs), 'argv0': argv[0],"
            " 'which': shutil.which(argv[0])}))")
    cmd = host.run("HOME=/tmp/kernel-check /opt/venv/bin/python -c %s", code)
    assert cmd.rc == 0, f"{spec['tag']}: {cmd.stderr[-2000:]}"
    found = json.loads(cmd.stdout)
    assert found["kernels"] == ["python3"], f"{spec['tag']}: kernels {found['kernels']}"
    assert found["which"] in ("/opt/venv/bin/python", "/opt/venv/bin/python3"), (
        f"{spec['tag']}: kernel runs {found['argv0']} -> {found['which']}")
    # One Python in the image: the kernel's interpreter is the distro's, through the venv.
    real = host.check_output("readlink -f %s", found["which"])
    assert real == f"/usr/bin/python{spec['base']['python']}", f"{spec['tag']}: kernel python is {real}"


def test_no_secret_baked_into_the_image(image_attrs, labels, host, spec):
    cfg = _config(image_attrs)
    env = dict(e.split("=", 1) for e in cfg.get("Env") or [])
    baked = sorted(k for k in env if k.startswith("JUPYTER_") and SECRET_WORDS.search(k))
    assert not baked, f"{spec['tag']}: secret-looking env in the image: {baked}"
    assert not [k for k in labels if SECRET_WORDS.search(k)], f"{spec['tag']}: labels {labels}"
    assert not SECRET_WORDS.search(" ".join(cfg.get("Cmd") or [])), f"{spec['tag']}: CMD"
    # Every config file Jupyter reads: no token, password or allow_root set in any.
    code = ("import glob, os, json\n"
            "from jupyter_core.paths import jupyter_config_path\n"
            "files = [f for d in jupyter_config_path() for f in glob.glob(os.path.join(d, '**', '*'),"
            " recursive=True) if os.path.isfile(f)]\n"
            "print(json.dumps({f: open(f, errors='replace').read() for f in files}))")
    cmd = host.run("HOME=/home/worker /opt/venv/bin/python -c %s", code)
    assert cmd.rc == 0, f"{spec['tag']}: {cmd.stderr[-2000:]}"
    setting = re.compile(r"(token|password|hashed_password|allow_root)\W*[=:]", re.IGNORECASE)
    hits = {f: setting.findall(text) for f, text in json.loads(cmd.stdout).items()
            if setting.search(text)}
    assert not hits, f"{spec['tag']}: auth settings baked into config: {hits}"
    # No server ran at build time: no runtime file (they hold the token) in any home.
    left = host.run("find /home /root /tmp -name 'jpserver-*' 2>/dev/null").stdout.strip()
    assert not left, f"{spec['tag']}: server runtime files in the image: {left}"


def test_no_secret_in_the_build_history(spec):
    import docker

    history = docker.from_env().api.history(spec["image_id"])
    steps = [h.get("CreatedBy") or "" for h in history]
    bad = [s for s in steps if re.search(r"JUPYTER_(TOKEN|PASSWORD)\s*=|ServerApp\.(token|password)", s)]
    assert not bad, f"{spec['tag']}: a secret in the build history: {bad}"


def test_jupyter_dirs_in_home_are_not_root_owned(host, spec):
    """Jupyter and IPython write under HOME at start (config, data, runtime, profile); a
    root-owned one left by the build would break the server for uid 1000 and any uid."""
    dirs = " ".join(f"/home/worker/{d}" for d in (".jupyter", ".local", ".ipython"))
    found = host.run(f"find {dirs} -user 0 2>/dev/null").stdout.strip()
    assert not found, f"{spec['tag']}: root-owned paths under HOME break --user: {found}"
