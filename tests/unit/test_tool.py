"""probes._tool.run: a vendor tool's answer is kept when a child it left behind holds
the pipe (issue 22 review F13: the probe waited out its budget and called a finished
answer a timeout), and the child is stopped with the tool's process group."""
from __future__ import annotations

import os
import time
from pathlib import Path

from probes import _tool


def _script(tmp_path: Path, text: str) -> str:
    path = tmp_path / "tool"
    path.write_text(text)
    path.chmod(0o755)
    return str(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    return state != "Z"


def test_an_answer_with_a_child_holding_the_pipe_is_kept(tmp_path: Path):
    pidfile = tmp_path / "child.pid"
    tool = _script(tmp_path, f"#!/bin/sh\necho answer\nsleep 100 &\necho $! > {pidfile}\nexit 0\n")
    rc, text = _tool.run([tool], timeout_s=30, limit=1 << 20)
    assert (rc, text) == (0, "answer\n")
    pid = int(pidfile.read_text())
    for _ in range(100):  # SIGKILL is delivered at once; the reaping is init's
        if not _alive(pid):
            break
        time.sleep(0.01)
    assert not _alive(pid), "the child the tool left was not stopped"


def test_a_hanging_tool_is_still_a_timeout(tmp_path: Path):
    rc, text = _tool.run([_script(tmp_path, "#!/bin/sh\necho partial\nexec sleep 100\n")], timeout_s=0.3, limit=1 << 20)
    assert rc is None and text.startswith("timed out after"), (rc, text)


def test_a_child_that_floods_after_the_tool_exits_is_bounded(tmp_path: Path):
    rc, text = _tool.run([_script(tmp_path, "#!/bin/sh\necho first\n(yes child) &\nexit 0\n")], timeout_s=30, limit=4096)
    assert (rc is None and "printed more than 4096 bytes" in text) or (rc == 0 and len(text) <= 4096), (rc, text[:200])
