"""Labels and quoted words carry the matrix text exactly ($, backslashes, quotes,
non-ASCII), read back through the model of BuildKit's parser (dockerfile_model, itself
checked against a real engine by tests/integration/test_build_behaviour.py). Pure."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stagecraft.bases import base_image
from stagecraft.errors import InputError
from stagecraft.expand import expand
from stagecraft.matrix import load_matrix
from stagecraft.plan import full_dockerfile
from stagecraft.render import _shquote, dquote, final_labels, label_instruction
from stagecraft.safetext import UNSAFE_CATEGORIES
from tests.unit.dockerfile_model import instructions, labels, process_word, shell_syntax
from tests.unit.minimal_matrix import MINIMAL

ENV = {"HOME": "/home/worker", "PATH": "/usr/bin"}
# Printable text: every character outside the unsafe class, the troublesome ones often.
TEXT = st.text(st.one_of(st.sampled_from(list("$\\\"'`{}()#=;&| \u00a0\u3000é日🐳%*?~")),
                         st.characters(exclude_categories=tuple(UNSAFE_CATEGORIES))))


@pytest.mark.parametrize("value", [
    "Société $HOME", "${HOME}", "$(id)", "`id`", "a\\", "\\$HOME", '"', "'", "\\u00e9",
    "x = y", "# not a comment", "tab\u00a0nbsp", "", " lead and trail ", "🐳 日本",
])
def test_a_label_reads_back_as_written(value):
    text = label_instruction({"org.example.v": value, "org.example.w": "w"})
    (ins,) = instructions(text)
    got = labels(ins.args, ENV)
    assert got["org.example.v"].text == value and not got["org.example.v"].expanded
    assert got["org.example.w"].text == "w"


@given(st.dictionaries(st.from_regex(r"org\.example\.[a-z]{1,8}", fullmatch=True), TEXT,
                       min_size=1, max_size=6))
def test_any_printable_labels_read_back_as_written(values):
    text = label_instruction(values)
    found = [i for i in instructions(text) if i.keyword == "label"]
    assert len(found) == 1
    got = labels(found[0].args, ENV)
    assert {k: w.text for k, w in got.items()} == values
    assert not any(w.expanded for w in got.values())


@given(TEXT)
def test_dquote_and_shquote_keep_any_printable_text_in_one_word(value):
    assert process_word(dquote(value), ENV).text == value
    word = _shquote(value)
    assert shlex.split(word) == [value]
    # Only quoting and the two word breaks: no expansion, operator or comment.
    assert set(shell_syntax(f"echo {word} x")) <= {" ", "'...'", '"'}


@pytest.mark.parametrize("bad", ["a\nb", "a\u2028b", "a\x85b", "a\tb", "a\u202eb", "a\x00b"])
def test_a_label_that_would_leave_its_line_is_refused(bad):
    with pytest.raises(InputError, match=r"label org\.example\.v: the value .* holds U\+"):
        label_instruction({"org.example.v": bad})


def test_the_final_labels_of_a_tag_are_the_matrix_text(project):
    vendor, source = "Société $HOME \\ \"x\"", "https://example.invalid/$USER"
    text = MINIMAL.replace("source: https://example.invalid/src",
                           f"source: '{source}'\nvendor: '{vendor}'")
    matrix = load_matrix(project(text))
    spec = expand(matrix)[0]
    dockerfile = full_dockerfile(matrix, spec, base_image(spec.base, None), "0" * 40,
                                 "1970-01-01T00:00:00Z")
    last = [i for i in instructions(dockerfile) if i.keyword == "label"][-1]
    got = {k: w.text for k, w in labels(last.args, ENV).items()}
    assert got == final_labels(matrix, spec, "0" * 40, "1970-01-01T00:00:00Z")
    assert got["org.opencontainers.image.vendor"] == vendor
    assert got["org.opencontainers.image.source"] == source
