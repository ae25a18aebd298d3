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
            with open(path, encoding="utf-8") as fh:
                value = str(json.load(fh).get("device_string") or "").strip()
        except (OSError, ValueError, AttributeError):
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
