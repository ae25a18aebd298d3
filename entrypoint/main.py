"""The program tini starts in every image: probe, choose, set the environment, say what
was chosen, write the report, exec the command.

Usage: stagecraft-entrypoint [CMD ARGS...] | stagecraft-entrypoint --report [--json] [--fresh]

Environment (inputs; what each accepts, and exit 2 for anything else: entrypoint.options):
  STAGECRAFT_DEVICE=nvidia|xpu|npu|amd|mlu|cpu  prefer this device's kernel sets
  STAGECRAFT_KERNEL_SET=NAME                    choose this set if it can run here
  STAGECRAFT_STRICT=1                           refuse (exit 78) instead of falling back
  STAGECRAFT_QUIET=1                            no start-up line on stderr
  STAGECRAFT_REPORT=PATH                        where to write the JSON report first (absolute)
  STAGECRAFT_BUDGET_S=SECONDS                   per-family probe budget, 0.001 <= S <= 60 (default 2)
  STAGECRAFT_PROBE_ROOT=DIR                     test/debug only: read /proc, /sys, /dev under DIR
  STAGECRAFT_IMAGE_JSON=PATH                    test/debug only: image description to use
Environment (outputs, for CMD): STAGECRAFT_DEVICE_STRING (the chosen device as the
framework spells it, from the image's device_strings: ``gpu:0``, ``xpu:0``, ``cpu``), the
chosen set's env, the ISA caps of a forced lower CPU
set, every other vendor's devices hidden on a fallback (CUDA_VISIBLE_DEVICES="",
XPU_VISIBLE_DEVICES="", ASCEND_RT_VISIBLE_DEVICES="", ROCR_VISIBLE_DEVICES="",
MLU_VISIBLE_DEVICES=""; sources in probes.visible), thread-pool sizes (see envplan),
STAGECRAFT_CHOSEN, STAGECRAFT_REPORT_PATH.

Each vendor's visibility variable is read as its runtime reads it (probes.visible,
probes.nvidia_visible): only the devices it selects are counted; a value that selects
none (empty, "-1", a name the runtime would not read) makes that device absent and the
entrypoint falls back, saying which variable and why; it never blocks the command.

Exit codes: CMD's own (we exec it); 78 when no kernel set can run here or strict mode
refuses (probes.select.EXIT_REFUSED); 2 for a bad override or option (one line naming the
variable; nothing probed or written); 127 CMD not found (an empty CMD, ``docker run IMAGE
""``, included); 126 CMD not executable. No CMD: exec /bin/bash, else /bin/sh. If the entrypoint itself fails
unexpectedly it says so in one line and still runs CMD: it never blocks a container.
"""
from __future__ import annotations

import os
import sys
import time

TYPE_CHECKING = False  # typing costs ms at start-up; only type checkers import it
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

IMAGE_JSON = "/etc/stagecraft/image.json"
MAX_IMAGE_JSON = 1 << 20  # bytes read of image.json (the build writes a few KiB)


def _say(msg: str) -> None:
    """One line on stderr: line breaks and control characters in ``msg`` (which may carry
    values from the environment or a vendor tool) are escaped, its length bounded."""
    from probes.show import one_line

    try:
        sys.stderr.write(f"stagecraft: {one_line(msg)}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def load_image(env: Mapping[str, str], root: str) -> dict[str, Any] | None:
    """image.json as a dict, None when the file is absent. Raises ValueError when broken,
    not a regular file, unreadable or over MAX_IMAGE_JSON bytes (read through probes.fsread:
    a FIFO there does not hold the start). Parsed by its build-time twin when that holds
    the same bytes (entrypoint.imagefile: no ``json`` import at start), else by ``json``;
    the same checks follow either way."""
    from entrypoint import imagefile
    from probes import fsread

    path = env.get("STAGECRAFT_IMAGE_JSON") or fsread.at(root, IMAGE_JSON)
    raw = fsread.read_file(path, MAX_IMAGE_JSON + 1)
    if raw is None:
        if not os.path.lexists(path):
            return None
        raise ValueError(f"{path}: not a readable regular file")
    if len(raw) > MAX_IMAGE_JSON:
        raise ValueError(f"{path}: larger than {MAX_IMAGE_JSON} bytes")
    data = imagefile.from_twin(path, raw, 4 * MAX_IMAGE_JSON)
    if data is None:
        import json

        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{path}: {type(exc).__name__}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("kernel_sets", []), list):
        raise ValueError(f"{path}: expected an object with a kernel_sets list")  # noqa: TRY004 - one error type for a bad file
    why = image_problem(data)
    if why:
        raise ValueError(f"{path}: {why}")
    return data


