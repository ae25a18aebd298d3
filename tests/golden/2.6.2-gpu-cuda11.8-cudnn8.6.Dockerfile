# stagecraft/paddle:2.6.2-gpu-cuda11.8-cudnn8.6, rendered by stagecraft from matrix.yaml (image group 'paddle-2.6-gpu').
# Build: DOCKER_BUILDKIT=1 docker build -f THIS_FILE -t stagecraft/paddle:2.6.2-gpu-cuda11.8-cudnn8.6 [--secret id=pip-ca,src=CA_BUNDLE] PROJECT_DIR

FROM docker.io/library/debian:bookworm-slim@sha256:7c7b2c966bc9ee8cedfeef67e0e279108992c77681fa595db4a9d65c06ccc587 AS base
ARG SOURCE_DATE_EPOCH
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
# Stood in for: apt counts these installed (stagecraft-stand-ins Provides them) and
# installs none of their files for a dependency; `apt-get install NAME` gets the real one.
#   libglx-mesa0: libglx0 Depends on it alone; it pulls Mesa's DRI drivers and LLVM (210 MB), which only a GL context loads (cv2 makes none)
RUN mkdir -p /tmp/stagecraft-stand-ins/DEBIAN \
 && printf '%s\n' 'Package: stagecraft-stand-ins' 'Version: 1' 'Architecture: all' \
      'Maintainer: stagecraft <stagecraft@localhost>' 'Priority: optional' \
      'Provides: libglx-mesa0' \
      'Description: Debian packages this image stands in for, with none of their files' \
      ' To have the real one: apt-get update && apt-get install PACKAGE.' \
      > /tmp/stagecraft-stand-ins/DEBIAN/control \
 && dpkg-deb --build /tmp/stagecraft-stand-ins /tmp/stagecraft-stand-ins.deb > /dev/null \
 && dpkg -i /tmp/stagecraft-stand-ins.deb > /dev/null \
 && rm -rf /tmp/stagecraft-stand-ins /tmp/stagecraft-stand-ins.deb /var/log/dpkg.log /var/lib/dpkg/*-old \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
# Packages, with why each is here:
#   ca-certificates: TLS roots for pip and the frameworks' downloads
#   libgomp1: OpenMP runtime the frameworks load at import
#   python3: the distro's Python is the one Python in the image
#   python3-venv: the framework lives in a virtual environment
#   tini: PID 1: reaps zombies, forwards signals
# Exactly the versions of matrix.lock (these and what they pull in), each .deb checked
# against the lock's SHA-256 before anything is installed.
RUN apt-get update \
 && printf '%s\n' \
      'ca-certificates 20230311+deb12u1 0d5f444f594e48c1e16a41d8fc628a09b24c658916a1274025c2330f2a802bed' \
      'libexpat1 2.5.0-1+deb12u2 2255e62fc22a86d2c544b8a3f516da9aee19383ad5742722ab4ce7f66a30dbc8' \
      'libgomp1 12.2.0-14+deb12u1 48fec46bda7f5b1638b9e959889bfbc20491247d402d120bb152687eb48143d7' \
      'libgssapi-krb5-2 1.20.1-2+deb12u5 d8b87aea91b956b416c01a28c44ff6228315ae3b73de40acddac3dc5043607d2' \
      'libk5crypto3 1.20.1-2+deb12u5 7b6e47d15c5c9cdcd456137533d8308aeba608a54cec73b28bd59bfc4b54cf06' \
      'libkeyutils1 1.6.3-2 cfac89e6a7a54ff3c6a4f843310e25efeddaa771baeae470bd98bd588c373563' \
      'libkrb5-3 1.20.1-2+deb12u5 c90801be09701af221b54dd502a59cb378b7284ff31e480738baca317d2f7653' \
      'libkrb5support0 1.20.1-2+deb12u5 8b9c05f2d8d461a10d657b118f572af5bf8fd6c8f93dcef81e852c5ab0f428ab' \
      'libncursesw6 6.4-4 98fa7a53dc565a38b65fb70422ad08001bf5361d8fbc74255280c329996a6bec' \
      'libnsl2 1.3.0-2 c0d83437fdb016cb289436f49f28a36be44b3e8f1f2498c7e3a095f709c0d6f8' \
      'libpython3-stdlib 3.11.2-1+b1 4e58891d5c951a1e360ed9eaa814413cb5e84deadce3f08e801ac680434c786e' \
      'libpython3.11-minimal 3.11.2-6+deb12u8 f3beaa03994ffedacf73c43a0843d53b062d347115d8af65bee2034552a4e6f9' \
      'libpython3.11-stdlib 3.11.2-6+deb12u8 890b3540dad8a1ccc0deeca025db735bcc82629a76adacbe3b50fcc06ed528ca' \
      'libreadline8 8.2-1.3 e02ebbd3701cf468dbf98d6d917fbe0325e881f07fe8b316150c8d2a64486e66' \
      'libsqlite3-0 3.40.1-2+deb12u2 a8d78b40e9b4e422224aeebfe0e4dfc243f6acf3532490b0c05480d4283d41e2' \
      'libssl3 3.0.20-1~deb12u2 89be24b41bff568ee6e7caf5680a3d808e80315ed92e407056ce0fa7a5bda025' \
      'libtirpc-common 1.3.3+ds-1 3e3ef129b4bf61513144236e15e1b4ec57fa5ae3dc8a72137abdbefb7a63af85' \
      'libtirpc3 1.3.3+ds-1 2a46d5a5e9486da11ffeff5740931740d6deae4f92cd6098df060dc5dff1e1c7' \
      'media-types 10.0.0 aaa46dcb3b39948ae2e0fdb72cfcb2f48c0b59f19785a3da8045c05eb19955dd' \
      'openssl 3.0.20-1~deb12u2 4d218561dc838de081de97f54584c4a29e77e26c7ed9fe3440d776d8e6071bf9' \
      'python3 3.11.2-1+b1 33f6dafbd1a6902d9063172ec7dbd4b2225e12009e0d7ec5c933a72c2f5f3b74' \
      'python3-distutils 3.11.2-3 a620b555f301860a08e30534c7e6f7d79818e5e1977bfec39a612e7003074318' \
      'python3-lib2to3 3.11.2-3 4e7f5e01e49a0622d10db3d0995666a6ead6a369cd127a996e9a4f9e91696a51' \
      'python3-minimal 3.11.2-1+b1 30f9618670e686d781afbfc713eb0830c29d2819e9cb2a0488800dad6bb99faa' \
      'python3-pip-whl 23.0.1+dfsg-1 cc373690a1cb469fb301b9fe0125048e3102f2e365d1b2d27cab091ec89fccdc' \
      'python3-setuptools-whl 66.1.1-1+deb12u2 0eb54da9f3d47e42a1be5dd8285def8bbc6e2556131b9c4ce3bd781dfc4b425a' \
      'python3-venv 3.11.2-1+b1 bc6c8b8c15ae53abfac54877fd2c830336112568f40ee57c75d5c78ebcf7f44a' \
      'python3.11 3.11.2-6+deb12u8 cd7b10c24281416a6acb22cd23ed7391c7dddd4a3d4d4a63d37faa786639b5de' \
      'python3.11-minimal 3.11.2-6+deb12u8 4aba533f7cc5e7b93b7ff24482840e96813f5bcde9cce028395b65a0d799ccee' \
      'python3.11-venv 3.11.2-6+deb12u8 1391d405ac12a1bbdd75d36a738ec410e5b01f9e065cc38974d9976a37b59c99' \
      'readline-common 8.2-1.3 69317523fe56429aa361545416ad339d138c1500e5a604856a80dd9074b4e35c' \
      'tini 0.19.0-1+b3 7d1947665fa40e55f218fefad773dc6de66458d0b39eaa292cdcadfc7c996632' \
      > /tmp/stagecraft-apt.lock \
 && while read -r p v _; do [ -n "$(apt-cache show "$p=$v" 2> /dev/null)" ] \
      || { echo "stagecraft: $p $v is locked but the mirror no longer serves it; run \`build.py lock --upgrade\`" >&2; exit 1; }; \
    done < /tmp/stagecraft-apt.lock \
 && apt-get install -y --no-install-recommends --download-only \
      'ca-certificates=20230311+deb12u1' \
      'libexpat1=2.5.0-1+deb12u2' \
      'libgomp1=12.2.0-14+deb12u1' \
      'libgssapi-krb5-2=1.20.1-2+deb12u5' \
      'libk5crypto3=1.20.1-2+deb12u5' \
      'libkeyutils1=1.6.3-2' \
      'libkrb5-3=1.20.1-2+deb12u5' \
      'libkrb5support0=1.20.1-2+deb12u5' \
      'libncursesw6=6.4-4' \
      'libnsl2=1.3.0-2' \
      'libpython3-stdlib=3.11.2-1+b1' \
      'libpython3.11-minimal=3.11.2-6+deb12u8' \
      'libpython3.11-stdlib=3.11.2-6+deb12u8' \
      'libreadline8=8.2-1.3' \
      'libsqlite3-0=3.40.1-2+deb12u2' \
      'libssl3=3.0.20-1~deb12u2' \
      'libtirpc-common=1.3.3+ds-1' \
      'libtirpc3=1.3.3+ds-1' \
      'media-types=10.0.0' \
      'openssl=3.0.20-1~deb12u2' \
      'python3=3.11.2-1+b1' \
      'python3-distutils=3.11.2-3' \
      'python3-lib2to3=3.11.2-3' \
      'python3-minimal=3.11.2-1+b1' \
      'python3-pip-whl=23.0.1+dfsg-1' \
      'python3-setuptools-whl=66.1.1-1+deb12u2' \
      'python3-venv=3.11.2-1+b1' \
      'python3.11=3.11.2-6+deb12u8' \
      'python3.11-minimal=3.11.2-6+deb12u8' \
      'python3.11-venv=3.11.2-6+deb12u8' \
      'readline-common=8.2-1.3' \
      'tini=0.19.0-1+b3' \
 && for d in /var/cache/apt/archives/*.deb; do \
      [ -e "$d" ] || continue; \
      read -r p v <<< "$(dpkg-deb --showformat="\${Package} \${Version}" -W "$d")"; \
      got="$(sha256sum "$d" | cut -d' ' -f1)"; \
      want="$(awk -v p="$p" -v v="$v" "\$1 == p && \$2 == v { print \$3 }" /tmp/stagecraft-apt.lock)"; \
      [ "$got" = "$want" ] || { echo "stagecraft: hash mismatch for $p $v: lock sha256:${want:-none}, downloaded sha256:$got" >&2; exit 1; }; \
    done \
 && apt-get install -y --no-install-recommends \
      'ca-certificates=20230311+deb12u1' \
      'libexpat1=2.5.0-1+deb12u2' \
      'libgomp1=12.2.0-14+deb12u1' \
      'libgssapi-krb5-2=1.20.1-2+deb12u5' \
      'libk5crypto3=1.20.1-2+deb12u5' \
      'libkeyutils1=1.6.3-2' \
      'libkrb5-3=1.20.1-2+deb12u5' \
      'libkrb5support0=1.20.1-2+deb12u5' \
      'libncursesw6=6.4-4' \
      'libnsl2=1.3.0-2' \
      'libpython3-stdlib=3.11.2-1+b1' \
      'libpython3.11-minimal=3.11.2-6+deb12u8' \
      'libpython3.11-stdlib=3.11.2-6+deb12u8' \
      'libreadline8=8.2-1.3' \
      'libsqlite3-0=3.40.1-2+deb12u2' \
      'libssl3=3.0.20-1~deb12u2' \
      'libtirpc-common=1.3.3+ds-1' \
      'libtirpc3=1.3.3+ds-1' \
      'media-types=10.0.0' \
      'openssl=3.0.20-1~deb12u2' \
      'python3=3.11.2-1+b1' \
      'python3-distutils=3.11.2-3' \
      'python3-lib2to3=3.11.2-3' \
      'python3-minimal=3.11.2-1+b1' \
      'python3-pip-whl=23.0.1+dfsg-1' \
      'python3-setuptools-whl=66.1.1-1+deb12u2' \
      'python3-venv=3.11.2-1+b1' \
      'python3.11=3.11.2-6+deb12u8' \
      'python3.11-minimal=3.11.2-6+deb12u8' \
      'python3.11-venv=3.11.2-6+deb12u8' \
      'readline-common=8.2-1.3' \
      'tini=0.19.0-1+b3' \
 && rm -f /tmp/stagecraft-apt.lock \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
           /var/log/alternatives.log /var/cache/ldconfig/aux-cache /var/cache/debconf/*-old \
           /var/lib/dpkg/*-old \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
# A non-root default user (uid 1000). Home and /workspace belong to group 0 and are
# group-writable, so `docker run --user <any uid>` (gid 0 by default) works too.
RUN groupadd --gid 1000 worker \
 && useradd --uid 1000 --gid 1000 --groups 0 --home-dir /home/worker --create-home \
            --shell /bin/bash worker \
 && mkdir -p /workspace \
 && chown 1000:0 /workspace /home/worker \
 && chmod 2775 /workspace /home/worker \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
ENV HOME=/home/worker
LABEL io.stagecraft.os="debian" \
      io.stagecraft.os.version="12" \
      io.stagecraft.python="3.11"

FROM base AS cuda
ARG SOURCE_DATE_EPOCH
# cuda: CUDA 11.8 runtime libraries and cuDNN 8.6.0, from pypi.
# Framework-independent: every image with these components shares this stage. Laid out
# as tools expect: /usr/local/cuda-11.8/lib64, /usr/local/cuda -> it, the loader cache, and
# unversioned names (libcudnn.so) beside the versioned ones (libcudnn.so.8), since
# frameworks dlopen the unversioned names. No devel toolkit, no driver libraries: the
# host's driver (libcuda, libnvidia-ml) is mounted by the NVIDIA container runtime.
# pipefail (the base stage sets it too): a failing step inside a pipe fails the build.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# NVIDIA's wheels are installed as Python distributions into /opt/venv, the
# environment the runtime stage extends: a framework that requires them (Paddle 3.x,
# PyTorch) finds them installed, and pip installs no CUDA library a second time. The
# libraries stay where the wheels put them (site-packages/nvidia/*/lib, where the
# frameworks' own RPATHs look); /usr/local/cuda-11.8/lib64 holds links to them.
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && umask 0002 \
 && { [ -x /opt/venv/bin/python ] || { python3 -m venv --without-pip /opt/venv && /opt/venv/bin/python3 -m ensurepip --upgrade --default-pip; }; } \
 && printf '%s\n' \
      'nvidia-cublas-cu11==11.11.3.6 --hash=sha256:39fb40e8f486dd8a2ddb8fdeefe1d5b28f5b99df01c87ab3676f057a74a5a6f3 --hash=sha256:60252822adea5d0b10cd990a7dc7bedf7435f30ae40083c7a624a85a43225abc' \
      'nvidia-cuda-cupti-cu11==11.8.87 --hash=sha256:0e50c707df56c75a2c0703dc6b886f3c97a22f37d6f63839f75b7418ba672a8d --hash=sha256:4191a17913a706b5098681280cd089cd7d8d3df209a6f5cb79384974a96d24f2' \
      'nvidia-cuda-nvrtc-cu11==11.8.89 --hash=sha256:1f27d67b0f72902e9065ae568b4f6268dfe49ba3ed269c9a3da99bb86d1d2008 --hash=sha256:a8d02f3cba345be56b1ffc3e74d8f61f02bb758dd31b0f20e12277a5a244f756' \
      'nvidia-cuda-runtime-cu11==11.8.89 --hash=sha256:92d04069a987e1fbc9213f8376d265df0f7bb42617d44f5eda1f496acea7f2d1 --hash=sha256:f587bd726eb2f7612cf77ce38a2c1e65cf23251ff49437f6161ce0d647f64f7c' \
      'nvidia-cudnn-cu11==8.6.0.163 --hash=sha256:add207b5fb149cfa02919b8f413364ff4ed348a202f6ae3d7922ae5303fa38a3' \
      'nvidia-cufft-cu11==10.9.0.58 --hash=sha256:222f9da70c80384632fd6035e4c3f16762d64ea7a843829cb278f98b3cb7dd81 --hash=sha256:e21037259995243cc370dd63c430d77ae9280bedb68d5b5a18226bfc92e5d748' \
      'nvidia-curand-cu11==10.3.0.86 --hash=sha256:ac439548c88580269a1eb6aeb602a5aed32f0dbb20809a31d9ed7d01d77f6bf5 --hash=sha256:cd4cffbf78bb06580206b4814d5dc696d1161c902aae37b2bba00056832379e6' \
      'nvidia-cusolver-cu11==11.4.1.48 --hash=sha256:ca538f545645b7e6629140786d3127fe067b3d5a085bd794cde5bfe877c8926f --hash=sha256:ea9fb1ad8c644ca9ed55af13cc39af3b7ba4c3eb5aef18471fe1fe77d94383cb' \
      'nvidia-cusparse-cu11==11.7.5.86 --hash=sha256:4ae709fe78d3f23f60acaba8c54b8ad556cf16ca486e0cc1aa92dca7555d2d2b --hash=sha256:8d7cf1628fd8d462b5d2ba6678fae34733a48ecb80495b9c68672ec6a6dde5ef' \
      'nvidia-nvjpeg-cu11==11.9.0.86 --hash=sha256:124e204cb7520b9ec7456d879ef96f80a7821c3c64b0e6c89d70d84825036b3c --hash=sha256:df47fa7ad48694f8ee6eca5c184f1cf916866da1e57516bc0d382f9b2212ca18' \
      'nvidia-nvtx-cu11==11.8.86 --hash=sha256:890656d8bd9b4e280231c832e1f0d03459200ba4824ddda3dcb59b1e1989b9f5 --hash=sha256:979f5b2aef5da164c5c53c64c85c3dfa61b8b4704f4f963bb568bf98fa8472e8' \
      > /tmp/wheels.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps --only-binary=:all: --require-hashes \
      -r /tmp/wheels.txt \
 && rm -f /tmp/wheels.txt \
 && /opt/venv/bin/pip check \
 && umask 0022 \
 && mkdir -p /usr/local/cuda-11.8/lib64 \
 && site=/opt/venv/lib/python3.11/site-packages \
 && cut -d, -f1 "$site"/nvidia_*.dist-info/RECORD | grep -E '(^|/)lib/lib[^/]*[.]so[.0-9]*$' \
    | while read -r rel; do \
      f="$site/$rel"; l="/usr/local/cuda-11.8/lib64/${rel##*/}"; \
      if [ ! -L "$l" ]; then ln -s "$f" "$l"; \
      elif [ "$(readlink "$l")" != "$f" ]; then echo "two wheels ship ${rel##*/}: $f and $(readlink "$l")" >&2; exit 1; fi; \
    done \
 && for f in /usr/local/cuda-11.8/lib64/lib*.so.*; do \
      link="${f%%.so.*}.so"; [ -e "$link" ] || ln -s "${f##*/}" "$link"; \
    done \
 && ln -s /usr/local/cuda-11.8 /usr/local/cuda \
 && echo /usr/local/cuda/lib64 > /etc/ld.so.conf.d/000-stagecraft-cuda.conf \
 && ldconfig \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
