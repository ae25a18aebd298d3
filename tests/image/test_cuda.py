"""CUDA stage: the runtime libraries and cuDNN, checked without a GPU, and what the
framework on top does with them.

`cudaRuntimeGetVersion` and `cudnnGetVersion` need no driver, so the declared versions
are checked for real; every library's own dependencies must resolve; no driver library
(libcuda, libnvidia-ml) may be on the loader path (the NVIDIA container runtime mounts
the host's). NVIDIA's wheels are Python distributions in the framework's venv: the
framework's own pins on them are installed, nothing more, and no CUDA, cuDNN or NCCL
library exists twice anywhere in the image. The SASS and PTX the build measured from the
framework's binaries are the ones matrix.yaml declares.
"""

from __future__ import annotations

import json
import re

import pytest

# NVIDIA's CUDA toolkit, cuDNN, NCCL and NVSHMEM libraries, by soname (the CUDA Toolkit's
# redistributable list and the wheels of NVIDIA's PyPI projects; libcheckpoint,
# libnvperf_* and libpcsamplingutil come with CUPTI).
CUDA_LIBRARY = re.compile(
    r"^lib(cuda|cudart|cublas|cublasLt|nvblas|cudnn\w*|nccl\w*|nvshmem\w*|nvrtc(-builtins)?"
    r"|curand|cusolver(Mg)?|cusparse(Lt)?|cufft(w)?|cufile(_rdma)?|cupti|checkpoint|nvperf_host"
    r"|nvperf_target|pcsamplingutil|nvToolsExt|nvJitLink|nvjpeg|npp\w*|nvvm)\.so(\.[0-9]+)*$")
# The host's driver provides these; an image must not (test below).
DRIVER = ("libcuda.so.1", "libnvidia-ml.so.1")


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


def _site(spec):
    return f"/opt/venv/lib/python{spec['base']['python']}/site-packages"


def test_each_cuda_library_exists_once(py, spec):
    """By soname (auditwheel's hash removed), over the whole file system of the image:
    links are not copies; a second regular file is."""
    out = py("import json, subprocess, sys\n"
             "print(subprocess.run([sys.executable, '-I', '/opt/stagecraft/probes/sonames.py', 'list', '/'],"
             " capture_output=True, text=True, check=True).stdout)", timeout=600)
    found = json.loads(out)
    twice = {name: paths for name, paths in found.items() if CUDA_LIBRARY.match(name) and len(paths) > 1}
    assert twice == {}, f"{spec['tag']}: CUDA libraries present more than once: {json.dumps(twice, indent=1)}"
    present = sorted(name for name in found if CUDA_LIBRARY.match(name))
    assert any(n.startswith("libcudart.so") for n in present), f"{spec['tag']}: no CUDA runtime found: {present}"


def test_nvidia_wheels_are_distributions_in_the_venv(host, spec):
    """The cuda and accel stages' wheels are installed distributions (pip sees them) at
    the pinned versions, and their libraries are what /usr/local/cuda/lib64 links to."""
    installed = {k.lower(): v["version"] for k, v in host.pip.get_packages(pip_path="/opt/venv/bin/pip").items()}
    pins = {**spec["components"]["cuda"].get("pypi", {}), **spec["components"].get("accel", {}).get("pypi", {})}
    wrong = {pkg: installed.get(pkg.lower()) for pkg, v in pins.items() if installed.get(pkg.lower()) != v}
    assert wrong == {}, f"{spec['tag']}: NVIDIA wheels not installed at the pinned versions: {wrong} (pins {pins})"
    links = host.run("for f in /usr/local/cuda/lib64/*; do readlink -f \"$f\"; done").stdout.split()
    outside = sorted({p for p in links if not p.startswith(_site(spec) + "/")})
    assert outside == [], f"{spec['tag']}: /usr/local/cuda/lib64 holds libraries outside the wheels: {outside[:10]}"


def test_framework_requires_no_further_nvidia_wheel(host, spec):
    """matrix.yaml's ``cuda_wheels`` are the framework package's own NVIDIA pins (its
    Requires-Dist), and pip, asked for them in the venv, would install nothing."""
    fw = spec["framework"]
    code = ("import importlib.metadata as m, json, re\n"
            f"reqs = m.requires({fw['package']!r}) or []\n"
            "pins = {}\n"
            "for r in reqs:\n"
            "    g = re.match(r'(nvidia-[A-Za-z0-9_.-]+)\\s*==\\s*([^;\\s]+)', r)\n"
            "    if g and 'extra ==' not in r: pins[g.group(1).lower()] = g.group(2)\n"
            "print(json.dumps(pins))")
    cmd = host.run("/opt/venv/bin/python -c %s", code)
    assert cmd.rc == 0, f"{spec['tag']}: {cmd.stderr[-1000:]}"
    own = json.loads(cmd.stdout)
    declared = {k.lower(): str(v) for k, v in (fw.get("cuda_wheels") or {}).items()}
    assert own == declared, (f"{spec['tag']}: {fw['package']} {fw['version']} requires {own}; "
                             f"matrix.yaml cuda_wheels says {declared}")
    if not declared:
        return
    reqs = " ".join(f"'{k}=={v}'" for k, v in sorted(declared.items()))
    cmd = host.run(f"/opt/venv/bin/pip install --dry-run --no-index --quiet --report - {reqs}")
    assert cmd.rc == 0, f"{spec['tag']}: pip cannot satisfy {fw['package']}'s NVIDIA pins from the venv: {cmd.stderr[-1500:]}"
    install = [i["metadata"]["name"] + "==" + i["metadata"]["version"] for i in json.loads(cmd.stdout)["install"]]
    assert install == [], f"{spec['tag']}: pip would install {install}"


