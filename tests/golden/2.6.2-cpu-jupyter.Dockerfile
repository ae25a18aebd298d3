# stagecraft/paddle:2.6.2-cpu-jupyter, rendered by stagecraft from matrix.yaml (image group 'paddle-2.6-cpu-jupyter').
# Build: DOCKER_BUILDKIT=1 docker build -f THIS_FILE -t stagecraft/paddle:2.6.2-cpu-jupyter [--secret id=pip-ca,src=CA_BUNDLE] PROJECT_DIR

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
# runtime: paddlepaddle 2.6.2 (cpu) in a
# virtual environment on the distro's Python 3.11.
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# A CA bundle for TLS-intercepting proxies arrives as a BuildKit secret: it is read
# during this step only and never lands in a layer, the history or a label.
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /opt/venv \
 && printf '%s\n' 'anyio==4.16.0' 'astor==0.8.1' 'certifi==2026.10.19.post1' 'decorator==5.3.1' 'h11==0.16.0' 'httpcore==1.0.9' 'httpx==0.28.1' 'idna==3.20' 'numpy==1.26.4' 'opt-einsum==3.3.0' 'pillow==13.0.0' 'protobuf==3.20.2' 'typing_extensions==4.16.0' > /tmp/constraints.txt \
 && /opt/venv/bin/pip install --no-cache-dir -c /tmp/constraints.txt \
      'paddlepaddle==2.6.2' \
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
 && printf '%s\n' '{"components":{"os":"debian 12","python":"3.11"},"device":"cpu","device_strings":{"amd":"gpu:{index}","cpu":"cpu","mlu":"mlu:{index}","npu":"npu:{index}","nvidia":"gpu:{index}","xpu":"xpu:{index}"},"framework":{"name":"paddle-2.6.2-cpu","package":"paddlepaddle","version":"2.6.2"},"kernel_sets":[{"description":"AVX-512 hosts; MKL and oneDNN dispatch on their own (VNNI, BF16, AMX included)","device":"cpu","name":"cpu-avx512","requires":{"cpu_flags":["avx512f","avx512bw","avx512vl"]}},{"description":"AVX2 and FMA kernels; forced on an AVX-512 host, keeps the libraries off AVX-512","device":"cpu","isa_cap":"avx2","name":"cpu-avx2","requires":{"cpu_flags":["avx2","fma"]}},{"description":"the wheel\u0027s floor (it is compiled with -mavx); below it the image refuses, never SIGILL","device":"cpu","isa_cap":"avx","name":"cpu-avx","requires":{"cpu_flags":["avx"]}}],"schema":1}' > /etc/stagecraft/image.json \
 && ln -s /opt/stagecraft/entrypoint/stagecraft-report /usr/local/bin/stagecraft-report \
 && purelib="$(/opt/venv/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && ln -s /opt/stagecraft/entrypoint/stagecraft_device.py "$purelib/stagecraft_device.py" \
 && /opt/venv/bin/python3 -m compileall -q /opt/stagecraft "$purelib/stagecraft_device.py"
LABEL io.stagecraft.framework="paddlepaddle" \
      io.stagecraft.framework.version="2.6.2" \
      io.stagecraft.device="cpu"
USER 1000
WORKDIR /workspace
# tini is PID 1 (signals, zombies); the entrypoint probes the hardware, chooses the
# kernel set, sets the environment, says why in one line, then execs the command.
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/stagecraft/entrypoint/stagecraft-entrypoint"]
CMD ["python3"]

