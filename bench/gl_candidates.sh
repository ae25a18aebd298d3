#!/bin/bash
# Issue 23 item 6: what each way of giving OpenCV its libGL.so.1 costs, unpacked.
# Usage: bench/gl_candidates.sh BASE_IMAGE   (a base stage image: Debian with python3)
# For each candidate, one RUN on top of BASE_IMAGE (host engine, BuildKit); prints the
# layer's unpacked size (`docker history`), whether libGL.so.1 loads (ctypes.CDLL, as
# cv2's import does) and whether apt is consistent afterwards (`apt-get check`).
set -uo pipefail
base=${1:?usage: bench/gl_candidates.sh BASE_IMAGE}
docker=${DOCKER:-/usr/bin/docker}
standin='mkdir -p /tmp/si/DEBIAN && printf "%s\n" "Package: stagecraft-stand-ins" "Version: 1" "Architecture: all" "Maintainer: stagecraft" "Provides: libglx-mesa0" "Description: stand-in" > /tmp/si/DEBIAN/control && dpkg-deb --build /tmp/si /tmp/si.deb && dpkg -i /tmp/si.deb && rm -rf /tmp/si /tmp/si.deb && '
declare -A cand=(
  [mesa]='apt-get install -y --no-install-recommends libgl1 libglib2.0-0'
  [glvnd-no-vendor]='apt-get install -y --no-install-recommends libgl1 libglx0 libglib2.0-0 libglx-mesa0-'
  [libopengl0]='apt-get install -y --no-install-recommends libopengl0 libglib2.0-0'
  [stand-in]="${standin}apt-get install -y --no-install-recommends libgl1 libglib2.0-0"
)
for name in mesa glvnd-no-vendor libopengl0 stand-in; do
  tag="stagecraft-i23-gl/$name:probe"
  if ! printf 'FROM %s\nUSER root\nRUN apt-get update && %s && apt-get clean && rm -rf /var/lib/apt/lists/*\n' \
      "$base" "${cand[$name]}" | DOCKER_BUILDKIT=1 "$docker" build -q -t "$tag" - > /tmp/gl-$name.log 2>&1; then
    echo "$name: build failed: $(grep -m1 -E 'unmet|Depends|E:' /tmp/gl-$name.log)"
    continue
  fi
  size=$("$docker" history --format '{{.Size}}' "$tag" | head -1)
  gl=$("$docker" run --rm --entrypoint python3 "$tag" -c 'import ctypes; ctypes.CDLL("libGL.so.1"); print("loads")' 2>&1 | tail -1)
  check=$("$docker" run --rm --user root --entrypoint apt-get "$tag" check > /dev/null 2>&1 && echo ok || echo BROKEN)
  echo "$name: layer $size; libGL.so.1: $gl; apt-get check: $check"
done
