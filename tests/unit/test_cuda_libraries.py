"""The build-time helpers the runtime stage runs inside images: ELF sonames and the
linking of a library's second copy (probes/sonames.py), the SASS/PTX measurement from
cuobjdump listings (probes/fatbin.py). Real ELF files, built with the host's gcc; real
cuobjdump output captured from the wheels named in the fixtures."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from probes import fatbin, sonames
from tests.conftest import ROOT

# `cuobjdump --list-elf --list-ptx` (CUDA 13.4.92, PyPI nvidia-cuda-cuobjdump) run on the
# wheels' libraries, gzipped; see tests/fixtures/README.md.
LISTINGS = ROOT / "tests" / "fixtures" / "cuobjdump"


def listing(name: str) -> str:
    return gzip.decompress((LISTINGS / f"{name}.txt.gz").read_bytes()).decode()


def _cc() -> str:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler to build test libraries")
    return cc


def build_lib(dest: Path, name: str, soname: str | None) -> Path:
    """A real shared object ``dest/name`` with DT_SONAME ``soname`` (none when None)."""
    src = dest / f"{name}.c"
    src.write_text(f"int marker_{abs(hash(name)) % 10**6}(void) {{ return 1; }}\n")
    args = [_cc(), "-shared", "-fPIC", "-o", str(dest / name), str(src)]
    if soname:
        args.insert(3, f"-Wl,-soname,{soname}")
    subprocess.run(args, check=True, capture_output=True)
    src.unlink()
    return dest / name


def test_soname_of_real_libraries(tmp_path):
    lib = build_lib(tmp_path, "libcupti.so.2025.1.1", "libcupti.so.12")
    assert sonames.soname(str(lib)) == "libcupti.so.12"
    bare = build_lib(tmp_path, "libnoname.so", None)
    assert sonames.soname(str(bare)) is None
    text = tmp_path / "libfake.so.1"
    text.write_text("not an ELF file\n")
    assert sonames.soname(str(text)) is None
    assert sonames.soname(sys.executable) is None or sonames.soname(sys.executable).startswith("lib")


def test_auditwheel_hash_is_not_a_different_library():
    assert sonames.normalise("libcudart-9335f6a2.so.12") == "libcudart.so.12"
    assert sonames.normalise("libgomp-a34b3233.so.1") == "libgomp.so.1"
    assert sonames.normalise("libcudart.so.12") == "libcudart.so.12"
    assert sonames.normalise("libnvrtc-builtins.so.12.8") == "libnvrtc-builtins.so.12.8"


def test_a_bundled_copy_becomes_a_link_to_the_stage_library(tmp_path):
    """Triton's wheel carries CUPTI three times (libcupti.so, .so.12, .so.2025.1.1, all
    soname libcupti.so.12) beside the stage's nvidia-cuda-cupti-cu12: after `link`, one
    regular file remains and the copies point at it."""
    site = tmp_path / "venv" / "site-packages"
    stage = site / "nvidia" / "cuda_cupti" / "lib"
    stage.mkdir(parents=True)
    real = build_lib(stage, "libcupti.so.12", "libcupti.so.12")
    libdir = tmp_path / "cuda" / "lib64"
    libdir.mkdir(parents=True)
    (libdir / "libcupti.so.12").symlink_to(real)
    (libdir / "libcupti.so").symlink_to("libcupti.so.12")
    bundled = site / "triton" / "backends" / "nvidia" / "lib" / "cupti"
    bundled.mkdir(parents=True)
    copies = [build_lib(bundled, n, "libcupti.so.12")
              for n in ("libcupti.so", "libcupti.so.12", "libcupti.so.2025.1.1")]
    other = build_lib(bundled, "libnvperf_host.so", "libnvperf_host.so")  # the stage lacks it
    (site / "torch").mkdir()
    hashed = build_lib(site / "torch", "libcupti-0123abcd.so.12", "libcupti-0123abcd.so.12")  # auditwheel's name

    before = sonames.by_soname([str(tmp_path)])
    assert len(before["libcupti.so.12"]) == 5, before

    done = sonames.link_duplicates(str(libdir), str(tmp_path / "venv"))
    assert sorted(d["path"] for d in done) == sorted(str(p) for p in [*copies, hashed])
    for p in [*copies, hashed]:
        assert p.is_symlink() and os.path.realpath(p) == str(real), p
    assert not other.is_symlink(), "a library the stage does not provide is left alone"
    after = sonames.by_soname([str(tmp_path)])
    assert after["libcupti.so.12"] == [str(real)], after
    assert sonames.link_duplicates(str(libdir), str(tmp_path / "venv")) == [], "not idempotent"


def test_link_cli_prints_what_it_replaced(tmp_path):
    site = tmp_path / "site"
    (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)
    real = build_lib(site / "nvidia" / "nccl" / "lib", "libnccl.so.2", "libnccl.so.2")
    libdir = tmp_path / "lib64"
    libdir.mkdir()
    (libdir / "libnccl.so.2").symlink_to(real)
    (site / "fw").mkdir()
    copy = build_lib(site / "fw", "libnccl.so.2", "libnccl.so.2")
    out = subprocess.run([sys.executable, "-I", str(ROOT / "probes" / "sonames.py"), "link", str(libdir), str(site)],
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == [{"path": str(copy), "soname": "libnccl.so.2", "target": str(real)}]


# --- SASS and PTX from cuobjdump listings ----------------------------------------------


def test_listing_counts_per_capability():
    text = listing("torch-2.7.1-libtorch_cuda")
    counts = fatbin.parse_listing(text)
    assert counts["sass"] == {"5.0": 378, "6.0": 378, "7.0": 378, "7.5": 378, "8.0": 378,
                              "8.6": 378, "8.9": 2, "9.0": 378}
    assert counts["specific"] == {"9.0a": 3}
    assert counts["ptx"] == {}
    # A stray handful of sm_89 cubins is not a build for 8.9; sm_90a never counts.
    assert fatbin.covered(counts["sass"]) == ["5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0"]


def test_blackwell_capabilities_parse_as_ten_and_twelve():
    text = listing("torch-2.10.0-libtorch_cuda")
    counts = fatbin.parse_listing(text)
    assert fatbin.covered(counts["sass"]) == ["7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"]
    assert counts["specific"] == {"9.0a": 4, "10.0a": 60, "12.0a": 1}


def test_ptx_entries_are_read():
    lines = [f"PTX file {i:4d}: lib.{i}.sm_{cc}.ptx" for i, cc in enumerate(["80"] * 4 + ["90"] * 3 + ["52"], 1)]
    counts = fatbin.parse_listing("\n".join([*lines, "ELF file    1: lib.1.sm_80.cubin"]))
    assert counts["ptx"] == {"8.0": 4, "9.0": 3, "5.2": 1} and counts["sass"] == {"8.0": 1}
    assert fatbin.covered(counts["ptx"]) == ["8.0", "9.0"]


def _fake_cuobjdump(tmp_path: Path, listings: dict[str, str]) -> Path:
    """A stand-in cuobjdump (a script) that prints the captured listing of each binary
    by file name, or fails as the real one does on a file without device code."""
    tool = tmp_path / "cuobjdump"
    table = json.dumps({k: v for k, v in listings.items()})
    tool.write_text(f"#!{sys.executable}\nimport json, os, sys\nT = json.loads({table!r})\n"
                    "if sys.argv[1] == '--version': print('Cuda compilation tools, release 13.4, V13.4.92'); sys.exit(0)\n"
                    "name = os.path.basename(sys.argv[-1])\n"
                    "if name not in T: print(f\"cuobjdump info    : File '{sys.argv[-1]}' does not contain device code\", "
                    "file=sys.stderr); sys.exit(255)\n"
                    "print(T[name])\n")
    tool.chmod(0o755)
    return tool


def test_measure_intersects_binaries_and_rewrites_the_manifest(tmp_path):
    """Paddle 2.6's libphi.so and libpaddle.so: each 6.1 to 8.6; libphi.so's stray
    sm_50/52/60/90 cubins do not count. The manifest's NVIDIA set takes the result."""
    phi = listing("paddle-2.6.0-libphi")
    lib = listing("paddle-2.6.0-libpaddle")
    tool = _fake_cuobjdump(tmp_path, {"libphi.so": phi, "libpaddle.so": lib})
    root = tmp_path / "site"
    for rel in ("paddle/libs/libphi.so", "paddle/base/libpaddle.so", "paddle/libs/libdnnl.so.3"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"\x7fELF")
    measured = fatbin.measure(str(tool), str(root), ["paddle/libs/libphi.so", "paddle/base/libpaddle.so"])
    assert measured["sass"] == ["6.1", "7.0", "7.5", "8.0", "8.6"] and measured["ptx"] == []
    assert measured["tool"] == "Cuda compilation tools, release 13.4, V13.4.92"
    manifest = tmp_path / "image.json"
    manifest.write_text(json.dumps({"kernel_sets": [
        {"name": "cuda", "device": "nvidia", "requires": {"cuda": "11.8", "sass": ["9.9"], "ptx": ["9.9"]}},
        {"name": "cpu-avx", "device": "cpu", "requires": {"cpu_flags": ["avx"]}}]}))
    out = tmp_path / "measured.json"
    assert fatbin.main(["measure", "--cuobjdump", str(tool), "--root", str(root), "--out", str(out),
                        "paddle/libs/libphi.so", "paddle/base/libpaddle.so"]) == 0
    assert json.loads(out.read_text()) == measured
    assert fatbin.main(["apply", str(out), str(manifest)]) == 0
    got = json.loads(manifest.read_text())
    assert got["kernel_sets"][0]["requires"] == {"cuda": "11.8", "sass": ["6.1", "7.0", "7.5", "8.0", "8.6"], "ptx": []}
    assert got["kernel_sets"][1] == {"name": "cpu-avx", "device": "cpu", "requires": {"cpu_flags": ["avx"]}}
    assert got["measured"]["binaries"]["paddle/libs/libphi.so"]["sass"]["9.0"] == 1


def test_a_binary_without_device_code_is_named(tmp_path, capsys):
    tool = _fake_cuobjdump(tmp_path, {})
    root = tmp_path / "site"
    (root / "paddle/libs").mkdir(parents=True)
    (root / "paddle/libs/libdnnl.so.3").write_bytes(b"\x7fELF")
    out = tmp_path / "measured.json"
    assert fatbin.main(["measure", "--cuobjdump", str(tool), "--root", str(root), "--out", str(out),
                        "paddle/libs/libdnnl.so.3"]) == 1
    err = capsys.readouterr().err
    assert "paddle/libs/libdnnl.so.3: no device code found by cuobjdump" in err and "does not contain device code" in err
    assert fatbin.main(["measure", "--cuobjdump", str(tool), "--root", str(root), "--out", str(out),
                        "paddle/libs/libnope.so"]) == 1
    assert "paddle/libs/libnope.so: no such file" in capsys.readouterr().err
    assert not out.exists(), "a failed measurement must write nothing"
