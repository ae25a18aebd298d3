# stagecraft/paddle:3.3.1-cpu-debian13, rendered by stagecraft from matrix.yaml (image group 'paddle-3-cpu').
# Build: DOCKER_BUILDKIT=1 docker build -f THIS_FILE -t stagecraft/paddle:3.3.1-cpu-debian13 [--secret id=pip-ca,src=CA_BUNDLE] PROJECT_DIR

FROM docker.io/library/debian:trixie-slim@sha256:a29215f6a35e51e22adffa17f89e9d2ef06214e64a2bad10d765c46aea49f11f AS base
ARG SOURCE_DATE_EPOCH
# base: debian 13 (trixie) with its own Python 3.13,
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
      'ca-certificates 20250419+deb13u1 c10585ac22c7f617a73d394eea29ba71d0356f350ae973b19043d1b017f80f54' \
      'libexpat1 2.9.0-1~deb13u1 feff874772cae904ae4d24e917b35664952bec4b4ae9100a4edda5a7fa746832' \
      'libffi8 3.4.8-2 0ebdc340de33333639c3c63874cd4b15ac2e83dfa1ef3053b7eefaf4919f4f68' \
      'libgomp1 14.2.0-19 72b7a1a33c48f3195efeb044111b34ae684b1e640bb6495c832443b798601cd5' \
      'libncursesw6 6.5+20250216-2 47baa2e11579583654583a066b69bd5a5d2f22423081f707ed6c0c3ba6d538b7' \
      'libpython3-stdlib 3.13.5-1 7e142ed64a81ccdd39714f213467bd365736ef341adb2be11be981f638b9175f' \
      'libpython3.13-minimal 3.13.5-2+deb13u5 a4aa6a9a8c77f87bfe545e1d14ec42c001d189ace90e3aa75deec882b39dee49' \
      'libpython3.13-stdlib 3.13.5-2+deb13u5 db161322a3481d2c0c3b9a3b9a03c3ab0e2b1718f54b88755fb4a3f939165b84' \
      'libreadline8t64 8.2-6 eeadf2b5e755c9f183883feea2d9b5b28560284275d5f54d3e55d0923b1d0967' \
      'media-types 13.0.0 0788e4b0b72db1bcf74a19cb24c3511e7770ad0b341f0f30e361701c3072f53e' \
      'netbase 6.5 76bafa92947ebd37b0a6f9ec6570412041f56edebc1c66d323731216d318471e' \
      'openssl 3.5.9-1~deb13u1 faf53a993766c81f94f35b6a31202f0dcd936e1529791790a393aa59f41c0993' \
      'python3 3.13.5-1 c1388174dc7140e6c19a6dd39f8a0dcb38a835cd66c65644e0dded43d5223cb0' \
      'python3-minimal 3.13.5-1 a5d2371bebf3689f676e3f3bae800371bcc4392a8a51269e23d528249b399615' \
      'python3-pip-whl 25.1.1+dfsg-1 e65351935aa4af2b10ae2abb5744f5059e9abad51aea6cd0cb825702010763f7' \
      'python3-setuptools-whl 78.1.1-0.1 0caf134e73ab90ffeaa5ce2529d73ea7d48078b2a9251ed9d1b7b514a61e9483' \
      'python3-venv 3.13.5-1 744ea5038e645ed22299e1bca47f76169b5665dd640df3492bdd1e21eba6cb76' \
      'python3.13 3.13.5-2+deb13u5 460c1fd72845516ac3ce9d1686916f3ab2e4c86f8a9746e14d26243a47e2b98d' \
      'python3.13-minimal 3.13.5-2+deb13u5 c1fda9e7b1bf15b2fa75a238d8a8710e142fe14c722fc650c5fc614f078c9073' \
      'python3.13-venv 3.13.5-2+deb13u5 b079db533ff9d9d11585d06c3b2a5c034d01453a1e915502ffece42fb0ce4a3f' \
      'readline-common 8.2-6 f77e8aa0bf0de618f11cb0b21658a4ed60f177d63b3cf26d7fc3706b6d0eaaa9' \
      'tini 0.19.0-3+b8 a443b12107331f67836a64cb6efe1dd92d2765e15568eb4567dccb409a8cd2a0' \
      > /tmp/stagecraft-apt.lock \
 && while read -r p v _; do [ -n "$(apt-cache show "$p=$v" 2> /dev/null)" ] \
      || { echo "stagecraft: $p $v is locked but the mirror no longer serves it; run \`build.py lock --upgrade\`" >&2; exit 1; }; \
    done < /tmp/stagecraft-apt.lock \
 && apt-get install -y --no-install-recommends --download-only \
      'ca-certificates=20250419+deb13u1' \
      'libexpat1=2.9.0-1~deb13u1' \
      'libffi8=3.4.8-2' \
      'libgomp1=14.2.0-19' \
      'libncursesw6=6.5+20250216-2' \
      'libpython3-stdlib=3.13.5-1' \
      'libpython3.13-minimal=3.13.5-2+deb13u5' \
      'libpython3.13-stdlib=3.13.5-2+deb13u5' \
      'libreadline8t64=8.2-6' \
      'media-types=13.0.0' \
      'netbase=6.5' \
      'openssl=3.5.9-1~deb13u1' \
      'python3=3.13.5-1' \
      'python3-minimal=3.13.5-1' \
      'python3-pip-whl=25.1.1+dfsg-1' \
      'python3-setuptools-whl=78.1.1-0.1' \
      'python3-venv=3.13.5-1' \
      'python3.13=3.13.5-2+deb13u5' \
      'python3.13-minimal=3.13.5-2+deb13u5' \
      'python3.13-venv=3.13.5-2+deb13u5' \
      'readline-common=8.2-6' \
      'tini=0.19.0-3+b8' \
 && for d in /var/cache/apt/archives/*.deb; do \
      [ -e "$d" ] || continue; \
      read -r p v <<< "$(dpkg-deb --showformat="\${Package} \${Version}" -W "$d")"; \
      got="$(sha256sum "$d" | cut -d' ' -f1)"; \
      want="$(awk -v p="$p" -v v="$v" "\$1 == p && \$2 == v { print \$3 }" /tmp/stagecraft-apt.lock)"; \
      [ "$got" = "$want" ] || { echo "stagecraft: hash mismatch for $p $v: lock sha256:${want:-none}, downloaded sha256:$got" >&2; exit 1; }; \
    done \
 && apt-get install -y --no-install-recommends \
      'ca-certificates=20250419+deb13u1' \
      'libexpat1=2.9.0-1~deb13u1' \
      'libffi8=3.4.8-2' \
      'libgomp1=14.2.0-19' \
      'libncursesw6=6.5+20250216-2' \
      'libpython3-stdlib=3.13.5-1' \
      'libpython3.13-minimal=3.13.5-2+deb13u5' \
      'libpython3.13-stdlib=3.13.5-2+deb13u5' \
      'libreadline8t64=8.2-6' \
      'media-types=13.0.0' \
      'netbase=6.5' \
      'openssl=3.5.9-1~deb13u1' \
      'python3=3.13.5-1' \
      'python3-minimal=3.13.5-1' \
      'python3-pip-whl=25.1.1+dfsg-1' \
      'python3-setuptools-whl=78.1.1-0.1' \
      'python3-venv=3.13.5-1' \
      'python3.13=3.13.5-2+deb13u5' \
      'python3.13-minimal=3.13.5-2+deb13u5' \
      'python3.13-venv=3.13.5-2+deb13u5' \
      'readline-common=8.2-6' \
      'tini=0.19.0-3+b8' \
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
      io.stagecraft.os.version="13" \
      io.stagecraft.python="3.13"

FROM base AS runtime
ARG SOURCE_DATE_EPOCH
# runtime: paddlepaddle 3.3.1 (cpu) in a
# virtual environment on the distro's Python 3.13.
# System libraries this framework build loads, and those the frameworks' common toolkits
# load, so that installing one (`pip install paddleocr`) works as it is. A layer of its
# own: `docker history` shows its size. libGL.so.1 comes without Mesa's GLX vendor (the
# base stage stands in for it: matrix.yaml apt_stand_ins), so no DRI drivers or LLVM.
#   libgl1: libGL.so.1, which OpenCV's cv2 module links (PaddleOCR, PaddleDetection import cv2)
#   libglib2.0-0t64: libglib-2.0.so.0 and libgthread-2.0.so.0, which OpenCV's cv2 module links
# (The shell is the base stage's bash with pipefail; hadolint reads each FROM on its own.)
# hadolint ignore=DL4006,SC3011
RUN apt-get update \
 && printf '%s\n' \
      'libatomic1 14.2.0-19 212b399aae2f7299203d261a57e49372e09565a9a5ea971905f94a3960366c05' \
      'libgl1 1.7.0-1+b2 87fa2f6e5abaed4ed385fac879c8dd735af719ee2300222d901793c66e041678' \
      'libglib2.0-0t64 2.84.4-3~deb13u5 e2baf92c57d1db1753e5781a61450d9a01e7833c7bd2dfe87776a6811c11ecc2' \
      'libglvnd0 1.7.0-1+b2 887f74008166549ce9e100c906aa937e95d6e5ce1c8d86efe8c95fd953359b9c' \
      'libglx0 1.7.0-1+b2 2721fdca0fe3bd963cb39482eabc253af52b88f4a7f6dbb69e475549daf5af3b' \
      'libx11-6 2:1.8.12-1 b5a3fd3bf8c8fd0364bfb9bea00dcba7fc301229bd02dded084632d31f5b0fb3' \
      'libx11-data 2:1.8.12-1 c54f87069888f80ba4da586da6147d74c7598ccdd8b90906dbc4271fa414c738' \
      'libxau6 1:1.0.11-1 689a9f0e0ba3e2c65431f864871e303ee904de69dd28abfc462663fae030227f' \
      'libxcb1 1.17.0-2+b1 5c222a72d11b866447da31693254f738430726e3e065a384e82687b2fd2f978b' \
      'libxdmcp6 1:1.1.5-1 0740dc760916b2008b45417a42a8fd7dd5de370fb57d31373f15034cda8acf0b' \
      > /tmp/stagecraft-apt.lock \
 && while read -r p v _; do [ -n "$(apt-cache show "$p=$v" 2> /dev/null)" ] \
      || { echo "stagecraft: $p $v is locked but the mirror no longer serves it; run \`build.py lock --upgrade\`" >&2; exit 1; }; \
    done < /tmp/stagecraft-apt.lock \
 && apt-get install -y --no-install-recommends --download-only \
      'libatomic1=14.2.0-19' \
      'libgl1=1.7.0-1+b2' \
      'libglib2.0-0t64=2.84.4-3~deb13u5' \
      'libglvnd0=1.7.0-1+b2' \
      'libglx0=1.7.0-1+b2' \
      'libx11-6=2:1.8.12-1' \
      'libx11-data=2:1.8.12-1' \
      'libxau6=1:1.0.11-1' \
      'libxcb1=1.17.0-2+b1' \
      'libxdmcp6=1:1.1.5-1' \
 && for d in /var/cache/apt/archives/*.deb; do \
      [ -e "$d" ] || continue; \
      read -r p v <<< "$(dpkg-deb --showformat="\${Package} \${Version}" -W "$d")"; \
      got="$(sha256sum "$d" | cut -d' ' -f1)"; \
      want="$(awk -v p="$p" -v v="$v" "\$1 == p && \$2 == v { print \$3 }" /tmp/stagecraft-apt.lock)"; \
      [ "$got" = "$want" ] || { echo "stagecraft: hash mismatch for $p $v: lock sha256:${want:-none}, downloaded sha256:$got" >&2; exit 1; }; \
    done \
 && apt-get install -y --no-install-recommends \
      'libatomic1=14.2.0-19' \
      'libgl1=1.7.0-1+b2' \
      'libglib2.0-0t64=2.84.4-3~deb13u5' \
      'libglvnd0=1.7.0-1+b2' \
      'libglx0=1.7.0-1+b2' \
      'libx11-6=2:1.8.12-1' \
      'libx11-data=2:1.8.12-1' \
      'libxau6=1:1.0.11-1' \
      'libxcb1=1.17.0-2+b1' \
      'libxdmcp6=1:1.1.5-1' \
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
      'certifi==2026.10.19.post1 --hash=sha256:1324c476b4811eff41a8bc2122cd0bbd4d9c7234c725446d99ab1612b3a7fdd2' \
      'h11==0.16.0 --hash=sha256:63cf8bbe7522de3bf65932fda1d9c2772064ffb3dae62d55932da54b31cb6c86' \
      'httpcore==1.0.9 --hash=sha256:2d400746a40668fc9dec9810239072b40b4484b640a8c38fd654a024c7a1bf55' \
      'httpx==0.28.1 --hash=sha256:d909fcccc110f8c7faf814ca82a9a4d816bc5a6dbfea25d6591d6985b8ba59ad' \
      'idna==3.20 --hash=sha256:ab7ae7122974553370f0bdb919e1a960b2cd1bc1ef0276416d896db81c14582c' \
      'networkx==3.6.1 --hash=sha256:d47fbf302e7d9cbbb9e2555a0d267983d2aa476bac30e90dfbe5669bd57f3762' \
      'numpy==2.3.5 --hash=sha256:11e06aa0af8c0f05104d56450d6093ee639e15f24ecf62d417329d06e522e017' \
      'nvidia-ml-py==13.580.82 --hash=sha256:4361db337b0c551e2d101936dae2e9a60f957af26818e8c0c3a1f32b8db8d0a7' \
      'opt-einsum==3.3.0 --hash=sha256:2455e59e3947d3c275477df7f5205b30635e266fe6dc300e3d9f9646bfcea147' \
      'paddlepaddle==3.3.1 --hash=sha256:4f28038427649bb2fcfd4d52efa85ed8311df19122b4ebedc942484a0b57b032' \
      'pillow==13.0.0 --hash=sha256:5f56499c1a74d2b862beb0c33b8016f99d095858455df9d21583bbbc1c15b582' \
      'protobuf==7.36.2 --hash=sha256:89f23aa53c24553a2416fd4fd1ec06f74fa42b14b546d8883128813f775bbfd2 --hash=sha256:bdb3a345d48db958e6ce1f18e508beb0cc981d64f24088427549c866cd039f1e' \
      'safetensors==0.8.0 --hash=sha256:fd6f3f93c9a0a7cc2788ee63fb763353d4bd2e89b0751bc78fcf7dda00bea774' \
      'setuptools==84.2.1 --hash=sha256:ca140b45d5325a9478f880e351484f62fef15f336462e449ca0c03c873d589c2' \
      'typing-extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8' \
      > /tmp/requirements.txt \
 && /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps \
      -r /tmp/requirements.txt \
 && /opt/venv/bin/pip check \
 && rm -f /tmp/requirements.txt \
 && printf '%s\n' \
      'anyio==4.16.0' \
      'certifi==2026.10.19.post1' \
      'h11==0.16.0' \
      'httpcore==1.0.9' \
      'httpx==0.28.1' \
      'idna==3.20' \
      'networkx==3.6.1' \
      'numpy==2.3.5' \
      'nvidia-ml-py==13.580.82' \
      'opt-einsum==3.3.0' \
      'paddlepaddle==3.3.1' \
      'pillow==13.0.0' \
      'protobuf==7.36.2' \
      'safetensors==0.8.0' \
      'setuptools==84.2.1' \
      'typing-extensions==4.16.0' \
      > /opt/stagecraft/constraints.txt \
 && cat /tmp/stage-pins.txt >> /opt/stagecraft/constraints.txt \
 && rm -f /tmp/stage-pins.txt \
 && printf '%s\n' '[global]' 'constraint = /opt/stagecraft/constraints.txt' > /opt/venv/pip.conf \
 && if [ -d /usr/local/cuda/lib64 ]; then \
      /opt/venv/bin/python -I /dev/stagecraft-context/probes/sonames.py link /usr/local/cuda/lib64 /opt/venv \
        > /opt/stagecraft/linked-libraries.json; fi \
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
 && printf '%s\n' '{"components":{"os":"debian 13","python":"3.13"},"device":"cpu","device_strings":{"amd":"gpu:{index}","cpu":"cpu","mlu":"mlu:{index}","npu":"npu:{index}","nvidia":"gpu:{index}","xpu":"xpu:{index}"},"framework":{"name":"paddle-3.3.1-cpu","package":"paddlepaddle","version":"3.3.1"},"kernel_sets":[{"description":"AVX-512 hosts; MKL and oneDNN dispatch on their own (VNNI, BF16, AMX included)","device":"cpu","name":"cpu-avx512","requires":{"cpu_flags":["avx512f","avx512bw","avx512vl"]}},{"description":"AVX2 and FMA kernels; forced on an AVX-512 host, keeps the libraries off AVX-512","device":"cpu","isa_cap":"avx2","name":"cpu-avx2","requires":{"cpu_flags":["avx2","fma"]}},{"description":"the wheel\u0027s floor (it is compiled with -mavx); below it the image refuses, never SIGILL","device":"cpu","isa_cap":"avx","name":"cpu-avx","requires":{"cpu_flags":["avx"]}}],"schema":1}' > /etc/stagecraft/image.json \
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
LABEL io.stagecraft.framework="paddlepaddle" \
      io.stagecraft.framework.version="3.3.1" \
      io.stagecraft.device="cpu"
USER 1000
WORKDIR /workspace
# tini is PID 1 (signals, zombies); the entrypoint probes the hardware, chooses the
# kernel set, sets the environment, says why in one line, then execs the command.
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/stagecraft/entrypoint/stagecraft-entrypoint"]
CMD ["python3"]
LABEL io.stagecraft.matrix.group="paddle-3-cpu" \
      io.stagecraft.matrix.selection="base=debian13,framework=paddle-3.3.1-cpu" \
      org.opencontainers.image.created="1970-01-01T00:00:00Z" \
      org.opencontainers.image.description="paddlepaddle 3.3.1 (cpu) on debian 13, Python 3.13" \
      org.opencontainers.image.ref.name="3.3.1-cpu-debian13" \
      org.opencontainers.image.revision="0000000000000000000000000000000000000000" \
      org.opencontainers.image.source="https://github.com/stagecraft/stagecraft" \
      org.opencontainers.image.title="stagecraft/paddle:3.3.1-cpu-debian13" \
      org.opencontainers.image.vendor="stagecraft" \
      org.opencontainers.image.version="3.3.1-cpu-debian13"
