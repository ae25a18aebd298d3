"""stalesnapshot: the snapshotter's words for a directory an engine's crash left, and the
one request more they cost. The texts are the engine's own, as Docker 26.1.5 with
containerd 1.7.24 answered ``docker create``, a BuildKit build and ``docker load`` after
a directory was left at the next snapshot's id (and the fault suite's CI run, seed
1796663260, for the SDK's form)."""

from __future__ import annotations

import docker.errors
import pytest

from stagecraft import stalesnapshot

ROOT = "/var/lib/docker/containerd/daemon/io.containerd.snapshotter.v1.overlayfs/snapshots"
CREATE = (f"Error response from daemon: failed to rename: rename {ROOT}/new-2475723895 "
          f"{ROOT}/985: file exists: unknown")
BUILD = (f"#1 ERROR: failed to prepare  as llsaoghdloo9am53q15eyi2on: failed to rename: rename "
         f"{ROOT}/new-1684493458 {ROOT}/989: file exists: unknown")
LOAD = (f'failed to unpack loaded image: failed to prepare extraction snapshot "extract-822519334-eu-R '
        f'sha256:6bf04b4ca5e70a575cd1fd380d26772778072538c389ae7a082a6211cec3ebe1": failed to rename: '
        f"rename {ROOT}/new-2832745750 {ROOT}/998: file exists: unknown")


@pytest.mark.parametrize("text", [CREATE, BUILD, LOAD], ids=["create", "build", "load"])
def test_the_engines_words_are_found(text):
    assert stalesnapshot.said(text)
    assert stalesnapshot.said("#12 DONE 0.1s", text, "")


@pytest.mark.parametrize("text", [
    # another rename that failed: not a directory left at a new snapshot's id
    f"failed to rename: rename {ROOT}/new-1 {ROOT}/7: no space left on device",
    f"failed to rename: rename {ROOT}/new-1 {ROOT}/7: permission denied",
    "failed to rename: rename /tmp/a /tmp/b: file exists",
    f"failed to rename: rename {ROOT}/7 {ROOT}/new-1: file exists",  # the other way round
    "mkdir /var/lib/docker/volumes/x: file exists",
    "",
], ids=["no-space", "permission", "not-snapshots", "reversed", "mkdir", "empty"])
def test_other_errors_are_not_taken_for_it(text):
    assert not stalesnapshot.said(text)


class Engine:
    """What the SDK raises, in order: each call takes the next answer (an exception is
    raised, anything else returned)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_a_request_refused_with_the_words_is_made_once_more():
    engine = Engine(docker.errors.APIError(CREATE), "container")
    assert stalesnapshot.once_more(engine) == "container"
    assert engine.calls == 2


def test_a_load_stream_that_ended_in_the_words_is_made_once_more():
    """``images.load`` raises ``ImageLoadError`` (not an APIError) for the stream's error
    (Docker 26.1.5 said LOAD there)."""
    engine = Engine(docker.errors.ImageLoadError(LOAD), "loaded")
    assert stalesnapshot.once_more(engine) == "loaded"
    assert engine.calls == 2


def test_refused_twice_the_second_answer_is_raised():
    second = docker.errors.APIError(LOAD)
    engine = Engine(docker.errors.APIError(CREATE), second, "never asked")
    with pytest.raises(docker.errors.APIError) as raised:
        stalesnapshot.once_more(engine)
    assert raised.value is second and engine.calls == 2


@pytest.mark.parametrize("error", [
    docker.errors.APIError("500 Server Error: no space left on device"),
    docker.errors.NotFound("No such image: x"),
    OSError(CREATE),  # the words, but not the engine's answer
    KeyboardInterrupt(),
], ids=["other-answer", "not-found", "not-an-answer", "ctrl-c"])
def test_anything_else_is_raised_at_once(error):
    engine = Engine(error, "never asked")
    with pytest.raises(type(error)):
        stalesnapshot.once_more(engine)
    assert engine.calls == 1


# BuildKit's own lines as Docker 26.1.5 printed them (a build's first after the directory
# was left: the Dockerfile's snapshot), and what a step may print that must not count.
BUILD_SOLVE = (f"ERROR: failed to solve: failed to read dockerfile: failed to prepare  as "
               f"llsaoghdloo9am53q15eyi2on: failed to rename: rename {ROOT}/new-1684493458 {ROOT}/989: "
               f"file exists: unknown")
STEP_SAID = f"failed to rename: rename {ROOT}/new-1 {ROOT}/2: file exists"


@pytest.mark.parametrize("lines", [[BUILD], [BUILD, "------", BUILD_SOLVE], ["#1 DONE 0.0s", BUILD_SOLVE]],
                         ids=["vertex", "both", "solve"])
def test_a_build_that_met_it_is_known_by_buildkits_own_line(lines):
    assert stalesnapshot.build_met(lines)


@pytest.mark.parametrize("lines", [
    [f"#7 0.41 {STEP_SAID}"],  # the step's own output
    [f"0.41 {STEP_SAID}"],  # BuildKit's trailer repeating it
    [f"   5 | >>> RUN echo '{STEP_SAID}'"],  # the Dockerfile excerpt
    [f'#7 ERROR: process "/bin/sh -c echo {STEP_SAID}" did not complete successfully: exit code: 1'],
    [f'ERROR: failed to solve: process "/bin/sh -c echo {STEP_SAID}" did not complete successfully: '
     "exit code: 1"],
    [BUILD] + ["#8 more"] * 20,  # long before the end: not what failed
], ids=["step-output", "trailer", "excerpt", "step-error", "solve-of-step", "long-before"])
def test_what_a_step_printed_is_not_taken_for_it(lines):
    assert not stalesnapshot.build_met(lines)
