"""Errors a user can act on.

Every error caused by input (matrix.yaml, a template, the command line) is an
``InputError``: one line that says what is wrong, where (``file:line``, tag or stage) and
what to do. The CLI prints it without a traceback and exits with status 2
(``EXIT_INPUT``). Failures of the outside world (the Docker engine, a build step) are
``BuildError`` and exit with status 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .safetext import one_line

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INPUT = 2
MAX_PROBLEMS = 100  # problems one error lists; the rest are counted


@dataclass(frozen=True)
class Problem:
    """One finding: ``where`` (``file:line`` or a name), ``what`` is wrong, ``hint`` to fix."""

    where: str
    what: str
    hint: str = ""

    def line(self) -> str:
        """The problem as one line: ``where: what; hint``. Always one line of bounded
        length, whatever text the parts echo (line breaks and other unsafe characters
        are written as escapes; see ``safetext``)."""
        text = f"{self.where}: {self.what}" if self.where else self.what
        return one_line(f"{text}; {self.hint}" if self.hint else text)


class InputError(Exception):
    """Bad input, reported as one line per problem; the CLI exits 2.

    ``problems`` holds every problem found, so a user fixes them all in one pass (up
    to ``MAX_PROBLEMS``, then one line counting the rest).
    """

    def __init__(self, problems: list[Problem] | Problem):
        problems = [problems] if isinstance(problems, Problem) else list(problems)
        if len(problems) > MAX_PROBLEMS:  # bounded output, whatever the input
            rest = len(problems) - MAX_PROBLEMS
            problems = problems[:MAX_PROBLEMS] + [Problem(
                "", f"{rest} more problem{'s' if rest > 1 else ''} not shown",
                "fix these first")]
        self.problems = problems
        super().__init__("\n".join(p.line() for p in self.problems))

    @classmethod
    def one(cls, where: str, what: str, hint: str = "") -> InputError:
        """Build an error holding a single problem."""
        return cls(Problem(where, what, hint))


class BuildError(Exception):
    """The engine or a build step failed (not the user's input); the CLI exits 1."""


class NameTaken(BuildError):
    """A build that ran whole, whose image the engine would not name ``ref``: another
    build created that name first (``buildlog.name_taken``). The name is made only once
    its image is whole, so a caller building content named by its key may use it."""

    SAID = "the engine would not name the image {}: another build had just made that name (BuildKit: already exists)"

    def __init__(self, message: str, ref: str):
        super().__init__(message)
        self.ref = ref


def engine_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` says the engine did not answer at all (its connection refused or
    cut, its socket gone: the engine was killed or is restarting), as opposed to an
    answer that refused the request. The docker SDK raises these from requests and
    urllib3 under it (``requests.exceptions.ConnectionError``, urllib3's
    ``ProtocolError``), or the builtin ``ConnectionError`` family."""
    return (type(exc).__module__.split(".")[0] in ("requests", "urllib3")
            or isinstance(exc, ConnectionError))