def _env_problem(env: object) -> str:
    if not isinstance(env, dict):
        return "not an object"
    for k, v in env.items():
        if not (k and k.isascii() and (k[0].isalpha() or k[0] == "_") and k.replace("_", "a").isalnum()):
            from probes.show import shown

            return f"{shown(k, 60)} is not a variable name"
        if not isinstance(v, str) or "\0" in v:
            return f"{k}: not a string without NUL"
    return ""


def image_problem(data: Mapping[str, Any]) -> str:
    """What in image.json's kernel sets and device strings the chooser cannot use (the
    shapes of probes/kernel_sets.schema.json: each set an object with a string name and
    device, ``requires`` an object, ``env`` names of variables to strings without NUL;
    ``device_strings`` strings), or "". Issue 22 review: a set that was a number or an
    env that was a string ended in "probe failed (AttributeError ...)", and an env name
    holding a NUL stopped the command itself (exit 126)."""
    for i, s in enumerate(data.get("kernel_sets", [])):
        at = f"kernel_sets[{i}]"
        if not isinstance(s, dict):
            return f"{at}: not an object"
        for key in ("name", "device"):
            if not isinstance(s.get(key), str) or not s[key]:
                return f"{at}.{key}: not a non-empty string"
        if not isinstance(s.get("requires") or {}, dict):
            return f"{at}.requires: not an object"
        why = _env_problem(s.get("env") or {})
        if why:
            return f"{at}.env: {why}"
    strings = data.get("device_strings") or {}
    if not isinstance(strings, dict) or not all(isinstance(v, str) for v in strings.values()):
        return "device_strings: not an object of strings"
    return ""


def summary_line(choice: Any, probes: Mapping[str, Any]) -> str:
    """The one short line: what was chosen and why."""
    if choice.refused:
        return f"refusing to start: {choice.message}"
    if not choice.name:
        return "no image.json: probed only"
    p = probes.get(choice.device)
    detail = ""
    if choice.device == "cpu" and p is not None:
        lvl = f"x86-64-v{p.isa_level}, " if p.isa_level else ""
        detail = f"{p.model or p.arch}, {lvl}{p.effective_cpus} CPU{'s' if p.effective_cpus != 1 else ''}"
    elif p is not None and getattr(p, "devices", None):
        names: dict[str, int] = {}
        for d in p.devices:
            names[d.name or choice.device] = names.get(d.name or choice.device, 0) + 1
        devs = " + ".join(f"{n}x {k}" for k, n in names.items())
        archs = sorted({d.arch for d in p.devices if d.arch})
        parts = [devs]
        if archs:
            parts.append(("cc " if choice.device == "nvidia" else "") + "/".join(archs))
        if p.driver_version:
            parts.append(f"driver {p.driver_version}")
        detail = ", ".join(parts)
    if choice.fallback:  # the reason matters more than the CPU model: keep the line short
        return f"{choice.name} \u2014 {choice.message}"
    return f"{choice.name} ({detail})" if detail else choice.name


_UNREAD: Any = object()


