"""CUDA stage: the runtime libraries and cuDNN, checked without a GPU.

`cudaRuntimeGetVersion` and `cudnnGetVersion` need no driver, so the declared versions
are checked for real; every library's own dependencies must resolve; no driver library
(libcuda, libnvidia-ml) may be on the loader path (the NVIDIA container runtime mounts
the host's).
"""

from __future__ import annotations

import json


def _cuda(spec):
    return spec["components"]["cuda"]


def test_layout(host, spec):
    cuda = _cuda(spec)
    link = host.file("/usr/local/cuda")
    assert link.is_symlink and link.linked_to == cuda["prefix"], f"{spec['tag']}: /usr/local/cuda -> {link.linked_to}"
    conf = host.check_output("cat /etc/ld.so.conf.d/*.conf")
    assert "/usr/local/cuda/lib64" in conf, f"{spec['tag']}: loader config {conf!r}"


def test_runtime_version(py, spec, host):
    major, minor = (int(x) for x in _cuda(spec)["cuda"].split("."))
    want = major * 1000 + minor * 10
    out = py("import ctypes; lib = ctypes.CDLL('libcudart.so'); v = ctypes.c_int();"
             " rc = lib.cudaRuntimeGetVersion(ctypes.byref(v)); print(rc, v.value)")
    rc, version = (int(x) for x in out.split())
    if rc == 0:
        assert version == want, f"{spec['tag']}: cudaRuntimeGetVersion {version}, want {want}"
        return
    # Seen here with cudart 11.8.89: without any driver it answers 35
    # (cudaErrorInsufficientDriver). Then read the same release from NVRTC, which needs no
    # driver, and from the CUDA runtime version cuDNN was built for.
    assert rc == 35 and not host.file("/dev/nvidia0").exists, f"{spec['tag']}: cudaRuntimeGetVersion rc {rc}"
    out = py("import ctypes; n = ctypes.CDLL('libnvrtc.so'); a, b = ctypes.c_int(), ctypes.c_int();"
             " rc = n.nvrtcVersion(ctypes.byref(a), ctypes.byref(b)); print(rc, a.value, b.value)")
    assert out.split() == ["0", str(major), str(minor)], f"{spec['tag']}: nvrtcVersion {out}"
    if _cuda(spec).get("cudnn"):
        built_for = int(py("import ctypes; print(ctypes.CDLL('libcudnn.so').cudnnGetCudartVersion())"))
        assert built_for // 1000 == major and built_for <= want, (
            f"{spec['tag']}: cuDNN built for CUDA runtime {built_for}, image has {want}")


def test_cudnn_version(py, spec):
    cudnn = _cuda(spec).get("cudnn")
    if not cudnn:
        return
    major, minor, patch = (int(x) for x in (cudnn.split(".") + ["0"])[:3])
    # cuDNN 8 encodes major*1000 + minor*100 + patch; cuDNN 9 major*10000 + minor*100 + patch.
    want = major * (1000 if major < 9 else 10000) + minor * 100 + patch
    out = py("import ctypes; print(ctypes.CDLL('libcudnn.so').cudnnGetVersion())")
    assert int(out) == want, f"{spec['tag']}: cudnnGetVersion {out}, want {want}"


def test_every_library_resolves_its_dependencies(host, spec):
    prefix = _cuda(spec)["prefix"]
    out = host.run(f"for f in {prefix}/lib64/*.so*; do ldd \"$f\" | sed \"s|^|$f: |\"; done")
    missing = [ln for ln in out.stdout.splitlines() if "not found" in ln]
    assert missing == [], f"{spec['tag']}: unresolved: {missing[:10]}"


def test_no_driver_libraries_on_the_loader_path(host, spec):
    cache = host.check_output("ldconfig -p")
    for name in ("libcuda.so", "libnvidia-ml.so"):
        assert name not in cache, f"{spec['tag']}: {name} in the loader cache"
    found = host.run("find / -xdev \\( -name 'libcuda.so*' -o -name 'libnvidia-ml.so*' \\) "
                     "-not -path '*/stubs/*' 2>/dev/null").stdout.split()
    assert found == [], f"{spec['tag']}: driver libraries in the image: {found}"


def test_no_devel_toolkit(host, spec):
    prefix = _cuda(spec)["prefix"]
    assert not host.exists("nvcc"), f"{spec['tag']}: nvcc in the image"
    assert not host.file(f"{prefix}/include").exists, f"{spec['tag']}: CUDA headers in the image"
    static = host.run(f"find {prefix} -name '*.a'").stdout.split()
    assert static == [], f"{spec['tag']}: static libraries {static[:5]}"


def test_nvidia_container_env_and_labels(image_attrs, labels, spec):
    env = dict(e.split("=", 1) for e in image_attrs["Config"]["Env"])
    cuda = _cuda(spec)
    assert env.get("NVIDIA_VISIBLE_DEVICES") == "all", spec["tag"]
    assert env.get("NVIDIA_DRIVER_CAPABILITIES") == "compute,utility", spec["tag"]
    assert env.get("NVIDIA_REQUIRE_CUDA") == f"cuda>={cuda['cuda'].split('.')[0]}.0", spec["tag"]
    assert labels.get("io.stagecraft.cuda") == cuda["cuda"], spec["tag"]
    if cuda.get("cudnn"):
        assert labels.get("io.stagecraft.cudnn") == cuda["cudnn"], spec["tag"]
    comps = spec["manifest"]["components"]
    assert labels.get("io.stagecraft.cuda.min-driver") == comps["min_driver"], spec["tag"]
    assert labels.get("io.stagecraft.cuda.min-driver-compat") == comps["min_driver_compat"], spec["tag"]


def test_manifest_names_the_driver_needs(host, spec):
    manifest = json.loads(host.file(spec["manifest_path"]).content_string)
    nvidia = [ks for ks in manifest["kernel_sets"] if ks["device"] == "nvidia"]
    assert nvidia, f"{spec['tag']}: no NVIDIA kernel set"
    assert nvidia[0]["requires"]["cuda"] == _cuda(spec)["cuda"], spec["tag"]
