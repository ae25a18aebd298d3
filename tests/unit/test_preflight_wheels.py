"""The wheel-version preflight: every NVIDIA wheel pin of a stage to build exists on the
index, asked through PEP 691's JSON simple API. A real HTTP server on 127.0.0.1 stands
in for PyPI (pages in PyPI's own format); the real matrix gives the pins and lines."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.preflight import index_versions, missing_wheels, wheel_pins
from tests.conftest import ROOT

MATRIX = load_matrix(ROOT / "matrix.yaml")
SPECS = {s.tag: s for s in expand(MATRIX)}
TORCH = "torch-2.10.0-gpu-cuda12.8"


def _page(name: str, versions: list[str]) -> dict:
    dist = name.replace("-", "_")
    files = [{"filename": f"{dist}-{v}-py3-none-manylinux2014_x86_64.whl", "yanked": False,
              "hashes": {}, "url": "https://files.invalid/x.whl"} for v in versions]
    files.append({"filename": f"{dist}-9.9.9.tar.gz", "yanked": False, "hashes": {}, "url": "x"})
    return {"meta": {"api-version": "1.1"}, "name": name, "files": files}


@pytest.fixture
def index():
    """A simple index serving every pin of the real matrix, except that it lacks
    nvidia-cudnn-cu12 9.10.2.21 and knows no nvidia-nvshmem-cu12 at all."""
    pages: dict[str, list[str]] = {}
    for spec in SPECS.values():
        for table in ("cuda", "accel"):
            for pkg, v in (spec.components.get(table) or {}).get("pypi", {}).items():
                pages.setdefault(pkg, []).append(str(v))
    pages["nvidia-cuda-cuobjdump"] = ["13.4.92"]
    pages["nvidia-cudnn-cu12"] = [v for v in pages["nvidia-cudnn-cu12"] if v != "9.10.2.21"] + ["9.10.1.4"]
    del pages["nvidia-nvshmem-cu12"]
    yield from _serve(pages)


def _serve(pages: dict[str, list[str]]):
    """Serve ``pages`` (project -> versions with a wheel) as a PEP 691 simple index; yields
    (its URL, the projects asked for, in order)."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            name = self.path.strip("/").split("/")[-1]
            asked.append(name)
            if self.headers.get("Accept") != "application/vnd.pypi.simple.v1+json" or name not in pages:
                self.send_response(404)
                self.end_headers()
                return
            body = json.dumps(_page(name, pages[name])).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple", asked
    server.shutdown()


def test_versions_come_from_wheel_file_names(index):
    url, _ = index
    assert index_versions("nvidia-cuda-cuobjdump", None, url) == {"13.4.92"}
    assert index_versions("no-such-project", None, url) == set()
    assert index_versions("anything", None, "http://127.0.0.1:9/simple", timeout_s=2) is None


def test_a_pin_the_index_lacks_is_one_line_at_its_matrix_line(index):
    url, asked = index
    spec = SPECS[TORCH]
    pins = wheel_pins(MATRIX, [(spec, stage) for stage in spec.chain])
    problems, notes = missing_wheels(MATRIX, pins, None, url)
    lines = sorted(p.line() for p in problems)
    assert len(lines) == 2, lines
    assert "nvidia-cudnn-cu12==9.10.2.21: " + url + " has no wheel of that version (latest: " in lines[0], lines
    assert "9.10.1.4" in lines[0] and lines[0].startswith("matrix.yaml:"), lines
    assert "nvidia-nvshmem-cu12==3.4.5: " in lines[1] and "(no such project)" in lines[1], lines
    assert notes == []
    assert len(asked) == len(set(asked)), f"a project was asked twice: {asked}"
    assert "nvidia-cuda-cuobjdump" in asked, "the runtime stage's build tool was not checked"


def test_only_the_stages_to_build_are_checked(index):
    url, asked = index
    spec = SPECS["2.6.0-gpu-cuda11.8-cudnn8.6"]
    assert wheel_pins(MATRIX, [(spec, "base")]) == {}
    pins = wheel_pins(MATRIX, [(spec, "accel")])
    assert list(pins) == [("nvidia-nccl-cu11", "2.15.5")]
    assert missing_wheels(MATRIX, pins, None, url) == ([], [])
    assert asked == ["nvidia-nccl-cu11"]


def test_an_index_that_does_not_answer_is_a_note_not_an_error():
    spec = SPECS[TORCH]
    pins = wheel_pins(MATRIX, [(spec, "accel")])
    problems, notes = missing_wheels(MATRIX, pins, None, "http://127.0.0.1:9/simple")
    assert problems == [] and len(notes) == len(pins) and "cannot check" in notes[0]


@pytest.fixture
def cudnn_releases():
    """An index whose nvidia-cudnn-cu12 has pre-, post- and dev releases beside the
    finals (file names with _ for -, as PyPI serves them), one version packaging cannot
    read, and none of the real pin."""
    yield from _serve({"nvidia-cudnn-cu12": [
        "9.10.2.20", "9.9.0.52", "9.10.2.21.post1", "9.10.2.22.dev3", "9.10.2.22rc1",
        "9.10.2.22", "legacy_build"]})


def test_the_latest_versions_named_are_the_latest_in_pep_440_order(cudnn_releases):
    # 9.9 before 9.10 (numbers, not text); a dev release before its rc, the rc before the
    # final, a post release after its final; what packaging cannot read before all.
    url, _ = cudnn_releases
    spec = SPECS[TORCH]
    pins = {k: v for k, v in wheel_pins(MATRIX, [(spec, "accel"), (spec, "cuda")]).items()
            if k[0] == "nvidia-cudnn-cu12"}
    assert [k[1] for k in pins] == ["9.10.2.21"], pins
    assert index_versions("NVIDIA_cuDNN.cu12", None, url) == {
        "9.10.2.20", "9.9.0.52", "9.10.2.21.post1", "9.10.2.22.dev3", "9.10.2.22rc1",
        "9.10.2.22", "legacy_build"}, "the project name is compared PEP 503-normalised"
    problems, notes = missing_wheels(MATRIX, pins, None, url)
    assert notes == [] and len(problems) == 1
    assert ("(latest: 9.10.2.21.post1, 9.10.2.22.dev3, 9.10.2.22rc1, 9.10.2.22)"
            in problems[0].line()), problems[0].line()
