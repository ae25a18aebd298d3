"""ELF sonames, and each CUDA library once in an image.

The runtime stage runs this file at build time, inside the image, with the venv's
Python (standard library only)::

    python3 sonames.py link LIBDIR ROOT      # prints JSON: what it replaced by links
    python3 sonames.py list ROOT [ROOT ...]  # prints JSON: soname -> [paths]

``link``: LIBDIR is /usr/local/cuda/lib64, where the cuda and accel stages linked each
library of NVIDIA's wheels. Every regular ELF file under ROOT whose soname is that of a
library in LIBDIR, but which is not that library (a copy a framework's own package
bundles, such as the CUPTI inside Triton's wheel), is replaced by a symbolic link to it.
Two copies gain nothing: glibc loads one object per soname in a process (an object
already loaded under that soname answers every later request), so which copy serves is
decided by load order. The link makes it the stage's, the version the framework pinned.

Sonames are compared after removing auditwheel's 8-hex-digit hash
(``libgomp-a34b3233.so.1`` is ``libgomp.so.1``): a vendored, renamed copy is a copy.
ELF layout: the System V gABI (program headers, PT_DYNAMIC, DT_STRTAB, DT_SONAME).
"""
from __future__ import annotations

import json
import os
import re
import struct
import sys

PT_LOAD, PT_DYNAMIC = 1, 2
DT_NULL, DT_STRTAB, DT_SONAME = 0, 5, 14
_HASHED = re.compile(r"^(lib.+?)-[0-9a-f]{8}(\.so(?:\.[0-9]+)*)$")


def soname(path: str) -> str | None:
    """The DT_SONAME of the ELF shared object at ``path``; None when the file is not ELF,
    has no dynamic section or no soname. Reads only the headers (a 1 GB library costs a
    few reads). Raises OSError when the file cannot be read."""
    with open(path, "rb") as fh:
        ident = fh.read(16)
        if len(ident) < 16 or ident[:4] != b"\x7fELF" or ident[4] not in (1, 2):
            return None
        wide = ident[4] == 2
        end = "<" if ident[5] == 1 else ">"
        head = fh.read(48 if wide else 36)
        if wide:
            phoff, phentsize, phnum = struct.unpack(end + "Q", head[16:24])[0], *struct.unpack(end + "HH", head[38:42])
        else:
            phoff, phentsize, phnum = struct.unpack(end + "I", head[12:16])[0], *struct.unpack(end + "HH", head[26:30])
        fh.seek(phoff)
        table = fh.read(phentsize * phnum)
        loads, dynamic = [], None
        for i in range(phnum):
            raw = table[i * phentsize:(i + 1) * phentsize]
            if wide:
                ptype, _, off, vaddr, _, filesz = struct.unpack(end + "IIQQQQ", raw[:40])
            else:
                ptype, off, vaddr, _, filesz = struct.unpack(end + "IIIII", raw[:20])
            if ptype == PT_LOAD:
                loads.append((vaddr, off, filesz))
            elif ptype == PT_DYNAMIC:
                dynamic = (off, filesz)
        if dynamic is None:
            return None
        fh.seek(dynamic[0])
        data = fh.read(dynamic[1])
        fmt, size = (end + "qQ", 16) if wide else (end + "iI", 8)
        strtab = name = None
        for i in range(0, len(data) - size + 1, size):
            tag, val = struct.unpack(fmt, data[i:i + size])
            if tag == DT_NULL:
                break
            if tag == DT_STRTAB:
                strtab = val
            elif tag == DT_SONAME:
                name = val
        if strtab is None or name is None:
            return None
        base = next((off + strtab - vaddr for vaddr, off, filesz in loads
                     if vaddr <= strtab < vaddr + filesz), None)
        if base is None:
            return None
        fh.seek(base + name)
        raw = fh.read(256)
        return raw.split(b"\0", 1)[0].decode("utf-8", "replace") or None


def normalise(name: str) -> str:
    """A soname without auditwheel's hash: ``libcudart-9335f6a2.so.12`` -> ``libcudart.so.12``."""
    m = _HASHED.match(name)
    return m.group(1) + m.group(2) if m else name


def shared_objects(root: str):
    """(path, normalised soname) of every regular ELF file named like a shared object
    (``*.so`` or ``*.so.N...``) under ``root``, not following symbolic links and not
    entering other file systems (/proc, /sys, /dev in a container). Files without a
    soname are named by their file name."""
    device = os.stat(root).st_dev
    for top, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if _same_device(os.path.join(top, d), device))
        for f in sorted(files):
            if ".so" not in f:
                continue
            path = os.path.join(top, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            try:
                name = soname(path)
            except OSError:
                continue
            if name is not None or _is_elf(path):
                yield path, normalise(name or f)


def _same_device(path: str, device: int) -> bool:
    try:
        return os.lstat(path).st_dev == device
    except OSError:
        return False


def _is_elf(path: str) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def provided(libdir: str) -> dict[str, str]:
    """Normalised soname -> real path of every library linked in ``libdir``."""
    out: dict[str, str] = {}
    for entry in sorted(os.listdir(libdir)):
        real = os.path.realpath(os.path.join(libdir, entry))
        if not os.path.isfile(real):
            continue
        try:
            name = soname(real)
        except OSError:
            continue
        if name:
            out.setdefault(normalise(name), real)
    return out


def link_duplicates(libdir: str, root: str) -> list[dict[str, str]]:
    """Replace every copy under ``root`` of a library in ``libdir`` by a link to it (see
    the module docstring). Returns one ``{"path", "soname", "target"}`` per replaced file.
    Raises OSError when a file cannot be replaced."""
    have = provided(libdir)
    done = []
    for path, name in list(shared_objects(root)):
        target = have.get(name)
        if target is None or os.path.realpath(path) == target:
            continue
        tmp = path + ".stagecraft-link"
        os.symlink(target, tmp)
        os.replace(tmp, path)
        done.append({"path": path, "soname": name, "target": target})
    return done


def by_soname(roots: list[str]) -> dict[str, list[str]]:
    """Normalised soname -> the regular files under ``roots`` that carry it."""
    out: dict[str, list[str]] = {}
    for root in roots:
        for path, name in shared_objects(root):
            out.setdefault(name, []).append(path)
    return out


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "link":
        print(json.dumps(link_duplicates(argv[1], argv[2]), indent=1))
        return 0
    if len(argv) >= 2 and argv[0] == "list":
        print(json.dumps(by_soname(argv[1:]), indent=1, sort_keys=True))
        return 0
    print("usage: sonames.py link LIBDIR ROOT | sonames.py list ROOT [ROOT ...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
