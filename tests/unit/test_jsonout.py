"""entrypoint.jsonout writes the start-up report byte for byte as
``json.dumps(obj, indent=1, sort_keys=True)`` does (it exists to keep ``json``, ``re`` and
``enum`` off the start path; BENCHMARKS.md "Start-up after issue 22"). Checked against
``json`` itself on generated values: every code point (lone surrogates, controls, DEL,
astral), floats with NaN and infinities, big integers, scalar keys, deep nesting."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from entrypoint import jsonout

SCALARS = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10**40), max_value=10**40)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(st.characters(), max_size=40))
KEYS = st.text(st.characters(), max_size=12)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
                      | st.dictionaries(KEYS, inner, max_size=5), max_leaves=40)


def _same(obj: object) -> None:
    assert jsonout.dumps(obj) == json.dumps(obj, indent=1, sort_keys=True)


@given(VALUES)
def test_equals_json_on_generated_values(obj):
    _same(obj)


@given(st.dictionaries(st.integers() | st.booleans() | st.floats(allow_nan=False), SCALARS, max_size=6))
def test_scalar_keys_are_converted_as_json_converts_them(obj):
    _same(obj)


@pytest.mark.parametrize("obj", [
    "", "plain", 'quote " and \\ backslash', "\x00\x01\x1f\x7f", "\b\f\n\r\t", "é ü 中文", "\U0001F600",
    "\ud800 lone \udfff", {}, [], (), {"": []}, [[[]]], {"b": 1, "a": {"d": [1.5, None], "c": True}},
    0.1, -0.0, 1e300, 5e-324, math.nan, math.inf, -math.inf, 10**100, -(10**100), True, False, None,
    {None: 1}, {True: 1, 3: 2}, {1.5: "x"},
])
def test_equals_json_on_the_edges(obj):
    _same(obj)


@pytest.mark.parametrize("obj", [{(1, 2): 3}, {b"k": 1}, b"bytes", {1, 2}, object(), {"a": object()}])
def test_what_json_refuses_is_refused(obj):
    with pytest.raises(TypeError):
        json.dumps(obj, indent=1, sort_keys=True)
    with pytest.raises(TypeError):
        jsonout.dumps(obj)


def test_keys_that_do_not_sort_together_are_refused_as_by_json():
    with pytest.raises(TypeError):
        json.dumps({"a": 1, 2: 3}, indent=1, sort_keys=True)
    with pytest.raises(TypeError):
        jsonout.dumps({"a": 1, 2: 3})


def test_nesting_is_bounded():
    deep: list = []
    for _ in range(jsonout.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper"):
        jsonout.dumps(deep)


def test_a_real_report_round_trips(tmp_path):
    """The report of a plan on a fixture root (what the entrypoint writes), read back by json."""
    from entrypoint.main import plan
    from tests.fixtures.compose import IMAGES, compose

    root = compose(tmp_path / "root", cpuinfo="linux-rhel7-haswell", pieces=["cgroup-v2-quota-1.5"])
    image = json.loads((IMAGES / "cpu-avx-only.json").read_text())
    report = plan({"STAGECRAFT_PROBE_ROOT": str(root)}, image)["report"]
    _same(report)
    assert json.loads(jsonout.dumps(report)) == json.loads(json.dumps(report))


def test_subclasses_are_written_by_their_value_as_json_writes_them():
    import enum
    from collections import OrderedDict

    class Colour(str, enum.Enum):
        RED = "red"

    class Loud(str):
        def __str__(self):
            return "LOUD"

        def __format__(self, spec):
            return "LOUD"

    class Items(dict):
        def __getitem__(self, key):
            raise KeyError(key)

    for obj in ([Colour.RED], {Colour.RED: 1}, [Loud("quiet")], Items(b=1, a=2),
                OrderedDict([("z", 1), ("a", 2)])):
        _same(obj)


def test_a_report_too_deep_to_write_still_starts_the_command(tmp_path):
    """An image.json nested deeper than MAX_DEPTH (its components go into the report):
    the kernel set is still chosen and set, the report is skipped and said."""
    import os
    import subprocess
    import sys

    from tests.fixtures.compose import IMAGES

    img = json.loads((IMAGES / "cpu-avx-only.json").read_text())
    deep: dict = {}
    node = deep
    for _ in range(jsonout.MAX_DEPTH + 10):
        node["c"] = {}
        node = node["c"]
    img["components"] = deep
    image = tmp_path / "image.json"
    image.write_text(json.dumps(img))
    repo = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if not k.startswith("STAGECRAFT_")}
    env.update(STAGECRAFT_IMAGE_JSON=str(image), STAGECRAFT_REPORT=str(tmp_path / "r.json"))
    cp = subprocess.run([sys.executable, "-IS", str(repo / "entrypoint" / "stagecraft-entrypoint"),
                         "sh", "-c", 'echo "chosen=[$STAGECRAFT_CHOSEN]"'], env=env,
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert "chosen=[cpu-" in cp.stdout and "report not written (ValueError: nested deeper" in cp.stderr
    assert not (tmp_path / "r.json").exists()
