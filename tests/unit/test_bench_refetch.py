"""bench/refetch.py: what a run's stage logs say was fetched more than once (issue 23 item 4)."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.harness import ROOT

# Lines as BuildKit's plain progress carries pip's and apt's own (from a real 2.6.2-cpu
# runtime log, sizes kept).
RUNTIME = """#7 0.232 Get:1 http://deb.debian.org/debian bookworm InRelease [151 kB]
#7 0.371 Get:2 http://deb.debian.org/debian bookworm/main amd64 Packages [8790 kB]
#7 0.426 Get:3 http://deb.debian.org/debian bookworm/main Translation-en [6107 kB]
#7 3.240 Get:1 http://deb.debian.org/debian bookworm/main amd64 libnl-3-200 amd64 3.7.0-0.2+b1 [63.1 kB]
#8 4.100 Downloading https://files.pythonhosted.org/packages/aa/paddlepaddle-2.6.2-cp311-cp311-manylinux1_x86_64.whl (126.0 MB)
#8 6.000 Downloading numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl (18.3 MB)
"""
TOOLKIT = """#5 0.300 Get:2 http://deb.debian.org/debian bookworm/main amd64 Packages [8790 kB]
#5 3.100 Get:7 http://deb.debian.org/debian bookworm/main amd64 libnl-3-200 amd64 3.7.0-0.2+b1 [63.1 kB]
#6 2.000   Downloading numpy-1.26.4-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl (18.3 MB)
"""


def test_each_file_once_and_what_came_again(tmp_path):
    (tmp_path / "runtime-0123456789ab.log").write_text(RUNTIME)
    (tmp_path / "toolkit-ba9876543210.log").write_text(TOOLKIT)
    (tmp_path / "notes.txt").write_text(TOOLKIT)  # not a stage log: not read
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "refetch.py"), "--logs", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split(" | ")[0].lstrip("| "): line for line in proc.stdout.splitlines()[2:]}
    assert rows["wheels"] == "| wheels | 2 | 3 | 163 | 18 |"
    assert rows["debs"] == "| debs | 1 | 2 | 0 | 0 |"  # 63.1 kB each
    assert rows["indexes"] == "| indexes | 2 | 3 | 24 | 9 |"
