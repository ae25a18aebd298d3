"""One record per device family (probes/families.py): a made-up family added through one
record and one probe module (tests/fixtures/testfam_probe.py, fixture root
tests/fixtures/roots/testfam-two) reaches the probes, the visibility variables hidden on a
fallback, the device string, the health check and both schemas' enums; the checked-in
schemas and matrix.yaml's device strings agree with the built-in records."""
from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from entrypoint import health
from entrypoint.main import plan
from probes import families, probe_family, visible
from probes.families import Family, Visibility
from probes.types import FAMILIES, USABLE
from stagecraft import familyschema
from tests.fixtures.compose import compose

TESTFAM = Family(
    "testfam", "Test Fam", "Test Fams", "tests.fixtures.testfam_probe", nodes="/dev/testfam<N>",
    controls=("/dev/testfam_ctl",),
    visibility=Visibility(slots=(("TESTFAM_VISIBLE_DEVICES",),), hide=(("TESTFAM_VISIBLE_DEVICES", ""),),
                          runtime="testfam runtime", source="made up for this test"),
    device_string="tf:{index}", source="made up for this test")
SETS = [{"name": "tf1", "device": "testfam", "requires": {"arch": ["tf*"]}},
        {"name": "cpu", "device": "cpu"}]


@pytest.fixture
def testfam() -> Iterator[Family]:
    """TESTFAM registered for one test, removed after it whatever happens."""
    families.register(TESTFAM)
    try:
        yield TESTFAM
    finally:
        families.unregister("testfam")


def start(tmp_path: Path, pieces: tuple[str, ...] = ("testfam-two",), **env: str) -> dict:
    """The entrypoint's plan (probe, choose, environment, report) in this process, on a
    fixture root and an image carrying a testfam set and a CPU set."""
    root = compose(tmp_path / "root", "linux-rhel7-haswell", ("host-16cpu", *pieces))
    image = tmp_path / "image.json"
    image.write_text(json.dumps({"schema": 1, "device": "testfam", "kernel_sets": SETS,
                                 "device_strings": families.device_strings()}))
    return plan({"STAGECRAFT_PROBE_ROOT": str(root), "STAGECRAFT_IMAGE_JSON": str(image),
                 "PATH": "/usr/bin:/bin", **env})


def test_made_up_family_is_chosen_spelled_and_health_checked(tmp_path: Path, testfam: Family) -> None:
    assert "testfam" in FAMILIES and list(FAMILIES)[-2:] == ["testfam", "cpu"]
    p = start(tmp_path)
    report = p["report"]
    assert (report["chosen"], report["device"], report["fallback"]) == ("tf1", "testfam", False), report
    assert [d["node"] for d in report["probes"]["testfam"]["devices"]] == ["/dev/testfam0", "/dev/testfam1"]
    assert p["changes"]["STAGECRAFT_DEVICE_STRING"] == "tf:0", p["changes"]
    assert not any(k.startswith("TESTFAM") for k in p["changes"]), p["changes"]
    root = str(tmp_path / "root")
    assert health.check(report, 1.0, root) == (0, "healthy: testfam nodes present and usable (3 checked)")
    (tmp_path / "root" / "dev" / "testfam_ctl").unlink()  # the record's control node
    assert health.check(report, 1.0, root) == (1, "unhealthy: /dev/testfam_ctl gone")


def test_made_up_family_is_hidden_on_a_fallback(tmp_path: Path, testfam: Family) -> None:
    p = start(tmp_path, TESTFAM_VISIBLE_DEVICES="7")
    report = p["report"]
    assert (report["chosen"], report["fallback"]) == ("cpu", True), report
    assert report["message"] == ("fallback: TESTFAM_VISIBLE_DEVICES='7' selects no Test Fam "
                                 "(TESTFAM_VISIBLE_DEVICES entry '7' matches no Test Fam; "
                                 "the runtime reads no entry from there on)"), report["message"]
    assert p["changes"]["TESTFAM_VISIBLE_DEVICES"] == "", p["changes"]
    assert "Test Fams hidden from the framework: TESTFAM_VISIBLE_DEVICES=''" in report["notes"], report["notes"]
    assert p["changes"]["STAGECRAFT_DEVICE_STRING"] == "cpu"
    assert health.check(report, 1.0, str(tmp_path / "root")) == (0, "healthy: cpu chosen: nothing to check")


def test_made_up_family_unusable_without_its_control_node(tmp_path: Path, testfam: Family) -> None:
    root = compose(tmp_path / "bare", None, ("testfam-two",))
    (root / "dev" / "testfam_ctl").unlink()
    r = probe_family("testfam", str(root), 1.0, {})
    assert (r.state, r.reason) == ("unusable", "/dev/testfam* present but /dev/testfam_ctl missing "
                                               "(pass it with --device)")
    p = start(tmp_path, STAGECRAFT_DEVICE="cpu")  # usable, but not chosen: hidden all the same
    assert p["changes"]["TESTFAM_VISIBLE_DEVICES"] == "" and p["report"]["chosen"] == "cpu"