def plan(env: Mapping[str, str], image: dict[str, Any] | None = _UNREAD) -> dict[str, Any]:
    """Probe and choose; returns everything the report and exec need. Pure of side effects
    except reading the machine. ``image``: image.json as ``load_image`` read it (read here
    when not given). Raises entrypoint.options.BadOption for a bad option; ValueError for
    a broken image.json."""
    from entrypoint import options
    from probes import probe_all
    from probes.report import probes_to_dict
    from probes.select import Choice, Overrides, choose

    t0 = time.monotonic()
    opts = options.read(env)
    root, budget = opts.root, opts.budget_s
    if image is _UNREAD:
        image = load_image(env, root)
    sets: list[dict[str, Any]] = list(image.get("kernel_sets", [])) if image else []
    ov = Overrides(device=opts.device, kernel_set=opts.kernel_set, strict=opts.strict)
    families = sorted({str(s.get("device")) for s in sets} | ({ov.device} if ov.device else set())) if sets else None
    from probes.types import FAMILIES

    if families is not None:
        families = [f for f in families if f in FAMILIES]
    probes = probe_all(root, budget, families, env)
    if image is None:
        choice = Choice(name="", device="", kernel_set=None, message="no image.json")
    else:
        choice = choose(probes, sets, ov)
    from entrypoint.envplan import plan_env

    changes, notes = (plan_env(choice, probes, sets, env, image.get("device_strings") if image else None)
                      if not choice.refused else ({}, []))
    report = {
        "schema": 1,
        "image": {k: image.get(k) for k in ("framework", "device", "components") if k in image} if image else None,
        "chosen": choice.name or None, "device": choice.device or None,
        "wanted_device": choice.wanted_device or None, "fallback": choice.fallback,
        "refused": choice.refused, "exit_code": choice.exit_code, "message": choice.message,
        "warnings": list(choice.warnings),
        "passed_over": [{"name": p.name, "device": p.device, "reason": p.reason} for p in choice.passed_over],
        "overrides": {"device": ov.device, "kernel_set": ov.kernel_set, "strict": ov.strict},
        "device_string": env.get("STAGECRAFT_DEVICE_STRING") or changes.get("STAGECRAFT_DEVICE_STRING"),
        "env_set": changes, "notes": notes, "probes": probes_to_dict(probes),
        "elapsed_ms": round((time.monotonic() - t0) * 1000, 2),
    }
    report["line"] = summary_line(choice, probes)
    return {"choice": choice, "probes": probes, "changes": changes, "report": report}


def execvpe(file: str, args: list[str], env: dict[str, str]) -> None:
    """``os.execvpe``'s search, the same: a name with a slash is run as it is; otherwise
    each directory of the command's $PATH (``os.defpath`` when unset; an empty entry is
    the working directory) in turn; raises the first error other than ENOENT/ENOTDIR met,
    else the last (CPython 3.11 ``os._execvpe``). Written out because ``os.execvpe`` asks
    ``os.get_exec_path``, which imports ``warnings``: 0.37 ms of every start (issue 22's
    start-up check). Raises OSError, or ValueError for a NUL; returns never."""
    if os.path.dirname(file):
        os.execve(file, args, env)
    path = env.get("PATH")
    saved: OSError | None = None
    last: OSError | None = None
    for d in (os.defpath if path is None else path).split(os.pathsep):
        try:
            os.execve(os.path.join(d, file), args, env)
        except (FileNotFoundError, NotADirectoryError) as exc:
            last = exc
        except OSError as exc:
            last = exc
            saved = saved or exc
    raise saved or last or FileNotFoundError(2, "No such file or directory", file)


