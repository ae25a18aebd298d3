"""Accelerator-library stage: NCCL (and TensorRT where declared), without a GPU."""

from __future__ import annotations


def test_nccl_version(py, spec):
    nccl = spec["components"]["accel"].get("nccl")
    if not nccl:
        return
    major, minor, patch = (int(x) for x in nccl.split("."))
    out = py("import ctypes; lib = ctypes.CDLL('libnccl.so'); v = ctypes.c_int();"
             " rc = lib.ncclGetVersion(ctypes.byref(v)); print(rc, v.value)")
    # NCCL >= 2.9 encodes major*10000 + minor*100 + patch (nccl.h NCCL_VERSION_CODE).
    assert out.split() == ["0", str(major * 10000 + minor * 100 + patch)], f"{spec['tag']}: {out}"


def test_labels(labels, spec):
    accel = spec["components"]["accel"]
    if accel.get("nccl"):
        assert labels.get("io.stagecraft.nccl") == accel["nccl"], spec["tag"]


def test_declared_system_libraries_are_installed(host, spec):
    for pkg in spec["components"]["accel"].get("apt", {}):
        assert host.package(pkg).is_installed, f"{spec['tag']}: {pkg} missing"


def test_nccl_finds_the_verbs_library(py, spec):
    """NCCL's InfiniBand/RoCE transport dlopens libibverbs.so.1; without it NCCL falls
    back to TCP sockets between nodes (the accel component installs rdma-core's user
    space)."""
    if "libibverbs1" not in spec["components"]["accel"].get("apt", {}):
        return
    py("import ctypes; ctypes.CDLL('libibverbs.so.1')")