def test_made_up_family_visibility_variable_selects(tmp_path: Path, testfam: Family) -> None:
    root = str(compose(tmp_path / "root", None, ("testfam-two",)))
    r = probe_family("testfam", root, 1.0, {"TESTFAM_VISIBLE_DEVICES": "1"})
    assert r.state == USABLE and [d.index for d in r.devices] == [1]
    assert visible.hidden_reason("testfam", {"TESTFAM_VISIBLE_DEVICES": " "}) == \
        "TESTFAM_VISIBLE_DEVICES=' ' hides every Test Fam"
    assert probe_family("testfam", root, 1.0, {"TESTFAM_VISIBLE_DEVICES": ""}).state == "absent"


def test_family_without_visibility_variables_keeps_every_node(tmp_path: Path) -> None:
    families.register(TESTFAM._replace(visibility=None))
    try:
        root = str(compose(tmp_path / "root", None, ("testfam-two",)))
        r = probe_family("testfam", root, 1.0, {"TESTFAM_VISIBLE_DEVICES": ""})
        assert (r.state, [d.index for d in r.devices]) == (USABLE, [0, 1]), r
        assert visible.hide("testfam", {}) == {}
    finally:
        families.unregister("testfam")


def test_made_up_family_in_both_schemas(testfam: Family) -> None:
    ks_file = json.loads(familyschema.KERNEL_SETS.read_text())
    ks = familyschema.derive(familyschema.KERNEL_SETS, ks_file)
    kset = {"name": "tf1", "device": "testfam", "requires": {"arch": ["tf*"]}}
    assert "testfam" in ks["$defs"]["kernel_set"]["properties"]["device"]["enum"]
    assert "testfam" in ks["$defs"]["kernel_set"]["allOf"][2]["if"]["properties"]["device"]["enum"]
    assert jsonschema.Draft202012Validator(ks).is_valid([kset])
    assert not jsonschema.Draft202012Validator(ks).is_valid([{**kset, "isa_cap": "avx2"}])  # accel rules apply
    assert not jsonschema.Draft202012Validator(ks_file).is_valid([kset])  # the file needs regenerating
    mx_file = json.loads(familyschema.MATRIX.read_text())
    mx = familyschema.derive(familyschema.MATRIX, mx_file)
    fw = mx["$defs"]["framework"]["properties"]
    assert fw["device"]["enum"][0] == "cpu" and "testfam" in fw["device"]["enum"]
    assert "testfam" in fw["device_strings"]["propertyNames"]["enum"]
    # the rewrite gives the derived schema and keeps each file's layout: the hand-made
    # kernel_sets file its lines, the indent=2 matrix schema one line more per enum
    for path, want, more in ((familyschema.KERNEL_SETS, ks, 0), (familyschema.MATRIX, mx, 2)):
        old = path.read_text()
        text = familyschema.rewritten(path, old)
        assert json.loads(text) == want and text.count("\n") == old.count("\n") + more, path.name


def test_stale_schemas_are_reported_and_left_alone(testfam: Family, capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.read_bytes() for p in familyschema.ENUMS}
    assert familyschema.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "probes/kernel_sets.schema.json: stale" in out and "stagecraft/matrix.schema.json: stale" in out
    assert {p: p.read_bytes() for p in familyschema.ENUMS} == before


def test_checked_in_schemas_equal_the_records() -> None:
    """After adding a family: python -m stagecraft.familyschema rewrites both files."""
    for path in familyschema.ENUMS:
        text = path.read_text()
        assert familyschema.derive(path, json.loads(text)) == json.loads(text), (
            f"{path.name}: family enums differ from probes/families.py; run python -m stagecraft.familyschema")
        assert familyschema.rewritten(path, text) == text
    assert familyschema.main(["--check"]) == 0


