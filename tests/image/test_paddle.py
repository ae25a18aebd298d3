"""PaddlePaddle: attached to the paddle framework entries in matrix.yaml, not to a stage.

Imports, version, a computation with known right numbers (not just that it runs), the
dynamic -> static -> inference round trip models take to production, and Paddle's own
self-check. `run_check()` alone is no device probe (it passes after falling
back to CPU), so the GPU facts are checked separately by the CUDA suites.
"""

from __future__ import annotations

import json


def test_import_and_version(py, spec):
    out = py("import paddle; print(paddle.__version__)")
    assert out.strip() == spec["framework"]["version"], f"{spec['tag']}: paddle {out.strip()}"


def test_known_numbers(py, spec):
    code = (
        "import json, paddle\n"
        "x = paddle.to_tensor([[1., 2.], [3., 4.]])\n"
        "y = paddle.to_tensor([[5., 6.], [7., 8.]])\n"
        "print(json.dumps({'mul2': (paddle.to_tensor([1., 2.]) * 2).numpy().tolist(),"
        " 'matmul': paddle.matmul(x, y).numpy().tolist(),"
        " 'sum': float(paddle.arange(1, 101, dtype='float32').sum()),"
        " 'softmax': [round(v, 6) for v in paddle.nn.functional.softmax(paddle.to_tensor([0., 0.])).numpy().tolist()]}))"
    )
    got = json.loads(py(code).strip().splitlines()[-1])
    assert got["mul2"] == [2.0, 4.0], f"{spec['tag']}: [1,2]*2 = {got['mul2']} (numpy 2 with paddle 2.6 gives garbage)"
    assert got["matmul"] == [[19.0, 22.0], [43.0, 50.0]], f"{spec['tag']}: matmul {got['matmul']}"
    assert got["sum"] == 5050.0, f"{spec['tag']}: sum {got['sum']}"
    assert got["softmax"] == [0.5, 0.5], f"{spec['tag']}: softmax {got['softmax']}"


def test_a_training_step_lowers_the_loss(py, spec):
    code = (
        "import paddle\n"
        "paddle.seed(0)\n"
        "x = paddle.randn([64, 3]); w = paddle.to_tensor([[1.], [-2.], [3.]]); y = x.matmul(w)\n"
        "lin = paddle.nn.Linear(3, 1); opt = paddle.optimizer.SGD(0.1, parameters=lin.parameters())\n"
        "losses = []\n"
        "for _ in range(50):\n"
        "    loss = ((lin(x) - y) ** 2).mean(); loss.backward(); opt.step(); opt.clear_grad()\n"
        "    losses.append(float(loss))\n"
        "print(losses[0], losses[-1])\n"
    )
    first, last = map(float, py(code).split()[-2:])
    assert last < first * 0.01, f"{spec['tag']}: loss {first} -> {last}"


def test_run_check_passes(py, spec):
    out = py("import paddle; paddle.utils.run_check()", timeout=300)
    assert "PaddlePaddle is installed successfully" in out, f"{spec['tag']}: {out[-500:]}"


def test_device_string_agrees_with_paddle(host, spec):
    """A program writes `paddle.set_device(device())`: the string the entrypoint chose must
    be what Paddle itself then reports (on this GPU-less host: the CPU fallback, `cpu`)."""
    code = ("import paddle; from stagecraft_device import device; d = device(); "
            "paddle.set_device(d); print(d, paddle.get_device())")
    cmd = host.run("STAGECRAFT_QUIET=1 /opt/stagecraft/entrypoint/stagecraft-entrypoint python -c %s", code)
    assert cmd.rc == 0, f"{spec['tag']}: exit {cmd.rc}: {cmd.stderr[-1500:]}"
    chosen, paddles = cmd.stdout.split()[-2:]
    assert chosen == paddles, f"{spec['tag']}: chose {chosen}, paddle.get_device() says {paddles}"
    if not host.file("/dev/nvidia0").exists:
        assert chosen == "cpu", f"{spec['tag']}: {chosen} on a host without a GPU"


