"""Toolkit stage: the toolkit pinned in the framework's venv, under the framework's pins,
importable by the default user and by any uid, with nothing root-owned left in the home.

The toolkit's own behaviour is its own suite's (tests/image/test_paddleocr.py, attached to
the toolkit entry in matrix.yaml); the framework's pins holding is test_runtime.py's.
"""

from __future__ import annotations

import docker
from packaging.utils import canonicalize_name

TOOLKIT_CONSTRAINTS = "/opt/stagecraft/toolkit-constraints.txt"


def _installed(host) -> dict[str, str]:
    return {canonicalize_name(k): v["version"]
            for k, v in host.pip.get_packages(pip_path="/opt/venv/bin/pip").items()}


def test_toolkit_version_and_labels(host, spec, labels):
    tk = spec["components"]["toolkit"]
    got = _installed(host).get(canonicalize_name(tk["package"]))
    assert got == tk["version"], f"{spec['tag']}: {tk['package']} {got}, want {tk['version']}"
    assert labels.get("io.stagecraft.toolkit") == tk["package"], f"{spec['tag']}: {labels}"
    assert labels.get("io.stagecraft.toolkit.version") == tk["version"], f"{spec['tag']}: {labels}"


def test_toolkit_pins_hold(host, spec):
    """Every pin of the toolkit is in the recorded file and installed at that version."""
    tk = spec["components"]["toolkit"]
    f = host.file(TOOLKIT_CONSTRAINTS)
    assert f.is_file, f"{spec['tag']}: no {TOOLKIT_CONSTRAINTS}"
    recorded = {canonicalize_name(a): b.strip() for a, _, b in
                (ln.partition("==") for ln in f.content_string.splitlines() if "==" in ln)}
    installed = _installed(host)
    for pin in [*tk.get("constraints", []), f"{tk['package']}=={tk['version']}"]:
        name, _, version = pin.partition("==")
        assert recorded.get(canonicalize_name(name)) == version, f"{spec['tag']}: {pin} not in {TOOLKIT_CONSTRAINTS}"
        if canonicalize_name(name) in installed:
            assert installed[canonicalize_name(name)] == version, (
                f"{spec['tag']}: {name} {installed[canonicalize_name(name)]}, pinned {version}")


def test_imports_as_the_default_user_and_any_uid(host, spec):
    """Under the entrypoint, in the suite's own container (execs, no new container)."""
    tk = spec["components"]["toolkit"]
    container = docker.from_env().containers.get(host.backend.name)
    for user in ("1000", "12345"):
        rc, out = container.exec_run(
            ["/opt/stagecraft/entrypoint/stagecraft-entrypoint", "python", "-c",
             f"import {tk['import']} as t; print(t.__version__)"],
            user=user, workdir="/tmp", environment={"STAGECRAFT_QUIET": "1"})
        text = out.decode(errors="replace").strip()
        assert rc == 0 and text.splitlines()[-1] == tk["version"], f"{spec['tag']} as {user}: {text[-1500:]}"


def test_nothing_root_owned_in_the_home(host, spec):
    found = host.run("find /home/worker -user 0 2>/dev/null").stdout.strip()
    assert not found, f"{spec['tag']}: root-owned paths under HOME break --user: {found}"
