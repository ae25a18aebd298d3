"""`pip install .` without extras gives everything the product needs, validation
included (issue 13, item 8): in a fresh virtual environment, `build.py --test` builds a
small image of the real format and validates it with its testinfra suites."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid

from tests.integration.harness import ROOT
from tests.unit.minimal_matrix import MINIMAL

PACKAGE = ("pyproject.toml", "README.md", "stagecraft", "probes", "entrypoint")


def test_pip_install_without_extras_builds_and_validates(tmp_path, project, client):
    src = tmp_path / "src"
    src.mkdir()
    for name in PACKAGE:  # a copy: pip builds in the tree it is given
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(
            ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                        if (ROOT / name).is_dir() else {}))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(src)],
                         capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-3000:]
    repo = f"stagecraft-it/venv-{uuid.uuid4().hex[:8]}"
    path = project(MINIMAL.replace("repository: example/fw", f"repository: {repo}"))
    try:
        proc = subprocess.run([str(venv / "bin" / "python"), str(ROOT / "build.py"), "--matrix",
                               str(path), "--tag", "1.16.0-cpu", "--test", "--json",
                               "--state-dir", str(tmp_path / "state")],
                              capture_output=True, text=True, timeout=1800, cwd=path.parent,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert proc.returncode == 0, proc.stderr[-3000:]
        image = json.loads(proc.stdout)["images"][0]
        assert image["test"]["passed"] and image["test"]["counts"].get("passed", 0) > 0, image
    finally:
        for img in client.images.list(name=repo):
            for tag in img.tags:
                if tag.startswith(repo + ":"):
                    client.images.remove(tag, noprune=True)
