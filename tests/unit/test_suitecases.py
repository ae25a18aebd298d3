"""What failed in a suite run (stagecraft/suitecases.py), from JUnit reports real pytest
runs wrote: the engine's failures to start a process in the test container are told
apart from the image's own."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stagecraft.suitecases import MAX_MESSAGE, MAX_REPORT, FailedCase, engine_failed, failed_cases

# What the Docker CLI printed for a testinfra check when runc could not start the exec'd
# process (the fault suite's seed 20261390, trial 3), and what it prints when the image
# lacks the command (runc's own wording).
ENGINE = ("OCI runtime exec failed: exec failed: unable to start container process: waiting for init "
          "preliminary setup: read init-p: connection reset by peer: unknown")
IMAGE = ('OCI runtime exec failed: exec failed: unable to start container process: exec: "/bin/sh": '
         "stat /bin/sh: no such file or directory: unknown")


def _report(tmp_path, body: str):
    mod = tmp_path / "test_suite.py"
    mod.write_text(body)
    junit = tmp_path / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--rootdir={tmp_path}",
                    f"--junitxml={junit}", str(mod)], cwd=tmp_path, capture_output=True, timeout=120, check=False)
    return junit


def _check(name: str, said: str, rc: int) -> str:
    # As testinfra fails a check whose command exited unexpectedly: the CommandResult's repr.
    return (f"def test_{name}():\n    out = {said.encode()!r}\n"
            f"    raise AssertionError(f'Unexpected exit code {rc} for CommandResult(exit_status={rc}, "
            "_stdout={out!r})')\n")


def test_checks_the_engine_failed_are_the_engines(tmp_path):
    junit = _report(tmp_path, "def test_fine():\n    pass\n" + _check("pkgs", ENGINE, 126) + _check("user", ENGINE, 126))
    cases = failed_cases(junit)
    assert [c.test for c in cases] == ["test_suite::test_pkgs", "test_suite::test_user"]
    assert all("waiting for init preliminary setup" in c.message for c in cases)
    assert all(engine_failed(c) for c in cases)


def test_the_image_lacking_a_command_is_the_images_failure(tmp_path):
    junit = _report(tmp_path, _check("shell", IMAGE, 126) + _check("pkgs", ENGINE, 126))
    cases = failed_cases(junit)
    assert [engine_failed(c) for c in cases] == [False, True]
    # One is the engine's: the run is no verdict (stagecraft.testing runs it again).


def test_a_plain_failure_and_an_error_are_the_images(tmp_path):
    junit = _report(tmp_path, "import pytest\n@pytest.fixture\ndef f():\n    raise RuntimeError('no venv')\n"
                              "def test_err(f):\n    pass\n"
                              "def test_bad():\n    assert 1 == 2, 'python 3.13, not 3.11'\n")
    cases = failed_cases(junit)
    assert sorted(c.test for c in cases) == ["test_suite::test_bad", "test_suite::test_err"]
    assert not any(engine_failed(c) for c in cases)


def test_a_passing_run_has_no_failed_cases(tmp_path):
    junit = _report(tmp_path, "def test_fine():\n    pass\n")
    assert failed_cases(junit) == []


def test_messages_and_reports_are_bounded(tmp_path):
    junit = _report(tmp_path, "def test_long():\n    assert False, 'x' * 100000\n")
    (case,) = failed_cases(junit)
    assert len(case.message) == MAX_MESSAGE
    big = tmp_path / "big.xml"
    big.write_bytes(b" " * (MAX_REPORT + 1))
    with pytest.raises(ValueError, match="over .* bytes"):
        failed_cases(big)
    torn = tmp_path / "torn.xml"
    torn.write_text("<testsuites><testcase name='a'>")
    with pytest.raises(ValueError, match="not XML"):
        failed_cases(torn)
    with pytest.raises(OSError):
        failed_cases(tmp_path / "missing.xml")


def test_the_engines_words_after_the_images_own_do_not_count():
    """An image message that names the runtime's words after its own exec failure is
    still the image's; the engine's words alone are the engine's."""
    assert engine_failed(FailedCase("t", f"AssertionError: {ENGINE}"))
    assert not engine_failed(FailedCase("t", f"AssertionError: {IMAGE}"))
    assert not engine_failed(FailedCase("t", "AssertionError: exit code 126"))
    assert not engine_failed(FailedCase("t", 'OCI runtime exec failed: exec: \\"python3\\": executable file not found'))


