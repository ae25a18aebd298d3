"""A CPU workload where oneDNN, MKL and OpenBLAS matter, run inside a Paddle image by
bench/cpu_dispatch.py (mounted read-only; it writes only under $TMPDIR or /tmp).

    python cpu_workload.py [--iters N] [--phases infer_fp32,infer_bf16,matmul,numpy]

Phases (each: warm-up, then N timed iterations; the median in ms is reported):
- infer_fp32: ResNet-18 (paddle.vision, random weights, batch 1, 224x224) through Paddle
  Inference with oneDNN on (Config.enable_mkldnn), Paddle's default thread count.
- infer_bf16: the same with oneDNN bfloat16 (enable_mkldnn_bfloat16): the path where the
  ISA matters most (AVX512_CORE_BF16 native vs emulated on AVX512_CORE).
- matmul: paddle.matmul of two 1024x1024 float32 tensors in dygraph (MKL SGEMM).
- numpy: numpy float64 1024x1024 matmul (OpenBLAS, whose pool sizes itself from the
  host's CPU count unless OPENBLAS_NUM_THREADS is set).
Prints one JSON object: {phase: median wall ms, "samples": {phase: [wall ms...]},
"cpu_samples": {phase: [process CPU ms...]}, "threads", "env"}.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time


def timed(fn, iters: int, warmup: int = 3) -> tuple[list[float], list[float]]:
    """(wall ms, process CPU ms) per iteration. CPU time (every thread of the process,
    time.process_time) is the work done, what other jobs on a shared host cannot inflate;
    wall time is what a quota or waiting threads cost."""
    for _ in range(warmup):
        fn()
    wall, cpu = [], []
    for _ in range(iters):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    return wall, cpu


def inference(tmp: str, bf16: bool):
    import numpy as np
    import paddle
    from paddle import inference
    from paddle.vision.models import resnet18

    prefix = os.path.join(tmp, "r18", "model")
    if not os.path.exists(prefix + ".pdiparams"):
        paddle.disable_static()
        model = resnet18(pretrained=False)
        model.eval()
        spec = [paddle.static.InputSpec([1, 3, 224, 224], "float32", "x")]
        paddle.jit.save(paddle.jit.to_static(model, input_spec=spec, full_graph=True), prefix)
    model_file = prefix + ".pdmodel" if os.path.exists(prefix + ".pdmodel") else prefix + ".json"
    cfg = inference.Config(model_file, prefix + ".pdiparams")
    cfg.disable_gpu()
    cfg.enable_mkldnn()
    if bf16:
        cfg.enable_mkldnn_bfloat16()
    cfg.disable_glog_info()
    pred = inference.create_predictor(cfg)
    x = np.random.default_rng(0).random((1, 3, 224, 224), dtype=np.float32)
    h = pred.get_input_handle(pred.get_input_names()[0])
    h.copy_from_cpu(x)
    return pred.run


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--phases", default="infer_fp32,infer_bf16,matmul,numpy")
    args = ap.parse_args()
    # The environment as the entrypoint (or docker) left it: Paddle sets some of these
    # variables itself when imported.
    given = {k: os.environ.get(k) for k in (
        "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "ONEDNN_MAX_CPU_ISA",
        "MKL_ENABLE_INSTRUCTIONS", "STAGECRAFT_CHOSEN")}
    tmp = tempfile.mkdtemp(prefix="cpu-workload-")
    samples: dict[str, tuple[list[float], list[float]]] = {}
    for phase in args.phases.split(","):
        if phase == "infer_fp32":
            samples[phase] = timed(inference(tmp, bf16=False), args.iters)
        elif phase == "infer_bf16":
            samples[phase] = timed(inference(tmp, bf16=True), args.iters)
        elif phase == "matmul":
            import paddle

            a = paddle.rand([1024, 1024])
            b = paddle.rand([1024, 1024])
            samples[phase] = timed(lambda a=a, b=b: paddle.matmul(a, b).numpy(), args.iters)
        elif phase == "numpy":
            import numpy as np

            m = np.random.default_rng(0).random((1024, 1024))
            samples[phase] = timed(lambda m=m: m @ m, args.iters)
        else:
            print(f"unknown phase {phase!r}", file=sys.stderr)
            return 2
    with open("/proc/self/status") as fh:
        threads = int(fh.read().split("Threads:")[1].split()[0])
    out = {p: round(statistics.median(v[0]), 3) for p, v in samples.items()}
    out["samples"] = {p: [round(x, 3) for x in v[0]] for p, v in samples.items()}
    out["cpu_samples"] = {p: [round(x, 3) for x in v[1]] for p, v in samples.items()}
    out["threads"] = {"process": threads}
    out["env"] = given
    print("CPU_WORKLOAD " + json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
