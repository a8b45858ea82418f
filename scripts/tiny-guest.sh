#!/usr/bin/env bash
# Builds the tiny guest the snapshot tests boot: Debian's cloud kernel and an initramfs of
# busybox-static whose init keeps a counter in RAM and answers HTTP on port 8000 (the port the host
# service forwards to a guest's computer server). It boots in seconds under TCG with 128 MB.
#
#   ./scripts/tiny-guest.sh [DIR]     prints DIR (default /var/cache/hangar-tiny-guest) when ready
#
# DIR gets vmlinuz and initramfs.cpio.gz; they are made once (the kernel comes from apt with
# `apt-get download`: no other download) and kept, so the tests call this script every run.
#
# The guest's HTTP answers (one connection at a time):
#   GET /status          {"status":"ok","counter":N,"bootId":"…","time":EPOCH}
#   GET /inc             adds one to the counter, answers as /status
#   GET /disk            the word written at the start of the guest's disk (/dev/vda)
#   GET /disk/WORD       writes WORD (letters and digits) at the start of the disk
#   GET /settime/EPOCH   sets the guest's clock (tests set it wrong before a snapshot)
# bootId and the clock come from fw_cfg (opt/hangar/boot-id, opt/hangar/clock), which the host
# service sets at every QEMU launch: when the guest sees a new boot id (it was restored or forked),
# it sets its clock from opt/hangar/clock.
set -euo pipefail
DIR=${1:-${HANGAR_TINY_GUEST_DIR:-/var/cache/hangar-tiny-guest}}
if [[ -s $DIR/vmlinuz && -s $DIR/initramfs.cpio.gz ]]; then
  echo "$DIR"
  exit 0
fi
mkdir -p "$DIR"
# One build at a time; a second waits for it and finds the guest made.
exec 9>"$DIR/.lock"
flock 9
if [[ -s $DIR/vmlinuz && -s $DIR/initramfs.cpio.gz ]]; then
  echo "$DIR"
  exit 0
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
BUSYBOX=$(command -v busybox || true)
if [[ -z $BUSYBOX ]] || ! file -L "$BUSYBOX" 2>/dev/null | grep -q 'statically linked'; then
  if [[ -x /bin/busybox ]] && file -L /bin/busybox | grep -q 'statically linked'; then
    BUSYBOX=/bin/busybox
  else
    (cd "$WORK" && apt-get download busybox-static >&2)
    dpkg-deb -x "$WORK"/busybox-static_*.deb "$WORK/bb"
    BUSYBOX=$WORK/bb/bin/busybox
  fi
fi
KERNEL_PKG=$(apt-cache depends linux-image-cloud-amd64 | awk '/Depends: linux-image-/ {print $2; exit}')
(cd "$WORK" && apt-get download "$KERNEL_PKG" >&2)
dpkg-deb -x "$WORK"/linux-image-*.deb "$WORK/k"
MODULES=$(echo "$WORK"/k/lib/modules/*)

ROOT=$WORK/root
mkdir -p "$ROOT"/{bin,dev,proc,sys,run,lib/modules}
cp "$BUSYBOX" "$ROOT/bin/busybox"
# In load order: the PCI transport, the network and the disk, fw_cfg.
for module in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci \
  failover net_failover virtio_net virtio_blk qemu_fw_cfg; do
  path=$(find "$MODULES" -name "$module.ko" | head -1)
  [[ -n $path ]] || { echo "tiny-guest: module $module not found in $KERNEL_PKG" >&2; exit 1; }
  cp "$path" "$ROOT/lib/modules/"
  echo "$module" >>"$ROOT/lib/modules/order"
done

cat >"$ROOT/init" <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /lib/modules/order); do insmod /lib/modules/$m.ko; done
ip link set lo up
ip addr add 10.0.2.15/24 dev eth0
ip link set eth0 up
ip route add default via 10.0.2.2
echo 0 >/run/counter
CFG=/sys/firmware/qemu_fw_cfg/by_name/opt/hangar
cat $CFG/boot-id/raw >/run/boot-id 2>/dev/null
# A new boot id: this RAM was restored into a new QEMU; the clock is set from the host's.
( while :; do
    id=$(cat $CFG/boot-id/raw 2>/dev/null)
    if [ "$id" != "$(cat /run/boot-id)" ]; then
      date -s "@$(cat $CFG/clock/raw)" >/dev/null
      echo "$id" >/run/boot-id
    fi
    sleep 0.2
  done ) &
echo "tiny guest: ready" >/dev/ttyS0
while :; do nc -ll -p 8000 -e /handler; done
EOF
cat >"$ROOT/handler" <<'EOF'
#!/bin/busybox sh
read -r method path version
while read -r line; do [ "$(echo "$line" | tr -d '\r')" = "" ] && break; done
status() {
  echo "{\"status\":\"ok\",\"counter\":$(cat /run/counter),\"bootId\":\"$(cat /run/boot-id)\",\"time\":$(date +%s)}"
}
reply() {
  printf 'HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %s\r\nConnection: close\r\n\r\n%s' \
    "$1" "${#2}" "$2"
}
case "$path" in
  /status) reply "200 OK" "$(status)" ;;
  /inc) echo $(($(cat /run/counter) + 1)) >/run/counter; reply "200 OK" "$(status)" ;;
  /disk) reply "200 OK" "\"$(dd if=/dev/vda bs=64 count=1 2>/dev/null | tr -cd 'A-Za-z0-9')\"" ;;
  /disk/*)
    word=$(echo "${path#/disk/}" | tr -cd 'A-Za-z0-9' | cut -c1-60)
    { printf '%s' "$word"; dd if=/dev/zero bs=1 count=$((64 - ${#word})) 2>/dev/null; } >/run/block
    dd if=/run/block of=/dev/vda bs=64 count=1 conv=fsync 2>/dev/null
    reply "200 OK" "\"$word\"" ;;
  /settime/*) date -s "@${path#/settime/}" >/dev/null; reply "200 OK" "$(status)" ;;
  *) reply "404 Not Found" '{"message":"not found"}' ;;
esac
EOF
chmod +x "$ROOT/init" "$ROOT/handler"
(cd "$ROOT" && find . | "$BUSYBOX" cpio -o -H newc 2>/dev/null | gzip -9) >"$WORK/initramfs.cpio.gz"
cp "$WORK"/k/boot/vmlinuz-* "$WORK/vmlinuz"
# Renamed into place last: a killed build leaves nothing that looks ready.
mv "$WORK/initramfs.cpio.gz" "$DIR/initramfs.cpio.gz.tmp"
mv "$WORK/vmlinuz" "$DIR/vmlinuz"
mv "$DIR/initramfs.cpio.gz.tmp" "$DIR/initramfs.cpio.gz"
echo "$DIR"
