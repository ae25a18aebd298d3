#!/usr/bin/env bash
# The modern engine the tests run beside the host's: Docker 26 with buildx, the
# containerd image store and CDI (`--device nvidia.com/gpu=all`; specs from /etc/cdi,
# /var/run/cdi and share/cdi, see modern-engine/daemon.json), from Debian 13 (trixie) packages only, running in a container
# of the host's engine, with a registry (Debian's docker-registry) in its own network
# namespace. Users do not need it: stagecraft builds on whatever engine they have.
#
#   scripts/modern-engine.sh up              make what is missing, start what is stopped,
#                                            wait until engine and registry answer
#   scripts/modern-engine.sh env             the variables that select it (KEY=VALUE lines)
#   scripts/modern-engine.sh status          what exists, what answers (exit 1: not ready)
#   scripts/modern-engine.sh reset           a fresh engine state (new data volume: no
#                                            images, no build cache); its registry stays
#   scripts/modern-engine.sh down [--purge]  remove its container and data volume;
#                                            --purge: also its registry volume, the engine
#                                            image and the state directory
#
# What it makes, each named after STAGECRAFT_MODERN_NAME (default stagecraft-modern) and
# labelled io.stagecraft.engine=<name>, so `down` removes only that:
# - image stagecraft-engine/docker26:<recipe hash> (debootstrap trixie + docker.io,
#   docker-buildx, docker-registry; about 80 s, once per recipe; reused afterwards;
#   labelled io.stagecraft.engine-image, shared by every engine of this script; an image
#   of an older recipe is removed once no container uses it)
# - container <name> (restarted by `up` when stopped, recreated when the recipe changed)
# - volumes <name>-data (/var/lib/docker) and <name>-registry (the registry's storage)
# - directory STAGECRAFT_MODERN_DIR (default /var/lib/stagecraft/<name>):
#     sock/docker.sock       the engine's API socket (DOCKER_HOST=unix://...)
#     docker-config/         a private DOCKER_CONFIG whose cli-plugins/ holds buildx
#                            0.13.1, taken from the same image (the host's own client
#                            config is left alone)
#     share/                 seen by the engine's container as /stagecraft/share (tests
#                            keep the storage of registries they start there)
# Needs root (debootstrap, bind mounts) and a host engine that answers.
set -euo pipefail
cd "$(dirname "$0")"
HERE=$(pwd)

