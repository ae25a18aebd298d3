"""The -jupyter images, served for real and driven by a real client, on each engine that
builds them (tests/integration/engines.py: a CPU one on the modern engine too).

For each tag whose chain has the jupyter stage: start it as `docker run` would (a random
port on the engine's address: 127.0.0.1 for the host's engine, the modern engine's
container address for it; JUPYTER_TOKEN from the environment), then check over HTTP that the
server answers and enforces its token, that Docker's health check turns healthy, and
that a notebook importing the framework runs through the server's own kernel (REST to
create the notebook and the session, the kernel's websocket channel to execute it, the
executed notebook saved back). Without JUPYTER_TOKEN a random token is printed and
enforced; `--user 12345` works. Every container started here is removed.
"""

from __future__ import annotations

import json
import re
import secrets
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import docker
import pytest

from stagecraft.cabundle import find_ca_bundle
from tests.integration import engines
from tests.integration.conftest import build_on
from tests.integration.harness import SPECS, buildable_here

websocket = pytest.importorskip("websocket", reason="pip install -e '.[test]' (websocket-client)")

JUPYTER_TAGS = [s.tag for s in SPECS if "jupyter" in s.chain]
# (engine, tag): every -jupyter image on the host engine, the modern engine's on it.
PAIRS = [pytest.param((e, s.tag), id=f"{e}-{s.tag}", marks=getattr(pytest.mark, e))
         for e in engines.selected() for s in SPECS
         if "jupyter" in s.chain and (e == "host" or s.tag in engines.modern_tags())]
_, SKIPPED = buildable_here()
FRAMEWORK_IMPORT = {s.tag: s.framework["import"] for s in SPECS}
START_TIMEOUT_S = 120
HEALTH_TIMEOUT_S = 150
CELL_TIMEOUT_S = 300


@dataclass
class Lab:
    """A running JupyterLab container: ``url`` ends with '/', ``token`` may be ''."""

    tag: str
    container: Any
    url: str
    token: str

    def logs(self) -> str:
        return self.container.logs().decode(errors="replace")[-4000:]


def http(url: str, token: str | None = None, method: str = "GET",
         body: Any = None, timeout: float = 30) -> tuple[int, Any]:
    """(status, parsed JSON or text) of one request; HTTP errors are returned, not raised."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"token {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    text = raw.decode(errors="replace")
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


@pytest.fixture(scope="module")
def start():
    """``start(engine, tag, image_id, token=..., **run_kwargs) -> Lab``, ready to answer
    HTTP; every container started is removed at the end of the module."""
    started: list[Any] = []

    def run(engine: engines.TestEngine, tag: str, image_id: str, token: str | None = None,
            **kwargs: Any) -> Lab:
        env = {**kwargs.pop("environment", {}), **({"JUPYTER_TOKEN": token} if token is not None else {})}
        container = engine.client().containers.run(
            image_id, detach=True, environment=env, labels={"io.stagecraft.test": f"jupyter {tag}"},
            ports={"8888/tcp": (engine.address, None)}, **kwargs)
        started.append(container)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            container.reload()
            binding = (container.ports.get("8888/tcp") or [{}])[0].get("HostPort")
            assert container.status == "running", (
                f"{tag}: container exited:\n{container.logs().decode(errors='replace')[-3000:]}")
            if binding:
                url = f"http://{engine.address}:{binding}/"
                try:
                    if http(url + "api", timeout=5)[0] == 200:
                        return Lab(tag, container, url, token or "")
                except OSError:
                    pass
            assert time.monotonic() < deadline, (
                f"{tag}: server did not answer in {START_TIMEOUT_S} s:\n"
                f"{container.logs().decode(errors='replace')[-3000:]}")
            time.sleep(1)

    yield run
    for container in started:
        try:
            container.remove(force=True)
        except docker.errors.NotFound:
            pass


@pytest.fixture(scope="module", params=PAIRS)
def image(request) -> tuple[engines.TestEngine, str, str]:
    """(engine, tag, image id) of one -jupyter image."""
    name, tag = request.param
    if tag in SKIPPED:
        pytest.skip(SKIPPED[tag])
    try:
        engine = engines.get(name)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    return engine, tag, build_on(engine)[tag]["image_id"]


@pytest.fixture(scope="module")
def lab(image, start) -> Lab:
    """The tag's server, started with a token of ours and a 1-CPU quota (so the kernel's
    environment shows the entrypoint's thread-pool sizing)."""
    engine, tag, image_id = image
    return start(engine, tag, image_id, token=secrets.token_hex(24), nano_cpus=1_000_000_000)


