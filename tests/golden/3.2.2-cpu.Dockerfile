# stagecraft/paddle:3.2.2-cpu, rendered by stagecraft from matrix.yaml (image group 'paddle-3.2-cpu').
# Build: DOCKER_BUILDKIT=1 docker build -f THIS_FILE -t stagecraft/paddle:3.2.2-cpu [--secret id=pip-ca,src=CA_BUNDLE] PROJECT_DIR

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

FROM base AS runtime
# runtime: paddlepaddle 3.2.2 (cpu) in a
# virtual environment on the distro's Python 3.11.
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# A CA bundle for TLS-intercepting proxies arrives as a BuildKit secret: it is read
# during this step only and never lands in a layer, the history or a label.
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /opt/venv \
 && printf '%s\n' 'anyio==4.16.0' 'certifi==2026.10.19.post1' 'h11==0.16.0' 'httpcore==1.0.9' 'httpx==0.28.1' 'idna==3.20' 'networkx==3.6.1' 'numpy==2.3.5' 'opt-einsum==3.3.0' 'pillow==13.0.0' 'protobuf==7.36.2' 'safetensors==0.8.0' 'typing_extensions==4.16.0' > /tmp/constraints.txt \
 && /opt/venv/bin/pip install --no-cache-dir -c /tmp/constraints.txt \
      'paddlepaddle==3.2.2' \
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
 && printf '%s\n' '{"components":{"os":"debian 12","python":"3.11"},"device":"cpu","device_strings":{"amd":"gpu:{index}","cpu":"cpu","mlu":"mlu:{index}","npu":"npu:{index}","nvidia":"gpu:{index}","xpu":"xpu:{index}"},"framework":{"name":"paddle-3.2.2-cpu","package":"paddlepaddle","version":"3.2.2"},"kernel_sets":[{"description":"AVX-512 hosts; MKL and oneDNN dispatch on their own (VNNI, BF16, AMX included)","device":"cpu","name":"cpu-avx512","requires":{"cpu_flags":["avx512f","avx512bw","avx512vl"]}},{"description":"AVX2 and FMA kernels; forced on an AVX-512 host, keeps the libraries off AVX-512","device":"cpu","isa_cap":"avx2","name":"cpu-avx2","requires":{"cpu_flags":["avx2","fma"]}},{"description":"the wheel\u0027s floor (it is compiled with -mavx); below it the image refuses, never SIGILL","device":"cpu","isa_cap":"avx","name":"cpu-avx","requires":{"cpu_flags":["avx"]}}],"schema":1}' > /etc/stagecraft/image.json \
 && ln -s /opt/stagecraft/entrypoint/stagecraft-report /usr/local/bin/stagecraft-report \
 && purelib="$(/opt/venv/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && ln -s /opt/stagecraft/entrypoint/stagecraft_device.py "$purelib/stagecraft_device.py" \
 && /opt/venv/bin/python3 -m compileall -q /opt/stagecraft "$purelib/stagecraft_device.py"
LABEL io.stagecraft.framework="paddlepaddle" \
      io.stagecraft.framework.version="3.2.2" \
      io.stagecraft.device="cpu"
USER 1000
WORKDIR /workspace
# tini is PID 1 (signals, zombies); the entrypoint probes the hardware, chooses the
# kernel set, sets the environment, says why in one line, then execs the command.
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/stagecraft/entrypoint/stagecraft-entrypoint"]
CMD ["python3"]
LABEL io.stagecraft.matrix.group="paddle-3.2-cpu" \
      io.stagecraft.matrix.selection="base=debian12,framework=paddle-3.2.2-cpu" \
      org.opencontainers.image.created="1970-01-01T00:00:00Z" \
      org.opencontainers.image.description="paddlepaddle 3.2.2 (cpu) on debian 12, Python 3.11" \
      org.opencontainers.image.ref.name="3.2.2-cpu" \
      org.opencontainers.image.revision="0000000000000000000000000000000000000000" \
      org.opencontainers.image.source="https://github.com/stagecraft/stagecraft" \
      org.opencontainers.image.title="stagecraft/paddle:3.2.2-cpu" \
      org.opencontainers.image.vendor="stagecraft" \
      org.opencontainers.image.version="3.2.2-cpu"
