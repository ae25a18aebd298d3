"""The containers stagecraft itself runs of an image: the test suites' container, the
short one that reads an image's inventory for its SBOM (sbom.py), ``freeze``'s pip
listing, and the catalog's created-never-started box. Each carries labels naming the run
that made it, so that whatever ends that run (SIGKILL, an engine whose disk is full and
refuses the removal) the next run on this machine removes what it left.

Labels (every container here):

- ``io.stagecraft.run``: the run's scratch directory (scratch.py); its lock says whether
  the run still lives (``scratch.run_alive``).
- ``io.stagecraft.boot``: this boot's id and mount namespace (``boot_id``); containers
  of another machine or container sharing the engine are never judged from here.
- ``io.stagecraft.purpose``: ``test``, ``inventory``, ``freeze``, ``catalog``.
- ``io.stagecraft.test``: the tag, on a suite's containers only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from . import retry, stalesnapshot, suitecases
from .errors import BuildError
from .retry import RetryPolicy
from .safetext import one_line

TEST_LABEL, RUN_LABEL, BOOT_LABEL = "io.stagecraft.test", "io.stagecraft.run", "io.stagecraft.boot"
PURPOSE_LABEL = "io.stagecraft.purpose"

# What one short run may print and take: an inventory of a GPU image is about 200 KB
# of JSON and takes a second or two.
OUTPUT_LIMIT_BYTES = 64 * 1024 * 1024
WAIT_LIMIT_S = 600
# A start runc could not make (``start``): three tries in all, 1 s and 2 s apart.
START_AGAIN = RetryPolicy(attempts=3, base_s=1.0)


def labels(purpose: str, tag: str = "") -> dict[str, str]:
    """The labels of a container this run makes for ``purpose`` (module docstring);
    ``tag`` adds the suites' ``io.stagecraft.test`` label."""
    out = {RUN_LABEL: tempfile.gettempdir(), BOOT_LABEL: boot_id(), PURPOSE_LABEL: purpose}
    if tag:
        out[TEST_LABEL] = tag
    return out


def boot_id() -> str:
    """This boot's id (random(4)) and this mount namespace's inode (``/proc/self/ns/mnt``,
    namespaces(7)): a run in another container sharing the engine's socket has the same
    boot but another mount namespace, where its scratch directory is not visible, so its
    containers are never judged from here. "" where the kernel does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            boot = f.read(64).decode("ascii", "replace").strip()
        return f"{boot}/{os.stat('/proc/self/ns/mnt').st_ino}" if boot else ""
    except OSError:
        return ""


def sweep(client: Any, dry_run: bool = False) -> tuple[list[str], list[tuple[str, str]]]:
    """Remove the containers that runs on this machine (this boot, this mount namespace)
    made and left: their run's scratch lock is free (killed, or the engine refused the
    removal). Returns ``(removed, failed)``: names, and ``(name, error)`` for those the
    engine would not remove (tried again next time); with ``dry_run``, the names it
    would remove, removing none. An engine that does not answer the listing gives
    ``([], [])``: the caller's own engine work meets that error."""
    import docker
    import requests

    from .scratch import run_alive

    boot = boot_id()
    if not boot:
        return [], []
    try:
        found = client.containers.list(all=True, filters={"label": [RUN_LABEL, f"{BOOT_LABEL}={boot}"]})
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return [], []
    removed: list[str] = []
    failed: list[tuple[str, str]] = []
    for c in found:
        run = (c.labels or {}).get(RUN_LABEL, "")
        if not run.startswith("/") or run_alive(Path(run)):
            continue
        try:
            if not dry_run:
                c.remove(force=True)
            removed.append(c.name)
        except docker.errors.NotFound:  # another run's sweep removed it meanwhile
            pass
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            failed.append((c.name, one_line(str(exc), 200)))
    return removed, failed


def remove(container: Any) -> None:
    """Remove ``container`` (running or not). Where the engine refuses or does not
    answer (its disk is full, it is gone), the container keeps its labels and the next
    run's ``sweep`` removes it: the caller's own outcome stands."""
    import docker
    import requests

    try:
        container.remove(force=True)
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        pass


def create(client: Any, ref: str, purpose: str, *, tag: str = "", sweep_first: bool = True,
           **kwargs: Any) -> Any:
    """``client.containers.create(ref, labels=labels(purpose, tag), **kwargs)``, after a
    ``sweep`` (unless ``sweep_first`` is false: the catalog's, one per image, and the
    suites' container, which never swept), made once more where the engine's first
    answer was a directory at a new snapshot's id (``stalesnapshot.once_more``). The
    caller removes it (``remove``) in a ``finally``. Raises what
    ``client.containers.create`` raises."""
    if sweep_first:
        sweep(client)
    return stalesnapshot.once_more(
        lambda: client.containers.create(ref, labels=labels(purpose, tag), **kwargs))


