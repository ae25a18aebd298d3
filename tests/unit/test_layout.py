"""The test tree itself: pytest's default (rootdir-based) import mode names a test module
by its basename where its folder is no package, so two test files of one name under
tests/unit and tests/integration stop the whole run at collection ("import file
mismatch"). Every test file that `make test` collects has a basename of its own
(tests/image holds the suites `build.py test` runs, one pytest run per image)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_file_basenames_are_unique():
    where: dict[str, list[str]] = defaultdict(list)
    for path in [*TESTS.glob("unit/**/test_*.py"), *TESTS.glob("integration/**/test_*.py")]:
        where[path.name].append(str(path.relative_to(TESTS)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not twice, f"test files sharing a basename (rename one): {twice}"