FROM runtime AS jupyter
# jupyter: JupyterLab 4.6.6 over the runtime, served by the non-root user on
# port 8888 with /workspace as the notebook directory. Framework-independent: it reads only
# the venv the runtime stage made, so one template serves every runtime (CPU or GPU).
#
# Where it lives: in the framework's venv (/opt/venv), not in a venv of its own. The distro
# Python stays the only interpreter either way, but in one venv ipykernel's native kernel
# spec ("python3", argv[0] `python`, which jupyter_client replaces by sys.executable) is
# /opt/venv/bin/python: the kernel is the framework's Python with nothing to register and
# no second site-packages to keep in step. The price is one dependency set, so the
# runtime's installed versions are constraints here and win over the pins below: adding
# Jupyter never moves a package the framework was tested with (`pip check` guards the
# rest). The pins are the set this JupyterLab resolved to (matrix.yaml, components.jupyter).
#
# Secrets: none in the image. JUPYTER_TOKEN (or JUPYTER_TOKEN_FILE, e.g. a Docker secret)
# comes from `docker run -e`; without it jupyter_server makes a random token at each start
# and prints it in the log. No ServerApp.token/password in any config file, no allow_root.
USER 0
# A CA bundle for TLS-intercepting proxies arrives as a BuildKit secret: it is read
# during this step only and never lands in a layer, the history or a label.
# Constraints: the runtime's `pip freeze` first, then each Jupyter pin whose package the
# runtime does not have (names compared PEP 503-normalised), so the runtime always wins.
# The merged file stays in the image (/opt/stagecraft/jupyter-constraints.txt): what this
# layer was resolved against, for the suite to check and for users to extend the venv.
# HOME points away from /home/worker while root imports the stack, so nothing root-owned
# lands in the home that `--user <any uid>` has to write to.
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && /opt/venv/bin/pip freeze --all > /tmp/runtime-pins.txt \
 && printf '%s\n' \
      'argon2-cffi-bindings==26.2.0' \
      'argon2-cffi==25.1.0' \
      'arrow==1.4.0' \
      'asttokens==3.0.2' \
      'async-lru==2.4.0' \
      'attrs==26.1.0' \
      'babel==2.19.0' \
      'beautifulsoup4==4.15.0' \
      'bleach==6.4.0' \
      'cffi==2.1.1' \
      'charset-normalizer==3.5.3' \
      'comm==0.2.3' \
      'debugpy==1.8.22' \
      'defusedxml==0.7.1' \
      'executing==2.3.0' \
      'fastjsonschema==2.22.3' \
      'fqdn==1.6.0' \
      'ipykernel==7.4.0' \
      'ipython==9.18.1' \
      'ipython_pygments_lexers==1.1.1' \
      'isoduration==20.11.0' \
      'jedi==0.20.1' \
      'Jinja2==3.1.6' \
      'json5==0.17.3' \
      'jsonpointer==3.12' \
      'jsonschema-specifications==2025.9.1' \
      'jsonschema==4.26.0' \
      'jupyter-events==0.12.1' \
      'jupyter-lsp==2.3.1' \
      'jupyter_builder==1.3.0' \
      'jupyter_client==8.10.0' \
      'jupyter_core==5.9.1' \
      'jupyter_server==2.21.1' \
      'jupyter_server_terminals==0.5.4' \
      'jupyterlab_pygments==0.3.0' \
      'jupyterlab_server==2.28.1' \
      'lark==1.3.1' \
      'MarkupSafe==3.0.4' \
      'matplotlib-inline==0.2.2' \
      'mistune==3.4.0' \
      'nbclient==0.11.0' \
      'nbconvert==7.17.2' \
      'nbformat==5.11.1' \
      'nest-asyncio2==1.7.4' \
      'notebook_shim==0.2.4' \
      'overrides==7.7.0' \
      'packaging==26.4' \
      'pandocfilters==1.5.1' \
      'parso==0.8.7' \
      'pexpect==4.9.0' \
      'platformdirs==4.14.8' \
      'prometheus_client==0.26.0' \
      'prompt_toolkit==3.0.53' \
      'psutil==7.2.2' \
      'ptyprocess==0.7.0' \
      'pure_eval==0.2.4' \
      'pycparser==3.12' \
      'Pygments==2.21.0' \
      'python-dateutil==4.0.0' \
      'python-json-logger==4.2.0' \
      'PyYAML==6.0.4' \
      'pyzmq==27.3.0' \
      'referencing==0.37.0' \
      'requests==2.34.2' \
      'rfc3339-validator==0.1.4' \
      'rfc3986-validator==0.1.1' \
      'rfc3987-syntax==1.1.0' \
      'rpds-py==2026.9.1' \
      'Send2Trash==2.2.0' \
      'six==1.17.0' \
      'soupsieve==2.10' \
      'stack-data==0.6.3' \
      'terminado==0.18.1' \
      'tinycss2==1.5.1' \
      'tornado==6.6.1' \
      'traitlets==5.16.1' \
      'tzdata==2026.6' \
      'uri-template==1.3.0' \
      'urllib3==2.8.0' \
      'wcwidth==0.9.4' \
      'webcolors==25.10.0' \
      'webencodings==0.6.1' \
      'websocket-client==1.9.2' \
      > /tmp/jupyter-pins.txt \
 && awk 'function key(s) { s = tolower(s); sub(/[ =<>!~;@[].*/, "", s); gsub(/[-_.]+/, "-", s); return s }; \
          NR == FNR { seen[key($0)] = 1; print; next }; !(key($0) in seen)' \
        /tmp/runtime-pins.txt /tmp/jupyter-pins.txt > /opt/stagecraft/jupyter-constraints.txt \
 && /opt/venv/bin/pip install --no-cache-dir -c /opt/stagecraft/jupyter-constraints.txt \
      'jupyterlab==4.6.6' \
 && rm -f /tmp/runtime-pins.txt /tmp/jupyter-pins.txt \
 && HOME=/nonexistent /opt/venv/bin/python -c 'import ipykernel, jupyter_server, jupyterlab'