# NVIDIA container runtime settings. NVIDIA_REQUIRE_CUDA asks only for the CUDA major's
# minor-version-compatibility floor: the hook then starts the container on any driver
# that can run it at all, and the entrypoint checks the exact need and falls back to CPU
# with a reason instead of the container being refused.
ENV CUDA_HOME=/usr/local/cuda \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=11.0"
LABEL io.stagecraft.cuda="11.8" \
      io.stagecraft.cudnn="8.6.0" \
      io.stagecraft.cuda.min-driver="520.61.05" \
      io.stagecraft.cuda.min-driver-compat="450.80.02"

FROM cuda AS accel
ARG SOURCE_DATE_EPOCH
# accel: accelerator libraries over CUDA 11.8: NCCL 2.15.5.
# Framework-independent, from NVIDIA's wheels on PyPI, installed as Python distributions
# into /opt/venv beside the CUDA wheels (nothing of those moves) and linked into
# /usr/local/cuda-11.8/lib64.
# pipefail (the base stage sets it too): a failing step inside a pipe fails the build.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# System libraries these load:
#   ibverbs-providers: the verbs drivers (libmlx5.so.1 among them)
#   libibverbs1: InfiniBand/RoCE verbs for NCCL and cuFile RDMA
#   librdmacm1: RDMA connection manager cuFile RDMA links
RUN apt-get update \
 && printf '%s\n' \
      'ibverbs-providers 44.0-2 3c9907fd96a4ae7effb5faa178bd3648344a521f6bcca2c23c9f2dd214cf1192' \
      'libibverbs1 44.0-2 35054815259fee46173240254246d03b673a5cd5c528aaac96fd15ac428a8d59' \
      'libnl-3-200 3.7.0-0.2+b1 d1fc3e9eb8e79b4c96b0a64c3d8c9e068ae2f665cab71bd19f417ffd0453a890' \
      'libnl-route-3-200 3.7.0-0.2+b1 0fdcc425ae2982788c085c76a7cb0eda3e3db99d41bd1ce56082ee18e9f1e21f' \
      'librdmacm1 44.0-2 16b18625834371d023b81477823074ea0d34c478d58dbef3f01107984f47d034' \
      > /tmp/stagecraft-apt.lock \
 && while read -r p v _; do [ -n "$(apt-cache show "$p=$v" 2> /dev/null)" ] \
      || { echo "stagecraft: $p $v is locked but the mirror no longer serves it; run \`build.py lock --upgrade\`" >&2; exit 1; }; \
    done < /tmp/stagecraft-apt.lock \
 && apt-get install -y --no-install-recommends --download-only \
      'ibverbs-providers=44.0-2' \
      'libibverbs1=44.0-2' \
      'libnl-3-200=3.7.0-0.2+b1' \
      'libnl-route-3-200=3.7.0-0.2+b1' \
      'librdmacm1=44.0-2' \
 && for d in /var/cache/apt/archives/*.deb; do \
      [ -e "$d" ] || continue; \
      read -r p v <<< "$(dpkg-deb --showformat="\${Package} \${Version}" -W "$d")"; \
      got="$(sha256sum "$d" | cut -d' ' -f1)"; \
      want="$(awk -v p="$p" -v v="$v" "\$1 == p && \$2 == v { print \$3 }" /tmp/stagecraft-apt.lock)"; \
      [ "$got" = "$want" ] || { echo "stagecraft: hash mismatch for $p $v: lock sha256:${want:-none}, downloaded sha256:$got" >&2; exit 1; }; \
    done \
 && apt-get install -y --no-install-recommends \
      'ibverbs-providers=44.0-2' \
      'libibverbs1=44.0-2' \
      'libnl-3-200=3.7.0-0.2+b1' \
      'libnl-route-3-200=3.7.0-0.2+b1' \
      'librdmacm1=44.0-2' \
 && rm -f /tmp/stagecraft-apt.lock \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
           /var/log/alternatives.log /var/cache/ldconfig/aux-cache /var/cache/debconf/*-old \
           /var/lib/dpkg/*-old \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && umask 0002 \
 && { [ -x /opt/venv/bin/python ] || { python3 -m venv --without-pip /opt/venv && /opt/venv/bin/python3 -m ensurepip --upgrade --default-pip; }; } \
 && printf '%s\n' \
      'nvidia-nccl-cu11==2.15.5 --hash=sha256:61444d28fe90ec02d6198a08c24fba249b4d34e924b597bb260c54f8951a4529' \
      > /tmp/wheels.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps --only-binary=:all: --require-hashes \
      -r /tmp/wheels.txt \
 && rm -f /tmp/wheels.txt \
 && /opt/venv/bin/pip check \
 && umask 0022 \
 && mkdir -p /usr/local/cuda-11.8/lib64 \
 && site=/opt/venv/lib/python3.11/site-packages \
 && cut -d, -f1 "$site"/nvidia_*.dist-info/RECORD | grep -E '(^|/)lib/lib[^/]*[.]so[.0-9]*$' \
    | while read -r rel; do \
      f="$site/$rel"; l="/usr/local/cuda-11.8/lib64/${rel##*/}"; \
      if [ ! -L "$l" ]; then ln -s "$f" "$l"; \
      elif [ "$(readlink "$l")" != "$f" ]; then echo "two wheels ship ${rel##*/}: $f and $(readlink "$l")" >&2; exit 1; fi; \
    done \
 && for f in /usr/local/cuda-11.8/lib64/lib*.so.*; do \
      link="${f%%.so.*}.so"; [ -e "$link" ] || ln -s "${f##*/}" "$link"; \
    done \
 && ldconfig \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
LABEL io.stagecraft.nccl="2.15.5"

FROM accel AS runtime
ARG SOURCE_DATE_EPOCH
# runtime: paddlepaddle-gpu 2.6.2 (nvidia) in a
# virtual environment on the distro's Python 3.11.
# System libraries this framework build loads, and those the frameworks' common toolkits
# load, so that installing one (`pip install paddleocr`) works as it is. A layer of its
# own: `docker history` shows its size. libGL.so.1 comes without Mesa's GLX vendor (the
# base stage stands in for it: matrix.yaml apt_stand_ins), so no DRI drivers or LLVM.
#   libgl1: libGL.so.1, which OpenCV's cv2 module links (PaddleOCR, PaddleDetection import cv2)
#   libglib2.0-0: libglib-2.0.so.0 and libgthread-2.0.so.0, which OpenCV's cv2 module links
# (The shell is the base stage's bash with pipefail; hadolint reads each FROM on its own.)
# hadolint ignore=DL4006,SC3011
RUN apt-get update \
 && printf '%s\n' \
      'libbsd0 0.11.7-2 bb31cc8b40f962a85b2cec970f7f79cc704a1ae4bad24257a822055404b2c60b' \
      'libgl1 1.6.0-1 6f89b1702c48e9a2437bb3c1ffac8e1ab2d828fc28b3d14b2eecd4cc19b2c790' \
      'libglib2.0-0 2.74.6-2+deb12u9 7ff85197685d89e150e342b29a59aab1beee400050ba7da73de81cd999ffee5a' \
      'libglvnd0 1.6.0-1 b6da5b153dd62d8b5e5fbe25242db1fc05c068707c365db49abda8c2427c75f8' \
      'libglx0 1.6.0-1 95f568df73dedf43ae66834a75502112e0d4f3ad7124f3dbfa790b739383b896' \
      'libx11-6 2:1.8.4-2+deb12u2 d88c973e79fd9b65838d77624142952757e47a6eb1a58602acf0911cf35989f4' \
      'libx11-data 2:1.8.4-2+deb12u2 987a848aeb1c358e4186368871b0526f10bb14c6b53214ab3bf8b69abb830191' \
      'libxau6 1:1.0.9-1 679db1c4579ec7c61079adeaae8528adeb2e4bf5465baa6c56233b995d714750' \
      'libxcb1 1.15-1 fdc61332a3892168f3cc9cfa1fe9cf11a91dc3e0acacbc47cbc50ebaa234cc71' \
      'libxdmcp6 1:1.1.2-3 ecb8536f5fb34543b55bb9dc5f5b14c9dbb4150a7bddb3f2287b7cab6e9d25ef' \
      > /tmp/stagecraft-apt.lock \
 && while read -r p v _; do [ -n "$(apt-cache show "$p=$v" 2> /dev/null)" ] \
      || { echo "stagecraft: $p $v is locked but the mirror no longer serves it; run \`build.py lock --upgrade\`" >&2; exit 1; }; \
    done < /tmp/stagecraft-apt.lock \
 && apt-get install -y --no-install-recommends --download-only \
      'libbsd0=0.11.7-2' \
      'libgl1=1.6.0-1' \
      'libglib2.0-0=2.74.6-2+deb12u9' \
      'libglvnd0=1.6.0-1' \
      'libglx0=1.6.0-1' \
      'libx11-6=2:1.8.4-2+deb12u2' \
      'libx11-data=2:1.8.4-2+deb12u2' \
      'libxau6=1:1.0.9-1' \
      'libxcb1=1.15-1' \
      'libxdmcp6=1:1.1.2-3' \
 && for d in /var/cache/apt/archives/*.deb; do \
      [ -e "$d" ] || continue; \
      read -r p v <<< "$(dpkg-deb --showformat="\${Package} \${Version}" -W "$d")"; \
      got="$(sha256sum "$d" | cut -d' ' -f1)"; \
      want="$(awk -v p="$p" -v v="$v" "\$1 == p && \$2 == v { print \$3 }" /tmp/stagecraft-apt.lock)"; \
      [ "$got" = "$want" ] || { echo "stagecraft: hash mismatch for $p $v: lock sha256:${want:-none}, downloaded sha256:$got" >&2; exit 1; }; \
    done \
 && apt-get install -y --no-install-recommends \
      'libbsd0=0.11.7-2' \
      'libgl1=1.6.0-1' \
      'libglib2.0-0=2.74.6-2+deb12u9' \
      'libglvnd0=1.6.0-1' \
      'libglx0=1.6.0-1' \
      'libx11-6=2:1.8.4-2+deb12u2' \
      'libx11-data=2:1.8.4-2+deb12u2' \
      'libxau6=1:1.0.9-1' \
      'libxcb1=1.15-1' \
      'libxdmcp6=1:1.1.2-3' \
 && rm -f /tmp/stagecraft-apt.lock \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
           /var/log/alternatives.log /var/cache/ldconfig/aux-cache /var/cache/debconf/*-old \
           /var/lib/dpkg/*-old \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# Users extend this environment as they are (the default user, any uid in group 0, a
# Dockerfile without `USER root`): it is root's, group 0, group-writable, directories
# setgid (fix-permissions, as jupyter/docker-stacks do, installed by the step below),
# while the system stays root's.
# The framework extends the environment the stages below made, if any: NVIDIA's wheels
# that the cuda and accel stages installed there are requirements pip finds satisfied
# (the lock leaves them out of this stage's set; without a lock their versions are
# constraints, `pip freeze`), so pip installs no CUDA library a second time and moves
# none; matrix.yaml says so first (compatibility rule framework-wheels). A library the
# framework's own packages bundle under the soname of one the stage provides is replaced
# by a link to the stage's (a process loads one library per soname anyway). The SASS and
# PTX of the framework's own binaries are read with NVIDIA's cuobjdump (build_tools;
# fetched, hash-checked where locked, and removed here).
# The framework's pins protect it: /opt/stagecraft/constraints.txt holds every pin the
# matrix (or its lock) resolved for it (the framework, its dependencies, the entrypoint's
# needs, the stages' NVIDIA wheels), and the venv's own pip.conf makes every pip of this
# environment honour them, so installing an app that would move one fails with pip's
# conflict message instead of breaking the framework. On purpose: PIP_CONSTRAINT=/dev/null
# (or a file of your own) replaces them.
# With a lock: exactly matrix.lock's distributions, each checked against its SHA-256;
# nothing resolved here.
# A CA bundle for TLS-intercepting proxies arrives as a BuildKit secret: it is read
# during this step only and never lands in a layer, the history or a label.
RUN --mount=type=secret,id=pip-ca,required=false \
    --mount=type=bind,source=entrypoint/fix-permissions,target=/dev/stagecraft-context/entrypoint/fix-permissions \
    --mount=type=bind,source=probes/sonames.py,target=/dev/stagecraft-context/probes/sonames.py \
    --mount=type=bind,source=probes/fatbin.py,target=/dev/stagecraft-context/probes/fatbin.py \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && install -m 0755 /dev/stagecraft-context/entrypoint/fix-permissions /usr/local/bin/fix-permissions \
 && { [ -x /opt/venv/bin/python ] || { python3 -m venv --without-pip /opt/venv && /opt/venv/bin/python3 -m ensurepip --upgrade --default-pip; }; } \
 && mkdir -p /opt/stagecraft /tmp/stagecraft-build \
 && /opt/venv/bin/pip freeze > /tmp/stage-pins.txt \
 && printf '%s\n' \
      'anyio==4.16.0 --hash=sha256:c66ae634e0b8228396b801741beb3294326d4b6102f7bba4041c0dfb58c29026' \
      'astor==0.8.1 --hash=sha256:070a54e890cefb5b3739d19f30f5a5ec840ffc9c50ffa7d23cc9fc1a38ebbfc5' \
      'certifi==2026.10.19.post1 --hash=sha256:1324c476b4811eff41a8bc2122cd0bbd4d9c7234c725446d99ab1612b3a7fdd2' \
      'decorator==5.3.1 --hash=sha256:f47fe6fdbd2edd623ecfe36875d37aba411624e2670dd395dddae1358689bb3c' \
      'h11==0.16.0 --hash=sha256:63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86' \
      'httpcore==1.0.9 --hash=sha256:2d400746a40668fc9dec9810239072b40b4484b640a8c38fd654a024c7a1bf55' \
      'httpx==0.28.1 --hash=sha256:d909fcccc110f8c7faf814ca82a9a4d816bc5a6dbfea25d6591d6985b8ba59ad' \
      'idna==3.20 --hash=sha256:ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c' \
      'numpy==1.26.4 --hash=sha256:666dbfb6ec68962c033a450943ded891bed2d54e6755e35e5835d63f4f6931d5' \
      'nvidia-ml-py==13.580.82 --hash=sha256:4361db337b0c551e2d101936dae2e9a60f957af26818e8c0c3a1f32b8db8d0a7' \
      'opt-einsum==3.3.0 --hash=sha256:2455e59e3947d3c275477df7f5205b30635e266fe6dc300e3d9f9646bfcea147' \
      'paddlepaddle-gpu==2.6.2 --hash=sha256:29694686383d935fb0966dd393f9af32a87d2d6674c8603583df5b08f9457f45' \
      'pillow==13.0.0 --hash=sha256:a625df9a2a5597fa5e5266e01aefc82604bb85d291e3547981e863560d75da6c' \
      'protobuf==3.20.2 --hash=sha256:c9cdf251c582c16fd6a9f5e95836c90828d51b0069ad22f463761d27c6c19019' \
      'typing-extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8' \
      > /tmp/requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps \
      -r /tmp/requirements.txt \
 && /opt/venv/bin/pip check \
 && rm -f /tmp/requirements.txt \
 && printf '%s\n' \
      'anyio==4.16.0' \
      'astor==0.8.1' \
      'certifi==2026.10.19.post1' \
      'decorator==5.3.1' \
      'h11==0.16.0' \
      'httpcore==1.0.9' \
      'httpx==0.28.1' \
      'idna==3.20' \
      'numpy==1.26.4' \
      'nvidia-ml-py==13.580.82' \
      'opt-einsum==3.3.0' \
      'paddlepaddle-gpu==2.6.2' \
      'pillow==13.0.0' \
      'protobuf==3.20.2' \
      'typing-extensions==4.16.0' \
      > /opt/stagecraft/constraints.txt \
 && cat /tmp/stage-pins.txt >> /opt/stagecraft/constraints.txt \
 && rm -f /tmp/stage-pins.txt \
 && printf '%s\n' '[global]' 'constraint = /opt/stagecraft/constraints.txt' > /opt/venv/pip.conf \
 && if [ -d /usr/local/cuda/lib64 ]; then \
      /opt/venv/bin/python -I /dev/stagecraft-context/probes/sonames.py link /usr/local/cuda/lib64 /opt/venv \
        > /opt/stagecraft/linked-libraries.json; fi \
 && printf '%s\n' \
      'nvidia-cuda-cuobjdump==13.4.92 --hash=sha256:fb72ca80d0cdd8f5e8e232ce17d3c5aa2a37c3153bb8ef4e010010ed4fdef6c5' \
      > /tmp/stagecraft-build/tools.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps --only-binary=:all: --require-hashes \
      --target /tmp/stagecraft-build/tools -r /tmp/stagecraft-build/tools.txt \
 && /opt/venv/bin/python -I /dev/stagecraft-context/probes/fatbin.py measure \
      --cuobjdump "$(find /tmp/stagecraft-build/tools -name cuobjdump -type f)" \
      --root /opt/venv/lib/python3.11/site-packages --out /opt/stagecraft/measured-kernels.json \
      'paddle/libs/libphi.so' \
      'paddle/base/libpaddle.so' \
 && rm -rf /tmp/stagecraft-build \
 && check_home="$(mktemp -d)" \
 && HOME="$check_home" TMPDIR="$check_home" /opt/venv/bin/python -c 'import paddle' \
 && rm -rf "$check_home" /tmp/.cache \
 && fix-permissions /opt/venv \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
# (The import check above runs with a scratch HOME and TMPDIR: whatever the framework
# caches at import must not land root-owned in the user's home or /tmp.)
# The hardware-probing entrypoint and what it knows about this image (/etc/stagecraft/image.json:
# the matrix's facts, with the SASS and PTX measured above from the framework's own
# binaries where it names them; beside it its parse by this Python, so that no start
# imports json: entrypoint/imagefile.py). Byte-compiled here: it runs as any uid and cannot write
# __pycache__, so it would otherwise compile its modules from source at every start
# (15-30 ms of a 40-60 ms budget).
# stagecraft_device (`paddle.set_device(device())`, `python -m stagecraft_device`) is
# linked into the venv's site-packages; stagecraft-health is the HEALTHCHECK below.
# Copied from the build context by this step (directories 0755, files as they are).
RUN --mount=type=bind,source=entrypoint,target=/dev/stagecraft-context/entrypoint \
    --mount=type=bind,source=probes,target=/dev/stagecraft-context/probes \
    mkdir -p /etc/stagecraft /opt/stagecraft \
 && cp -R --preserve=mode /dev/stagecraft-context/entrypoint /dev/stagecraft-context/probes /opt/stagecraft/ \
 && find /opt/stagecraft/entrypoint /opt/stagecraft/probes -type d -exec chmod 0755 {} + \
 && printf '%s\n' '{"components":{"cuda":"11.8","cudnn":"8.6.0","min_driver":"520.61.05","min_driver_compat":"450.80.02","nccl":"2.15.5","os":"debian 12","python":"3.11"},"device":"nvidia","device_strings":{"amd":"gpu:{index}","cpu":"cpu","mlu":"mlu:{index}","npu":"npu:{index}","nvidia":"gpu:{index}","xpu":"xpu:{index}"},"framework":{"name":"paddle-2.6.2-gpu","package":"paddlepaddle-gpu","version":"2.6.2"},"kernel_sets":[{"description":"native kernels for the compute capabilities the wheel ships","device":"nvidia","env":{},"name":"cuda","requires":{"cuda":"11.8","min_driver":"520.61.05","min_driver_compat":"450.80.02","ptx":[],"sass":["6.1","7.0","7.5","8.0","8.6"]}},{"description":"no usable GPU; MKL and oneDNN dispatch on their own (VNNI, BF16, AMX included)","device":"cpu","name":"cpu-avx512","requires":{"cpu_flags":["avx512f","avx512bw","avx512vl"]}},{"description":"no usable GPU; AVX2 and FMA kernels","device":"cpu","isa_cap":"avx2","name":"cpu-avx2","requires":{"cpu_flags":["avx2","fma"]}},{"description":"no usable GPU; the wheel\u0027s floor (-mavx)","device":"cpu","isa_cap":"avx","name":"cpu-avx","requires":{"cpu_flags":["avx"]}}],"schema":1}' > /etc/stagecraft/image.json \
 && /opt/venv/bin/python -I /opt/stagecraft/probes/fatbin.py apply /opt/stagecraft/measured-kernels.json /etc/stagecraft/image.json \
 && /opt/venv/bin/python3 -I /opt/stagecraft/entrypoint/imagefile.py /etc/stagecraft/image.json \
 && ln -s /opt/stagecraft/entrypoint/stagecraft-report /usr/local/bin/stagecraft-report \
 && purelib="$(/opt/venv/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
 && ln -s /opt/stagecraft/entrypoint/stagecraft_device.py "$purelib/stagecraft_device.py" \
 && /opt/venv/bin/python3 -m compileall -q /opt/stagecraft "$purelib/stagecraft_device.py" \
 && fix-permissions /opt/venv \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
# New files of a non-root user group-writable (umask 0002), so any uid in group 0 can
# change what another installed: the entrypoint sets it for `docker run` (and Jupyter, and
# its kernels), this file for non-interactive bash (a derived Dockerfile's RUN steps).
ENV BASH_ENV=/opt/stagecraft/entrypoint/bash-env
LABEL io.stagecraft.framework="paddlepaddle-gpu" \
      io.stagecraft.framework.version="2.6.2" \
      io.stagecraft.cuda.sass="6.1 7.0 7.5 8.0 8.6" \
      io.stagecraft.cuda.ptx="" \
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
LABEL io.stagecraft.matrix.group="paddle-2.6-gpu" \
      io.stagecraft.matrix.selection="base=debian12,cuda=cuda11.8-cudnn8.6,accel=nccl2.15-cu11,framework=paddle-2.6.2-gpu" \
      org.opencontainers.image.created="1970-01-01T00:00:00Z" \
      org.opencontainers.image.description="paddlepaddle-gpu 2.6.2 (nvidia) on debian 12, Python 3.11" \
      org.opencontainers.image.ref.name="2.6.2-gpu-cuda11.8-cudnn8.6" \
      org.opencontainers.image.revision="0000000000000000000000000000000000000000" \
      org.opencontainers.image.source="https://github.com/stagecraft/stagecraft" \
      org.opencontainers.image.title="stagecraft/paddle:2.6.2-gpu-cuda11.8-cudnn8.6" \
      org.opencontainers.image.vendor="stagecraft" \
      org.opencontainers.image.version="2.6.2-gpu-cuda11.8-cudnn8.6"
