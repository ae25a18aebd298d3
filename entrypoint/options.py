"""The entrypoint's own options, read from the environment and checked before anything
is probed, written or run.

Each variable, what it accepts, and what happens otherwise (exit 2 is
probes.select.EXIT_USAGE; the line names the variable and its value, quoted, escaped and
bounded by probes._show.shown; nothing is probed, written or run):

  STAGECRAFT_BUDGET_S    unset: 2 (seconds). Set: a decimal number of seconds, 0.001 <= S
                         <= 60 (``0.5``, ``2``, ``10.``). Empty, ``nan``, ``inf``,
                         ``1e999``, ``-1``, ``0``, ``0.0000001``, ``61``, ``abc``: exit 2.
                         Each probed family's budget (probes.probe_all). Below a
                         millisecond every probe timed out: 8 working GPUs were refused
                         (exit 78, "NVML did not answer within 0.0 s"; issue 22 review).
  STAGECRAFT_QUIET       unset, empty, 0, false, no, off: off; 1, true, yes, on (any case,
  STAGECRAFT_STRICT      spaces around ignored): on. Anything else: exit 2.
  STAGECRAFT_DEVICE      unset or empty: no preference. One of probes.types.FAMILIES
                         exactly; anything else: exit 2.
  STAGECRAFT_KERNEL_SET  unset or empty: none. Any other value is looked up among the
                         image's kernel sets when choosing (an unknown one: exit 2 there,
                         probes.select.choose).
  STAGECRAFT_REPORT      unset or empty: the runtime locations (entrypoint.runtime). An
                         absolute path without NUL; a relative one: exit 2 (it would name a
                         different file in every working directory). A path where a node
                         stands that the entrypoint did not write is never replaced: the
                         report goes to the next location, and a line says so.
  STAGECRAFT_PROBE_ROOT  (test/debug) unset or empty: ``/``. An absolute path of an
  STAGECRAFT_IMAGE_JSON  existing directory (root) / an absolute path (image.json);
                         otherwise exit 2.
Variables of other programs (CUDA_VISIBLE_DEVICES and the other vendors' visibility
variables, OMP_NUM_THREADS, XDG_RUNTIME_DIR, PATH) are read as those programs read them
(probes.visible, entrypoint.envplan, entrypoint.runtime) and never stop the command.
"""
from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping

DEFAULT_BUDGET_S = 2.0
MIN_BUDGET_S = 0.001  # below it no probe answers (a probe's grace aside): as good as 0
MAX_BUDGET_S = 60.0
_ON, _OFF = ("1", "true", "yes", "on"), ("", "0", "false", "no", "off")


class BadOption(ValueError):
    """One of the entrypoint's variables holds a value it does not accept; ``str()`` is
    the one line to print (without the ``stagecraft:`` prefix)."""


class Options:
    """The checked options (read-only by convention). budget_s in seconds; root ``/``
    unless a probe root is set; report/image_json None when unset."""

    __slots__ = ("budget_s", "device", "image_json", "kernel_set", "quiet", "report", "root", "strict")

    def __init__(self, budget_s: float = DEFAULT_BUDGET_S, quiet: bool = False, strict: bool = False,
                 device: str | None = None, kernel_set: str | None = None, report: str | None = None,
                 root: str = "/", image_json: str | None = None) -> None:
        self.budget_s, self.quiet, self.strict, self.device = budget_s, quiet, strict, device
        self.kernel_set, self.report, self.root, self.image_json = kernel_set, report, root, image_json


def _bad(var: str, value: str, why: str) -> BadOption:
    from probes._show import shown

    return BadOption(f"refusing to start: {var}={shown(value)}: {why}")


def _decimal(text: str) -> bool:
    """``text`` is ASCII digits with at most one ``.`` (``2``, ``0.5``, ``.5``, ``10.``):
    no sign, exponent, underscore, ``nan``/``inf`` or non-ASCII digit, which float()
    would take. (No regular expression: compiling one costs start-up time.)"""
    digits = text.replace(".", "", 1)
    return 0 < len(text) <= 25 and digits.isascii() and digits.isdigit()


def budget(env: Mapping[str, str]) -> float:
    """STAGECRAFT_BUDGET_S in seconds (see the module docstring). Raises BadOption."""
    raw = env.get("STAGECRAFT_BUDGET_S")
    if raw is None:
        return DEFAULT_BUDGET_S
    text = raw.strip(" \t\n\r")  # str.strip() would also take \x1c-\x1f, which float() refuses
    value = float(text) if _decimal(text) else -1.0
    if not MIN_BUDGET_S <= value <= MAX_BUDGET_S:
        raise _bad("STAGECRAFT_BUDGET_S", raw, f"not a number of seconds in [{MIN_BUDGET_S:g}, "
                   f"{MAX_BUDGET_S:g}]; set e.g. 2 (the default when unset)")
    return value


def flag(env: Mapping[str, str], var: str) -> bool:
    """An on/off variable (see the module docstring). Raises BadOption."""
    raw = env.get(var, "")
    low = raw.strip().lower()
    if low in _ON:
        return True
    if low in _OFF:
        return False
    raise _bad(var, raw, "not on/off; use 1 (or true, yes, on) or 0 (or false, no, off), or unset it")


def _path(env: Mapping[str, str], var: str, directory: bool = False) -> str | None:
    raw = env.get(var) or None
    if raw is None:
        return None
    if "\0" in raw or not raw.startswith("/"):
        raise _bad(var, raw, "not an absolute path; name a path from / or unset it")
    if directory and not os.path.isdir(raw):
        raise _bad(var, raw, "no such directory; name an existing one or unset it")
    return raw


def read(env: Mapping[str, str]) -> Options:
    """Every option, checked (see the module docstring). Raises BadOption for the first
    variable that holds a value it does not accept."""
    from probes.types import FAMILIES

    device = env.get("STAGECRAFT_DEVICE") or None
    if device is not None and device not in FAMILIES:
        raise _bad("STAGECRAFT_DEVICE", device, f"unknown device; use one of {', '.join(FAMILIES)}")
    return Options(budget_s=budget(env), quiet=flag(env, "STAGECRAFT_QUIET"),
                   strict=flag(env, "STAGECRAFT_STRICT"), device=device,
                   kernel_set=env.get("STAGECRAFT_KERNEL_SET") or None,
                   report=_path(env, "STAGECRAFT_REPORT"),
                   root=_path(env, "STAGECRAFT_PROBE_ROOT", directory=True) or "/",
                   image_json=_path(env, "STAGECRAFT_IMAGE_JSON"))