NAME=${STAGECRAFT_MODERN_NAME:-stagecraft-modern}
DIR=${STAGECRAFT_MODERN_DIR:-/var/lib/stagecraft/$NAME}
MIRROR=${STAGECRAFT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
# docker.io 26.1.5, docker-buildx 0.13.1, docker-registry 2.8.3 in trixie.
PACKAGES=docker.io,docker-buildx,docker-registry,iptables,ca-certificates,procps,curl
LABEL=io.stagecraft.engine=$NAME
IMAGE_LABEL=io.stagecraft.engine-image=docker26
SOCK=$DIR/sock/docker.sock
CONFIG=$DIR/docker-config
PLUGIN=$CONFIG/cli-plugins/docker-buildx

log() { printf 'modern-engine: %s\n' "$*" >&2; }
die() { log "$*"; exit 2; }

# The host's engine, whatever the caller's environment selects.
hd() { env -u DOCKER_HOST -u DOCKER_CONTEXT -u DOCKER_CONFIG docker "$@"; }
# The modern engine.
md() { env -u DOCKER_CONTEXT DOCKER_HOST="unix://$SOCK" DOCKER_CONFIG="$CONFIG" docker "$@"; }

recipe_hash() {
  { printf '%s\n' "stagecraft-modern-engine-v2" "$IMAGE_LABEL" "$SUITE" "$MIRROR" "$PACKAGES"
    cat modern-engine/init.sh modern-engine/daemon.json modern-engine/registry.yml
  } | sha256sum | cut -c1-16
}
IMAGE=stagecraft-engine/docker26:$(recipe_hash)

image_id() { hd image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

make_image() {
  [ -n "$(image_id "$IMAGE")" ] && return 0
  [ "$(id -u)" = 0 ] || die "making $IMAGE needs root (debootstrap); run this as root"
  command -v debootstrap >/dev/null || die "debootstrap is missing: apt-get install debootstrap"
  tmp=$(mktemp -d /var/tmp/stagecraft-engine.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  log "making $IMAGE: debootstrap $SUITE with $PACKAGES (about 80 s, once)"
  if ! debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$tmp/rootfs" "$MIRROR" \
      >"$tmp/debootstrap.log" 2>&1; then
    tail -5 "$tmp/debootstrap.log" >&2
    die "debootstrap $SUITE failed (log above); is $MIRROR reachable?"
  fi
  install -D -m 0755 modern-engine/init.sh "$tmp/rootfs/usr/local/sbin/stagecraft-engine-init"
  install -D -m 0644 modern-engine/daemon.json "$tmp/rootfs/etc/stagecraft/daemon.json"
  install -D -m 0644 modern-engine/registry.yml "$tmp/rootfs/etc/stagecraft/registry.yml"
  rm -rf "$tmp"/rootfs/var/cache/apt/archives/*.deb "$tmp"/rootfs/var/lib/apt/lists/*
  tar -C "$tmp/rootfs" --numeric-owner -c . | hd import \
    --change 'ENTRYPOINT ["/usr/local/sbin/stagecraft-engine-init"]' \
    --change "LABEL $IMAGE_LABEL" - "$IMAGE" >/dev/null
  rm -rf "$tmp"
  log "made $IMAGE"
}

# buildx for the host's client, from the image itself: a private DOCKER_CONFIG.
install_plugin() {
  local want from
  want=$(image_id "$IMAGE")
  from=$(cat "$CONFIG/.image" 2>/dev/null || true)
  [ -x "$PLUGIN" ] && [ "$from" = "$want" ] && return 0
  mkdir -p "$CONFIG/cli-plugins"
  local cid
  cid=$(hd create "$IMAGE")
  hd cp "$cid:/usr/libexec/docker/cli-plugins/docker-buildx" "$PLUGIN.new" >/dev/null
  hd rm "$cid" >/dev/null
  chmod 0755 "$PLUGIN.new" && mv "$PLUGIN.new" "$PLUGIN"
  [ -f "$CONFIG/config.json" ] || printf '{}\n' > "$CONFIG/config.json"
  printf '%s\n' "$want" > "$CONFIG/.image"
  log "buildx $("$PLUGIN" version | awk '{print $2}') in $CONFIG/cli-plugins (DOCKER_CONFIG)"
}

# Engine images of this script (label) that no container uses, except the current one.
remove_unused_images() {
  local used img
  used=$(hd ps -a --format '{{.Image}}' | sort -u)
  for img in $(hd images --filter "label=$IMAGE_LABEL" --format '{{.Repository}}:{{.Tag}}'); do
    [ "$img" = "$IMAGE" ] && continue
    grep -qxF "$img" <<<"$used" && continue
    hd rmi "$img" >/dev/null && log "removed $img (an older recipe)"
  done
}

container_state() { hd container inspect --format "$1" "$NAME" 2>/dev/null || true; }

ensure_container() {
  local image running
  image=$(container_state '{{.Image}}')
  if [ -n "$image" ]; then
    [ "$(container_state "{{index .Config.Labels \"io.stagecraft.engine\"}}")" = "$NAME" ] \
      || die "a container named $NAME exists and was not made by this script; set STAGECRAFT_MODERN_NAME"
    if [ "$image" != "$(image_id "$IMAGE")" ]; then
      log "recreating $NAME on $IMAGE (the recipe changed; its volumes stay)"
      hd rm -f "$NAME" >/dev/null
      image=""
      remove_unused_images
    fi
  fi
  mkdir -p "$DIR/sock" "$DIR/share"
  if [ -z "$image" ]; then
    for v in data registry; do
      hd volume inspect "$NAME-$v" >/dev/null 2>&1 || hd volume create --label "$LABEL" "$NAME-$v" >/dev/null
    done
    log "starting $NAME (socket $SOCK)"
    # --privileged is refused on hosts whose bounding set lacks CAP_SYS_RESOURCE; these
    # options give dockerd what it needs (shared/ENVIRONMENT.md, "A modern engine").
    hd run -d --init --name "$NAME" --hostname "$NAME" --label "$LABEL" \
      --restart unless-stopped \
      --cap-add ALL --cap-drop SYS_RESOURCE \
      --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
      --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm' \
      --tmpfs /run --tmpfs /tmp \
      -v "$NAME-data:/var/lib/docker" -v "$NAME-registry:/var/lib/stagecraft-registry" \
      -v "$DIR/sock:/stagecraft/sock" -v "$DIR/share:/stagecraft/share" \
      "$IMAGE" >/dev/null
    return 0
  fi
  running=$(container_state '{{.State.Running}}')
  if [ "$running" != true ]; then
    log "starting the stopped $NAME"
    hd start "$NAME" >/dev/null
  fi
}

engine_answers() { md version --format '{{.Server.Version}}' >/dev/null 2>&1; }
registry_answers() { hd exec "$NAME" curl -fsS -o /dev/null --max-time 2 http://127.0.0.1:5000/v2/ 2>/dev/null; }

wait_ready() {
  local i
  for i in $(seq 1 120); do
    engine_answers && registry_answers && return 0
    [ "$(container_state '{{.State.Running}}')" = true ] || break
    sleep 0.5
  done
  hd logs --tail 20 "$NAME" >&2 || true
  die "$NAME did not answer on $SOCK within 60 s (its log is above; docker logs $NAME)"
}

host_ip() { container_state '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' | awk '{print $1}'; }

print_env() {
  cat <<EOF
DOCKER_HOST=unix://$SOCK
DOCKER_CONFIG=$CONFIG
STAGECRAFT_MODERN_NAME=$NAME
STAGECRAFT_MODERN_REGISTRY=127.0.0.1:5000
STAGECRAFT_MODERN_REGISTRY_FROM_HOST=$(host_ip):5000
STAGECRAFT_MODERN_ADDRESS=$(host_ip)
STAGECRAFT_MODERN_SHARE=$DIR/share
EOF
}

with_lock() {
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  flock 9
}

cmd_up() {
  with_lock
  hd version --format '{{.Server.Version}}' >/dev/null 2>&1 \
    || die "the host's Docker engine does not answer; run scripts/setup.sh first"
  make_image
  install_plugin
  ensure_container
  wait_ready
  log "ready: Docker $(md version --format '{{.Server.Version}}') with buildx $("$PLUGIN" version | awk '{print $2}'), registry 127.0.0.1:5000 inside; select it with: env \$(scripts/modern-engine.sh env) ..."
}

cmd_down() {
  with_lock
  if [ -n "$(container_state '{{.Id}}')" ]; then
    [ "$(container_state "{{index .Config.Labels \"io.stagecraft.engine\"}}")" = "$NAME" ] \
      || die "the container $NAME was not made by this script; left alone"
    hd rm -f "$NAME" >/dev/null && log "removed container $NAME"
  fi
  local vols=("$NAME-data")
  [ "${1:-}" = --purge ] && vols+=("$NAME-registry")
  for v in "${vols[@]}"; do
    if [ "$(hd volume inspect --format "{{index .Labels \"io.stagecraft.engine\"}}" "$v" 2>/dev/null)" = "$NAME" ]; then
      hd volume rm "$v" >/dev/null && log "removed volume $v"
    fi
  done
  if [ "${1:-}" = --purge ]; then
    # The engine image goes too unless another engine of this script still runs on it.
    local used img
    used=$(hd ps -a --format '{{.Image}}' | sort -u)
    for img in $(hd images --filter "label=$IMAGE_LABEL" --format '{{.Repository}}:{{.Tag}}'); do
      grep -qxF "$img" <<<"$used" && { log "kept $img (another engine uses it)"; continue; }
      hd rmi "$img" >/dev/null && log "removed image $img"
    done
    rm -rf "$DIR" && log "removed $DIR"
  fi
}

cmd_status() {
  printf 'image      %s %s\n' "$IMAGE" "$([ -n "$(image_id "$IMAGE")" ] && echo present || echo missing)"
  printf 'container  %s %s\n' "$NAME" "$(container_state '{{.State.Status}}' | sed 's/^$/missing/')"
  printf 'socket     %s\n' "$SOCK"
  printf 'buildx     %s\n' "$([ -x "$PLUGIN" ] && "$PLUGIN" version | awk '{print $2}' || echo missing)"
  if engine_answers && registry_answers; then
    printf 'engine     Docker %s, registry 127.0.0.1:5000 (from the host: %s:5000)\n' \
      "$(md version --format '{{.Server.Version}}')" "$(host_ip)"
  else
    printf 'engine     not answering\n'
    return 1
  fi
}

case "${1:-}" in
  up) cmd_up ;;
  env) print_env ;;
  status) cmd_status ;;
  reset) cmd_down && cmd_up ;;
  down) shift; cmd_down "${1:-}" ;;
  *) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
