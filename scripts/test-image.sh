#!/usr/bin/env bash
# Builds the desktop container from the Dockerfile and tries it from outside as a user would
# (test/image/check.ts says what is checked). CI runs it on every run (.ci/run).
#
#   ./scripts/test-image.sh [--cache DIR] [--no-build] [--if-missing]     (as root: through sudo otherwise)
#
# `npm test` runs it with --if-missing when the image is not there (test/support/project-image.ts):
# then an image already built is left as it is. One run at a time uses a cache: a second waits.
#
# With a Docker daemon: `docker build`, then `docker run`. Without one: buildah (`--isolation
# chroot`, overlay storage, or vfs where the kernel cannot mount overlay, Docker format so the
# HEALTHCHECK stays), then the built root is run with
# `chroot --userspec` as the image's user in its own PID, mount and network namespaces. When
# node:20-bookworm-slim cannot be pulled, a stand-in is made: `debootstrap --variant=minbase
# bookworm`, this machine's Node 20 and npm in /usr/local, the slim image's dpkg settings and this
# machine's extra CA certificates (for npm behind an intercepting proxy).
#
# The cache directory (default /var/cache/hangar-image, or $HANGAR_IMAGE_CACHE: outside the
# checkout, so that a fresh clone on the same machine uses it) keeps the stand-in base, buildah's
# storage with its layer cache, and the npm cache: a second run rebuilds only what changed. Every step has a time limit; each phase prints
# how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
# Read whole before running, so an edit of this file cannot change a run under way.
{

CACHE=${HANGAR_IMAGE_CACHE:-/var/cache/hangar-image}
BUILD=1
IF_MISSING=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) CACHE=$2; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    --if-missing) IF_MISSING=1; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "test-image.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
# As root (buildah's chroot builds and the runs' namespaces need it): through sudo otherwise.
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "test-image.sh: run it as root (buildah's chroot builds and the runs' namespaces need it)" >&2; exit 1; }
  exec sudo --preserve-env=HANGAR_IMAGE_CACHE,HANGAR_IMAGE_CACHE_GB,DEBOOTSTRAP_MIRROR "$PWD/scripts/test-image.sh" "$@"
fi
CACHE=$(realpath -m "$CACHE")
REPO_DIR=$PWD
mkdir -p "$CACHE"
# The storage, its layers and the runs' names are this script's own: one run at a time.
exec 9>"$CACHE/.lock"
flock -n 9 || { echo "test-image.sh: another run is using $CACHE; waiting for it to end"; flock 9; }
IMAGE=localhost/hangar:test
BASE=docker.io/library/node:20-bookworm-slim

started=$(date +%s)
phase_started=$started
phase() {
  local now
  now=$(date +%s)
  [ "$phase_started" -eq "$started" ] || printf '        (%ss)\n' "$((now - phase_started))"
  phase_started=$now
  printf '[%4ss] %s\n' "$((now - started))" "$*"
}
fail() { echo "test-image.sh: $*" >&2; exit 1; }
# Runs a step with a time limit; on failure shows the end of its log.
step() {
  local limit=$1 log=$2
  shift 2
  if ! timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1; then
    tail -40 "$log" >&2
    fail "failed or took longer than $limit: $* (log: $log)"
  fi
}

if docker info >/dev/null 2>&1; then
  ENGINE=docker
else
  if ! command -v buildah >/dev/null; then
    echo "test-image.sh: no Docker daemon; installing buildah"
    step 10m /tmp/apt-buildah.log env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends buildah
  fi
  ENGINE=buildah
  # overlay keeps each layer as a difference (a few GB in all); vfs copies every layer whole (tens
  # of GB), so it serves only where this kernel cannot mount overlay.
  DRIVER=vfs
  probe=$(mktemp -d "$CACHE/.overlay-probe.XXXXXX")
  mkdir -p "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
  if mount -t overlay overlay -o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
    umount "$probe/merged"
    DRIVER=overlay
  fi
  rm -rf "$probe"
  STORAGE=$CACHE/storage-$DRIVER
  BUILDAH=(buildah --root "$STORAGE" --runroot "$CACHE/run" --storage-driver "$DRIVER")
fi
if [ "$IF_MISSING" -eq 1 ]; then
  if [ "$ENGINE" = docker ]; then built() { docker image inspect "$IMAGE" >/dev/null 2>&1; }; else
    built() { "${BUILDAH[@]}" inspect --type image "$IMAGE" >/dev/null 2>&1; }
  fi
  if built; then
    echo "test-image.sh: $IMAGE is built already (--if-missing: left as it is)"
    exit 0
  fi
