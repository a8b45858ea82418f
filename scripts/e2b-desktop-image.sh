#!/usr/bin/env bash
# Builds E2B's `desktop` template (deploy/e2b-desktop/Dockerfile) as a layer on top of the desktop
# image that scripts/test-image.sh built, into the same cache, so that the container tests find it
# as localhost/hangar-desktop:test beside localhost/hangar:test (test/host/podman.ts). Run it after
# test-image.sh; it prints how long the build took and the size the layer adds.
#
#   sudo ./scripts/e2b-desktop-image.sh [--cache DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
{

CACHE=${HANGAR_IMAGE_CACHE:-/var/cache/hangar-image}
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) CACHE=$2; shift 2 ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "e2b-desktop-image.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "e2b-desktop-image.sh: run as root (as test-image.sh)" >&2; exit 1; }
# The tests' names for both images (test/host/podman.ts, test/host/e2b-support.ts).
BASE=${HANGAR_TEST_IMAGE:-localhost/hangar:test}
IMAGE=${HANGAR_TEST_DESKTOP_TEMPLATE:-localhost/hangar-desktop:test}
started=$(date +%s)
mkdir -p "$CACHE/logs"
LOG=$CACHE/logs/e2b-desktop-build.log

if docker info >/dev/null 2>&1; then
  docker image inspect "$BASE" >/dev/null || { echo "e2b-desktop-image.sh: no $BASE: run scripts/test-image.sh first" >&2; exit 1; }
  timeout 30m docker build --build-arg "BASE=$BASE" -t "$IMAGE" deploy/e2b-desktop >"$LOG" 2>&1 ||
    { tail -30 "$LOG" >&2; exit 1; }
  base_size=$(docker image inspect -f '{{.Size}}' "$BASE")
  size=$(docker image inspect -f '{{.Size}}' "$IMAGE")
else
  STORAGE=
  for driver in overlay vfs; do
    [ -f "$CACHE/storage-$driver/$driver-images/images.json" ] && { STORAGE=$CACHE/storage-$driver; DRIVER=$driver; break; }
  done
  [ -n "$STORAGE" ] || { echo "e2b-desktop-image.sh: no image store in $CACHE: run scripts/test-image.sh first" >&2; exit 1; }
  BUILDAH=(buildah --root "$STORAGE" --runroot "$CACHE/run" --storage-driver "$DRIVER")
  "${BUILDAH[@]}" inspect --type image "$BASE" >/dev/null ||
    { echo "e2b-desktop-image.sh: no $BASE in $STORAGE: run scripts/test-image.sh first" >&2; exit 1; }
  timeout 30m "${BUILDAH[@]}" bud --isolation chroot --format docker --layers --pull=false \
    --build-arg "BASE=$BASE" -t "$IMAGE" deploy/e2b-desktop >"$LOG" 2>&1 ||
    { tail -30 "$LOG" >&2; exit 1; }
  base_size=$("${BUILDAH[@]}" images --format '{{.Size}}' "$BASE" | head -1)
  size=$("${BUILDAH[@]}" images --format '{{.Size}}' "$IMAGE" | head -1)
fi
echo "e2b-desktop-image.sh: $IMAGE built in $(($(date +%s) - started)) s: $size (the desktop image: $base_size); log $LOG"
exit 0
}