# ---------------------------------------------------------------------------------------
# The kernel, driven as JupyterLab drives it: a session over REST, messages on the
# kernel's websocket channel (jupyter_server's default JSON protocol).

def _message(msg_type: str, content: dict[str, Any], session: str) -> dict[str, Any]:
    return {"header": {"msg_id": uuid.uuid4().hex, "msg_type": msg_type, "username": "test",
                       "session": session, "version": "5.3",
                       "date": datetime.now(timezone.utc).isoformat()},
            "parent_header": {}, "metadata": {}, "content": content, "channel": "shell",
            "buffers": []}


def execute(ws: Any, code: str, session: str) -> list[dict[str, Any]]:
    """Run ``code`` on the kernel; its outputs as nbformat output dicts. Raises
    ``AssertionError`` on timeout."""
    msg = _message("execute_request", {"code": code, "silent": False, "store_history": True,
                                        "user_expressions": {}, "allow_stdin": False,
                                        "stop_on_error": True}, session)
    ws.send(json.dumps(msg))
    outputs: list[dict[str, Any]] = []
    idle = replied = False
    deadline = time.monotonic() + CELL_TIMEOUT_S
    while not (idle and replied):
        assert time.monotonic() < deadline, f"no reply in {CELL_TIMEOUT_S} s to {code!r}"
        reply = json.loads(ws.recv())
        if reply.get("parent_header", {}).get("msg_id") != msg["header"]["msg_id"]:
            continue
        kind, content = reply["header"]["msg_type"], reply["content"]
        if kind == "stream":
            outputs.append({"output_type": "stream", "name": content["name"], "text": content["text"]})
        elif kind in ("execute_result", "display_data"):
            outputs.append({"output_type": kind, "data": content["data"], "metadata": {},
                            **({"execution_count": content["execution_count"]}
                               if kind == "execute_result" else {})})
        elif kind == "error":
            outputs.append({"output_type": "error", "ename": content["ename"],
                            "evalue": content["evalue"], "traceback": content["traceback"]})
        elif kind == "status" and content["execution_state"] == "idle":
            idle = True
        elif kind == "execute_reply":
            replied = True
    return outputs


def notebook(cells: list[str]) -> dict[str, Any]:
    """An nbformat 4.5 notebook of code cells, for the python3 kernel."""
    return {"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                        "language": "python"}},
            "cells": [{"id": uuid.uuid4().hex[:8], "cell_type": "code", "source": src,
                       "metadata": {}, "outputs": [], "execution_count": None} for src in cells]}


