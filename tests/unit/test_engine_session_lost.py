"""A build that lost a shared step's session is run once more (stagecraft/buildlog.py
``session_lost``; moby/buildkit#1432), and so is one that met a snapshot directory the
engine's last crash left (stagecraft/stalesnapshot.py).

Found by the fault suite (seed 20261373, trial 56): build.py was SIGKILLed alone while
its buildx client ran a step; the next run's build of the same stage shared that step
with the orphaned client's solve, the client then died, and the next run failed with
"ERROR: failed to solve: no active sessions". The engine here is a stand-in at the lowest
level (an HTTP server on a Unix socket answering as Docker does), the builder a stand-in
docker CLI that fails as BuildKit did, then builds."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from stagecraft import stalesnapshot
from stagecraft.buildlog import BuildLog, session_lost
from stagecraft.buildpath import Builder
from stagecraft.engine import Engine
from stagecraft.errors import BuildError
from tests.unit.socket_engine import serving

IMAGE = "sha256:" + "ab" * 32
LOST = "ERROR: failed to solve: no active sessions"
# Docker 26.1.5 (containerd 1.7.24) building after a directory was left at the next
# snapshot's id: its first build failed so, the second built.
STALE = ("ERROR: failed to solve: failed to read dockerfile: failed to prepare  as llsaoghdloo9am53q15eyi2on: "
         "failed to rename: rename /var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/"
         "snapshots/new-1684493458 /var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/"
         "snapshots/989: file exists: unknown")


class _Engine(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        if self.path.endswith("/_ping"):
            code, body = 200, b"OK"
        elif self.path.endswith("/version"):
            code, body = 200, json.dumps({"ApiVersion": "1.41", "Version": "20.10.24", "Os": "linux"}).encode()
        elif f"/images/{IMAGE}/json" in self.path:
            code, body = 200, json.dumps({"Id": IMAGE}).encode()
        else:
            code, body = 404, json.dumps({"message": "no such image"}).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Api-Version", "1.41")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def engine(tmp_path, monkeypatch):
    with serving(_Engine, tmp_path, monkeypatch):
        yield tmp_path


def standin_cli(tmp_path: Path, failures: list[str], wait_s: float = 0) -> Builder:
    """A docker CLI whose Nth build prints ``failures[N]`` after ``wait_s`` seconds and
    exits 1 (while there is one), then writes the image id to its --iidfile and exits 0."""
    (tmp_path / "failures.json").write_text(json.dumps(failures))
    cli = tmp_path / "docker"
    cli.write_text(f"""#!/usr/bin/env python3
import json, signal, sys, time
from pathlib import Path
signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as a docker client has it, whatever this test inherited
calls = Path({str(tmp_path / "calls")!r})
n = len(calls.read_text().splitlines()) if calls.exists() else 0
calls.write_text(calls.read_text() + "build\\n" if calls.exists() else "build\\n")
failures = json.loads(Path({str(tmp_path / "failures.json")!r}).read_text())
print("#1 [internal] load build definition from Dockerfile", flush=True)
if n < len(failures):
    print("#4 [2/2] RUN the attempt that fails", flush=True)
    time.sleep({wait_s})
    print(failures[n], flush=True)
    sys.exit(1)
