#!/usr/bin/env bash
# Builds the desktop container from the Dockerfile and tries it from outside as a user would
# (test/image/image-check.ts says what is checked). CI runs it on every run (.ci/run).
#
#   sudo ./scripts/test-image.sh [--cache build/image-cache] [--keep]
#
# With a Docker daemon: `docker build`, then `docker run`. Without one: buildah (`--isolation
# chroot`, vfs storage, Docker format so the HEALTHCHECK stays), then the built root is run with
# `chroot --userspec` as the image's user in its own PID, mount and network namespaces. When
# node:20-bookworm-slim cannot be pulled, a stand-in is made: `debootstrap --variant=minbase
# bookworm`, this machine's Node 20 and npm in /usr/local, the slim image's dpkg settings and this
# machine's extra CA certificates (for npm behind an intercepting proxy).
#
# The cache directory keeps the stand-in base, buildah's storage with its layer cache, and the npm
# cache: a second run rebuilds only what changed. Every step has a time limit; each phase prints
# how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

CACHE=build/image-cache
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) CACHE=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "test-image.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "test-image.sh: run as root (buildah's chroot builds and namespaces need it)" >&2; exit 1; }
CACHE=$(realpath -m "$CACHE")
mkdir -p "$CACHE"
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
  command -v buildah >/dev/null || fail "neither a Docker daemon nor buildah (apt-get install buildah)"
  ENGINE=buildah
  BUILDAH=(buildah --root "$CACHE/storage" --runroot "$CACHE/run" --storage-driver vfs)
fi
LOGS="$CACHE/logs"
mkdir -p "$LOGS"
echo "test-image.sh: engine $ENGINE, cache $CACHE, logs $LOGS"

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
    cat >"$root/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
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

phase "base image $BASE"
if [ "$ENGINE" = docker ]; then
  step 10m "$LOGS/pull.log" docker pull "$BASE"
elif ! "${BUILDAH[@]}" inspect --type image "$BASE" >/dev/null 2>&1; then
  if ! timeout 60 "${BUILDAH[@]}" pull -q "$BASE" >"$LOGS/pull.log" 2>&1; then
    echo "        cannot pull it ($(tail -1 "$LOGS/pull.log" | cut -c1-120)); making a stand-in"
    standin_base
  fi
fi

# 2. The image, with the layer cache.
phase "build the Dockerfile"
if [ "$ENGINE" = docker ]; then
  step 60m "$LOGS/build.log" docker build -t "$IMAGE" .
else
  mkdir -p "$CACHE/npm"
  step 60m "$LOGS/build.log" "${BUILDAH[@]}" bud --isolation chroot --format docker --layers --pull=false \
    -v "$CACHE/npm:/root/.npm" -t "$IMAGE" .
fi
