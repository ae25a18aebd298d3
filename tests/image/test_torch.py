"""PyTorch: attached to the torch framework entries in matrix.yaml, not to a stage.

Imports, version, computations with known right numbers on the CPU (not just that they
run), a training step, and what the build says about CUDA: the CUDA and cuDNN versions
torch reports are the stage's, and without a GPU it says so instead of failing. The CUDA
libraries themselves (one copy each, every one resolving) are the cuda suite's.
"""

from __future__ import annotations

import json


def test_import_and_version(py, spec):
    out = py("import torch; print(torch.__version__)").strip()
    # PyPI's build says which CUDA it is for in the local version: 2.10.0+cu128.
    want = spec["framework"]["version"]
    cuda = spec["components"]["cuda"]["cuda"].replace(".", "")
    assert out in (want, f"{want}+cu{cuda}"), f"{spec['tag']}: torch {out}, want {want}(+cu{cuda})"


def test_known_numbers_on_cpu(py, spec):
    code = (
        "import json, torch\n"
        "x = torch.tensor([[1., 2.], [3., 4.]]); y = torch.tensor([[5., 6.], [7., 8.]])\n"
        "c = torch.nn.functional.conv1d(torch.tensor([[[1., 2., 3., 4.]]]), torch.tensor([[[1., 0., -1.]]]))\n"
        "print(json.dumps({'mul2': (torch.tensor([1., 2.]) * 2).tolist(),"
        " 'matmul': (x @ y).tolist(),"
        " 'sum': float(torch.arange(1, 101, dtype=torch.float32).sum()),"
        " 'softmax': [round(v, 6) for v in torch.softmax(torch.tensor([0., 0.]), 0).tolist()],"
        " 'conv': c.flatten().tolist(),"
        " 'inv': torch.linalg.inv(torch.tensor([[2., 0.], [0., 4.]])).tolist()}))"
    )
    got = json.loads(py(code).strip().splitlines()[-1])
    assert got["mul2"] == [2.0, 4.0], f"{spec['tag']}: [1,2]*2 = {got['mul2']}"
    assert got["matmul"] == [[19.0, 22.0], [43.0, 50.0]], f"{spec['tag']}: matmul {got['matmul']}"
    assert got["sum"] == 5050.0, f"{spec['tag']}: sum {got['sum']}"
    assert got["softmax"] == [0.5, 0.5], f"{spec['tag']}: softmax {got['softmax']}"
    assert got["conv"] == [-2.0, -2.0], f"{spec['tag']}: conv1d {got['conv']}"
    assert got["inv"] == [[0.5, 0.0], [0.0, 0.25]], f"{spec['tag']}: inverse {got['inv']}"


def test_a_training_step_lowers_the_loss(py, spec):
    code = (
        "import torch\n"
        "torch.manual_seed(0)\n"
        "x = torch.randn(64, 3); y = x @ torch.tensor([[1.], [-2.], [3.]])\n"
        "lin = torch.nn.Linear(3, 1); opt = torch.optim.SGD(lin.parameters(), lr=0.1)\n"
        "losses = []\n"
        "for _ in range(50):\n"
        "    opt.zero_grad(); loss = ((lin(x) - y) ** 2).mean(); loss.backward(); opt.step()\n"
        "    losses.append(float(loss))\n"
        "print(losses[0], losses[-1])\n"
    )
    first, last = map(float, py(code).split()[-2:])
    assert last < first * 0.01, f"{spec['tag']}: loss {first} -> {last}"


def test_cuda_and_cudnn_versions_are_the_stage(py, spec, host):
    cuda = spec["components"]["cuda"]
    out = py("import json, torch; print(json.dumps({'cuda': torch.version.cuda,"
             " 'built': torch.backends.cuda.is_built(), 'cudnn': torch.backends.cudnn.version(),"
             " 'available': torch.cuda.is_available(), 'n': torch.cuda.device_count()}))")
    got = json.loads(out.strip().splitlines()[-1])
    assert got["built"] is True, f"{spec['tag']}: torch was not built with CUDA"
    assert got["cuda"] == cuda["cuda"] == spec["framework"]["requires"]["cuda"], (
        f"{spec['tag']}: torch.version.cuda {got['cuda']}, stage CUDA {cuda['cuda']}")
    major, minor, patch = (int(x) for x in (cuda["cudnn"].split(".") + ["0"])[:3])
    want = major * 10000 + minor * 100 + patch  # cuDNN 9: major*10000 + minor*100 + patch
    assert got["cudnn"] == want, f"{spec['tag']}: torch.backends.cudnn.version() {got['cudnn']}, stage cuDNN {cuda['cudnn']} ({want})"
    if not host.file("/dev/nvidia0").exists:
        assert got["available"] is False and got["n"] == 0, f"{spec['tag']}: {got} without /dev/nvidia0"


def test_the_device_string_is_torchs(py, spec):
    """What the entrypoint exports for programs (stagecraft_device.device(), from the
    framework's device_strings) is a device torch accepts: on this GPU-less host the CPU."""
    out = py("import torch, stagecraft_device; d = torch.device(stagecraft_device.device());"
             " print(d.type, torch.ones(2, device=d).sum().item())")
    kind, total = out.split()[-2:]
    assert kind in ("cpu", "cuda") and float(total) == 2.0, f"{spec['tag']}: {out}"


def test_torch_compile_builds_cpu_kernels_and_matches_eager(py, spec):
    """torch.compile on the CPU (pytorch#116696): Inductor writes C++ for the function and
    builds it with the image's g++ against Python.h (matrix.yaml's torch `apt`). Checked
    three ways: the compiled function's numbers equal eager mode's (1e-5), Inductor built a
    shared object in its cache (so the kernel is the compiled one, not an eager fallback),
    and a second call with a new shape recompiles and still matches."""
    code = (
        "import glob, json, os, torch\n"
        "from torch._inductor.runtime.cache_dir_utils import cache_dir\n"
        "def f(x, y):\n"
        "    return torch.sin(x) * y + torch.relu(x) ** 2\n"
        "cf = torch.compile(f)\n"
        "x = torch.linspace(-2, 2, 64); y = torch.arange(64, dtype=torch.float32)\n"
        "a = float((cf(x, y) - f(x, y)).abs().max())\n"
        "x2 = torch.linspace(-3, 3, 1000); y2 = torch.ones(1000)\n"
        "b = float((cf(x2, y2) - f(x2, y2)).abs().max())\n"
        "so = glob.glob(os.path.join(cache_dir(), '**', '*.so'), recursive=True)\n"
        "print(json.dumps({'diff': max(a, b), 'so': len(so), 'dir': cache_dir()}))\n"
    )
    got = json.loads(py(code, timeout=600).strip().splitlines()[-1])
    assert got["diff"] < 1e-5, f"{spec['tag']}: compiled and eager differ by {got['diff']}"
    assert got["so"] >= 1, f"{spec['tag']}: no kernel built under {got['dir']}: {got}"
