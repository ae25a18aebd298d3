"""Every option and file of the command line checked before the command does anything
(issue 22, item 6): no network call, no engine call, no file written while a value the
user gave is wrong. ``check(args)`` runs first in ``cli.main``, over the parsed
arguments of any command, and raises one ``InputError`` holding every problem (one line
each, exit 2).

What is checked:

- every option and argument that takes a value: not empty (``--stage ""`` was ignored,
  ``--state-dir ""`` meant the default), found through the parser (``flags_of``), so a
  new option is covered without a line here;
- values by their form, from the parsed arguments alone (``value_problems``, pure):
  platforms (known, no empty item, no repeat; ``render`` writes one Dockerfile, so one
  platform), registry, repository, cache locations, numbers (``--jobs`` >= 1,
  ``--retries``, ``--keep`` >= 0), the image reference of ``verify`` (the grammar of
  distribution/reference, as ``docker_image.reference`` implements it), options that
  contradict each other;
- files, from the file system read-only (``file_problems``: ``stat``, ``access`` and
  the first bytes of a key): ``-o`` (a regular file or nothing, in a writable
  directory; see ``outfile``), ``--state-dir`` (a writable directory, or one that can be
  made), the signing key of ``--sign-key``/``STAGECRAFT_COSIGN_KEY`` and the public key
  of ``verify`` (files that look like keys: before oras and cosign, 80 MB, are fetched),
  ``--ca-bundle`` (PEM certificates).

What needs the matrix (a registry from ``registry:``, a tag, a stage) or the engine is
checked by the command, before it writes anything.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import kernelfs
from .errors import InputError, Problem

MAX_KEY = 64 * 1024  # bytes: a cosign key file is a few hundred
# PEM armour of cosign's keys (cosign generate-key-pair: "ENCRYPTED SIGSTORE PRIVATE KEY",
# before v2.0 "ENCRYPTED COSIGN PRIVATE KEY"; the public key is PKIX "PUBLIC KEY").
_PRIVATE_PEM = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")
_PUBLIC_PEM = re.compile(rb"-----BEGIN PUBLIC KEY-----")
_KEY_HINT = "create one with `cosign generate-key-pair` or fix the path"


def clip(text: str, limit: int = 80) -> str:
    """``text`` as echoed back: at most ``limit`` characters, then ``...`` and its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def flags_of(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Destination -> how the user writes it, for each option and argument of
    ``parser`` that takes a value: the longest option string (``--state-dir``), or the
    metavar of a positional argument (``TAG``)."""
    out: dict[str, str] = {}
    for action in parser._actions:  # argparse keeps no public list of them
        if action.nargs == 0 or action.dest in (argparse.SUPPRESS, "help"):
            continue
        if action.option_strings:
            out[action.dest] = max(action.option_strings, key=len)
        else:
            out[action.dest] = str(action.metavar or action.dest)
    return out


def check(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> None:
    """Raise ``InputError`` with every problem of ``args`` (see the module's text);
    return when there is none. ``env``: the environment (default ``os.environ``)."""
    found = value_problems(args)
    if not found:  # a file is looked at only once its option's value has a form
        found = file_problems(args, os.environ if env is None else env)
    if found:
        raise InputError(found)


def _empty(args: argparse.Namespace) -> list[Problem]:
    out = []
    for dest, flag in getattr(args, "flags", {}).items():
        value = getattr(args, dest, None)
        if value == "" or (isinstance(value, list) and "" in value):
            out.append(Problem(flag, "empty value", "give a value or leave the option out"))
    return out


def value_problems(args: argparse.Namespace) -> list[Problem]:
    """Problems of the values' forms and combinations, from ``args`` alone (pure)."""
    empty = _empty(args)
    if empty:
        return empty
    found: list[Problem] = []
    get = vars(args).get
    for dest, least, hint in (("jobs", 1, "pass --jobs 1 or more"),
                              ("retries", 0, "pass --retries 3"), ("keep", 0, "pass --keep 1 or more")):
        if get(dest) is not None and get(dest) < least:
            what = "must be at least 1" if least == 1 else "must be 0 or more"
            found.append(Problem(f"--{dest} {get(dest)}", what, hint))
    if get("platform"):
        found += _platforms(get("platform"), get("command"))
    if get("repository") is not None:
        found += _repository(get("repository"))
    if get("ref") is not None:
        found += _reference(get("ref"))
    found += _locations(args)
    found += _contradictions(args)
    return found


def _platforms(value: str, command: str | None) -> list[Problem]:
    from .platforms import KNOWN, normalise

    where = f"--platform {clip(value)}"
    items = value.split(",")
    if any(not item.strip() for item in items):
        return [Problem(where, "an empty platform in the list",
                        "write OS/ARCH[,OS/ARCH...] with no empty item")]
    names = [normalise(item) for item in items]
    for item, name in zip(items, names, strict=True):
        if name not in KNOWN:
            return [Problem(f"--platform {clip(item)}", "unknown platform",
                            f"one of: {', '.join(KNOWN)}")]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        return [Problem(where, f"names {twice[0]} twice", "name each platform once")]
    if command == "render" and len(names) > 1:
        return [Problem(where, "render writes one Dockerfile, for one platform",
                        "pass one platform (run render once per platform)")]
    return []


def _repository(value: str) -> list[Problem]:
    from .matrix import schema as _schema

    pattern = _schema()["$defs"]["repository"]["pattern"]
    if re.fullmatch(pattern, value):
        return []
    return [Problem(f"--repository {clip(value)}", "not a valid repository name",
                    "lowercase path components like team/paddle, no tag")]


def _reference(value: str) -> list[Problem]:
    """The image reference of ``verify``: ``HOST[:PORT]/REPO`` with a tag or a digest, by
    the grammar of github.com/distribution/reference (``docker_image.reference``, a port
    of it)."""
    from docker_image import reference

    where = f"REF {clip(value)}"
    hint = "give HOST[:PORT]/REPO:TAG or HOST[:PORT]/REPO@sha256:DIGEST"
    try:
        ref = reference.Reference.parse(value)
    except reference.InvalidReference as exc:
        return [Problem(where, f"malformed image reference ({exc})", hint)]
    if not ref.get("tag") and not ref.get("digest"):
        return [Problem(where, "names no tag or digest", hint)]
    if not ref.repository["domain"]:
        return [Problem(where, "names no registry host", hint)]
    return []


def _locations(args: argparse.Namespace) -> list[Problem]:
    """Registry and cache locations: the parsers the commands use, run early."""
    from . import cache
    from .ci import parse_bake_cache
    from .publish import resolve_registry

    get = vars(args).get
    checks: list[Any] = []
    if get("registry"):
        checks.append(lambda: resolve_registry(get("registry"), ""))
    for dest, flag in (("cache_from", "--cache-from"), ("cache_to", "--cache-to")):
        if get(dest):
            checks.append(lambda d=dest, f=flag: cache.parse(get(d), f))
    if get("cache"):
        checks.append((lambda: parse_bake_cache(get("cache"))) if get("command") == "bake"
                      else (lambda: cache.parse(get("cache"), "--cache")))
    found: list[Problem] = []
    for run in checks:
        try:
            run()
        except InputError as exc:
            found += exc.problems
    return found


def _contradictions(args: argparse.Namespace) -> list[Problem]:
    get = vars(args).get
    found = []
    if get("ca_bundle") and get("no_ca_bundle"):
        found.append(Problem("--no-ca-bundle", f"contradicts --ca-bundle {clip(get('ca_bundle'))}",
                             "pass one of them"))
    if get("stage") and (get("test") or get("push")):
        found.append(Problem(f"--stage {clip(get('stage'))}", "builds stages, not images",
                             "drop --test/--push, or --stage"))
    return found


def file_problems(args: argparse.Namespace, env: Mapping[str, str]) -> list[Problem]:
    """Problems of the files the options name, read from the file system (``stat``,
    ``access``, a key's first bytes); nothing is created or changed."""
    from . import outfile

    get = vars(args).get
    found: list[Problem] = []
    if get("output"):
        why = outfile.problem(get("output"))
        if why:
            found.append(Problem(f"-o {clip(get('output'))}", why,
                                 "name a regular file (or a new one) in a directory you can write"))
    if get("state_dir"):
        why = state_dir_problem(Path(get("state_dir")))
        if why:
            found.append(Problem(f"--state-dir {clip(get('state_dir'))}", why,
                                 "pass a directory you can write (made when missing)"))
    if get("ca_bundle"):
        from .cabundle import find_ca_bundle

        try:
            find_ca_bundle(get("ca_bundle"))
        except InputError as exc:
            found += exc.problems
    found += _signing_key(args, env)
    if get("command") == "verify":
        found += _public_key(get("key"), env)
    return found


def state_dir_problem(path: Path) -> str:
    """Why ``path`` cannot be the state directory, or "" when it can: it is a writable
    directory, or it is missing and its nearest existing parent is a writable directory
    (``cli`` makes it once every check has passed)."""
    why = _unresolvable(path)
    if why:
        return why
    if path.exists():
        if not path.is_dir():
            return "exists and is not a directory"
        return "not writable" if not os.access(path, os.W_OK | os.X_OK) else kernelfs.kernel_interface(str(path))
    parent = path.absolute().parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    if os.path.islink(parent) and not parent.exists():
        return f"cannot create it ({parent} is a symbolic link to nothing)"
    if not parent.is_dir():
        return f"cannot create it ({parent} is not a directory)"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create it ({parent} is not writable)"
    why = kernelfs.kernel_interface(str(parent))
    return f"cannot create it ({parent} is {why})" if why else ""


def _unresolvable(path: Path) -> str:
    """Why ``path`` cannot be looked up (a loop of symbolic links, a name too long, a
    symbolic link to nothing where the directory would be made), or "". ``Path.exists``
    answers False for all of these, which read as "missing, can be made" (issue 22
    review: ``--state-dir LOOP`` passed the checks and the run reached the engine)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            return "is a symbolic link to nothing"
        return ""
    except NotADirectoryError:
        return ""  # a file above it: the parent walk names that file
    except OSError as exc:
        return f"cannot look at it ({exc.strerror or exc})"
    return ""


def _key_file(path: str, where: str, armour: re.Pattern[bytes], kind: str,
              hint: str) -> list[Problem]:
    p = Path(path)
    if not p.exists():
        return [Problem(where, "no such key file", hint)]
    if not p.is_file():
        return [Problem(where, "not a regular file", hint)]
    if p.stat().st_size > MAX_KEY:
        return [Problem(where, f"larger than {MAX_KEY // 1024} KiB: not a key file", hint)]
    try:
        head = p.read_bytes()
    except OSError as exc:
        return [Problem(where, f"cannot read it ({exc.strerror or exc})", hint)]
    if not armour.search(head):
        return [Problem(where, f"not a {kind} (no '{armour.pattern.decode()}' line)", hint)]
    return []


def _signing_key(args: argparse.Namespace, env: Mapping[str, str]) -> list[Problem]:
    """``--sign-key`` whenever given; ``STAGECRAFT_COSIGN_KEY`` where the run signs with
    it (``push``, ``build --push``, and test records: ``test``, ``build --test``)."""
    get = vars(args).get
    option = get("sign_key")
    if option:
        where, path = f"--sign-key {clip(option)}", option
    elif env.get("STAGECRAFT_COSIGN_KEY") and (
            get("command") in ("push", "test") or (get("command") == "build" and
                                                  (get("test") or get("push")))):
        path = env["STAGECRAFT_COSIGN_KEY"]
        where = f"STAGECRAFT_COSIGN_KEY={clip(path)}"
    else:
        return []
    return _key_file(path, where, _PRIVATE_PEM, "PEM private key (cosign.key)", _KEY_HINT)


def _public_key(option: str | None, env: Mapping[str, str]) -> list[Problem]:
    path = option or env.get("STAGECRAFT_COSIGN_PUB")
    if not path:
        return [Problem("verify", "no public key", "pass --key cosign.pub or set STAGECRAFT_COSIGN_PUB")]
    where = f"--key {clip(path)}" if option else f"STAGECRAFT_COSIGN_PUB={clip(path)}"
    return _key_file(path, where, _PUBLIC_PEM, "PEM public key (cosign.pub)",
                     "pass the cosign.pub of the signing key")