def test_familyschema_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert familyschema.main(["--write"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown arguments '--write'" in err and "[--check]" in err


def test_familyschema_refuses_a_file_it_cannot_rewrite_in_place(testfam: Family) -> None:
    text = familyschema.KERNEL_SETS.read_text().replace('"cpu"]},', '\n"cpu"]},', 1)
    with pytest.raises(ValueError, match="is not on one line; edit it by hand"):
        familyschema.rewritten(familyschema.KERNEL_SETS, text)


def test_matrix_paddle_device_strings_equal_the_records() -> None:
    matrix = yaml.safe_load((REPO / "matrix.yaml").read_text())
    paddle = {name: fw["device_strings"] for name, fw in matrix["components"]["framework"].items()
              if fw["package"].startswith("paddlepaddle")}
    assert paddle, "matrix.yaml declares no PaddlePaddle framework"
    for name, strings in paddle.items():
        assert strings == families.device_strings(), (
            f"matrix.yaml framework {name}: device_strings differ from probes/families.py's device_string")


def test_register_refuses_bad_records() -> None:
    before = families.records()
    with pytest.raises(ValueError, match="'xpu' is registered already"):
        families.register(TESTFAM._replace(name="xpu"))
    with pytest.raises(ValueError, match="name 'Test-Fam' must be lower-case letters and digits"):
        families.register(TESTFAM._replace(name="Test-Fam"))
    with pytest.raises(ValueError, match="requires 'quantum' must be one of nvidia, cpu, accel"):
        families.register(TESTFAM._replace(requires="quantum"))
    with pytest.raises(ValueError, match="health 'ping' must be one of"):
        families.register(TESTFAM._replace(health="ping"))
    with pytest.raises(ValueError, match="nodes 'testfam<N>' must read /dev/<name><N>"):
        families.register(TESTFAM._replace(nodes="testfam<N>"))
    with pytest.raises(ValueError, match="control node 'ctl' must be under /dev/"):
        families.register(TESTFAM._replace(controls=("ctl",)))
    vis = TESTFAM.visibility
    assert vis is not None
    with pytest.raises(ValueError, match="hide variable 'OTHER' is not among the visibility variables"):
        families.register(TESTFAM._replace(visibility=vis._replace(hide=(("OTHER", ""),))))
    with pytest.raises(ValueError, match="early variable 'OTHER' is not among"):
        families.register(TESTFAM._replace(visibility=vis._replace(early=("OTHER",))))
    with pytest.raises(ValueError, match="'xpu' is built in"):
        families.unregister("xpu")
    with pytest.raises(KeyError, match="unknown device family 'nope'"):
        families.unregister("nope")
    assert families.records() == before and "testfam" not in FAMILIES


def test_unknown_family_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown device family 'tpu'; expected one of nvidia, xpu"):
        probe_family("tpu")
    assert families.find(["xpu"]) is None and ["xpu"] not in FAMILIES  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="has no visibility variables"):
        visible.select("nvidia", [], {})


def test_families_view_is_live(testfam: Family) -> None:
    assert len(FAMILIES) == 7 and FAMILIES[-1] == "cpu" and FAMILIES[-2] == "testfam"
    assert FAMILIES == ("nvidia", "xpu", "npu", "amd", "mlu", "testfam", "cpu")
    assert repr(FAMILIES) == repr(("nvidia", "xpu", "npu", "amd", "mlu", "testfam", "cpu"))


@pytest.mark.parametrize("fam", families.BUILT_IN, ids=lambda f: f.name)
def test_built_in_records_are_whole(fam: Family) -> None:
    from entrypoint import devicestring

    assert families.problems(fam) == []
    mod = __import__(fam.probe, fromlist=["probe"])
    assert callable(mod.probe), fam.probe
    assert devicestring.problems(fam.device_string) == [], fam.device_string
    if fam.name != "cpu":
        assert fam.visibility is not None and fam.visibility.hide, fam.name
        assert fam.nodes and fam.controls, fam.name


# The fixture root of each node family: its nodes and control nodes in the real layout.
PIECES = {"xpu": "kunlun-r200", "npu": "ascend-910b", "amd": "amd-mi210", "mlu": "cambricon-mlu370",
          "nvidia": "nvidia-nodes"}


@pytest.mark.parametrize(("name", "piece"), sorted(PIECES.items()))
def test_records_name_the_nodes_the_fixture_roots_hold(tmp_path: Path, name: str, piece: str) -> None:
    fam = families.get(name)
    root = compose(tmp_path / "root", None, (piece,))
    where, prefix = fam.node_parts()
    assert any(p.name.startswith(prefix) and p.name[len(prefix):].isdigit() for p in (root / where[1:]).iterdir()), \
        f"{piece}: no {fam.nodes}"
    missing = [c for c in fam.controls if not (root / c[1:]).exists()]
    assert not missing, f"{piece}: {missing}"
    if fam.health == "nodes":  # a fresh root is healthy; without a control node it is not
        report = {"device": name, "probes": {}}
        assert health.check(report, 1.0, str(root))[0] == 0
        (root / fam.controls[-1][1:]).unlink()
        assert health.check(report, 1.0, str(root)) == (1, f"unhealthy: {fam.controls[-1]} gone")


def test_records_cost_no_typing_or_dataclasses_at_import() -> None:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import probes.families; "
            "print(sorted(m for m in ('typing', 'dataclasses', 'json', 're') if m in sys.modules))")
    cp = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(REPO)], capture_output=True, text=True,
                        timeout=60, check=False)
    assert (cp.returncode, cp.stdout.strip()) == (0, "[]"), cp.stdout + cp.stderr

