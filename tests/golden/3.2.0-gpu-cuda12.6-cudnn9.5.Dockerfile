# stagecraft/paddle:3.2.0-gpu-cuda12.6-cudnn9.5, rendered by stagecraft from matrix.yaml (image group 'paddle-3-gpu').
# Build: DOCKER_BUILDKIT=1 docker build -f THIS_FILE -t stagecraft/paddle:3.2.0-gpu-cuda12.6-cudnn9.5 [--secret id=pip-ca,src=CA_BUNDLE] PROJECT_DIR

FROM docker.io/library/debian:bookworm-slim@sha256:7c7b2c966bc9ee8cedfeef67e0e279108992c77681fa595db4a9d65c06ccc587 AS base
# base: debian 12 (bookworm) with its own Python 3.11,
# tini and the system libraries the frameworks load. Framework-independent: one base
# serves every image of this distro.
ENV DEBIAN_FRONTEND=noninteractive \
    LANG=C.UTF-8 \
    LC_ALL=C.UTF-8 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Packages, with why each is here:
#   ca-certificates: TLS roots for pip and the frameworks' downloads
#   libgomp1: OpenMP runtime the frameworks load at import
#   python3: the distro's Python is the one Python in the image
#   python3-venv: the framework lives in a virtual environment
#   tini: PID 1: reaps zombies, forwards signals
# Version globs keep the release's ABI and take its security updates.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      ca-certificates=2023* \
      libgomp1=12.2.* \
      python3=3.11.* \
      python3-venv=3.11.* \
      tini=0.19.* \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
           /var/cache/debconf/*-old
# A non-root default user (uid 1000). Home and /workspace belong to group 0 and are
# group-writable, so `docker run --user <any uid>` (gid 0 by default) works too.
RUN groupadd --gid 1000 worker \
 && useradd --uid 1000 --gid 1000 --groups 0 --home-dir /home/worker --create-home \
            --shell /bin/bash worker \
 && mkdir -p /workspace \
 && chown 1000:0 /workspace /home/worker \
 && chmod 2775 /workspace /home/worker
ENV HOME=/home/worker
LABEL io.stagecraft.os="debian" \
      io.stagecraft.os.version="12" \
      io.stagecraft.python="3.11"

FROM base AS cuda
# cuda: CUDA 12.6 runtime libraries and cuDNN 9.5.1, from pypi.
# Framework-independent: every image with these components shares this stage. Laid out
# as tools expect: /usr/local/cuda-12.6/lib64, /usr/local/cuda -> it, the loader cache, and
# unversioned names (libcudnn.so) beside the versioned ones (libcudnn.so.8), since
# frameworks dlopen the unversioned names. No devel toolkit, no driver libraries: the
# host's driver (libcuda, libnvidia-ml) is mounted by the NVIDIA container runtime.
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /tmp/fetch \
 && /tmp/fetch/bin/pip download --no-cache-dir --no-deps --only-binary=:all: --dest /tmp/wheels \
      'nvidia-cublas-cu12==12.6.4.1' \
      'nvidia-cuda-cupti-cu12==12.6.80' \
      'nvidia-cuda-nvrtc-cu12==12.6.77' \
      'nvidia-cuda-runtime-cu12==12.6.77' \
      'nvidia-cudnn-cu12==9.5.1.17' \
      'nvidia-cufft-cu12==11.3.0.4' \
      'nvidia-curand-cu12==10.3.7.77' \
      'nvidia-cusolver-cu12==11.7.1.2' \
      'nvidia-cusparse-cu12==12.5.4.2' \
      'nvidia-nvjitlink-cu12==12.6.85' \
      'nvidia-nvtx-cu12==12.6.77' \
 && mkdir -p /usr/local/cuda-12.6/lib64 /tmp/unpacked \
 && for w in /tmp/wheels/*.whl; do /tmp/fetch/bin/python -m zipfile -e "$w" /tmp/unpacked; done \
 && find /tmp/unpacked/nvidia -path '*/lib/*.so*' -type f -exec mv -t /usr/local/cuda-12.6/lib64 {} + \
 && rm -rf /tmp/fetch /tmp/wheels /tmp/unpacked \
 && for f in /usr/local/cuda-12.6/lib64/lib*.so.*; do \
      link="${f%%.so.*}.so"; [ -e "$link" ] || ln -s "${f##*/}" "$link"; \
    done \
 && ln -s /usr/local/cuda-12.6 /usr/local/cuda \
 && echo /usr/local/cuda/lib64 > /etc/ld.so.conf.d/000-stagecraft-cuda.conf \
 && ldconfig