fi
# Working containers an interrupted run left behind (the storage is this script's own).
[ "$ENGINE" = docker ] || "${BUILDAH[@]}" rm --all >/dev/null 2>&1 || true
LOGS="$CACHE/logs"
mkdir -p "$LOGS"
echo "test-image.sh: engine $ENGINE${DRIVER:+ ($DRIVER storage)}, cache $CACHE, logs $LOGS"

# 1. The base image: pulled, or the stand-in.
standin_base() {
  local tarball="$CACHE/node-20-bookworm-slim-standin.tar" root
  if [ ! -f "$tarball" ]; then
    phase "stand-in base: debootstrap bookworm (minbase)"
    root=$(mktemp -d "$CACHE/.base.XXXXXX")
    mkdir -p "$CACHE/debs"
    step 20m "$LOGS/debootstrap.log" debootstrap --variant=minbase --cache-dir="$CACHE/debs" bookworm "$root" \
      ${DEBOOTSTRAP_MIRROR:-http://deb.debian.org/debian}
    phase "stand-in base: Node $(node -v) and npm from this machine, slim dpkg settings"
    local nodebin npmdir
    nodebin=$(readlink -f "$(command -v node)")
    npmdir=$(dirname "$(dirname "$(readlink -f "$(command -v npm)")")")
    install -D -m 0755 "$nodebin" "$root/usr/local/bin/node"
    mkdir -p "$root/usr/local/lib/node_modules"
    cp -a "$npmdir" "$root/usr/local/lib/node_modules/npm"
    ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$root/usr/local/bin/npm"
    ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$root/usr/local/bin/npx"
    # debian:bookworm-slim's settings: no documentation, manuals or locales; apt cleans up after itself.
    install -m 0644 "$REPO_DIR/scripts/dpkg-nodoc.cfg" "$root/etc/dpkg/dpkg.cfg.d/docker"
    cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
    echo 'APT::Install-Recommends "false";' >"$root/etc/apt/apt.conf.d/docker-no-recommends"
    rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/lib/apt/lists/* \
      "$root"/var/cache/apt/archives/*.deb
    # The machine's extra CAs (an intercepting proxy's) for npm; node reads NODE_EXTRA_CA_CERTS.
    mkdir -p "$root/etc/ssl"
    cat /usr/local/share/ca-certificates/*.crt >"$root/etc/ssl/extra-ca.pem" 2>/dev/null || true
    tar -C "$root" -cf "$tarball.part" . && mv "$tarball.part" "$tarball"
    rm -rf "$root"
  fi
  phase "stand-in base: import as $BASE"
  local ctr extra=()
  [ -s /usr/local/share/ca-certificates/custom-ca.crt ] || [ -n "$(ls /usr/local/share/ca-certificates/*.crt 2>/dev/null)" ] &&
    extra=(--env NODE_EXTRA_CA_CERTS=/etc/ssl/extra-ca.pem)
  ctr=$("${BUILDAH[@]}" from scratch)
  step 5m "$LOGS/base-import.log" "${BUILDAH[@]}" add "$ctr" "$tarball" /
  "${BUILDAH[@]}" config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env NODE_VERSION="$(node -v | tr -d v)" "${extra[@]}" --cmd node "$ctr"
  step 5m "$LOGS/base-commit.log" "${BUILDAH[@]}" commit --format docker --rm "$ctr" "$BASE"
}

# The layer cache grows with every changed build: past the cap, or when the disk has less than
# 10 GB free, it starts again empty (this build is then a cold one; the stand-in base's tarball stays).
if [ "$ENGINE" = buildah ] && [ "$BUILD" -eq 1 ]; then
  used=$(du -s --block-size=1G "$STORAGE" 2>/dev/null | cut -f1)
  free=$(df --output=avail --block-size=1G "$CACHE" | tail -1 | tr -d ' ')
  if [ "${used:-0}" -gt "${HANGAR_IMAGE_CACHE_GB:-20}" ] || [ "$free" -lt 10 ]; then
    echo "        the layer cache holds ${used} GB (cap ${HANGAR_IMAGE_CACHE_GB:-20}), ${free} GB free on its disk: emptied"
    "${BUILDAH[@]}" rmi --all --force >/dev/null 2>&1 || true
  fi
fi
phase "base image $BASE"
if [ "$BUILD" -eq 0 ]; then
  echo "        --no-build: the image built before"
elif [ "$ENGINE" = docker ]; then
  step 10m "$LOGS/pull.log" docker pull "$BASE"
elif ! "${BUILDAH[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  if ! timeout 60 "${BUILDAH[@]}" pull -q "$BASE" >"$LOGS/pull.log" 2>&1; then
    echo "        cannot pull it ($(tail -1 "$LOGS/pull.log" | cut -c1-120)); making a stand-in"
    standin_base
  fi
fi

# 2. The image, with the layer cache. A build whose checks do not all pass is not left under the name
# the tests use (--if-missing would take it for a good one); its layers stay cached.
UNCHECKED=0
drop_unchecked() {
  [ "$UNCHECKED" -eq 1 ] || return 0
  echo "test-image.sh: the image did not pass its checks: $IMAGE removed (its layers stay cached)" >&2
  if [ "$ENGINE" = docker ]; then
    command docker rmi -f "$IMAGE" hangar >/dev/null 2>&1
  else
    "${BUILDAH[@]}" rmi -f "$IMAGE" localhost/hangar >/dev/null 2>&1
  fi
  return 0
}
trap drop_unchecked EXIT

phase "build the Dockerfile"
if [ "$BUILD" -eq 0 ]; then
  :
elif [ "$ENGINE" = docker ]; then
  step 60m "$LOGS/build.log" docker build -t "$IMAGE" .
else
  mkdir -p "$CACHE/npm"
  step 60m "$LOGS/build.log" "${BUILDAH[@]}" bud --isolation chroot --format docker --layers --pull=false \
    -v "$CACHE/npm:/root/.npm" -t "$IMAGE" .
fi
[ "$BUILD" -eq 0 ] || UNCHECKED=1

# 3. Run the image as a user would and check it from outside (test/image/check.ts).
if [ "$ENGINE" = docker ]; then
  docker tag "$IMAGE" hangar
  SIZE="$(($(docker image inspect -f '{{.Size}}' "$IMAGE") / 1000000)) MB"
else
  "${BUILDAH[@]}" tag "$IMAGE" localhost/hangar
  # sed, not head: head's early exit would kill the writer with SIGPIPE, which pipefail makes fatal.
  SIZE=$("${BUILDAH[@]}" images --format '{{.Size}}' "$IMAGE" | sed -n 1p)
  mapfile -t IMAGE_ENV < <("${BUILDAH[@]}" inspect --type image --format '{{range .OCIv1.Config.Env}}{{println .}}{{end}}' "$IMAGE" | grep .)
fi
CHECK=(node --import tsx test/image/check.ts)
SHOTS="$(realpath -m .tmp/image)"
mkdir -p "$SHOTS"
RUN=0 PID1= CTR= ROOT= RUNNER=

# `docker run …` as written in the docs: with Docker, detached under a known name; without it, the
# image's root (a fresh buildah container) under chroot as uid 10001 in new PID, mount and network
# namespaces, with -e, -v (:ro), --group-add and --read-only done the same way.
docker() {
  [ "$1" = run ] || fail "docker $1: only 'docker run' lines are run"
  shift
  RUN=$((RUN + 1))
  STARTED_MS=$(date +%s%3N)
  if [ "$ENGINE" = docker ]; then
    command docker run -d --name "hangar-image-test-$RUN" "$@" >/dev/null
    PID1=$(command docker inspect -f '{{.State.Pid}}' "hangar-image-test-$RUN")
    return
  fi
  local envs=() vols=() groups=10001 readonly=0 image=
  while [ $# -gt 0 ]; do
    case "$1" in
      --rm | -d | -i | -t | -it) shift ;;
      -p) shift 2 ;;
      -e) [[ "$2" == *=* ]] && envs+=("$2") || envs+=("$2=${!2:-}"); shift 2 ;;
      -v) vols+=("$2"); shift 2 ;;
      --group-add) groups+=",$2"; shift 2 ;;
      --read-only) readonly=1; shift ;;
      -*) fail "docker run $1: this option is not emulated" ;;
      *) image=$1; shift; break ;;
    esac
  done
  [ "$image" = hangar ] || fail "docker run: unknown image $image"
  CTR=$("${BUILDAH[@]}" from --pull=false "$IMAGE")
  ROOT=$("${BUILDAH[@]}" mount "$CTR")
  local mounts="" v src dst opt
  for v in "${vols[@]}"; do
    IFS=: read -r src dst opt <<<"$v"
    src=$(realpath "$src")
    if [ -d "$src" ]; then mkdir -p "$ROOT$dst"; else mkdir -p "$(dirname "$ROOT$dst")" && touch "$ROOT$dst"; fi
    mounts+="mount --bind '$src' '$ROOT$dst';"
    [ "$opt" != ro ] || mounts+="mount -o remount,bind,ro '$ROOT$dst';"
  done
  [ "$readonly" -eq 0 ] || mounts="mount --bind '$ROOT' '$ROOT'; mount -o remount,bind,ro '$ROOT'; mount -t tmpfs -o mode=1777 tmpfs '$ROOT/tmp'; mount -t tmpfs tmpfs '$ROOT/home/hangar'; chown 10001:10001 '$ROOT/home/hangar';$mounts"
  mkdir -p "$ROOT/run/secrets"
  local quoted=""
  [ $# -eq 0 ] || quoted=$(printf "'%s' " "$@")
  # Sets up the namespaces' mounts and loopback, then becomes tini as uid 10001 (PID 1 inside).
  timeout --kill-after=5 15m unshare --pid --fork --mount --net --propagation private -- bash -c "
    set -e
    ip link set lo up
    mount -t proc proc '$ROOT/proc'
    mount --rbind /dev '$ROOT/dev'
    mount -t tmpfs -o mode=1777 tmpfs '$ROOT/dev/shm'
    $mounts
    exec chroot --userspec=10001:10001 --groups=$groups '$ROOT' /usr/bin/env -i $(printf "'%s' " "${IMAGE_ENV[@]}" "${envs[@]}") \
      /usr/bin/tini -- node /opt/hangar/dist/cli/container.js $quoted
  " >"$LOGS/run-$RUN.log" 2>&1 &
  RUNNER=$!
  # timeout → unshare → (forked) PID 1 of the new namespace, which becomes tini. A container that
  # ends at once (run 3's, refusing an unreadable key) may be gone before it is seen: PID1 stays
  # empty, and a run that checks it says so.
  PID1=$(timeout 10 bash -c "until u=\$(pgrep -P $RUNNER) && pgrep -P \$u; do kill -0 $RUNNER 2>/dev/null || exit 0; sleep 0.1; done" | sed -n 1p) ||
    fail "the container did not start (log: $LOGS/run-$RUN.log)"
  STARTED_MS=$(date +%s%3N)
}

# Runs the checker in the container's network namespace (with Docker: the published ports).
check() {
  local ns
  [ -n "$PID1" ] || { tail -30 "$LOGS/run-$RUN.log" >&2; fail "the container of run $RUN ended at once (log: $LOGS/run-$RUN.log)"; }
  ns=$(readlink "/proc/$PID1/ns/pid")
  if [ "$ENGINE" = docker ]; then
    IMAGE_STARTED_MS=$STARTED_MS IMAGE_SHOTS=$SHOTS timeout 5m "${CHECK[@]}" "$@" --pid-ns "$ns"
  else
    IMAGE_STARTED_MS=$STARTED_MS IMAGE_SHOTS=$SHOTS timeout 5m nsenter --net="/proc/$PID1/ns/net" "${CHECK[@]}" "$@" --pid-ns "$ns"
  fi || { tail -30 "$LOGS/run-$RUN.log" >&2; stop_container; fail "the checks of run $RUN failed (log: $LOGS/run-$RUN.log)"; }
}

# Every process in the container's PID namespace, as host PIDs.
container_pids() {
  local ns p
  ns=$(readlink "/proc/$PID1/ns/pid") || return 0
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$ns" ] && echo "${p#/proc/}"
  done
  return 0
}

# SIGTERM to PID 1: everything must be gone within 10 s, with exit 0.
stop_container() {
  local code=0 ns
  ns=$(readlink "/proc/$PID1/ns/pid" 2>/dev/null || true)
  if [ "$ENGINE" = docker ]; then
    timeout 15 command docker stop -t 10 "hangar-image-test-$RUN" >/dev/null
    code=$(command docker inspect -f '{{.State.ExitCode}}' "hangar-image-test-$RUN")
    command docker rm -f "hangar-image-test-$RUN" >/dev/null
  else
    kill -TERM "$PID1" 2>/dev/null || true
    timeout 10 tail --pid="$RUNNER" -f /dev/null || { kill -KILL "$PID1" 2>/dev/null; echo "still running 10 s after SIGTERM" >&2; code=124; }
    wait "$RUNNER" || code=$?
    "${BUILDAH[@]}" umount "$CTR" >/dev/null 2>&1 || true
    "${BUILDAH[@]}" rm "$CTR" >/dev/null 2>&1 || true
  fi
  STOP_CODE=$code
  [ -z "$ns" ] || ! container_pids_in "$ns" || { echo "processes left after the stop" >&2; STOP_CODE=125; }
}
container_pids_in() {
  local p
  for p in /proc/[0-9]*; do [ "$(readlink "$p/ns/pid" 2>/dev/null)" = "$1" ] && return 0; done
  return 1
}
in_container() { nsenter -t "$PID1" --net --mount --pid chroot --userspec=10001:10001 "$ROOT" /usr/bin/env -i "${IMAGE_ENV[@]}" "$@"; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; drop_unchecked' EXIT
cd "$WORK"
REPO=$OLDPWD
CHECK=(node --import "$REPO/node_modules/tsx/dist/loader.mjs" "$REPO/test/image/check.ts")
export HANGAR_API_KEYS=image-test-key
# The checker's first start (tsx transforming it, sharp loading from a cold disk: 0.5 s here) would
# count against the container's 5 s to answer: it starts once before anything is timed.
"${CHECK[@]}" warm || fail "the checker does not start (test/image/check.ts)"

phase "run 1: keys in the environment (cloud mode): desktop, apps, where the keys went, TLS, SIGTERM"
docker run --rm -p 8443:8443 -e CONTAINER_NAME=image-test -e HANGAR_API_KEYS hangar
check desktop
phase "        health check"
if [ "$ENGINE" = docker ]; then
  command docker exec "hangar-image-test-$RUN" node /opt/hangar/dist/src/container/health.js /status
else
  in_container node /opt/hangar/dist/src/container/health.js /status
fi || fail "the health check failed"
echo "  ok   the health check exits 0"
stop_container
[ "$STOP_CODE" -eq 0 ] || fail "SIGTERM: exit $STOP_CODE (log: $LOGS/run-$RUN.log)"
echo "  ok   SIGTERM: every process gone within 10 s, exit 0"

phase "run 2: the documented lines as written"
mkdir -p tls && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=image-test \
  -keyout tls/tls.key -out tls/tls.crt 2>/dev/null
echo image-test-key >api-keys
chmod 0640 tls/tls.key api-keys
while IFS= read -r line; do
  echo "  \$ $line"
  export IMAGE_CONTAINER_NAME=my-desktop
  eval "$line"
  case "$line" in
    *8443*) check cloud ;;
    *) check local ;;
  esac
  stop_container
  [ "$STOP_CODE" -eq 0 ] || fail "SIGTERM: exit $STOP_CODE"
done < <({ sed -n 's/^#   \(docker run .*\)$/\1/p' "$REPO/Dockerfile"; grep '^docker run ' "$REPO/docs/deploy.md"; } | sort -u)

phase "run 3: a key file uid 10001 cannot read: the error says what to do"
chmod 0600 tls/tls.key
docker run --rm -p 8443:8443 -e CONTAINER_NAME=my-desktop -v "$PWD/tls:/run/secrets/hangar/tls:ro" hangar
if [ "$ENGINE" = docker ]; then
  timeout 30 command docker wait "hangar-image-test-$RUN" >/dev/null
  command docker logs "hangar-image-test-$RUN" >"$LOGS/run-$RUN.log" 2>&1
else
  timeout 30 tail --pid="$RUNNER" -f /dev/null || fail "the container kept running with an unreadable key"
fi
grep -q "cannot read /run/secrets/hangar/tls/tls.key (EACCES.*--group-add" "$LOGS/run-$RUN.log" ||
  fail "no clear error for an unreadable key (log: $LOGS/run-$RUN.log)"
echo "  ok   exits with: $(grep -o 'cannot read .*' "$LOGS/run-$RUN.log" | cut -c1-150)…"
stop_container

phase "run 4: HANGAR_VNC=1, the viewer on 6080"
docker run --rm -p 8000:8000 -p 6080:6080 -e HANGAR_VNC=1 -e HANGAR_VNC_PASSWORD=image-test hangar
check vnc
stop_container
[ "$STOP_CODE" -eq 0 ] || fail "SIGTERM: exit $STOP_CODE"

UNCHECKED=0
phase "done: image $IMAGE, $SIZE uncompressed"
exit 0
}