def start(box: Any, policy: RetryPolicy | None = None) -> None:
    """``box.start()`` (a created container), made again where the engine answered that
    runc's handshake with the container's first process failed
    (``suitecases.runtime_refused``: "runc create failed: unable to start container
    process: waiting for init preliminary setup: ..."; the fault suite, issue 24, seed
    20261404). Nothing of the image ran, and the engine leaves such a container created
    (moby's ``containerStart`` cleans up after a failed start), so starting it again is
    safe. ``policy``: the tries (default ``START_AGAIN``). Raises
    ``docker.errors.APIError`` as the engine answered: at once for any other refusal, with
    runc's words after the last try; ``KeyboardInterrupt`` (a stop asked for) at once."""
    import docker.errors

    def refused(exc: BaseException) -> bool:
        return isinstance(exc, docker.errors.APIError) and suitecases.runtime_refused(str(exc))

    retry.call(box.start, policy or START_AGAIN, refused)


def run_once(client: Any, ref: str, argv: list[str], purpose: str, *, name: str = "",
             timeout_s: float = WAIT_LIMIT_S, limit_bytes: int = OUTPUT_LIMIT_BYTES,
             **kwargs: Any) -> bytes:
    """Run ``argv`` in a new container of image ``ref`` with the image's entrypoint
    replaced (``entrypoint=[]``), wait for it and return its standard output (bytes);
    the container is removed however this ends (``remove``). ``name`` names the image in
    messages (a tag; default ``ref``).

    ``kwargs`` go to ``containers.create`` (``user``, ``environment``,
    ``network_disabled``). Raises ``BuildError`` (one line) when the container cannot
    start, exits other than 0 (with its last line of standard error), runs past
    ``timeout_s`` (s) or prints more than ``limit_bytes`` (read so far, no further: the
    engine's log driver keeps what it prints); ``docker.errors.DockerException`` or
    ``requests.exceptions.RequestException`` when the engine does not answer."""
    import docker
    import requests

    box = create(client, ref, purpose, command=argv, entrypoint=[], **kwargs)
    what = f"the {purpose} container of {name or ref}"
    try:
        try:
            start(box)
        except docker.errors.APIError as exc:  # the engine answered: it could not run it
            raise BuildError(one_line(f"{what} could not start: {exc.explanation or exc}")) from None
        try:
            status = box.wait(timeout=timeout_s).get("StatusCode", -1)
        except requests.exceptions.RequestException:  # a read timeout, or the engine went
            state = _state(box)
            if state is None:
                raise  # the engine's own error: it does not answer
            if state.get("Running"):
                raise BuildError(f"{what} ran past {timeout_s:g} s and is removed; the engine may be "
                                 "overloaded: run the same command again") from None
            status = state.get("ExitCode", -1)  # it ended as the wait gave up
        if status != 0:
            err = _tail(box.logs(stdout=False, stderr=True, stream=True), 64 * 1024, 16 * 1024 * 1024)
            last = next((ln for ln in reversed(err.decode("utf-8", "replace").splitlines()) if ln.strip()), "")
            raise BuildError(one_line(f"{what} exited {status}" + (f": {last.strip()}" if last else "")
                                      + "; the image lacks what stagecraft reads there, or the engine "
                                      "could not run it: see `docker run` of the image"))
        out = _bounded(box.logs(stdout=True, stderr=False, stream=True), limit_bytes + 1)
        if len(out) > limit_bytes:
            raise BuildError(f"{what} printed more than {limit_bytes} bytes (stagecraft's own "
                             "commands print far less): check what the image's Python prints at start")
        return out
    finally:
        remove(box)


def _state(box: Any) -> dict[str, Any] | None:
    """The container's ``State`` as the engine says it now; None when the engine does
    not answer, ``{}`` when the container is gone."""
    import docker
    import requests

    try:
        box.reload()
    except docker.errors.NotFound:
        return {}
    except (docker.errors.DockerException, requests.exceptions.RequestException):
        return None
    return box.attrs.get("State") or {}


def _tail(chunks: Any, keep: int, limit: int) -> bytes:
    """The last ``keep`` bytes of a log stream, reading at most ``limit`` bytes."""
    got = bytearray()
    read = 0
    try:
        for chunk in chunks:
            got += chunk
            read += len(chunk)
            del got[:-keep]
            if read >= limit:
                break
    finally:
        close = getattr(chunks, "close", None)
        if close:
            close()
    return bytes(got)


def _bounded(chunks: Any, limit: int) -> bytes:
    """The chunks of a log stream joined, read up to ``limit`` bytes."""
    got = bytearray()
    try:
        for chunk in chunks:
            got += chunk
            if len(got) >= limit:
                break
    finally:
        close = getattr(chunks, "close", None)
        if close:
            close()
    del got[limit:]
    return bytes(got)
