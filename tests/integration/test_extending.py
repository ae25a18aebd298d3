"""The images as users extend them, with the package index for real (PyPI, through the
host's TLS-intercepting proxy where there is one: the CA bundle stagecraft finds for its
own builds is bind-mounted read-only and named by PIP_CERT, as README says users behind
such a proxy do).

- `pip install paddleocr` as the default user in the 3.x CPU image, then `import
  paddleocr` (OpenCV's system libraries are in the runtime) and Paddle still right.
- `pip install "numpy>=2"` in the 2.6 CPU image: pip's conflict message, nothing changed,
  Paddle still computes [2., 4.]; `PIP_CONSTRAINT=/dev/null` lifts the pins on purpose.
- README's Dockerfile example, built as written (no `USER root`) and run as the default
  user; what its RUN step installed, another uid in group 0 can remove.

Every container and image made here is removed. Cost: about 1-2 minutes on top of the
images (the PaddleOCR install is about 300 MB of wheels).
"""

from __future__ import annotations

import re
import uuid

import docker
import pytest

from stagecraft.cabundle import SECRET_ID, find_ca_bundle
from stagecraft.engine import Engine
from tests.integration.harness import MATRIX, ROOT, SPECS, buildable_here

_, SKIPPED = buildable_here()
CA = find_ca_bundle()
CA_IN_CONTAINER = "/etc/pip-ca.crt"
PADDLEOCR = MATRIX.component("toolkit", "paddleocr-3.7")["version"]
RIGHT = "import paddle; print((paddle.to_tensor([1., 2.]) * 2).numpy().tolist())"


def _image(built, alias: str) -> str:
    spec = next(s for s in SPECS if alias in s.names)
    if spec.tag in SKIPPED:
        pytest.skip(SKIPPED[spec.tag])
    return built[spec.tag]["image_id"]


def _run(client, image: str, script: str, user: str | None = None, timeout: int = 900) -> tuple[int, str]:
    """`docker run` the image's entrypoint with ``bash -c script`` and the CA bundle (if
    any) mounted for pip; (exit status, output). The container is removed."""
    kwargs = {}
    if CA:
        kwargs = {"volumes": {str(CA.path): {"bind": CA_IN_CONTAINER, "mode": "ro"}},
                  "environment": {"PIP_CERT": CA_IN_CONTAINER, "STAGECRAFT_QUIET": "1"}}
    else:
        kwargs = {"environment": {"STAGECRAFT_QUIET": "1"}}
    c = client.containers.run(image, ["bash", "-c", script], user=user, detach=True,
                              labels={"io.stagecraft.test": "extending"}, **kwargs)
    try:
        rc = c.wait(timeout=timeout)["StatusCode"]
        return rc, c.logs().decode(errors="replace")
    finally:
        c.remove(force=True)


def test_pip_install_paddleocr_as_the_default_user(client, built):
    """`--no-compile`: byte-compiling the 55 packages at install is most of the time on 2
    cores (about 3 of 4 minutes) and tells nothing about the image; imports compile what
    they load, into the same group-0 directories."""
    image = _image(built, "3.3.1-cpu")
    rc, out = _run(client, image, (
        "set -e; id -u; "
        f"pip install --no-cache-dir --no-compile paddleocr=={PADDLEOCR} >/tmp/pip.log 2>&1 || {{ tail -30 /tmp/pip.log; exit 1; }}; "
        "cd /tmp && python -c 'import paddleocr; print(\"paddleocr\", paddleocr.__version__)'; "
        f"python -c '{RIGHT}'; pip check"))
    assert rc == 0, f"3.3.1-cpu: pip install paddleocr as the default user failed:\n{out[-3000:]}"
    lines = out.splitlines()
    assert lines[0] == "1000", f"not the default user: {lines[0]}"
    assert f"paddleocr {PADDLEOCR}" in lines, out[-2000:]
    assert "[2.0, 4.0]" in lines, out[-2000:]


