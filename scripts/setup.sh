#!/usr/bin/env bash
# Set up what stagecraft needs on this host, and nothing that is already there.
#
# - Python dependencies (pyproject.toml, with the test extras) into the current Python,
#   or into .venv/ when that Python is externally managed (PEP 668).
# - A Docker engine that answers. When none answers and we are root on Debian/Ubuntu,
#   install docker.io (+ debootstrap for bootstrapped base images) and start dockerd.
#   Anywhere else, say exactly what to do and exit 2.
# - A BuildKit build path (buildx, or a classic client with DOCKER_BUILDKIT=1): checked
#   by `python build.py doctor`.
# - Emulation for the platforms in STAGECRAFT_PLATFORMS (e.g. linux/amd64,linux/arm64)
#   other than the host's: qemu-user-static, binfmt_misc mounted (it is not on a fresh
#   boot), each interpreter registered. Every engine on the host then runs those images.
# - With --with-modern-engine (what `make test` passes): the modern engine the tests run
#   beside this one (Docker 26 + buildx from Debian 13 packages, in a container of this
#   engine; scripts/modern-engine.sh up).
# - With --with-podman (what `make test` passes): rootless Podman for
#   tests/integration/test_podman.py (scripts/podman-setup.sh: Debian's podman, a non-root
#   user with subordinate ids, its runtime directory /run/user/UID, which a boot empties,
#   so this step also repairs a machine that has rebooted since the last set-up).
# Every step is a no-op where its result is already present.
set -euo pipefail
with_modern=0
with_podman=0
for arg in "$@"; do
  case "$arg" in
    --with-modern-engine) with_modern=1 ;;
    --with-podman) with_podman=1 ;;
    *) printf 'setup: unknown option %s (known: --with-modern-engine, --with-podman)\n' "$arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."

log() { printf 'setup: %s\n' "$*" >&2; }

want_apt=()
is_root_debian() { [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; }

# Which Python gets the dependencies: an active virtual environment; else python3 unless
# it is externally managed (PEP 668, as on stock Debian 12), in which case a project
# virtual environment .venv/ (then run `.venv/bin/python build.py ...`; make uses it).
PY=python3
externally_managed() {
  python3 - <<'PY'
import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)
PY
}
if [ -z "${VIRTUAL_ENV:-}" ] && { [ -x .venv/bin/python ] || externally_managed; }; then
  if [ ! -x .venv/bin/python ]; then
    if ! python3 -m venv .venv 2>/dev/null; then
      rm -rf .venv
      if is_root_debian; then
        log "installing python3-venv (apt-get) for the project's virtual environment"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        python3 -m venv .venv
      else
        log "this Python is externally managed and cannot make a virtual environment: install python3-venv (sudo apt-get install python3-venv), then run this again"
        exit 2
      fi
    fi
    log "made a virtual environment in .venv/ (the system Python is externally managed)"
  fi
  PY=.venv/bin/python
fi

# Python dependencies: reinstalled when pyproject.toml changes (a stamp holds its hash).
stamp=.stagecraft/setup-python.sha256
want=$("$PY" -c 'import hashlib,sys; print(hashlib.sha256(open("pyproject.toml","rb").read()).hexdigest() + " " + sys.executable)')
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! "$PY" -c 'import docker, jinja2, yaml, jsonschema, pytest, testinfra, pynvml, tenacity' 2>/dev/null; then
  log "installing Python dependencies into $("$PY" -c 'import sys; print(sys.prefix)') (pip install -e '.[test]')"
  "$PY" -m pip install -q -e '.[test]'
  mkdir -p .stagecraft && printf '%s\n' "$want" > "$stamp"
fi

engine_answers() {
  for c in /usr/bin/docker "$(command -v docker || true)"; do
    [ -x "$c" ] && "$c" version --format '{{.Server.Version}}' >/dev/null 2>&1 && return 0
  done
  return 1
}

command -v debootstrap >/dev/null 2>&1 || want_apt+=(debootstrap)
# build.py lock checks the Debian mirror's InRelease signatures with Debian's keys.
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] || want_apt+=(debian-archive-keyring)
[ -x /usr/bin/dockerd ] || command -v dockerd >/dev/null 2>&1 || want_apt+=(docker.io)
# The tests push to a real local registry, one of them with htpasswd (bcrypt) auth.
if [ "${STAGECRAFT_WITH_REGISTRY:-1}" = 1 ]; then
  command -v docker-registry >/dev/null 2>&1 || want_apt+=(docker-registry)
  command -v htpasswd >/dev/null 2>&1 || want_apt+=(apache2-utils)
