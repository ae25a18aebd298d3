# stagecraft/paddle:torch-2.10.0-gpu-cuda12.8, rendered by stagecraft from matrix.yaml (image group 'torch-gpu').
# Build: DOCKER_BUILDKIT=1 docker build -f THIS_FILE -t stagecraft/paddle:torch-2.10.0-gpu-cuda12.8 [--secret id=pip-ca,src=CA_BUNDLE] PROJECT_DIR

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
# cuda: CUDA 12.8 runtime libraries and cuDNN 9.10.2, from pypi.
# Framework-independent: every image with these components shares this stage. Laid out
# as tools expect: /usr/local/cuda-12.8/lib64, /usr/local/cuda -> it, the loader cache, and
# unversioned names (libcudnn.so) beside the versioned ones (libcudnn.so.8), since
# frameworks dlopen the unversioned names. No devel toolkit, no driver libraries: the
# host's driver (libcuda, libnvidia-ml) is mounted by the NVIDIA container runtime.
# pipefail (the base stage sets it too): a failing step inside a pipe fails the build.
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# NVIDIA's wheels are installed as Python distributions into /opt/venv, the
# environment the runtime stage extends: a framework that requires them (Paddle 3.x,
# PyTorch) finds them installed, and pip installs no CUDA library a second time. The
# libraries stay where the wheels put them (site-packages/nvidia/*/lib, where the
# frameworks' own RPATHs look); /usr/local/cuda-12.8/lib64 holds links to them.
RUN --mount=type=secret,id=pip-ca,required=false \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && umask 0002 \
 && { [ -x /opt/venv/bin/python ] || { python3 -m venv --without-pip /opt/venv && /opt/venv/bin/python3 -m ensurepip --upgrade --default-pip; }; } \
 && printf '%s\n' \
      'nvidia-cublas-cu12==12.8.4.1 --hash=sha256:8ac4e771d5a348c551b2a426eda6193c19aa630236b418086020df5ba9667142' \
      'nvidia-cuda-cupti-cu12==12.8.90 --hash=sha256:ea0cb07ebda26bb9b29ba82cda34849e73c166c18162d3913575b0c9db9a6182' \
      'nvidia-cuda-nvrtc-cu12==12.8.93 --hash=sha256:a7756528852ef889772a84c6cd89d41dfa74667e24cca16bb31f8f061e3e9994' \
      'nvidia-cuda-runtime-cu12==12.8.90 --hash=sha256:adade8dcbd0edf427b7204d480d6066d33902cab2a4707dcfc48a2d0fd44ab90' \
      'nvidia-cudnn-cu12==9.10.2.21 --hash=sha256:949452be657fa16687d0930933f032835951ef0892b37d2d53824d1a84dc97a8' \
      'nvidia-cufft-cu12==11.3.3.83 --hash=sha256:4d2dd21ec0b88cf61b62e6b43564355e5222e4a3fb394cac0db101f2dd0d4f74' \
      'nvidia-cufile-cu12==1.13.1.3 --hash=sha256:1d069003be650e131b21c932ec3d8969c1715379251f8d23a1860554b1cb24fc' \
      'nvidia-curand-cu12==10.3.9.90 --hash=sha256:b32331d4f4df5d6eefa0554c565b626c7216f87a06a4f56fab27c3b68a830ec9' \
      'nvidia-cusolver-cu12==11.7.3.90 --hash=sha256:4376c11ad263152bd50ea295c05370360776f8c3427b30991df774f9fb26c450' \
      'nvidia-cusparse-cu12==12.5.8.93 --hash=sha256:1ec05d76bbbd8b61b06a80e1eaf8cf4959c3d4ce8e711b65ebd0443bb0ebb13b' \
      'nvidia-cusparselt-cu12==0.7.1 --hash=sha256:f1bb701d6b930d5a7cea44c19ceb973311500847f81b634d802b7b539dc55623' \
      'nvidia-nvjitlink-cu12==12.8.93 --hash=sha256:81ff63371a7ebd6e6451970684f916be2eab07321b73c9d244dc2b4da7f73b88' \
      'nvidia-nvtx-cu12==12.8.90 --hash=sha256:5b17e2001cc0d751a5bc2c6ec6d26ad95913324a4adb86788c944f8ce9ba441f' \
      > /tmp/wheels.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps --only-binary=:all: --require-hashes \
      -r /tmp/wheels.txt \
 && rm -f /tmp/wheels.txt \
 && /opt/venv/bin/pip check \
 && umask 0022 \
 && mkdir -p /usr/local/cuda-12.8/lib64 \
 && site=/opt/venv/lib/python3.11/site-packages \
 && cut -d, -f1 "$site"/nvidia_*.dist-info/RECORD | grep -E '(^|/)lib/lib[^/]*[.]so[.0-9]*$' \
    | while read -r rel; do \
      f="$site/$rel"; l="/usr/local/cuda-12.8/lib64/${rel##*/}"; \
      if [ ! -L "$l" ]; then ln -s "$f" "$l"; \
      elif [ "$(readlink "$l")" != "$f" ]; then echo "two wheels ship ${rel##*/}: $f and $(readlink "$l")" >&2; exit 1; fi; \
    done \
 && for f in /usr/local/cuda-12.8/lib64/lib*.so.*; do \
      link="${f%%.so.*}.so"; [ -e "$link" ] || ln -s "${f##*/}" "$link"; \
    done \
 && ln -s /usr/local/cuda-12.8 /usr/local/cuda \
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
    NVIDIA_REQUIRE_CUDA="cuda>=12.0"