def test_a_conflicting_requirement_fails_and_paddle_stays_right(client, built):
    image = _image(built, "2.6.2-cpu")
    rc, out = _run(client, image, (
        "pip freeze --all > /tmp/before; "
        "pip install --no-cache-dir 'numpy>=2'; echo \"exit=$?\"; "
        "pip freeze --all > /tmp/after; cmp -s /tmp/before /tmp/after && echo unchanged; "
        f"python -c '{RIGHT}'; "
        "PIP_CONSTRAINT=/dev/null pip install --no-cache-dir --dry-run 'numpy>=2' 2>&1 | tail -1"))
    assert rc == 0, out[-3000:]
    assert "exit=1" in out, f"2.6.2-cpu: pip install numpy>=2 did not fail:\n{out[-3000:]}"
    assert "ERROR: Cannot install numpy>=2 because these package versions have conflicting dependencies." in out, out[-3000:]
    assert re.search(r"The user requested \(constraint\) numpy==1\.26\.4", out), out[-3000:]
    assert "unchanged" in out.splitlines(), f"2.6.2-cpu: the environment changed:\n{out[-3000:]}"
    assert "[2.0, 4.0]" in out.splitlines(), f"2.6.2-cpu: Paddle computes wrong afterwards:\n{out[-3000:]}"
    # On purpose: without the image's pins pip would take numpy 2 (a dry run: nothing changes).
    assert re.search(r"Would install numpy-2\.", out), out[-3000:]


def _readme_block(label: str) -> str:
    """The code block that follows ``<!-- example: LABEL -->`` in README.md."""
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"<!-- example: {re.escape(label)}[^>]*-->\s*```[a-z]*\n(.*?)```", text, re.S)
    assert m, f"README.md has no example block {label!r}"
    return m.group(1)


def test_readme_dockerfile_builds_and_runs_as_the_default_user(client, built, tmp_path):
    image = _image(built, "3.3.1-cpu")
    dockerfile = _readme_block("Dockerfile")
    assert "USER" not in dockerfile, "the example must work without switching user"
    base_ref = f"stagecraft-test/extending-base:{uuid.uuid4().hex[:12]}"
    client.images.get(image).tag(base_ref)  # the built image, whatever retags the shared tag
    dockerfile = dockerfile.replace("FROM stagecraft/paddle:3.3.1-cpu", f"FROM {base_ref}")
    if CA:  # the proxy variant README gives, with the bundle as a BuildKit secret
        plain = next(ln for ln in dockerfile.splitlines() if ln.startswith("RUN pip install"))
        dockerfile = dockerfile.replace(plain, _readme_block("Dockerfile RUN behind a proxy").strip())
    (tmp_path / "Dockerfile").write_text(dockerfile)
    (tmp_path / "requirements.txt").write_text(_readme_block("requirements.txt"))
    (tmp_path / "app.py").write_text(_readme_block("app.py"))
    engine = Engine()
    app_id = None
    try:
        app_id = engine.build(tmp_path / "Dockerfile", tmp_path, tmp_path / "build.log",
                              tmp_path / "iid", {SECRET_ID: CA.path} if CA else {})
        out = client.containers.run(app_id, remove=True, environment={"STAGECRAFT_QUIET": "1"})
        rows = [ln.split() for ln in out.decode().strip().splitlines()]
        assert rows == [["7", "10"], ["15", "22"]], f"the README app printed {out!r}"
        cfg = client.api.inspect_image(app_id)["Config"]
        assert cfg.get("User") == "1000", f"the app image runs as {cfg.get('User')!r}"
        # What the RUN step (uid 1000) installed is group-writable: another uid removes it.
        out = client.containers.run(app_id, ["bash", "-c", "pip uninstall -y tabulate && id -u"],
                                    user="12345", remove=True, environment={"STAGECRAFT_QUIET": "1"})
        assert out.decode().strip().splitlines()[-1] == "12345", out
    finally:
        for ref in (app_id, base_ref):
            if ref:
                try:
                    client.images.remove(ref, force=True)
                except docker.errors.NotFound:
                    pass

