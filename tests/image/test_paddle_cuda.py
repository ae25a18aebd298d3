"""PaddlePaddle GPU builds, checked on a host without a GPU.

Paddle must say it was compiled with CUDA and report the declared CUDA and cuDNN
versions. Without a GPU it runs on CPU (test_paddle.py checks the numbers). The names it
dlopens, the libraries it links and the SASS/PTX it carries are checked for every
framework by the cuda suite (test_cuda.py).
"""

from __future__ import annotations

import json


def test_compiled_with_cuda_and_versions(py, spec, host):
    req = spec["framework"]["requires"]
    cuda = spec["components"]["cuda"]
    out = py("import json, paddle; print(json.dumps({'cuda': paddle.is_compiled_with_cuda(),"
             " 'v': paddle.version.cuda(), 'dnn': paddle.version.cudnn(),"
             " 'n': paddle.device.cuda.device_count()}))")
    got = json.loads(out.strip().splitlines()[-1])
    assert got["cuda"] is True, f"{spec['tag']}: not compiled with CUDA"
    assert got["v"] == req["cuda"] == cuda["cuda"], f"{spec['tag']}: paddle says CUDA {got['v']}"
    assert got["dnn"] == cuda["cudnn"], f"{spec['tag']}: paddle says cuDNN {got['dnn']}"
    if not host.file("/dev/nvidia0").exists:
        assert got["n"] == 0, f"{spec['tag']}: {got['n']} GPUs without /dev/nvidia0"


def test_compute_capability_labels(labels, spec):
    build = spec["framework"]["build"]
    for key in ("sass", "ptx"):  # a list, or the word "unknown" (matrix.yaml)
        want = build[key] if isinstance(build[key], str) else " ".join(build[key])
        assert labels.get(f"io.stagecraft.cuda.{key}") == want, f"{spec['tag']}: {key} label"
