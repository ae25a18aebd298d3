"""The fault suite's table of a run (``python -m tests.faults --table FILE...``): built from
the JSON lines the suite writes, whole or refused with exit 2."""

from __future__ import annotations

import json

from tests.faults.__main__ import main, table, variant_counts, where, where_table


def _line(kind: str, variant: str, *, violations=(), struck=True, rc=0, seconds=10.0, seed=7) -> dict:
    return {"kind": kind, "variant": variant, "violations": list(violations), "struck": struck,
            "recovered": rc == 0, "recovery_rc": rc, "seconds": seconds, "seed": seed}


def test_variants_are_counted_without_their_drawn_numbers():
    lines = [_line("engine", "engine killed build, down 0.3s (no --test)"),
             _line("engine", "engine killed build, down 2.9s"),
             _line("engine", "engine killed push at tagging, down 1.0s"),
             _line("disk", "state full, 989062 B free (no --test)")]
    assert variant_counts(lines[:3]) == "2 engine killed build, 1 engine killed push at tagging"
    assert variant_counts(lines[3:]) == "1 state full"


def test_table_counts_each_kind_and_all():
    lines = [_line("signal", "SIGINT build", seconds=5), _line("signal", "SIGKILL push", struck=False),
             _line("registry", "hang", violations=["registry: x"], rc=1, seconds=30)]
    rows = table(lines).splitlines()
    assert rows[2] == "| signal | 2 | 1 | 0 | 2 | 15 | 1 SIGINT build, 1 SIGKILL push |"
    assert rows[3] == "| registry | 1 | 1 | 1 | 0 | 30 | 1 hang |"
    assert rows[4] == "| all | 3 | 2 | 1 | 2 | 45 |  |"


def test_table_of_several_runs(tmp_path, capsys):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps(_line("disk", "engine full, 10 B free", seed=1)) + "\n\n")
    b.write_text(json.dumps(_line("disk", "state full, 10 B free", seed=2)) + "\n")
    assert main(["--table", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 trial(s), seed(s) 1, 2, project(s) six\n")  # lines without a project: six
    assert "| disk | 2 | 2 | 0 | 2 | 20 | 1 engine full, 1 state full |" in out


def test_a_line_that_is_not_a_trial_is_refused_with_its_place(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(_line("disk", "state full")) + "\n{\"kind\": \"disk\"}\n")
    assert main(["--table", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2: not a trial's line" in err and err.count("\n") == 1
    bad.write_text("not json\n")
    assert main(["--table", str(bad)]) == 2
    assert f"{bad}:1: not JSON" in capsys.readouterr().err


def test_a_missing_file_is_refused(tmp_path, capsys):
    assert main(["--table", str(tmp_path / "none.jsonl")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_where_a_fault_fell_is_named_from_the_last_line_said():
    assert where("[2/4] runtime@0123456789ab for 1.16.0-cpu") == "stage runtime"
    assert where("runtime@0123456789ab #7 exporting layers") == "stage runtime"
    assert where("label-1.16.0@0123456789ab #3 DONE 0.1s") == "stage label-1.16.0"
    assert where("pushing r/six:1.16.0 (12 MB in the engine)") == "push"
    assert where("sha256:0123abcd verified; 2 layer(s) uploaded") == "push"
    assert where("alias r/six:1.16 -> sha256:0123 verified") == "push"
    assert where("tagging r/six:1.16.0 and its alias") == "tagging"
    assert where("(nothing said yet)") == where("") == "(nothing said yet)"
    assert where("12 passed in 3.1s") == "N"
    assert where("1/1 image(s) pushed and verified in 0.4 s; run manifest /s/runs/x.json") == "after the push"
    assert where("stagecraft: 1 image(s), 3 stage(s); BuildKit via docker 26.1.5") == "planning"
    # A cold base trial's fault during debootstrap or its import (bases.py's line).
    assert where("base deb12: debootstrap minbase bookworm (amd64) from http://deb.debian.org/debian") \
        == "base bootstrap"
    assert where("base deb12: imported as stagecraft-base/debian:bookworm-amd64-0123") == "base"


def test_a_cold_base_share_outside_0_to_1_is_refused_before_anything_starts(capsys):
    assert main(["--cold-base", "1.5", "--faults", "1"]) == 2
    assert "--cold-base outside 0..1" in capsys.readouterr().err


def test_where_table_counts_struck_faults_and_is_empty_for_old_lines():
    lines = [dict(_line("signal", "SIGINT build"), met="[1/2] base@0123456789ab for a"),
             dict(_line("engine", "engine killed build"), met="base@0123456789ab #2 RUN apt"),
             dict(_line("disk", "state full"), met="pushing r:a (3 MB)"),
             dict(_line("disk", "state full"), met="")]
    assert where_table(lines).splitlines()[2:] == ["| stage base | 2 |", "| push | 1 |"]
    assert where_table([_line("signal", "SIGINT build")]) == ""