def run_notebook(lab: Lab, path: str, cells: list[str]) -> list[str]:
    """Save a notebook into the server's root (/workspace), open a session on it, execute
    its cells through the session's kernel, save the outputs back; returns each cell's
    stdout. Fails with the cell's error and the server log when a cell raises."""
    status, _ = http(lab.url + f"api/contents/{path}", lab.token, "PUT",
                     {"type": "notebook", "format": "json", "content": notebook(cells)})
    assert status in (200, 201), f"{lab.tag}: saving {path}: HTTP {status}"
    status, saved = http(lab.url + f"api/contents/{path}", lab.token)
    assert status == 200, f"{lab.tag}: reading {path} back: HTTP {status}"
    status, sess = http(lab.url + "api/sessions", lab.token, "POST",
                        {"path": path, "type": "notebook", "name": path,
                         "kernel": {"name": "python3"}})
    assert status == 201, f"{lab.tag}: session: HTTP {status} {sess}"
    kernel_id = sess["kernel"]["id"]
    ws = websocket.create_connection(
        lab.url.replace("http://", "ws://") + f"api/kernels/{kernel_id}/channels",
        header=[f"Authorization: token {lab.token}"], timeout=CELL_TIMEOUT_S, suppress_origin=True)
    nb = saved["content"]
    try:
        session = uuid.uuid4().hex
        for n, cell in enumerate(nb["cells"], 1):
            cell["outputs"] = execute(ws, "".join(cell["source"]), session)
            cell["execution_count"] = n
            errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
            assert not errors, (f"{lab.tag}: cell {n} raised {errors[0]['ename']}: "
                                f"{errors[0]['evalue']}\n{lab.logs()}")
    finally:
        ws.close()
        http(lab.url + f"api/sessions/{sess['id']}", lab.token, "DELETE")
    status, _ = http(lab.url + f"api/contents/{path}", lab.token, "PUT",
                     {"type": "notebook", "format": "json", "content": nb})
    assert status == 200, f"{lab.tag}: saving the executed notebook: HTTP {status}"
    return ["".join(o["text"] for o in c["outputs"] if o.get("name") == "stdout")
            for c in nb["cells"]]


# ---------------------------------------------------------------------------------------

def test_server_answers_and_enforces_the_token(lab):
    status, body = http(lab.url + "api")
    assert status == 200 and "version" in body, f"{lab.tag}: /api: {status} {body}"
    for token in (None, "wrong-" + lab.token[:8]):
        status, _ = http(lab.url + "api/contents", token)
        assert status in (401, 403), f"{lab.tag}: /api/contents with token {token!r}: HTTP {status}"
    status, body = http(lab.url + "api/contents", lab.token)
    assert status == 200 and body["type"] == "directory", f"{lab.tag}: with the token: {status}"
    status, _ = http(lab.url + f"lab?token={lab.token}")
    assert status == 200, f"{lab.tag}: JupyterLab page: HTTP {status}"
    assert lab.token not in lab.logs(), f"{lab.tag}: the given token is echoed in the log"


def wait_healthy(lab: Lab) -> None:
    """Poll `docker inspect` until the health check says healthy; fail on unhealthy or
    after HEALTH_TIMEOUT_S."""
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    while True:
        lab.container.reload()
        health = lab.container.attrs["State"].get("Health") or {}
        state = health.get("Status")
        if state == "healthy":
            break
        log = [(h.get("ExitCode"), h.get("Output", "")[-300:]) for h in health.get("Log", [])]
        assert state != "unhealthy", f"{lab.tag}: unhealthy: {log}"
        assert time.monotonic() < deadline, f"{lab.tag}: still {state!r} after {HEALTH_TIMEOUT_S} s: {log}"
        time.sleep(2)


def test_healthcheck_turns_healthy(lab):
    wait_healthy(lab)


def test_notebook_runs_the_framework_in_the_server_kernel(lab):
    module = FRAMEWORK_IMPORT[lab.tag]
    outputs = run_notebook(lab, "stagecraft-check.ipynb", [
        f"import json\nimport {module} as fw\n"
        "print(json.dumps((fw.to_tensor([1., 2.]) * 2).numpy().tolist()))",
        "import os, sys\n"
        "print(json.dumps({'executable': sys.executable, 'prefix': sys.prefix, 'uid': os.getuid(),"
        " 'chosen': os.environ.get('STAGECRAFT_CHOSEN'),"
        " 'omp': os.environ.get('OMP_NUM_THREADS'), 'cwd': os.getcwd()}))",
    ])
    assert json.loads(outputs[0].strip().splitlines()[-1]) == [2.0, 4.0], f"{lab.tag}: {outputs[0]!r}"
    facts = json.loads(outputs[1].strip().splitlines()[-1])
    assert facts["prefix"] == "/opt/venv", f"{lab.tag}: kernel python {facts}"
    assert facts["uid"] != 0, f"{lab.tag}: kernel runs as root"
    assert facts["cwd"] == "/workspace", f"{lab.tag}: kernel cwd {facts['cwd']}"
    # The kernel inherits what the probing entrypoint chose and set before the server.
    assert facts["chosen"], f"{lab.tag}: no STAGECRAFT_CHOSEN in the kernel: {facts}"
    assert facts["omp"] == "1", f"{lab.tag}: 1-CPU quota, kernel OMP_NUM_THREADS={facts['omp']}"
    status, saved = http(lab.url + "api/contents/stagecraft-check.ipynb", lab.token)
    assert status == 200 and saved["content"]["cells"][0]["outputs"], (
        f"{lab.tag}: the executed notebook was not saved in /workspace")


