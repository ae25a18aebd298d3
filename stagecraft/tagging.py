"""The tag phase of a run: every tag and alias of the run moves as one unit.

From the user's side the phase is all or nothing:

- SIGINT and SIGTERM are held while names move (the standard "defer the interrupt"
  pattern: the handlers record the signal; it takes effect once the phase is over), so a
  Ctrl-C cannot stop it half-way;
- a signal that arrived during the phase, or an engine error on any name, puts back every
  name already moved (to the image it pointed at before, or removes it when it did not
  exist), then the interrupt or the error goes on;
- ``TagJournal`` says exactly what the engine holds afterwards, for the final message:
  no name moved, every name moved, or (only when putting back failed too) which names
  are left moved.

The engine gives no transaction over tags (``POST /images/{name}/tag`` is one name per
call, https://docs.docker.com/reference/api/engine/version/v1.41/#tag/Image/operation/ImageTag),
so all-or-nothing is built here from its previous state, read before the first move.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import BuildError

HELD = (signal.SIGINT, signal.SIGTERM)


class TagEngine(Protocol):
    """What the tag phase needs of ``engine.Engine``."""

    def image_id(self, ref: str) -> str | None: ...

    def tag(self, image_id: str, ref: str) -> None: ...

    def untag(self, ref: str) -> None: ...


@dataclass
class TagJournal:
    """What the run did to names, for the message the CLI prints however it ends.

    ``state`` is ``none`` (the tag phase has not moved anything), ``done`` (every name of
    ``moved`` points at its new image), ``restored`` (names were moved and every one was
    put back) or ``partial`` (putting back failed for ``stuck``). ``images`` counts the
    images whose names were applied.
    """

    state: str = "none"
    moved: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    images: int = 0
    cause: str = ""

    def summary(self) -> str:
        """What the engine holds now, in words (one line, names clipped)."""
        if self.state == "done":
            return (f"every tag of the run was moved ({len(self.moved)} name(s) of "
                    f"{self.images} image(s): {_names(self.moved)})")
        if self.state == "partial":
            return (f"{len(self.stuck)} of {len(self.moved)} name(s) could not be put back "
                    f"({self.cause}): {_names(self.stuck)} point at the new image; "
                    "run the build again to finish, or fix those names by hand")
        if self.state == "restored":
            return f"no tag was moved ({len(self.moved)} name(s) already moved were put back)"
        return "no tag was moved"

    def interrupted(self) -> str:
        """The message for an interrupted run."""
        if self.state == "done":
            return (f"interrupted after tagging: {self.summary()}; what came after "
                    "(tests, push) did not finish")
        return (f"interrupted: {self.summary()}; the next run resumes from the stages that "
                "finished")


def _names(names: list[str], limit: int = 6) -> str:
    shown = ", ".join(n[:80] for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


@contextmanager
def held_signals() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM inside the block; yields the list of signals received
    meanwhile (the caller decides what they mean). Outside the main thread, where
    handlers cannot be set, nothing is held."""
    pending: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        pending.append(signum)

    previous = {sig: signal.getsignal(sig) for sig in HELD}
    installed: list[int] = []
    try:
        for sig in HELD:
            try:
                signal.signal(sig, hold)
            except ValueError:  # not the main thread
                break
            installed.append(sig)
        yield pending
    finally:
        for sig in installed:
            signal.signal(sig, previous[sig])


def apply_tags(engine: TagEngine, moves: list[tuple[str, str]], journal: TagJournal,
               images: int, say: Callable[[str], None]) -> None:
    """Point every ``(ref, image_id)`` of ``moves`` at its image, all or none.

    Signals are held meanwhile; on an engine error or a held signal every name already
    moved is put back and ``BuildError`` (error) or ``KeyboardInterrupt`` (signal) is
    raised; ``journal`` says what the engine holds in every case.
    """
    if not moves:
        return
    say(f"tagging {len(moves)} name(s) of {images} image(s): all or none")
    with held_signals() as pending:
        before = {ref: engine.image_id(ref) for ref, _ in moves}
        attempted: list[str] = []
        error: Exception | None = None
        for ref, image_id in moves:
            if pending:
                break
            attempted.append(ref)  # before the call: a move the client lost is put back too
            try:
                engine.tag(image_id, ref)
            except Exception as exc:  # noqa: BLE001 - engine or transport: put back, then report
                error = exc
                break
        journal.moved, journal.images = attempted, images
        if pending or error is not None:
            journal.cause = "interrupted" if pending else str(error)[:200]
            journal.stuck = _put_back(engine, attempted, before)
            journal.state = "partial" if journal.stuck else "restored" if attempted else "none"
        else:
            journal.state = "done"
    # A signal held until here takes effect now; the journal says what the engine holds
    # (a signal after the last move and the check above finds every name moved: "done").
    if pending:
        raise KeyboardInterrupt
    if error is not None:
        raise BuildError(f"tagging failed ({str(error)[:200]}); {journal.summary()}")


def _put_back(engine: TagEngine, refs: list[str], before: dict[str, str | None]) -> list[str]:
    """Point each of ``refs`` back at its image in ``before`` (None: remove the name);
    returns the names the engine does not show as before afterwards."""
    stuck = []
    for ref in reversed(refs):
        old = before[ref]
        try:
            if old is None:
                engine.untag(ref)
            else:
                engine.tag(old, ref)
            if engine.image_id(ref) != old:
                stuck.append(ref)
        except Exception:  # noqa: BLE001 - the engine is gone: say which names are left
            stuck.append(ref)
    return stuck[::-1]