Path(sys.argv[sys.argv.index("--iidfile") + 1]).write_text({IMAGE!r})
print("#5 [2/2] RUN pip install six", flush=True)
print("#5 DONE 0.1s", flush=True)
""")
    cli.chmod(0o755)
    return Builder(client=str(cli), argv=("build",), env=(), version="20.10.24")


def build(tmp_path: Path, builder: Builder) -> str:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    return Engine(builder).build(tmp_path / "Dockerfile", tmp_path, tmp_path / "logs" / "stage.log",
                                 tmp_path / "iid", secrets={})


def calls(tmp_path: Path) -> int:
    """How many builds the stand-in CLI began (0: none, or killed before it counted)."""
    path = tmp_path / "calls"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_a_lost_session_is_built_again_once(engine):
    assert build(engine, standin_cli(engine, [LOST])) == IMAGE
    assert calls(engine) == 2
    log = (engine / "logs" / "stage.log").read_text()
    assert LOST in log and log.count("$ ") == 2  # both builds, one log


def test_twice_lost_is_the_failure(engine):
    with pytest.raises(BuildError, match="no active sessions"):
        build(engine, standin_cli(engine, [LOST, LOST]))
    assert calls(engine) == 2


def test_other_failures_are_not_run_again(engine):
    with pytest.raises(BuildError, match="No matching distribution"):
        build(engine, standin_cli(engine, ["#5 3.2 ERROR: No matching distribution found for six==0"]))
    assert calls(engine) == 1


def test_the_retry_feeds_progress_and_steps_anew(engine):
    """The retried build's own counts and cache errors are the stage's (review: they were
    the failed first build's)."""
    log, steps = BuildLog(), []
    (engine / "Dockerfile").write_text("FROM scratch\n")
    Engine(standin_cli(engine, [LOST])).build(engine / "Dockerfile", engine, engine / "logs" / "stage.log",
                                              engine / "iid", secrets={}, progress=log, on_step=steps.append)
    assert [v.name for v in log.vertices.values()] == ["[internal] load build definition from Dockerfile",
                                                      "[2/2] RUN pip install six"]  # not the failed build's
    assert steps.count("[internal] load build definition from Dockerfile") == 2  # both builds shown
    assert "# stagecraft: lost a shared step's session: building again" in (engine / "logs" / "stage.log").read_text()


def test_after_ctrl_c_no_second_build(engine):
    """stop_builds before a build starts (it came between the check and the start, as
    it can before the second build): the build started is terminated (SIGTERM: exit
    -15), not left to run to its end, and none follows."""
    e = Engine(standin_cli(engine, [LOST], wait_s=20))
    e.stop_builds()
    (engine / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(BuildError, match=r"exit -15"):
        e.build(engine / "Dockerfile", engine, engine / "logs" / "stage.log", engine / "iid", secrets={})
    assert calls(engine) <= 1


def test_session_lost_reads_the_end_of_the_output():
    assert session_lost(["#5 [2/2] RUN x", LOST])
    assert session_lost(["#5 [2/2] RUN x", "#5 ERROR: failed to solve: no active sessions"])
    assert not session_lost([LOST] + ["#6 more"] * 20)  # long before the end: not this failure
    # A step that prints the words itself failed for its own reasons: not built again.
    assert not session_lost(["#7 [3/4] RUN myapp --status", "#7 0.41 no active sessions",
                             "#7 ERROR: process did not complete successfully: exit code: 3"])
    assert not session_lost(['ERROR: failed to solve: process "/bin/sh -c false" did not complete successfully: '
                             "exit code: 1"])


def test_a_crashs_snapshot_directory_is_built_again_once(engine):
    assert build(engine, standin_cli(engine, [STALE])) == IMAGE
    assert calls(engine) == 2
    assert f"# stagecraft: {stalesnapshot.WHY}" in (engine / "logs" / "stage.log").read_text()


def test_twice_met_is_the_failure(engine):
    with pytest.raises(BuildError, match="file exists"):
        build(engine, standin_cli(engine, [STALE, STALE]))
    assert calls(engine) == 2


def test_one_more_build_in_all_whatever_the_causes(engine):
    """A lost session, then a crash's directory: the second failure is the answer (one
    build more per stage build, not one per cause)."""
    with pytest.raises(BuildError, match="file exists"):
        build(engine, standin_cli(engine, [LOST, STALE]))
    assert calls(engine) == 2


def test_a_step_that_printed_the_words_is_not_built_again(engine):
    """A RUN step that failed for its own reasons, having printed containerd's words (review:
    any line of the tail counted): built once."""
    said = ("failed to rename: rename /var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/"
            "snapshots/new-1 /var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots/2: "
            "file exists")
    failure = "\n".join([f"#4 0.41 {said}", f'#4 ERROR: process "/bin/sh -c echo {said}" did not complete '
                          "successfully: exit code: 1", f"0.41 {said}",
                          f'ERROR: failed to solve: process "/bin/sh -c echo {said}" did not complete '
                          "successfully: exit code: 1"])
    with pytest.raises(BuildError):
        build(engine, standin_cli(engine, [failure]))
    assert calls(engine) == 1
    assert stalesnapshot.WHY not in (engine / "logs" / "stage.log").read_text()