def test_measured_sass_and_ptx_match_the_matrix(host, spec):
    """The build read the SASS and PTX from the framework's own binaries
    (build.fatbins, with cuobjdump) into the image's description; matrix.yaml must say the
    same, and the entrypoint chooses with the measured lists."""
    build = spec["framework"]["build"]
    manifest = json.loads(host.file(spec["manifest_path"]).content_string)
    measured = manifest.get("measured")
    assert measured, f"{spec['tag']}: no measured SASS/PTX in {spec['manifest_path']} (build.fatbins {build.get('fatbins')})"
    assert sorted(measured["binaries"]) == sorted(build["fatbins"]), f"{spec['tag']}: measured {sorted(measured['binaries'])}"
    for key in ("sass", "ptx"):
        assert measured[key] == list(build[key]), (
            f"{spec['tag']}: {key.upper()} measured from {', '.join(build['fatbins'])}: "
            f"{' '.join(measured[key]) or 'none'}; matrix.yaml declares {' '.join(build[key]) or 'none'} "
            f"(per-binary counts: {json.dumps(measured['binaries'])})")
    for ks in manifest["kernel_sets"]:
        if ks["device"] == "nvidia":
            assert ks["requires"]["sass"] == measured["sass"] and ks["requires"]["ptx"] == measured["ptx"], (
                f"{spec['tag']}: kernel set {ks['name']} does not use the measured lists: {ks['requires']}")


def test_every_dlopen_name_loads(py, spec):
    """Each library the framework loads by name at run time (build.dlopen) loads through
    the loader path, with all of its own dependencies."""
    names = spec["framework"].get("build", {}).get("dlopen", [])
    if names == "unknown":
        pytest.skip(f"{spec['tag']}: the matrix declares dlopen: unknown")
    assert names, f"{spec['tag']}: the matrix declares no dlopen names for a GPU build"
    code = ("import ctypes, json, sys\n"
            f"names = {names!r}\n"
            "bad = {}\n"
            "for n in names:\n"
            "    try: ctypes.CDLL(n)\n"
            "    except OSError as e: bad[n] = str(e)\n"
            "print(json.dumps(bad))\n")
    bad = json.loads(py(code).strip().splitlines()[-1])
    assert bad == {}, f"{spec['tag']}: cannot dlopen {bad}"


def test_every_framework_library_resolves(host, spec):
    """Every CUDA, cuDNN or NCCL library a shared object of the framework's package needs
    is found by the loader from that object (its RUNPATH, the loader cache), the host's
    driver libraries aside. (Other libraries may rest on what the framework preloads, as
    Paddle's libmklml_intel.so on its libiomp5.so: ldd cannot tell those from a miss.
    What a framework dlopens instead, Paddle 2.6 all of it, is test_every_dlopen_name_loads'.)"""
    pkg = f"{_site(spec)}/{spec['framework']['import'].split('.')[0]}"
    out = host.run(f"find {pkg} -name '*.so*' -type f -exec sh -c 'for f; do ldd \"$f\" | sed \"s|^|$f: |\"; done' sh {{}} +")
    missing = [ln for ln in out.stdout.splitlines() if "not found" in ln
               and CUDA_LIBRARY.match(ln.split(": ", 1)[-1].split("=>")[0].strip())
               and not any(d in ln for d in DRIVER)]
    assert missing == [], f"{spec['tag']}: unresolved: {missing[:10]}"


def test_bundled_copies_became_links(host, spec):
    """What the runtime stage replaced by links (a framework package's own copy of a
    library the stage provides) is listed in /opt/stagecraft/linked-libraries.json, and
    each entry is now a link to the stage's library."""
    f = host.file("/opt/stagecraft/linked-libraries.json")
    assert f.is_file, f"{spec['tag']}: no /opt/stagecraft/linked-libraries.json"
    for entry in json.loads(f.content_string):
        link = host.file(entry["path"])
        assert link.is_symlink and link.linked_to == entry["target"], f"{spec['tag']}: {entry}"