# NVIDIA container runtime settings. NVIDIA_REQUIRE_CUDA asks only for the CUDA major's
# minor-version-compatibility floor: the hook then starts the container on any driver
# that can run it at all, and the entrypoint checks the exact need and falls back to CPU
# with a reason instead of the container being refused.
ENV CUDA_HOME=/usr/local/cuda \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=12.0"
LABEL io.stagecraft.cuda="12.6" \
      io.stagecraft.cudnn="9.5.1" \
      io.stagecraft.cuda.min-driver="560.28.03" \
      io.stagecraft.cuda.min-driver-compat="525.60.13"

FROM cuda AS accel
# accel: accelerator libraries over CUDA 12.6: NCCL 2.21.5.
# Framework-independent, from NVIDIA's wheels on PyPI, laid out beside the CUDA libraries.
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /tmp/fetch \
 && /tmp/fetch/bin/pip download --no-cache-dir --no-deps --only-binary=:all: --dest /tmp/wheels \
      'nvidia-nccl-cu12==2.21.5' \
 && mkdir -p /tmp/unpacked \
 && for w in /tmp/wheels/*.whl; do /tmp/fetch/bin/python -m zipfile -e "$w" /tmp/unpacked; done \
 && find /tmp/unpacked -path '*/lib/*.so*' -type f -exec mv -t /usr/local/cuda-12.6/lib64 {} + \
 && rm -rf /tmp/fetch /tmp/wheels /tmp/unpacked \
 && for f in /usr/local/cuda-12.6/lib64/lib*.so.*; do \
      link="${f%%.so.*}.so"; [ -e "$link" ] || ln -s "${f##*/}" "$link"; \
    done \
 && ldconfig
LABEL io.stagecraft.nccl="2.21.5"

FROM accel AS runtime
# runtime: paddlepaddle-gpu 3.2.0 (nvidia) in a
# virtual environment on the distro's Python 3.11.
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# A CA bundle for TLS-intercepting proxies arrives as a BuildKit secret: it is read
# during this step only and never lands in a layer, the history or a label.
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /opt/venv \
 && printf '%s\n' 'numpy==2.3.5' > /tmp/constraints.txt \
 && /opt/venv/bin/pip install --no-cache-dir -c /tmp/constraints.txt \
      --index-url 'https://www.paddlepaddle.org.cn/packages/stable/cu126/' --extra-index-url https://pypi.org/simple \
      'paddlepaddle-gpu==3.2.0' \
      'nvidia-ml-py==13.580.82' \
 && rm -f /tmp/constraints.txt \
 && check_home="$(mktemp -d)" \
 && HOME="$check_home" TMPDIR="$check_home" /opt/venv/bin/python -c 'import paddle' \
 && rm -rf "$check_home" /tmp/.cache
