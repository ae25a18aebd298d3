"""What the worst matrix files cost before they are refused (issue 13, item 5).

Writes each file into a scratch project (the minimal matrix plus the bulk), runs
`build.py --matrix FILE list` on it as a user would (under GNU time, /usr/bin/time), and
prints, per case, the exit status, the wall time (s), the peak resident memory of the
run (MiB) and the first line of its error. Results also go to bench/results/matrix_bounds.json.

    python bench/matrix_bounds.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.unit.minimal_matrix import MINIMAL  # noqa: E402

MIB = 1024 * 1024
# GNU time reports the peak resident memory (KiB) of the run on its last stderr line.
# (Python's own getrusage would carry this process's peak over into the child's.)
TIME = shutil.which("time") or "/usr/bin/time"


def cases() -> dict[str, str]:
    flat = (MIB - len(MINIMAL) - 20) // 2  # "1," per value: the most values per byte
    bomb = "".join(f"b{i}: &b{i} [{'1, 1' if i == 0 else f'*b{i - 1}, *b{i - 1}'}]\n" for i in range(40))
    return {
        "50 MB of text": MINIMAL + "#" * (50 * MIB) + "\n",
        "1 MiB of values, one list": MINIMAL.replace("schema: 1\n", "schema: 1\nx: [" + ",".join(["1"] * flat) + "]\n"),
        "1 MiB string": MINIMAL.replace("schema: 1\n", "schema: 1\nx: '" + "a" * (MIB - len(MINIMAL) - 20) + "'\n"),
        "alias bomb (2^40 values)": MINIMAL.replace("schema: 1\n", "schema: 1\n" + bomb),
        "nested 5000 deep": MINIMAL.replace("schema: 1\n", "schema: 1\nx: " + "[" * 5000 + "]" * 5000 + "\n"),
        "tag with nested range loops": MINIMAL.replace(
            '"{{ framework.version }}-cpu"',
            '"{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}x"'),
    }


def main() -> int:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        for name in ("templates", "entrypoint", "probes"):
            shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__"))
        (project / "tests").symlink_to(ROOT / "tests")
        for name, text in cases().items():
            path = project / "matrix.yaml"
            path.write_text(text)
            t0 = time.monotonic()
            # GNU time, not the shell keyword
            proc = subprocess.run([TIME, "-f", "%M", sys.executable, str(ROOT / "build.py"),
                                   "--matrix", str(path), "list"], capture_output=True,
                                  text=True, cwd=project,
                                  env={**os.environ, "DOCKER_HOST": "tcp://127.0.0.1:9"})
            seconds = time.monotonic() - t0
            lines = proc.stderr.strip().splitlines()
            peak_kib = int(lines.pop()) if lines and lines[-1].isdigit() else 0
            row = {"case": name, "bytes": len(text.encode()), "exit": proc.returncode,
                   "seconds": round(seconds, 2), "peak_rss_mib": round(peak_kib / 1024, 1),
                   "error": (lines or [""])[0][:160]}
            out.append(row)
            print(f"{name:32} exit {row['exit']}  {row['seconds']:6.2f} s  {row['peak_rss_mib']:6.1f} MiB  {row['error']}")
    results = ROOT / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "matrix_bounds.json").write_text(json.dumps(
        {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "loadavg": os.getloadavg(),
         "cases": out}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
