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
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import tagrecovery
from .errors import BuildError, engine_unreachable

HELD = (signal.SIGINT, signal.SIGTERM)
# An engine that stops answering mid-phase (killed, restarted by its supervisor) is waited
# for this long (s) to put the names back within the run; polled every RETRY_S s.
ENGINE_RETURN_S = 30.0
RETRY_S = 0.5


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
    images whose names were applied; ``record`` is the state directory's tag record that
    keeps ``stuck`` for the next run (``tagrecovery``), when there is one.
    """

    state: str = "none"
    moved: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)
    images: int = 0
    cause: str = ""
    record: str = ""

    def summary(self) -> str:
        """What the engine holds now, in words (one line, names clipped)."""
        if self.state == "done":
            return (f"every tag of the run was moved ({len(self.moved)} name(s) of "
                    f"{self.images} image(s): {_names(self.moved)})")
        if self.state == "partial":
            then = (f"the next `build.py build` or `push` on this state directory puts them "
                    f"back before anything else (record: {self.record})"
                    if self.record else "run the build again to finish, or fix those names by hand")
            return (f"{len(self.stuck)} of {len(self.moved)} name(s) could not be put back "
                    f"({self.cause}): {_names(self.stuck)} left as the engine holds them; {then}")
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
               images: int, say: Callable[[str], None],
               on_disk: tuple[Path, str] | None = None) -> None:
    """Point every ``(ref, image_id)`` of ``moves`` at its image, all or none.

    Signals are held meanwhile; on an engine error or a held signal every name already
    moved is put back and ``BuildError`` (error) or ``KeyboardInterrupt`` (signal) is
    raised; ``journal`` says what the engine holds in every case. With ``on_disk``
    (the state directory and the engine's ID), the phase runs under that directory's tag
    lock and is recorded there first (``tagrecovery``): a dead run's unfinished phase is
    put back before this one starts, and a SIGKILL during this one leaves a record the
    next run puts back. Raises ``BuildError`` when the record cannot be written (a full
    disk): then no name moved.
    """
    if not moves:
        return
    say(f"tagging {len(moves)} name(s) of {images} image(s): all or none")
    with held_signals() as pending, _on_disk(engine, on_disk, pending, say) as record:
        if record is False:  # interrupted while waiting for another run's phase
            raise KeyboardInterrupt
        before = {ref: engine.image_id(ref) for ref, _ in moves}
        progress = None
        if record is not None:
            try:
                progress = tagrecovery.begin(record, moves, before)
            except OSError as exc:
                raise BuildError(f"tagging not started: cannot write {exc.filename or record} "
                                 f"({exc.strerror or exc}); no tag was moved") from None
        attempted: list[str] = []
        error: Exception | None = None
        for i, (ref, image_id) in enumerate(moves):
            if pending:
                break
            try:
                if progress is not None:
                    progress.mark(i)  # on disk before the engine is asked (recover reads it)
                attempted.append(ref)  # before the call: a move the client lost is put back too
                engine.tag(image_id, ref)
            except Exception as exc:  # noqa: BLE001 - engine, transport or disk: put back, then report
                error = exc
                break
        journal.moved, journal.images = attempted, images
        if pending or error is not None:
            journal.cause = "interrupted" if pending else _cause(error)
            journal.stuck, gone = _put_back(engine, attempted, before, pending, say)
            if journal.stuck and gone and pending:
                journal.cause = "interrupted, and the Docker engine did not answer"
            journal.state = "partial" if journal.stuck else "restored" if attempted else "none"
            journal.record = str(record) if record is not None and journal.stuck else ""
        else:
            journal.state = "done"
        if record is not None and not journal.stuck:
            tagrecovery.end(record, progress)  # settled: every name moved, or every one put back
        elif progress is not None:
            progress.close()  # the record and its progress stay for the next run
    # A signal held until here takes effect now; the journal says what the engine holds
    # (a signal after the last move and the check above finds every name moved: "done").
    if pending:
        raise KeyboardInterrupt
    if error is not None:
        raise BuildError(f"tagging failed ({_cause(error)}); {journal.summary()}")


def _cause(error: BaseException) -> str:
    """An engine error in words, naming the engine when it stopped answering."""
    if engine_unreachable(error):
        return f"the Docker engine stopped answering: {type(error).__name__}: {str(error)[:160]}"
    return str(error)[:200]


@contextmanager
def _on_disk(engine: TagEngine, on_disk: tuple[Path, str] | None, pending: list[int],
             say: Callable[[str], None]) -> Iterator[Path | bool | None]:
    """The record file of the phase under its lock, after a dead run's record is put
    back; None without ``on_disk``; False when a signal came while waiting."""
    if on_disk is None:
        yield None
        return
    state_dir, engine_key = on_disk
    with ExitStack() as stack:
        try:
            record = stack.enter_context(
                tagrecovery.phase_lock(state_dir, engine_key, lambda: bool(pending), say))
        except OSError as exc:
            raise BuildError(f"tagging not started: cannot lock {state_dir / 'tags'} "
                             f"({exc.strerror or exc}); no tag was moved") from None
        if record is None:
            yield False
            return
        tagrecovery.recover(engine, record, say)
        yield record


def _put_back(engine: TagEngine, refs: list[str], before: dict[str, str | None],
              pending: list[int], say: Callable[[str], None]) -> tuple[list[str], bool]:
    """Point each of ``refs`` back at its image in ``before`` (None: remove the name);
    returns the names the engine does not show as before afterwards, and whether an
    engine that did not answer is why. An engine that stopped answering is waited for up
    to ``ENGINE_RETURN_S`` s, checked before each call (one call is bounded by the
    client's own timeout); a signal ends the wait at once, and an interrupted phase does
    not wait at all: the record on disk keeps the names for the next run."""
    stuck, gone = _put_back_once(engine, refs, before, lambda: False)
    if not (stuck and gone) or pending:
        return stuck, gone
    say(f"the Docker engine stopped answering while tagging: waiting up to {ENGINE_RETURN_S:.0f} s "
        f"for it to put {len(stuck)} name(s) back")
    deadline = time.monotonic() + ENGINE_RETURN_S

    def stop() -> bool:
        return bool(pending) or time.monotonic() >= deadline

    while stuck and gone and not stop():
        time.sleep(RETRY_S)
        stuck, gone = _put_back_once(engine, stuck, before, stop)
    if not stuck:
        say(f"the engine answers again: {len(refs)} name(s) put back")
    return stuck, gone


def _put_back_once(engine: TagEngine, refs: list[str], before: dict[str, str | None],
                   stop: Callable[[], bool]) -> tuple[list[str], bool]:
    """One pass of ``_put_back``, last moved first: the names left, and whether any
    failed for an engine that did not answer. ``stop()`` true before a name: that name
    and the ones before it are left as they are."""
    stuck, gone = [], False
    for n, ref in enumerate(reversed(refs)):
        if stop():
            return refs[:len(refs) - n] + stuck[::-1], True
        old = before[ref]
        try:
            if old is None:
                engine.untag(ref)
            else:
                engine.tag(old, ref)
            if engine.image_id(ref) != old:
                stuck.append(ref)
        except Exception as exc:  # noqa: BLE001 - the engine is gone: say which names are left
            gone = gone or engine_unreachable(exc) or engine_unreachable(exc.__context__ or exc)
            stuck.append(ref)
    return stuck[::-1], gone