def exec_command(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """Replace this process with argv (or a shell); returns only on failure (126/127)."""
    cmd = list(argv)
    if not cmd:
        cmd = ["/bin/bash"] if os.path.exists("/bin/bash") else ["/bin/sh"]
    if not cmd[0] or "\0" in cmd[0]:  # `docker run IMAGE ""`: no such command, as a shell says
        from probes.show import shown

        _say(f"{shown(cmd[0])}: command not found")
        return 127
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    try:
        execvpe(cmd[0], cmd, dict(env))
    except FileNotFoundError:
        _say(f"{cmd[0]}: command not found")
        return 127
    except PermissionError:
        _say(f"{cmd[0]}: permission denied")
        return 126
    except OSError as exc:
        _say(f"{cmd[0]}: {exc.strerror}")
        return 126
    except ValueError as exc:  # a NUL in an argument or the environment
        _say(f"{cmd[0]}: cannot run: {exc}")
        return 126
    return 0  # not reached


def share_with_group() -> None:
    """A non-root user's new files group-writable: umask 0022 (Docker's default) becomes
    0002, so any uid in group 0 can later change what this one installed into the
    group-0 environment (/opt/venv; bash-env does the same for Dockerfile RUN steps).
    Root keeps 0022; any other umask was set on purpose and is kept."""
    if os.geteuid() != 0:
        old = os.umask(0o002)
        if old != 0o022:
            os.umask(old)


def start(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """The start path: check the options, plan, report, one line, exec. A bad option
    (entrypoint.options) is one line and exit 2, before anything is probed or written."""
    from entrypoint import options

    env = dict(os.environ if env is None else env)
    if argv and (not argv[0] or "\0" in argv[0]):  # `docker run IMAGE ""`: nothing to probe for
        return exec_command(argv, env)
    try:
        opts = options.read(env)
    except options.BadOption as exc:
        _say(str(exc))
        return 2
    quiet = opts.quiet
    try:
        image = load_image(env, opts.root)
    except Exception:  # noqa: BLE001 - never block the container on a broken image.json
        image = _UNREAD  # plan reads it again and names the problem
    why = options.override_problem(opts, image.get("kernel_sets", []) if isinstance(image, dict) else None)
    if why:  # an override the image cannot meet: one line, before anything is probed or written
        _say(why)
        return 2
    share_with_group()
    try:
        p = plan(env, image)
    except Exception as exc:  # noqa: BLE001 - never block the container on our own bug
        _say(f"probe failed ({type(exc).__name__}: {exc}); running the command without a kernel-set choice")
        return exec_command(argv, env)
    choice, report = p["choice"], p["report"]
    from entrypoint import jsonout, runtime

    try:
        path, skipped = runtime.write(jsonout.dumps(report), env)
    except (TypeError, ValueError, RecursionError) as exc:  # never blocks the choice
        path, skipped = None, f"report not written ({type(exc).__name__}: {exc})"
    if choice.refused:
        _say(report["line"])
        for ps in choice.passed_over:  # what the message does not say already
            if ps.reason not in choice.message:
                _say(f"  {ps.name}: {ps.reason}")
        _say(skipped or (f"full report: {path}" if path else "no writable runtime dir for the report"))
        return int(choice.exit_code)
    env.update(p["changes"])
    if path:
        env["STAGECRAFT_REPORT_PATH"] = path
    # h26: a read-only root without a tmpfs /tmp gets TMPDIR beside the report (tmpdir.py)
    from entrypoint.tmpdir import tmpdir_env

    env.update(tmpdir_env(env, path))
    # h26: no writable $HOME (any uid, read-only root): Jupyter's runtime dir and the
    # like beside the report (homeless.py)
    from entrypoint.homeless import home_env

    env.update(home_env(env, path))
    if not quiet:
        _say(report["line"])
        for w in choice.warnings:
            _say(f"warning: {w}")
        if skipped:
            _say(skipped)
    return exec_command(argv, env)


def show_report(args: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """``--report [--json] [--fresh]``: print the last report (or a fresh probe)."""
    import json

    from entrypoint import runtime

    unknown = [a for a in args if a not in ("--json", "--fresh")]
    if unknown:
        print("usage: stagecraft-report [--json] [--fresh]\n  the start-up report of this "
              "container: devices found, the kernel set chosen and why;\n  --fresh probes "
              "again instead of reading the report the entrypoint wrote",
              file=sys.stdout if unknown in (["--help"], ["-h"]) else sys.stderr)
        return 0 if unknown in (["--help"], ["-h"]) else 2
    from entrypoint import options

    env = dict(os.environ if env is None else env)
    data = None
    path = None if "--fresh" in args else runtime.find(env)
    if path:
        data = runtime.load(path)
    if data is None:
        try:
            data = plan(env)["report"]
        except options.BadOption as exc:
            _say(str(exc))
            return 2
    if "--json" in args:
        print(json.dumps(data, indent=1, sort_keys=True))
        return 0
    print(format_report(data, path))
    return 0


def format_report(data: Mapping[str, Any], path: str | None) -> str:
    """A person's view of a report dict."""
    out = [f"stagecraft: {data.get('line', '')}"]
    if path:
        out.append(f"report: {path}")
    img = data.get("image") or {}
    fw = img.get("framework") or {}
    if fw:
        out.append(f"image: {fw.get('name', '?')} {fw.get('version', '')} ({img.get('device', '?')})")
    for p in data.get("passed_over", []):
        out.append(f"passed over {p['name']}: {p['reason']}")
    for w in data.get("warnings", []):
        out.append(f"warning: {w}")
    for n in data.get("notes", []):
        out.append(f"note: {n}")
    for k, v in sorted((data.get("env_set") or {}).items()):
        out.append(f"env: {k}={v}")
    from probes.report import format_probes

    out += format_probes(data.get("probes") or {})
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """``stagecraft-entrypoint [CMD ARGS...]`` or ``--report ...``; see the module docstring.
    An unexpected error of the entrypoint itself is one line, and the command still runs."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--report"]:
        return show_report(args[1:])
    try:
        return start(args)
    except Exception as exc:  # noqa: BLE001 - never block the container on our own bug
        _say(f"internal error ({type(exc).__name__}: {exc}); running the command as it is")
        return exec_command(args, os.environ)
