"""Build and configure the stand-in libnvidia-ml.so.1 (nvml_standin.c) for tests.

As a library:   path = build(dest_dir)            # gcc, cached by source hash
                write_config(file, gpus=[...], driver=..., ...)
From a shell:   python tests/nvml_standin/standin.py build OUT_DIR   # prints the .so path
Loading: pynvml does ``CDLL("libnvidia-ml.so.1")``, so the stand-in is found through
LD_LIBRARY_PATH=<dir> in a subprocess, by a bind mount over
/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1 in a container, or in-process after
``preload(path)`` (glibc matches an already-loaded library by its soname).
The answers come from the file in $STAGECRAFT_NVML_CONFIG (format: nvml_standin.c).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("nvml_standin.c")
SONAME = "libnvidia-ml.so.1"


def build(dest_dir: str | os.PathLike[str]) -> Path:
    """Compile the stand-in into dest_dir/<hash>/libnvidia-ml.so.1 (reused when present).
    Raises RuntimeError when no C compiler is found or the build fails."""
    src = SOURCE.read_bytes()
    out_dir = Path(dest_dir) / hashlib.sha256(src).hexdigest()[:12]
    out = out_dir / SONAME
    if out.exists():
        return out
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise RuntimeError("no C compiler (gcc/cc) to build the stand-in NVML")
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / f".{SONAME}.{os.getpid()}"
    cmd = [cc, "-shared", "-fPIC", "-O2", "-Wall", f"-Wl,-soname,{SONAME}", "-o", str(tmp), str(SOURCE)]
    cp = subprocess.run(cmd, capture_output=True, text=True)
    if cp.returncode != 0:
        raise RuntimeError(f"building the stand-in NVML failed: {' '.join(cmd)}\n{cp.stderr}")
    os.replace(tmp, out)
    return out


def preload(path: str | os.PathLike[str]) -> None:
    """Load the stand-in into this process so pynvml's CDLL(soname) finds it."""
    import ctypes

    ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL)


def gpu(name: str, uuid: str, cc: str, memory_bytes: int, mig: int = -1) -> str:
    """One ``gpu=`` config line. cc like "9.0"; mig -1 unsupported, 0 off, 1 on."""
    major, minor = cc.split(".")
    return f"gpu={name}|{uuid}|{major}|{minor}|{memory_bytes}|{mig}"


def config_text(gpus: list[str] | None = None, driver: str = "550.54.15", cuda: int = 12040,
                init_error: int | None = None, errors: list[str] | None = None,
                hangs: list[str] | None = None, migs: list[str] | None = None) -> str:
    """Config file text. gpus: lines from gpu(); errors: "FUNCTION|CODE[|GPU]";
    hangs: "FUNCTION|SECONDS"; migs: "GPU_INDEX|MIG-UUID"."""
    lines = [f"driver={driver}", f"cuda={cuda}"]
    if init_error is not None:
        lines.append(f"init_error={init_error}")
    lines += list(gpus or [])
    lines += [f"mig={m}" for m in migs or []]
    lines += [f"error={e}" for e in errors or []]
    lines += [f"hang={h}" for h in hangs or []]
    return "\n".join(lines) + "\n"


def write_config(path: str | os.PathLike[str], **kw: object) -> Path:
    p = Path(path)
    p.write_text(config_text(**kw))  # type: ignore[arg-type]
    return p


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit("usage: standin.py build OUT_DIR")
    print(build(sys.argv[2]))