# (The import check above runs with a scratch HOME and TMPDIR: whatever the framework
# caches at import must not land root-owned in the user's home or /tmp.)
# The hardware-probing entrypoint and what it knows about this image. Byte-compiled
# here: it runs as any uid and cannot write __pycache__, so it would otherwise compile
# its modules from source at every start (15-30 ms of a 40-60 ms budget).
COPY entrypoint/ /opt/stagecraft/entrypoint/
COPY probes/ /opt/stagecraft/probes/
# stagecraft_device (`paddle.set_device(device())`, `python -m stagecraft_device`) is
# linked into the venv's site-packages; stagecraft-health is the HEALTHCHECK below.
RUN mkdir -p /etc/stagecraft \
 && printf '%s\n' '{"components":{"cuda":"12.6","cudnn":"9.5.1","min_driver":"560.28.03","min_driver_compat":"525.60.13","nccl":"2.21.5","os":"debian 12","python":"3.11"},"device":"nvidia","device_strings":{"amd":"gpu:{index}","cpu":"cpu","mlu":"mlu:{index}","npu":"npu:{index}","nvidia":"gpu:{index}","xpu":"xpu:{index}"},"framework":{"name":"paddle-3.2.0-gpu-cu126","package":"paddlepaddle-gpu","version":"3.2.0"},"kernel_sets":[{"description":"native kernels for the compute capabilities the wheel ships","device":"nvidia","env":{},"name":"cuda","requires":{"cuda":"12.6","min_driver":"560.28.03","min_driver_compat":"525.60.13","ptx":"unknown","sass":"unknown","supported":["9.0"]}},{"description":"no usable GPU; MKL and oneDNN dispatch on their own (VNNI, BF16, AMX included)","device":"cpu","name":"cpu-avx512","requires":{"cpu_flags":["avx512f","avx512bw","avx512vl"]}},{"description":"no usable GPU; AVX2 and FMA kernels","device":"cpu","isa_cap":"avx2","name":"cpu-avx2","requires":{"cpu_flags":["avx2","fma"]}},{"description":"no usable GPU; the wheel\u0027s floor (-mavx)","device":"cpu","isa_cap":"avx","name":"cpu-avx","requires":{"cpu_flags":["avx"]}}],"schema":1}' > /etc/stagecraft/image.json \
 && ln -s /opt/stagecraft/entrypoint/stagecraft-report /usr/local/bin/stagecraft-report \
 && purelib="$(/opt/venv/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && ln -s /opt/stagecraft/entrypoint/stagecraft_device.py "$purelib/stagecraft_device.py" \
 && /opt/venv/bin/python3 -m compileall -q /opt/stagecraft "$purelib/stagecraft_device.py"
LABEL io.stagecraft.framework="paddlepaddle-gpu" \
      io.stagecraft.framework.version="3.2.0" \
      io.stagecraft.cuda.sass="unknown" \
      io.stagecraft.cuda.ptx="unknown" \
      io.stagecraft.device="nvidia"
USER 1000
WORKDIR /workspace
# tini is PID 1 (signals, zombies); the entrypoint probes the hardware, chooses the
# kernel set, sets the environment, says why in one line, then execs the command.
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/stagecraft/entrypoint/stagecraft-entrypoint"]
CMD ["python3"]
# Re-checks the device the entrypoint chose (NVML for NVIDIA, device nodes for the
# others) without importing the framework: a container whose device access is revoked
# after start turns unhealthy. CPU-only images have nothing to re-check and no HEALTHCHECK.
HEALTHCHECK --interval=30s --timeout=4s --start-period=10s --retries=3 \
  CMD ["/opt/stagecraft/entrypoint/stagecraft-health", "--budget", "2"]
LABEL io.stagecraft.matrix.group="paddle-3-gpu" \
      io.stagecraft.matrix.selection="base=debian12,cuda=cuda12.6-cudnn9.5,accel=nccl2.21-cu12,framework=paddle-3.2.0-gpu-cu126" \
      org.opencontainers.image.created="1970-01-01T00:00:00Z" \
      org.opencontainers.image.description="paddlepaddle-gpu 3.2.0 (nvidia) on debian 12, Python 3.11" \
      org.opencontainers.image.ref.name="3.2.0-gpu-cuda12.6-cudnn9.5" \
      org.opencontainers.image.revision="0000000000000000000000000000000000000000" \
      org.opencontainers.image.source="https://github.com/stagecraft/stagecraft" \
      org.opencontainers.image.title="stagecraft/paddle:3.2.0-gpu-cuda12.6-cudnn9.5" \
      org.opencontainers.image.vendor="stagecraft" \
      org.opencontainers.image.version="3.2.0-gpu-cuda12.6-cudnn9.5"