LABEL io.stagecraft.jupyterlab.version="4.6.6"
USER 1000
WORKDIR /workspace
EXPOSE 8888
# Healthy when the server answers GET <base_url>api, the one endpoint that needs no token
# (it returns the server version), so the check never has to know the secret. Port,
# base_url and scheme come from the server's own runtime file (jpserver-<pid>.json, in
# the runtime dir of the user the container runs as), so `--port` or `--ServerApp.base_url`
# in a custom CMD still check the right place. No runtime file yet: unhealthy.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["/opt/venv/bin/python", "-I", "-c", "import glob, json, os, ssl, sys, urllib.request as r; from jupyter_core.paths import jupyter_runtime_dir as d; fs = glob.glob(os.path.join(d(), 'jpserver-*.json')); fs or sys.exit('no Jupyter server runtime file in ' + d()); s = json.load(open(max(fs, key=os.path.getmtime))); r.urlopen(('https' if s.get('secure') else 'http') + '://127.0.0.1:%d%sapi' % (s['port'], s.get('base_url', '/')), timeout=4, context=ssl._create_unverified_context())"]
# Under the probing entrypoint (from the runtime stage), so the server and the kernels it
# starts inherit the environment of the chosen kernel set.
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--ServerApp.root_dir=/workspace"]
LABEL io.stagecraft.matrix.group="paddle-2.6-cpu-jupyter" \
      io.stagecraft.matrix.selection="base=debian12,framework=paddle-2.6.2-cpu,jupyter=lab4" \
      org.opencontainers.image.created="1970-01-01T00:00:00Z" \
      org.opencontainers.image.description="paddlepaddle 2.6.2 (cpu) on debian 12, Python 3.11" \
      org.opencontainers.image.ref.name="2.6.2-cpu-jupyter" \
      org.opencontainers.image.revision="0000000000000000000000000000000000000000" \
      org.opencontainers.image.source="https://github.com/stagecraft/stagecraft" \
      org.opencontainers.image.title="stagecraft/paddle:2.6.2-cpu-jupyter" \
      org.opencontainers.image.vendor="stagecraft" \
      org.opencontainers.image.version="2.6.2-cpu-jupyter"
