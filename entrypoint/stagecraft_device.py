"""The device the image's entrypoint chose, in the framework's own spelling.

    import paddle
    from stagecraft_device import device
    paddle.set_device(device())          # "gpu:0", "xpu:0", "npu:0" or "cpu"

    $ python -m stagecraft_device        # prints it; exit 1 (and why) when unknown

The answer is ``STAGECRAFT_DEVICE_STRING``, which the entrypoint exports to the command it
starts; in a process it did not start (``docker exec``), the entrypoint's start-up report
(``STAGECRAFT_REPORT_PATH``, else the runtime paths of entrypoint/runtime.py). Nothing is
probed here and no framework is imported: it costs a file read at most. Installed into
the image's virtual environment as a link to /opt/stagecraft/entrypoint/stagecraft_device.py.
"""
from __future__ import annotations

import json
import os
import sys

VARIABLE = "STAGECRAFT_DEVICE_STRING"


def _report_paths(env: dict[str, str]) -> list[str]:
    # The same order as entrypoint/runtime.py (candidates), kept here so that importing
    # this module never puts /opt/stagecraft's packages on the user's sys.path.
    uid = os.getuid()
    out = [env.get("STAGECRAFT_REPORT_PATH", ""), env.get("STAGECRAFT_REPORT", "")]
    if env.get("XDG_RUNTIME_DIR"):
        out.append(os.path.join(env["XDG_RUNTIME_DIR"], "stagecraft", "report.json"))
    out += ["/run/stagecraft/report.json", f"/tmp/stagecraft-{uid}/report.json",
            f"/dev/shm/stagecraft-{uid}/report.json"]
    return [p for p in out if p]


def _read_report(path: str, limit: int = 4 << 20) -> bytes:
    """The first ``limit`` bytes of the regular file at ``path``, opened non-blocking (a
    FIFO or device named by STAGECRAFT_REPORT must not hang the caller). Raises OSError,
    also for anything that is not a regular file."""
    import stat

    if not stat.S_ISREG(os.stat(path).st_mode):  # a device is not even opened
        raise OSError(f"{path}: not a regular file")
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path}: not a regular file")
        chunks, left = [], limit
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            chunks.append(b)
            left -= len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)


def device(env: dict[str, str] | None = None) -> str:
    """The chosen device string, e.g. ``"gpu:0"`` or ``"cpu"``.

    Reads ``STAGECRAFT_DEVICE_STRING``, else the newest start-up report that names one.
    Raises LookupError (one line: what is missing and what to do) when neither does: the
    container was started without the entrypoint, or the image declares no device
    strings for its framework."""
    env = dict(os.environ if env is None else env)
    value = env.get(VARIABLE, "").strip()
    if value:
        return value
    found = []
    for path in _report_paths(env):
        try:
            found.append((os.path.getmtime(path), path))
        except OSError:
            continue
    for _, path in sorted(found, reverse=True):
        try:
            value = str(json.loads(_read_report(path)).get("device_string") or "").strip()
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
        if value:
            return value
    raise LookupError(f"no device chosen: {VARIABLE} is unset and no start-up report names one "
                      "(start the container through its entrypoint, or set the variable)")


def main() -> int:
    try:
        print(device())
    except LookupError as exc:
        print(f"stagecraft_device: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