LABEL io.stagecraft.cuda="12.8" \
      io.stagecraft.cudnn="9.10.2" \
      io.stagecraft.cuda.min-driver="570.26" \
      io.stagecraft.cuda.min-driver-compat="525.60.13"

FROM cuda AS accel
ARG SOURCE_DATE_EPOCH
# accel: accelerator libraries over CUDA 12.8: NCCL 2.27.5.
# Framework-independent, from NVIDIA's wheels on PyPI, installed as Python distributions
# into /opt/venv beside the CUDA wheels (nothing of those moves) and linked into
# /usr/local/cuda-12.8/lib64.
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
      'nvidia-nccl-cu12==2.27.5 --hash=sha256:ad730cf15cb5d25fe849c6e6ca9eb5b76db16a80f13f425ac68d8e2e55624457' \
      'nvidia-nvshmem-cu12==3.4.5 --hash=sha256:042f2500f24c021db8a06c5eec2539027d57460e1c1a762055a6554f72c369bd' \
      > /tmp/wheels.txt \
 && /opt/venv/bin/pip install --no-cache-dir --no-deps --only-binary=:all: --require-hashes \
      -r /tmp/wheels.txt \
 && rm -f /tmp/wheels.txt \
 && /opt/venv/bin/pip check \
 && umask 0022 \
 && mkdir -p /usr/local/cuda-12.8/lib64 \
 && site=/opt/venv/lib/python3.11/site-packages \
 && cut -d, -f1 "$site"/nvidia_*.dist-info/RECORD | grep -E '(^|/)lib/lib[^/]*[.]so[.0-9]*$' \
    | while read -r rel; do \
      f="$site/$rel"; l="/usr/local/cuda-12.8/lib64/${rel##*/}"; \
      if [ ! -L "$l" ]; then ln -s "$f" "$l"; \
      elif [ "$(readlink "$l")" != "$f" ]; then echo "two wheels ship ${rel##*/}: $f and $(readlink "$l")" >&2; exit 1; fi; \
    done \
 && for f in /usr/local/cuda-12.8/lib64/lib*.so.*; do \
      link="${f%%.so.*}.so"; [ -e "$link" ] || ln -s "${f##*/}" "$link"; \
    done \
 && ldconfig \
 && { [ -z "${SOURCE_DATE_EPOCH:-}" ] || find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run/secrets -o -path /etc/hosts -o -path /etc/resolv.conf -o -path /etc/hostname \) -prune -o -newermt "@${SOURCE_DATE_EPOCH}" -cnewer /dev -exec touch -h -d "@${SOURCE_DATE_EPOCH}" {} +; }
LABEL io.stagecraft.nccl="2.27.5"