fi
# Every pushed tag (and image index) is read back and verified with skopeo: stagecraft's
# one path to registries (stagecraft/registry.py).
command -v skopeo >/dev/null 2>&1 || want_apt+=(skopeo)
# The catalog's browser test (tests/integration/test_catalog_browser.py) drives Debian's
# chromium through its chromedriver: Selenium is pointed at /usr/bin/chromedriver and
# downloads nothing.
[ -x /usr/bin/chromium ] || want_apt+=(chromium)
[ -x /usr/bin/chromedriver ] || want_apt+=(chromium-driver)

# Platforms other than the host's need qemu's user-mode emulators registered with
# binfmt_misc (Debian's /usr/lib/binfmt.d/qemu-*.conf carry the F flag: the interpreter
# is opened at registration, so it works inside containers and chroots too).
want_qemu=()
for p in ${STAGECRAFT_PLATFORMS:+${STAGECRAFT_PLATFORMS//,/ }}; do
  case "$p" in
    linux/amd64) m=x86_64 ;;
    linux/arm64|linux/arm64/v8) m=aarch64 ;;
    linux/ppc64le) m=ppc64le ;;
    linux/s390x) m=s390x ;;
    *) log "STAGECRAFT_PLATFORMS: unknown platform '$p' (one of linux/amd64, linux/arm64, linux/ppc64le, linux/s390x)"; exit 2 ;;
  esac
  [ "$m" = "$(uname -m)" ] || want_qemu+=("$m")
done
if [ ${#want_qemu[@]} -gt 0 ] && [ ! -e "/usr/lib/binfmt.d/qemu-${want_qemu[0]}.conf" ]; then
  want_apt+=(qemu-user-static)
fi

if [ ${#want_apt[@]} -gt 0 ]; then
  if is_root_debian; then
    log "installing ${want_apt[*]} (apt-get)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${want_apt[@]}" >/dev/null
  else
    log "missing: ${want_apt[*]}. Install them with your package manager (Debian/Ubuntu: sudo apt-get install ${want_apt[*]}), then run this again."
    engine_answers || exit 2
  fi
fi

if ! engine_answers; then
  if [ "$(id -u)" = 0 ] && command -v dockerd >/dev/null 2>&1; then
    log "starting dockerd (log: /var/log/stagecraft-dockerd.log)"
    # setsid: the daemon outlives this script, as a service would.
    setsid dockerd >/var/log/stagecraft-dockerd.log 2>&1 < /dev/null &
    for _ in $(seq 1 60); do engine_answers && break; sleep 1; done
    engine_answers || { log "dockerd did not answer within 60 s; see /var/log/stagecraft-dockerd.log"; exit 2; }
  else
    log "no Docker engine answers. Start it (sudo systemctl start docker) or run this script as root, then run it again."
    exit 2
  fi
fi
binfmt=/proc/sys/fs/binfmt_misc
for m in "${want_qemu[@]}"; do
  [ -e "$binfmt/qemu-$m" ] && continue
  if [ "$(id -u)" != 0 ]; then
    log "emulation of $m is not registered: as root run scripts/setup.sh with STAGECRAFT_PLATFORMS=${STAGECRAFT_PLATFORMS:-}, or: mount -t binfmt_misc binfmt_misc $binfmt; cat /usr/lib/binfmt.d/qemu-$m.conf > $binfmt/register"
    exit 2
  fi
  conf=/usr/lib/binfmt.d/qemu-$m.conf
  [ -r "$conf" ] || { log "no $conf: qemu-user-static is not installed (apt-get install qemu-user-static)"; exit 2; }
  if [ ! -e "$binfmt/register" ]; then
    mount -t binfmt_misc binfmt_misc "$binfmt"
    log "mounted binfmt_misc on $binfmt"
  fi
  [ -e "$binfmt/qemu-$m" ] || cat "$conf" > "$binfmt/register"
  log "registered qemu-$m with binfmt_misc ($conf): $m images run under emulation"
done

log "ready: Docker engine $( (/usr/bin/docker version --format '{{.Server.Version}}' 2>/dev/null || docker version --format '{{.Server.Version}}') )"
if [ "$with_modern" = 1 ]; then
  bash scripts/modern-engine.sh up
fi
if [ "$with_podman" = 1 ]; then
  # --check is quiet about nothing: it names each missing piece; podman-setup.sh itself
  # is a no-op for what exists, so it runs only when something is missing.
  if ! bash scripts/podman-setup.sh --check 2>/dev/null; then
    if [ "$(id -u)" = 0 ]; then
      bash scripts/podman-setup.sh
    else
      bash scripts/podman-setup.sh --check || true
      log "rootless Podman is not ready (the lines above): run scripts/podman-setup.sh as root (sudo), then run this again"
      exit 2
    fi
  fi
fi