def test_random_token_is_printed_and_enforced(image, start):
    engine, tag, image_id = image
    tokens = []
    for _ in range(2):
        lab = start(engine, tag, image_id)
        deadline = time.monotonic() + 30
        while not (found := re.findall(r"[?&]token=([0-9a-f]{32,})", lab.logs())):
            assert time.monotonic() < deadline, f"{tag}: no token in the log:\n{lab.logs()}"
            time.sleep(1)
        token = found[-1]
        assert http(lab.url + "api/contents")[0] in (401, 403), f"{tag}: open without a token"
        assert http(lab.url + "api/contents", token)[0] == 200, f"{tag}: printed token refused"
        tokens.append(token)
        lab.container.remove(force=True)
    assert tokens[0] != tokens[1], f"{tag}: two starts gave the same token: it is baked in"


def test_any_uid_serves_and_runs_a_kernel(image, start):
    engine, tag, image_id = image
    lab = start(engine, tag, image_id, token=secrets.token_hex(24), user="12345")
    outputs = run_notebook(lab, "any-uid.ipynb", [
        "import os, json\nprint(json.dumps([os.getuid(), os.access('/workspace', os.W_OK)]))"])
    assert json.loads(outputs[0].strip()) == [12345, True], f"{tag}: {outputs[0]!r}"
    wait_healthy(lab)


def test_pip_install_in_a_notebook(image, start):
    """`%pip install` in a notebook, as the server's (non-root) user, into the framework's
    environment: the package imports in the same kernel, and its files are group 0 and
    group-writable (the entrypoint's umask reaches the kernel), so any uid can change them.
    The index is PyPI for real; behind a TLS-intercepting proxy the host's CA bundle is
    mounted read-only and named by PIP_CERT, as README says for `docker run`."""
    engine, tag, image_id = image
    ca = find_ca_bundle()
    kwargs: dict[str, Any] = {}
    if ca:
        source = str(ca.path)
        if engine.modern:  # a bind mount names a path of the engine's own filesystem
            name = f"pip-ca-{uuid.uuid4().hex[:8]}.crt"
            (engine.share / name).write_bytes(Path(ca.path).read_bytes())
            source = f"/stagecraft/share/{name}"
        kwargs = {"volumes": {source: {"bind": "/etc/pip-ca.crt", "mode": "ro"}},
                  "environment": {"PIP_CERT": "/etc/pip-ca.crt"}}
    lab = start(engine, tag, image_id, token=secrets.token_hex(24), **kwargs)
    outputs = run_notebook(lab, "pip-install.ipynb", [
        "%pip install --no-cache-dir tabulate==0.9.0",
        "import json, os, tabulate\n"
        "st = os.stat(tabulate.__file__)\n"
        "print(json.dumps([tabulate.__version__, os.getuid(), st.st_gid, oct(st.st_mode & 0o777)]))",
    ])
    version, uid, gid, mode = json.loads(outputs[1].strip().splitlines()[-1])
    assert version == "0.9.0" and uid != 0, f"{tag}: {outputs}"
    assert (gid, mode) == (0, "0o664"), f"{tag}: %pip installed tabulate.py with gid {gid}, mode {mode}"
