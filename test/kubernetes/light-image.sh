#!/bin/bash
# A light desktop image for the Kubernetes tests, pushed to the test cluster's registry: the
# cluster's own busybox image (built from Debian's busybox-static) with, as its entry point, a web
# server that answers the computer server's /status on 8000 as uid 10001. Pods of it are ready in
# about a second, so the tests can make many. Usage: light-image.sh BUSYBOX_TAR REGISTRY (host:port)
set -euo pipefail
tar=$1 registry=$2
work=$(mktemp -d)
trap 'buildah --root "$work/root" --runroot "$work/run" --storage-driver vfs rm --all >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
b=(buildah --root "$work/root" --runroot "$work/run" --storage-driver vfs)
mkdir -p "$work/www"
printf '{"status":"ok","light":true}\n' >"$work/www/status"
c=$("${b[@]}" from -q "docker-archive:$tar")
"${b[@]}" copy --chown 0:0 "$c" "$work/www" /www >/dev/null
"${b[@]}" config --user 10001:10001 \
  --entrypoint '["/bin/sh","-c","echo light desktop $CONTAINER_NAME $HANGAR_DISPLAY; exec /bin/busybox httpd -f -v -p 8000 -h /www","light"]' \
  --cmd '[]' "$c"
"${b[@]}" commit -q "$c" localhost/hangar-light:test >/dev/null
"${b[@]}" push -q --tls-verify=false localhost/hangar-light:test "docker://$registry/hangar-light:test"
echo "$registry/hangar-light:test"