# The round trip's tolerance: float32, the same weights and input; the predictor's kernels
# (oneDNN on CPU, cuBLAS/cuDNN on GPU) may sum in another order. Seen on CPU: 1.2e-7 max
# absolute difference (2.6.2 and 3.3.1). GPU: TF32 tensor cores may be used, hence looser.
ROUND_TRIP_TOL = {"cpu": {"rtol": 1e-5, "atol": 1e-5}, "gpu": {"rtol": 1e-3, "atol": 1e-3}}

ROUND_TRIP = """
import json, os, platform, tempfile
import numpy as np
import paddle
from paddle import inference
from paddle.base import core
paddle.seed(0)
net = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 4))
net.eval()
x = paddle.randn([5, 8])
want = net(x).numpy()
d = tempfile.mkdtemp()
prefix = os.path.join(d, "net")
paddle.jit.save(net, prefix, input_spec=[paddle.static.InputSpec([None, 8], "float32", "x")])
model = prefix + (".json" if os.path.exists(prefix + ".json") else ".pdmodel")  # 3.x: PIR
config = inference.Config(model, prefix + ".pdiparams")
gpu = paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
if gpu:
    config.enable_use_gpu(64, 0)
else:
    config.disable_gpu()
    if core.is_compiled_with_mkldnn():
        config.enable_mkldnn()
predictor = inference.create_predictor(config)
predictor.get_input_handle(predictor.get_input_names()[0]).copy_from_cpu(x.numpy())
predictor.run()
got = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
print(json.dumps({"files": sorted(os.listdir(d)), "gpu": bool(gpu), "onednn": config.mkldnn_enabled(),
                  "machine": platform.machine(), "with_onednn": core.is_compiled_with_mkldnn(),
                  "shape": list(got.shape), "want": want.tolist(), "got": got.tolist()}))
"""


def test_dynamic_to_static_to_inference_round_trip(py, spec):
    """A small net in dynamic mode, `paddle.jit.save`, a `paddle.inference` predictor
    (oneDNN on for CPU where the wheel has it; the GPU predictor where a GPU is visible,
    else the CPU one, as on a GPU image on a host without a GPU): the same outputs within
    ROUND_TRIP_TOL. PyPI's x86_64 wheels are built with oneDNN; the aarch64 ones without
    it (`paddle.version.mkl()` is OFF there, `is_compiled_with_mkldnn()` False): their
    predictor runs Paddle's own CPU kernels."""
    got = json.loads(py(ROUND_TRIP, timeout=300).strip().splitlines()[-1])
    device = "gpu" if got["gpu"] else "cpu"
    assert any(f.endswith(".pdiparams") for f in got["files"]), f"{spec['tag']}: saved {got['files']}"
    assert got["shape"] == [5, 4], f"{spec['tag']}: predictor output shape {got['shape']}"
    want_onednn = got["machine"] == "x86_64"
    assert got["with_onednn"] == want_onednn, (
        f"{spec['tag']}: the {got['machine']} wheel is "
        f"{'' if got['with_onednn'] else 'not '}built with oneDNN; PyPI's x86_64 wheels are, the aarch64 ones are not")
    if device == "cpu":
        assert got["onednn"] == want_onednn, (
            f"{spec['tag']}: oneDNN {'not ' if want_onednn else ''}enabled in the {got['machine']} CPU predictor")
    tol = ROUND_TRIP_TOL[device]
    pairs = [(o, w) for orow, wrow in zip(got["got"], got["want"], strict=True)
             for o, w in zip(orow, wrow, strict=True)]
    worst = max(abs(o - w) for o, w in pairs)
    assert all(abs(o - w) <= tol["atol"] + tol["rtol"] * abs(w) for o, w in pairs), (  # numpy.allclose
        f"{spec['tag']}: {device} predictor differs from dynamic mode by {worst:.3g} (tolerance {tol})")
