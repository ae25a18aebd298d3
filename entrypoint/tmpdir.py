"""A temporary directory for the command when the root filesystem is read-only and no
tmpfs is mounted on /tmp (``docker run --read-only`` without ``--tmpfs /tmp``; Podman
with ``--read-only-tmpfs=false``).

Python's ``tempfile.gettempdir()`` tries $TMPDIR, $TEMP, $TMP, then /tmp, /var/tmp,
/usr/tmp, then the working directory (Python docs, tempfile.gettempdir), and raises
FileNotFoundError when none is writable. Libraries call it at import: PaddlePaddle 2.6's
``paddle.dataset.common`` does (``HOME = tempfile.gettempdir()``), so ``import paddle``
fails there. When none of those is writable and none of the variables is set, the
command gets ``TMPDIR`` beside the start-up report (entrypoint.runtime: /dev/shm, which
Docker and Podman mount as a tmpfs even on a read-only root). Otherwise nothing changes.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

VARIABLES = ("TMPDIR", "TEMP", "TMP")
SYSTEM_DIRS = ("/tmp", "/var/tmp", "/usr/tmp")


def _writable(d: str) -> bool:
    """A directory this uid may create files in (access(2): EROFS on a read-only mount)."""
    return os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK)


def tmpdir_env(env: Mapping[str, str], report_path: str | None, cwd: str | None = None,
               dirs: Sequence[str] = SYSTEM_DIRS) -> dict[str, str]:
    """``{"TMPDIR": DIR}`` when the command would find no temporary directory (none of
    ``VARIABLES`` set, none of ``dirs`` nor ``cwd`` -- default: this process's --
    writable) and DIR, ``tmp`` beside ``report_path``, could be made (mode 0700); ``{}``
    otherwise. Never raises."""
    if any(env.get(v) for v in VARIABLES) or not report_path:
        return {}
    if cwd is None:
        try:
            cwd = os.getcwd()
        except OSError:  # the working directory was removed
            cwd = ""
    if any(_writable(d) for d in (*dirs, cwd)):
        return {}
    d = os.path.join(os.path.dirname(report_path), "tmp")
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
    except OSError:
        return {}
    return {"TMPDIR": d} if _writable(d) else {}