def test_testinfras_host_parameter_leaves_the_test_id(tmp_path):
    junit = _report(tmp_path, "import pytest\n@pytest.mark.parametrize('host', ['docker://' + '0123abcd' * 8])\n"
                              "def test_pkgs(host):\n    assert False, 'python3 missing'\n"
                              "@pytest.mark.parametrize('v', ['a'])\ndef test_kept(v):\n    assert False\n")
    assert [c.test for c in failed_cases(junit)] == ["test_suite::test_pkgs", "test_suite::test_kept[a]"]


def test_runc_naming_the_images_command_unquoted_is_the_images_failure():
    """runc's execve failures name the command unquoted: a missing loader, a binary of
    another architecture, a file without the execute bit are the image's."""
    for said in ("exec /bin/sh: exec format error", "exec /bin/sh: no such file or directory",
                 "exec /usr/bin/python3: permission denied", "exec ./run.sh: no such file or directory"):
        msg = f"AssertionError: OCI runtime exec failed: exec failed: unable to start container process: {said}: unknown"
        assert not engine_failed(FailedCase("t", msg)), said


def test_the_host_parameter_goes_first_among_others_too(tmp_path):
    junit = _report(tmp_path, "import pytest\n@pytest.mark.parametrize('host', ['docker://0123456789abcdef-python3'])\n"
                              "def test_cmd(host):\n    assert False\n")
    assert [c.test for c in failed_cases(junit)] == ["test_suite::test_cmd[python3]"]


# What docker-py raised in a suite's own ``client.containers.run`` when runc's handshake
# with the container's first process failed (runc 1.1 under Docker 26, the fault suite's
# seed 20261404; Docker 20.10's chain of "caused:"; runc 1.2's words).
CREATE_ENGINE = ("docker.errors.APIError: 500 Server Error for http+docker://localhost/v1.45/containers/"
                 "abc/start: Internal Server Error (\"failed to create task for container: failed to "
                 "create shim task: OCI runtime create failed: runc create failed: unable to start "
                 "container process: waiting for init preliminary setup: read init-p: connection reset "
                 "by peer: unknown\")")
CREATE_ENGINE_2010 = ("OCI runtime create failed: container_linux.go:380: starting container process "
                      "caused: process_linux.go:722: waiting for init preliminary setup caused: read "
                      "init-p: connection reset by peer: unknown")
# Create refusals an image causes (runc's words): never the engine's.
CREATE_IMAGE = [
    'OCI runtime create failed: runc create failed: unable to start container process: error during '
    'container init: error mounting "/var/lib/docker/containers/abc/resolv.conf" to rootfs at '
    '"/etc/resolv.conf": mount /proc/self/fd/7:/etc/resolv.conf (via /proc/self/fd/9), flags: 0x5021: '
    'not a directory: unknown',
    'OCI runtime create failed: runc create failed: unable to start container process: error during '
    'container init: error mounting "proc" to rootfs at "/proc": must be mounted on ordinary '
    'directory: unknown',
    'OCI runtime create failed: container_linux.go:380: starting container process caused: '
    'chdir to cwd ("/workspace") set in config.json failed: permission denied: unknown',
    'OCI runtime create failed: runc create failed: unable to start container process: exec: '
    '"python3": executable file not found in $PATH: unknown',
]


CREATE_ENGINE_12 = ("OCI runtime create failed: runc create failed: unable to start container process: "
                    "can't get final child's PID from pipe: EOF: unknown")


@pytest.mark.parametrize("said", [CREATE_ENGINE, CREATE_ENGINE_2010, CREATE_ENGINE_12])
def test_a_suites_container_runc_could_not_start_is_the_engines(tmp_path, said):
    junit = _report(tmp_path, f"def test_any_uid():\n    raise RuntimeError({said!r})\n")
    [case] = failed_cases(junit)
    assert engine_failed(case), case


@pytest.mark.parametrize("said", CREATE_IMAGE)
def test_a_create_refusal_the_image_causes_is_the_images(tmp_path, said):
    junit = _report(tmp_path, f"def test_any_uid():\n    raise RuntimeError({said!r})\n")
    [case] = failed_cases(junit)
    assert not engine_failed(case), case
