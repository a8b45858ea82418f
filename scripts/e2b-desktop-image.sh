#!/usr/bin/env bash
# Builds E2B's `desktop` template (deploy/e2b-desktop/Dockerfile) as a layer on top of the desktop
# image that scripts/test-image.sh built, into the same cache, so that the container tests find it
# as localhost/hangar-desktop:test beside localhost/hangar:test (test/host/podman.ts). CI runs it
# after test-image.sh; it prints how long the build took and the size of both images.
#
#   ./scripts/e2b-desktop-image.sh [--cache DIR] [--if-missing]     (as root: through sudo otherwise)
#
# `npm test` runs it with --if-missing when the template is not there (test/host/e2b-desktop-image.ts):
# then a template built from deploy/e2b-desktop as it is now on the desktop image as it is now is
# left as it is (one built from an older desktop image or template directory is built again;
# buildah's layer cache makes that quick when the Dockerfile is the same). The image names are the tests' ($HANGAR_TEST_IMAGE, $HANGAR_TEST_DESKTOP_TEMPLATE).
set -euo pipefail
cd "$(dirname "$0")/.."
{

CACHE=${HANGAR_IMAGE_CACHE:-/var/cache/hangar-image}
IF_MISSING=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) CACHE=$2; shift 2 ;;
    --if-missing) IF_MISSING=1; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "e2b-desktop-image.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "e2b-desktop-image.sh: run it as root (as test-image.sh)" >&2; exit 1; }
  exec sudo --preserve-env=HANGAR_IMAGE_CACHE,HANGAR_TEST_IMAGE,HANGAR_TEST_DESKTOP_TEMPLATE "$PWD/scripts/e2b-desktop-image.sh" "$@"
fi
CACHE=$(realpath -m "$CACHE")
mkdir -p "$CACHE/logs"
# The cache's storage is test-image.sh's: one run at a time, its lock.
exec 9>"$CACHE/.lock"
flock -n 9 || { echo "e2b-desktop-image.sh: another run is using $CACHE; waiting for it to end"; flock 9; }
BASE=${HANGAR_TEST_IMAGE:-localhost/hangar:test}
IMAGE=${HANGAR_TEST_DESKTOP_TEMPLATE:-localhost/hangar-desktop:test}
LABEL=dev.hangar.e2b-template-base
LOG=$CACHE/logs/e2b-desktop-build.log
started=$(date +%s)

if docker info >/dev/null 2>&1; then
  base_id() { docker image inspect -f '{{.Id}}' "$BASE"; }
  built_on() { docker image inspect -f "{{index .Config.Labels \"$LABEL\"}}" "$IMAGE" 2>/dev/null || true; }
  BUILD=(docker build)
  size_of() { echo "$(($(docker image inspect -f '{{.Size}}' "$1") / 1000000)) MB"; }
else
  STORAGE=
  for driver in overlay vfs; do
    [ -f "$CACHE/storage-$driver/$driver-images/images.json" ] && { STORAGE=$CACHE/storage-$driver; DRIVER=$driver; break; }
  done
  [ -n "$STORAGE" ] || { echo "e2b-desktop-image.sh: no image store in $CACHE: run scripts/test-image.sh first" >&2; exit 1; }
  ENGINE=(buildah --root "$STORAGE" --runroot "$CACHE/run" --storage-driver "$DRIVER")
  base_id() { "${ENGINE[@]}" inspect --type image --format '{{.FromImageID}}' "$BASE"; }
  built_on() { "${ENGINE[@]}" inspect --type image --format "{{index .Docker.Config.Labels \"$LABEL\"}}" "$IMAGE" 2>/dev/null || true; }
  BUILD=("${ENGINE[@]}" bud --isolation chroot --format docker --layers --pull=false)
  size_of() { "${ENGINE[@]}" images --format '{{.Size}}' "$1" | sed -n 1p; }
fi

base=$(base_id) && [ -n "$base" ] || { echo "e2b-desktop-image.sh: no $BASE in $CACHE: run scripts/test-image.sh first" >&2; exit 1; }
# What the template is made from: the desktop image and the files of its directory.
made_from="$base $(cd deploy/e2b-desktop && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)"
if [ "$IF_MISSING" -eq 1 ] && [ "$(built_on)" = "$made_from" ]; then
  echo "e2b-desktop-image.sh: $IMAGE is built on $BASE as it is (--if-missing: left as it is)"
  exit 0
fi
timeout 30m "${BUILD[@]}" --build-arg "BASE=$BASE" --label "$LABEL=$made_from" -t "$IMAGE" deploy/e2b-desktop >"$LOG" 2>&1 ||
  { tail -30 "$LOG" >&2; echo "e2b-desktop-image.sh: the build failed (log: $LOG)" >&2; exit 1; }
echo "e2b-desktop-image.sh: $IMAGE built in $(($(date +%s) - started)) s: $(size_of "$IMAGE") (the desktop image: $(size_of "$BASE")); log $LOG"
exit 0
}
