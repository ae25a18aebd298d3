#!/usr/bin/env bash
# Rootless Podman for tests/integration/test_podman.py and test_kube.py: Debian's podman (bookworm: 4.3;
# trixie: 5.x) with what rootless needs (uidmap: newuidmap/newgidmap; slirp4netns: the
# network; fuse-overlayfs: overlay storage where the kernel's own cannot nest;
# catatonit: the init of the pause image that `podman kube play` builds locally for a
# pod's infra container, as no registry is reachable to pull one; acl's setfacl only
# where /dev/net/tun needs it, below), and one non-root user with subordinate uid/gid ranges, a runtime
# directory and read/write access to /dev/net/tun.
#
# Usage (as root): scripts/podman-setup.sh           set up; a no-op for what exists
#                  scripts/podman-setup.sh --check   say what is missing; exit 1 if any
# Environment: STAGECRAFT_PODMAN_USER (default stagecraft-podman),
#              STAGECRAFT_PODMAN_SUBIDS (default 200000:65536: first id and count).
# Exit 0 ready, 1 not ready (--check), 2 bad use (not root, unknown option, not Debian).
set -euo pipefail

USER_NAME="${STAGECRAFT_PODMAN_USER:-stagecraft-podman}"
SUBIDS="${STAGECRAFT_PODMAN_SUBIDS:-200000:65536}"
PACKAGES=(podman uidmap slirp4netns fuse-overlayfs catatonit)

die() { echo "podman-setup: $*" >&2; exit 2; }
say() { echo "podman-setup: $*" >&2; }

missing() {  # print each missing piece, one per line
    local p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "package $p"
    done
    id -u "$USER_NAME" >/dev/null 2>&1 || { echo "user $USER_NAME"; return; }
    grep -q "^$USER_NAME:" /etc/subuid 2>/dev/null || echo "subuid range of $USER_NAME"
    grep -q "^$USER_NAME:" /etc/subgid 2>/dev/null || echo "subgid range of $USER_NAME"
    [ -d "/run/user/$(id -u "$USER_NAME")" ] || echo "runtime dir /run/user/$(id -u "$USER_NAME")"
    local home; home="$(getent passwd "$USER_NAME" | cut -d: -f6)"
    [ -f "$home/.config/containers/containers.conf" ] || echo "containers.conf of $USER_NAME"
    [ -f "$home/.config/containers/storage.conf" ] || echo "storage.conf of $USER_NAME"
    tun_usable || echo "read/write on /dev/net/tun for $USER_NAME"
}

tun_usable() {  # slirp4netns, the rootless network, opens /dev/net/tun as the user:
    # opened here the same way (a device cgroup can refuse what the mode allows); as a
    # third user, who can neither switch to that user nor open it for them, not judged
    [ -e /dev/net/tun ] || return 0
    local open_it='exec 3<>/dev/net/tun'
    if [ "$(id -u)" = 0 ]; then runuser -u "$USER_NAME" -- sh -c "$open_it" 2>/dev/null
    elif [ "$(id -un)" = "$USER_NAME" ]; then sh -c "$open_it" 2>/dev/null
    else return 0
    fi
}

case "${1:-}" in
    "") ;;
    --check) gaps="$(missing)"; [ -z "$gaps" ] && { say "ready ($USER_NAME)"; exit 0; }
             echo "$gaps" | sed 's/^/podman-setup: missing: /' >&2; exit 1 ;;
    *) die "unknown option ${1}; usage: scripts/podman-setup.sh [--check]" ;;
esac
[ "$(id -u)" = 0 ] || die "run as root (it installs packages and adds user $USER_NAME)"
command -v apt-get >/dev/null || die "no apt-get: install ${PACKAGES[*]} with your package manager, then rerun"
[[ "$SUBIDS" =~ ^[0-9]+:[0-9]+$ ]] || die "STAGECRAFT_PODMAN_SUBIDS=$SUBIDS: expected FIRST:COUNT (200000:65536)"

gaps="$(missing)"
if [ -z "$gaps" ]; then say "ready ($USER_NAME): nothing to do"; exit 0; fi

need=()
for p in "${PACKAGES[@]}"; do
    grep -qx "package $p" <<<"$gaps" && need+=("$p")
done
if [ "${#need[@]}" -gt 0 ]; then
    say "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

if ! id -u "$USER_NAME" >/dev/null 2>&1; then
    say "adding user $USER_NAME"
    useradd --create-home --shell /bin/bash "$USER_NAME"