FROM accel AS runtime
ARG SOURCE_DATE_EPOCH
# runtime: torch 2.10.0 (nvidia) in a
# virtual environment on the distro's Python 3.11.
# System libraries this framework build loads, and those the frameworks' common toolkits
# load, so that installing one (`pip install paddleocr`) works as it is. A layer of its
# own: `docker history` shows its size. libGL.so.1 comes without Mesa's GLX vendor (the
# base stage stands in for it: matrix.yaml apt_stand_ins), so no DRI drivers or LLVM.
#   g++: the C++ compiler torch.compile's Inductor builds its CPU kernels with
#   libgl1: libGL.so.1, which OpenCV's cv2 module links (PaddleOCR, PaddleDetection import cv2)
#   libglib2.0-0: libglib-2.0.so.0 and libgthread-2.0.so.0, which OpenCV's cv2 module links
#   libpython3.11-dev: Python.h, which Inductor's generated C++ includes
# (The shell is the base stage's bash with pipefail; hadolint reads each FROM on its own.)
# hadolint ignore=DL4006,SC3011
RUN apt-get update \
 && printf '%s\n' \
      'binutils 2.40-2 83c3e20b53e1fbd84d764c3ba27d26a0376e361ae5d7fb37120196934dd87424' \
      'binutils-common 2.40-2 ab314134f43a0891a48f69a9bc33d825da748fa5e0ba2bebb7a5c491b026f1a0' \
      'binutils-x86-64-linux-gnu 2.40-2 2d7ea8a570d768224d7f2424abbe6f373d2154865a1fa7f56c80d43ecf492521' \
      'cpp 4:12.2.0-3 a63db920f7aa1857a57beab185423deffb6111fa09437a99bbb4ef724fb7ba78' \
      'cpp-12 12.2.0-14+deb12u1 fedbb98e877adde83c983c6071537ea25ac52b277ac6e4637d85025949ca1454' \
      'g++ 4:12.2.0-3 26c451a660728cf7c15548a281e17eef2f36fab28499371e83fc2d3accb499d7' \
      'g++-12 12.2.0-14+deb12u1 68b182badae4ace7d472f1393c559d3532a95a2d70817498b10bb481d2627251' \
      'gcc 4:12.2.0-3 bb63b0fb2797e2a3a294dab8a02614930c557ec1f4ea96637c244b8b5f87e630' \
      'gcc-12 12.2.0-14+deb12u1 b46f33cc2ec245e435e043807038cecf4b201ef004800e9dfc1455240360e49d' \
      'libasan8 12.2.0-14+deb12u1 e7ac5d797d7d438a130674a8e463530f06aa02ecf919ca054d75eaa2f7849ec7' \
      'libatomic1 12.2.0-14+deb12u1 fbd4e154a6b444229ea002cc209df099209c0adc09102e5fd21239a3d2b55e2d' \
      'libbinutils 2.40-2 fcf55b99e5f8a78f3c8ce9b6957f1024f394cf20c196b100d308a57e43547710' \
      'libbsd0 0.11.7-2 bb31cc8b40f962a85b2cec970f7f79cc704a1ae4bad24257a822055404b2c60b' \
      'libc-dev-bin 2.36-9+deb12u14 f61d923b703401023bec2ac3d9d1c9ad7341930fbe11736f7f5ef64b489d03c4' \
      'libc6-dev 2.36-9+deb12u14 0218fc2befcd784c1b0c6292c0a137ce89fad054efaa579ad083bee0f2c01aae' \
      'libcc1-0 12.2.0-14+deb12u1 4ee6009633003f47de98333ea7f7d8835ec563ae2ac4f30251dbfee04d75d46b' \
      'libcrypt-dev 1:4.4.33-2 81ccd29130f75a9e3adabc80e61921abff42f76761e1f792fa2d1bb69af7f52f' \
      'libctf-nobfd0 2.40-2 ef1dfcf22de41ea90ebd3d505447ccccd999e96b85aa777a1d7d981dc3b347aa' \
      'libctf0 2.40-2 3fb7b6f326be3fae4a87a3d33b9269bd06c1e4346a24bd737f265067e3b7427f' \
      'libexpat1-dev 2.5.0-1+deb12u2 757279c1ce56ca88ca519e4c01cffd94e8480ce936f53fe9b0d61dc1bab20394' \
      'libgcc-12-dev 12.2.0-14+deb12u1 d720259380a84f2ffc6fe516eff5cbe9c8a005138e8d6a5748747ba4b3404a82' \
      'libgl1 1.6.0-1 6f89b1702c48e9a2437bb3c1ffac8e1ab2d828fc28b3d14b2eecd4cc19b2c790' \
      'libglib2.0-0 2.74.6-2+deb12u9 7ff85197685d89e150e342b29a59aab1beee400050ba7da73de81cd999ffee5a' \
      'libglvnd0 1.6.0-1 b6da5b153dd62d8b5e5fbe25242db1fc05c068707c365db49abda8c2427c75f8' \
      'libglx0 1.6.0-1 95f568df73dedf43ae66834a75502112e0d4f3ad7124f3dbfa790b739383b896' \
      'libgprofng0 2.40-2 a3c4092d84f19d13caf90f3c96eec53db8819f0e3a5247434944d71ed75fa53d' \
      'libisl23 0.25-1.1 ebff0b2f8b220c74224197523019366e97ee4770d464bebc48e4865114e4da0e' \
      'libitm1 12.2.0-14+deb12u1 0ed5b35dfd1346cccbf065408ec789db6c44c1d0a16ae84533411dea09632979' \
      'libjansson4 2.14-2 3fc9742f9f1a37bcb9931df6074b4d1483419ef832ad5349f47323e75fc27864' \
      'liblsan0 12.2.0-14+deb12u1 d234ab339c0ba31a4fb44e2334cf5a8d15b87f2c2f9e74fadfaa877f92dcf22a' \
      'libmpc3 1.3.1-1 d7f79544790e44f9b0c8cb9034a18c58d37f8702a15f32539050718679e52f80' \
      'libmpfr6 4.2.0-1 37b7a2b4e78890b6a074777f27b96c84f58e81558ba08410c2b6c0ca4a4ad77b' \
      'libnsl-dev 1.3.0-2 bb81a188c119cd7fdebae723cbc95887b6c549b2fe4fb7e268a9c8846444da99' \
      'libpython3.11 3.11.2-6+deb12u8 63845d53d5f64d2362cfb6007ec175ad1c6044cebe60a1885eff76d2ce637c35' \
      'libpython3.11-dev 3.11.2-6+deb12u8 01a8eddeb8505bb6e2c01209cda66b41fb5ebeaa64e69d0e25f7131915f1cd32' \
      'libquadmath0 12.2.0-14+deb12u1 3f0c9a4c730da2fdab001cae596625438598fd2996d29d888feeb4c1cdc9011f' \
      'libstdc++-12-dev 12.2.0-14+deb12u1 d28def6c23630432b57cb38a4c2fd67a79d4e0484027386ca6e8d6005c3d7a73' \
      'libtirpc-dev 1.3.3+ds-1 03326473eed54ffa27efae19aa5d6aeb402930968f869f318445513093691d55' \
      'libtsan2 12.2.0-14+deb12u1 06906663d644a75a1a836382ecd80b61461129c06f02935ce408b25809f6c958' \
      'libubsan1 12.2.0-14+deb12u1 744f52adf00ffd45d44806b1c7e802a36bd27e479c9bc8457128fde357faa530' \
      'libx11-6 2:1.8.4-2+deb12u2 d88c973e79fd9b65838d77624142952757e47a6eb1a58602acf0911cf35989f4' \
      'libx11-data 2:1.8.4-2+deb12u2 987a848aeb1c358e4186368871b0526f10bb14c6b53214ab3bf8b69abb830191' \
      'libxau6 1:1.0.9-1 679db1c4579ec7c61079adeaae8528adeb2e4bf5465baa6c56233b995d714750' \
      'libxcb1 1.15-1 fdc61332a3892168f3cc9cfa1fe9cf11a91dc3e0acacbc47cbc50ebaa234cc71' \
      'libxdmcp6 1:1.1.2-3 ecb8536f5fb34543b55bb9dc5f5b14c9dbb4150a7bddb3f2287b7cab6e9d25ef' \
      'linux-libc-dev 6.1.176-1 8bb258735b9dffbb111da778ebdd024750878e435ffd9dfcadcb6762ede6b4cf' \
      'rpcsvc-proto 1.4.3-1 32ac0692694f8a34cc90c895f4fc739680fb2ef0e2d4870a68833682bf1c81a3' \
      'zlib1g-dev 1:1.2.13.dfsg-1 f9ce531f60cbd5df37996af9370e0171be96902a17ec2bdbd8d62038c354094f' \
      > /tmp/stagecraft-apt.lock \
 && while read -r p v _; do [ -n "$(apt-cache show "$p=$v" 2> /dev/null)" ] \
      || { echo "stagecraft: $p $v is locked but the mirror no longer serves it; run \`build.py lock --upgrade\`" >&2; exit 1; }; \
    done < /tmp/stagecraft-apt.lock \
 && apt-get install -y --no-install-recommends --download-only \
      'binutils=2.40-2' \
      'binutils-common=2.40-2' \
      'binutils-x86-64-linux-gnu=2.40-2' \
      'cpp=4:12.2.0-3' \
      'cpp-12=12.2.0-14+deb12u1' \
      'g++=4:12.2.0-3' \
      'g++-12=12.2.0-14+deb12u1' \
      'gcc=4:12.2.0-3' \
      'gcc-12=12.2.0-14+deb12u1' \
      'libasan8=12.2.0-14+deb12u1' \
      'libatomic1=12.2.0-14+deb12u1' \
      'libbinutils=2.40-2' \
      'libbsd0=0.11.7-2' \
      'libc-dev-bin=2.36-9+deb12u14' \
      'libc6-dev=2.36-9+deb12u14' \
      'libcc1-0=12.2.0-14+deb12u1' \
      'libcrypt-dev=1:4.4.33-2' \
      'libctf-nobfd0=2.40-2' \
      'libctf0=2.40-2' \
      'libexpat1-dev=2.5.0-1+deb12u2' \
      'libgcc-12-dev=12.2.0-14+deb12u1' \
      'libgl1=1.6.0-1' \
      'libglib2.0-0=2.74.6-2+deb12u9' \
      'libglvnd0=1.6.0-1' \
      'libglx0=1.6.0-1' \
      'libgprofng0=2.40-2' \
      'libisl23=0.25-1.1' \
      'libitm1=12.2.0-14+deb12u1' \
      'libjansson4=2.14-2' \
      'liblsan0=12.2.0-14+deb12u1' \
      'libmpc3=1.3.1-1' \
      'libmpfr6=4.2.0-1' \
      'libnsl-dev=1.3.0-2' \
      'libpython3.11=3.11.2-6+deb12u8' \
      'libpython3.11-dev=3.11.2-6+deb12u8' \
      'libquadmath0=12.2.0-14+deb12u1' \
      'libstdc++-12-dev=12.2.0-14+deb12u1' \
      'libtirpc-dev=1.3.3+ds-1' \
      'libtsan2=12.2.0-14+deb12u1' \
      'libubsan1=12.2.0-14+deb12u1' \
      'libx11-6=2:1.8.4-2+deb12u2' \
      'libx11-data=2:1.8.4-2+deb12u2' \
      'libxau6=1:1.0.9-1' \
      'libxcb1=1.15-1' \
      'libxdmcp6=1:1.1.2-3' \
      'linux-libc-dev=6.1.176-1' \
      'rpcsvc-proto=1.4.3-1' \
      'zlib1g-dev=1:1.2.13.dfsg-1' \
 && for d in /var/cache/apt/archives/*.deb; do \
      [ -e "$d" ] || continue; \
      read -r p v <<< "$(dpkg-deb --showformat="\${Package} \${Version}" -W "$d")"; \
      got="$(sha256sum "$d" | cut -d' ' -f1)"; \
      want="$(awk -v p="$p" -v v="$v" "\$1 == p && \$2 == v { print \$3 }" /tmp/stagecraft-apt.lock)"; \
      [ "$got" = "$want" ] || { echo "stagecraft: hash mismatch for $p $v: lock sha256:${want:-none}, downloaded sha256:$got" >&2; exit 1; }; \
    done \
 && apt-get install -y --no-install-recommends \
      'binutils=2.40-2' \
      'binutils-common=2.40-2' \
      'binutils-x86-64-linux-gnu=2.40-2' \
      'cpp=4:12.2.0-3' \
      'cpp-12=12.2.0-14+deb12u1' \
      'g++=4:12.2.0-3' \
      'g++-12=12.2.0-14+deb12u1' \
      'gcc=4:12.2.0-3' \
      'gcc-12=12.2.0-14+deb12u1' \
      'libasan8=12.2.0-14+deb12u1' \
      'libatomic1=12.2.0-14+deb12u1' \
      'libbinutils=2.40-2' \
      'libbsd0=0.11.7-2' \
      'libc-dev-bin=2.36-9+deb12u14' \
      'libc6-dev=2.36-9+deb12u14' \
      'libcc1-0=12.2.0-14+deb12u1' \
      'libcrypt-dev=1:4.4.33-2' \
      'libctf-nobfd0=2.40-2' \
      'libctf0=2.40-2' \
      'libexpat1-dev=2.5.0-1+deb12u2' \
      'libgcc-12-dev=12.2.0-14+deb12u1' \
      'libgl1=1.6.0-1' \
      'libglib2.0-0=2.74.6-2+deb12u9' \
      'libglvnd0=1.6.0-1' \
      'libglx0=1.6.0-1' \
      'libgprofng0=2.40-2' \
      'libisl23=0.25-1.1' \
      'libitm1=12.2.0-14+deb12u1' \
      'libjansson4=2.14-2' \
      'liblsan0=12.2.0-14+deb12u1' \
      'libmpc3=1.3.1-1' \
      'libmpfr6=4.2.0-1' \
      'libnsl-dev=1.3.0-2' \
      'libpython3.11=3.11.2-6+deb12u8' \
      'libpython3.11-dev=3.11.2-6+deb12u8' \
      'libquadmath0=12.2.0-14+deb12u1' \
      'libstdc++-12-dev=12.2.0-14+deb12u1' \
      'libtirpc-dev=1.3.3+ds-1' \
      'libtsan2=12.2.0-14+deb12u1' \
      'libubsan1=12.2.0-14+deb12u1' \
      'libx11-6=2:1.8.4-2+deb12u2' \
      'libx11-data=2:1.8.4-2+deb12u2' \
      'libxau6=1:1.0.9-1' \
      'libxcb1=1.15-1' \
      'libxdmcp6=1:1.1.2-3' \
      'linux-libc-dev=6.1.176-1' \
      'rpcsvc-proto=1.4.3-1' \
      'zlib1g-dev=1:1.2.13.dfsg-1' \
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
      'cuda-bindings==12.9.4 --hash=sha256:c912a3d9e6b6651853eed8eed96d6800d69c08e94052c292fec3f282c5a817c9' \
      'cuda-pathfinder==1.9.1 --hash=sha256:b743c132f90ad2d1e71d43fd28f31ebcde518f943e50fd44aca62b2a80d5230d' \
      'filelock==4.3.1 --hash=sha256:79e43df8e9fe509cd83a3899a7c186c8077cbbe4d200a1ed3705c2f3bb6bc487' \
      'fsspec==2026.9.0 --hash=sha256:8dd6e646e99ea382bd85f97a45e6b526a442d79423a7dc673f1e2756d05fcb5f' \
      'jinja2==3.1.6 --hash=sha256:85ece4451f492d0c13c5dd7c13a64681a86afae63a5f347908daf103ce6d2f67' \
      'markupsafe==3.0.4 --hash=sha256:6da83a088f8ef93b2d483a8232a4dbf4d69d3d8496b568a03c56becac43e1808' \
      'mpmath==1.3.0 --hash=sha256:a0b2b9fe80bbcd81a6647ff13108738cfb482d481d826cc0e02f5b35e5c88d2c' \
      'networkx==3.6.1 --hash=sha256:d47fbf302e7d9cbbb9e2555a0d267983d2aa476bac30e90dfbe5669bd57f3762' \
      'nvidia-ml-py==13.580.82 --hash=sha256:4361db337b0c551e2d101936dae2e9a60f957af26818e8c0c3a1f32b8db8d0a7' \
      'sympy==1.14.0 --hash=sha256:e091cc3e99d2141a0ba2847328f5479b05d94a6635cb96148ccb3f34671bd8f5' \
      'torch==2.10.0 --hash=sha256:a2f9edd8dbc99f62bc4dfb78af7bf89499bca3d753423ac1b4e06592e467b763 --hash=sha256:ac5bdcbb074384c66fa160c15b1ead77839e3fe7ed117d667249afce0acabfac' \
      'triton==3.6.0 --hash=sha256:e8e323d608e3a9bfcc2d9efcc90ceefb764a82b99dea12a86d643c72539ad5d3' \
      'typing-extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8' \
      > /tmp/requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps \
      -r /tmp/requirements.txt \
 && /opt/venv/bin/pip check \
 && rm -f /tmp/requirements.txt \
 && printf '%s\n' \
      'cuda-bindings==12.9.4' \
      'cuda-pathfinder==1.9.1' \
      'filelock==4.3.1' \
      'fsspec==2026.9.0' \
      'jinja2==3.1.6' \
      'markupsafe==3.0.4' \
      'mpmath==1.3.0' \
      'networkx==3.6.1' \
      'nvidia-ml-py==13.580.82' \
      'sympy==1.14.0' \
      'torch==2.10.0' \
      'triton==3.6.0' \
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
      'torch/lib/libtorch_cuda.so' \
 && rm -rf /tmp/stagecraft-build \
 && check_home="$(mktemp -d)" \
 && HOME="$check_home" TMPDIR="$check_home" /opt/venv/bin/python -c 'import torch' \
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
 && printf '%s\n' '{"components":{"cuda":"12.8","cudnn":"9.10.2","min_driver":"570.26","min_driver_compat":"525.60.13","nccl":"2.27.5","os":"debian 12","python":"3.11"},"device":"nvidia","device_strings":{"cpu":"cpu","nvidia":"cuda:{index}"},"framework":{"name":"torch-2.10.0-cu128","package":"torch","version":"2.10.0"},"kernel_sets":[{"description":"native kernels (SASS) for the compute capabilities the wheel ships","device":"nvidia","env":{},"name":"cuda","requires":{"cuda":"12.8","min_driver":"570.26","min_driver_compat":"525.60.13","ptx":[],"sass":["7.0","7.5","8.0","8.6","9.0","10.0","12.0"]}},{"description":"no usable GPU; ATen chooses its CPU kernels (AVX-512, AVX2 or AVX) itself","device":"cpu","env":{},"name":"cpu","requires":{"cpu_flags":["avx"]}}],"schema":1}' > /etc/stagecraft/image.json \
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
LABEL io.stagecraft.framework="torch" \
      io.stagecraft.framework.version="2.10.0" \
      io.stagecraft.cuda.sass="7.0 7.5 8.0 8.6 9.0 10.0 12.0" \
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
LABEL io.stagecraft.matrix.group="torch-gpu" \
      io.stagecraft.matrix.selection="base=debian12,cuda=cuda12.8-cudnn9.10,accel=nccl2.27-cu12,framework=torch-2.10.0-cu128" \
      org.opencontainers.image.created="1970-01-01T00:00:00Z" \
      org.opencontainers.image.description="torch 2.10.0 (nvidia) on debian 12, Python 3.11" \
      org.opencontainers.image.ref.name="torch-2.10.0-gpu-cuda12.8" \
      org.opencontainers.image.revision="0000000000000000000000000000000000000000" \
      org.opencontainers.image.source="https://github.com/stagecraft/stagecraft" \
      org.opencontainers.image.title="stagecraft/paddle:torch-2.10.0-gpu-cuda12.8" \
      org.opencontainers.image.vendor="stagecraft" \
      org.opencontainers.image.version="torch-2.10.0-gpu-cuda12.8"
