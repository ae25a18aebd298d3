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
