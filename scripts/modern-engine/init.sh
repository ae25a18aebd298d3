#!/bin/sh
# PID 2 of the modern engine's container (tini, from `docker run --init`, is PID 1):
# make /sys and the cgroup hierarchies writable for the nested engine, start the
# registry the engine exports caches to (same network namespace: 127.0.0.1:5000 here),
# then become dockerd. Runs again on every container start.
set -eu
# The container is not --privileged (refused on these hosts); its capabilities allow
# these remounts, which dockerd and runc need to manage cgroups of nested containers.
mount -o remount,rw /sys
awk '$3 == "cgroup" || $3 == "cgroup2" { print $2 }' /proc/self/mounts | while read -r m; do
  mount -o remount,bind,rw "$m"
done
# CDI specs (daemon.json: features.cdi, cdi-spec-dirs) also come from the shared
# directory, so tests on the host can give a container devices with --device VENDOR/CLASS=NAME.
mkdir -p /stagecraft/share/cdi
docker-registry serve /etc/stagecraft/registry.yml >>/var/log/stagecraft-registry.log 2>&1 &
# Registries on this container's own address (test registries that the host reaches as
# well) are plain HTTP, as 127.0.0.1 is.
self=$(awk -v h="$(hostname)" '$2 == h { print $1; exit }' /etc/hosts)
exec dockerd --config-file /etc/stagecraft/daemon.json ${self:+--insecure-registry "$self/32"}