fi
uid="$(id -u "$USER_NAME")"
home="$(getent passwd "$USER_NAME" | cut -d: -f6)"
first="${SUBIDS%%:*}"; count="${SUBIDS##*:}"
last=$((first + count - 1))
if ! grep -q "^$USER_NAME:" /etc/subuid 2>/dev/null || ! grep -q "^$USER_NAME:" /etc/subgid 2>/dev/null; then
    say "subordinate ids $first-$last for $USER_NAME"
    grep -q "^$USER_NAME:" /etc/subuid 2>/dev/null || usermod --add-subuids "$first-$last" "$USER_NAME"
    grep -q "^$USER_NAME:" /etc/subgid 2>/dev/null || usermod --add-subgids "$first-$last" "$USER_NAME"
fi
# udev gives /dev/net/tun mode 0666 on a distribution's host (50-udev-default.rules); a
# container's /dev may hold it 0600 for root (seen on CI machines), and every rootless
# `podman run` then fails in slirp4netns ("open(/dev/net/tun): Permission denied"). Grant
# this one user read/write with an ACL: owner, group and others keep their access (ls
# then shows the ACL's mask in the group bits). The node is made anew at boot, so a
# later set-up grants it again. Where that does not help (no ACL support, a device
# cgroup), say so and go on: the rest of the set-up does not depend on it.
if ! tun_usable; then
    command -v setfacl >/dev/null \
        || DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends acl >/dev/null
    say "granting $USER_NAME read/write on /dev/net/tun (an ACL: slirp4netns needs it)"
    if ! setfacl -m "u:$USER_NAME:rw" /dev/net/tun || ! tun_usable; then
        say "warning: $USER_NAME still cannot open /dev/net/tun: rootless containers will have no network"
    fi
fi
[ -e /dev/net/tun ] || say "no /dev/net/tun on this host (modprobe tun): rootless containers will have no network"
# Without a systemd login session nobody makes /run/user/UID (XDG_RUNTIME_DIR).
install -d -m 0700 -o "$USER_NAME" -g "$USER_NAME" "/run/user/$uid"
# cgroupfs and a file event log: neither needs a systemd user session (cgroup v1 hosts,
# containers without systemd); rootless on cgroup v1 runs without resource limits.
conf="$home/.config/containers/containers.conf"
if [ ! -f "$conf" ]; then
    install -d -m 0755 -o "$USER_NAME" -g "$USER_NAME" "$home/.config" "$home/.config/containers"
    printf '[engine]\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n' > "$conf"
    chown "$USER_NAME:$USER_NAME" "$conf"
fi
# Overlay storage: the kernel's own (rootless since Linux 5.13) where it works, else
# fuse-overlayfs; podman 4.3 otherwise falls back to vfs, a full copy of every layer.
store="$home/.config/containers/storage.conf"
if [ ! -f "$store" ]; then
    install -d -m 0755 -o "$USER_NAME" -g "$USER_NAME" "$home/.config" "$home/.config/containers"
    kernel="$(uname -r)"; major="${kernel%%.*}"; rest="${kernel#*.}"; minor="${rest%%.*}"
    if [ "$major" -gt 5 ] || { [ "$major" = 5 ] && [ "$minor" -ge 13 ]; }; then
        printf '[storage]\ndriver = "overlay"\n' > "$store"
    else
        printf '[storage]\ndriver = "overlay"\n[storage.options.overlay]\nmount_program = "/usr/bin/fuse-overlayfs"\n' > "$store"
    fi
    chown "$USER_NAME:$USER_NAME" "$store"
    # a store made with another driver (vfs, by an earlier podman call) must go before
    # the new driver is used; only an empty one is reset, never someone's images
    runuser -u "$USER_NAME" -- env XDG_RUNTIME_DIR="/run/user/$uid" HOME="$home" \
        sh -c 'cd / && [ -z "$(podman images -q 2>/dev/null)" ] && podman system reset --force' \
        >/dev/null 2>&1 || true
fi
runuser -u "$USER_NAME" -- env XDG_RUNTIME_DIR="/run/user/$uid" HOME="$home" \
    sh -c 'cd / && podman system migrate' >/dev/null 2>&1 || true
runuser -u "$USER_NAME" -- env XDG_RUNTIME_DIR="/run/user/$uid" HOME="$home" \
    sh -c 'cd / && podman info --format "{{.Host.Security.Rootless}} {{.Store.GraphDriverName}}"' >&2 \
    || die "podman info failed as $USER_NAME: see the lines above"
say "ready ($USER_NAME)"
