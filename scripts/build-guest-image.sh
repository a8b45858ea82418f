#!/usr/bin/env bash
# Builds a bootable Debian 12 guest disk for Hangar's host service: a raw sparse disk with a GPT,
# an EFI system partition (systemd-boot for OVMF, syslinux for QEMU's BIOS) holding the kernel and
# initrd, and an ext4 root with systemd, the virtual desktop packages, Node 20 (this machine's
# binary) and Hangar's computer server enabled as a systemd unit on port 8000.
#
#   sudo ./scripts/build-guest-image.sh [--output build/guest/disk.img] [--size 8G]
#                                       [--display WxH] [--cache build/guest/cache]
#
# The guest's virtual desktop takes the VM's display size (the host service's `display`), or the
# size --display forces.
#
# No loop devices and no mounts of the disk: the root file system is written from a directory
# with `mkfs.ext4 -d`, the ESP with `mkfs.vfat` and mtools, at their offsets in the disk file.
# The Debian part (debootstrap + packages) is cached by its package list; a rebuild after a code
# change only repacks Hangar. The mirror is debootstrap's default unless DEBOOTSTRAP_MIRROR is set.
set -euo pipefail
cd "$(dirname "$0")/.."

OUTPUT=build/guest/disk.img
SIZE=8G
DISPLAY_SIZE=
CACHE=build/guest/cache
SUITE=bookworm

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --output) OUTPUT=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --display) DISPLAY_SIZE=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "build-guest-image.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
  esac
done
[ -z "$DISPLAY_SIZE" ] || [[ "$DISPLAY_SIZE" =~ ^[0-9]{3,5}x[0-9]{3,5}$ ]] || { echo "--display must be WxH, e.g. 1280x800" >&2; exit 2; }
# As root (debootstrap and chroot need it): through sudo otherwise.
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "build-guest-image.sh: run it as root (debootstrap and chroot need it)" >&2; exit 1; }
  exec sudo --preserve-env=DEBOOTSTRAP_MIRROR "$PWD/scripts/build-guest-image.sh" "$@"
fi
for tool in debootstrap chroot mkfs.ext4 mkfs.vfat mcopy mmd sfdisk syslinux npm node; do
  command -v "$tool" >/dev/null || {
    echo "build-guest-image.sh: $tool is missing (./scripts/install-deps.sh installs it)" >&2
    exit 1
  }
done
GPTMBR=/usr/lib/syslinux/mbr/gptmbr.bin
[ -f "$GPTMBR" ] || { echo "build-guest-image.sh: $GPTMBR is missing (package syslinux-common)" >&2; exit 1; }

started=$(date +%s)
step() { printf '[%4ss] %s\n' "$(($(date +%s) - started))" "$*"; }

# What the guest runs: the computer server's runtime packages with the container's desktop apps
# (the same list as the container's),
# plus a kernel, an init, networking and the UEFI boot loader.
mapfile -t RUNTIME < <(./scripts/install-deps.sh --runtime --list)
GUEST=(
  linux-image-amd64 initramfs-tools systemd systemd-sysv udev kmod
  iproute2 procps less systemd-boot-efi
)
PACKAGES=("${RUNTIME[@]}" "${GUEST[@]}")

OUTPUT=$(realpath -m "$OUTPUT")
CACHE=$(realpath -m "$CACHE")
mkdir -p "$(dirname "$OUTPUT")" "$CACHE"
WORK=$(mktemp -d "$(dirname "$OUTPUT")/.guest-build.XXXXXX")
MOUNTS=()
# Removes a build directory, but never while something is still mounted in it (a bound /dev!).
remove_tree() {
  if grep -q " $1/" /proc/self/mounts; then
    echo "build-guest-image.sh: $1 still has mounts; left in place" >&2
    return 1
  fi
  rm -rf "$1"
}

in_chroot() { chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LC_ALL=C "${@:2}"; }
mount_api() { # proc, sys and dev for package scripts (the kernel's initramfs hook needs them)
  local root=$1
  mount -t proc proc "$root/proc"
  MOUNTS+=("$root/proc")
  mount -t sysfs sys "$root/sys"
  MOUNTS+=("$root/sys")
  mount --bind /dev "$root/dev"
  MOUNTS+=("$root/dev")
}
unmount_api() {
  for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do umount -l "${MOUNTS[i]}" 2>/dev/null || true; done
  MOUNTS=()
}
cleanup() {
  unmount_api
  remove_tree "$WORK"
}
trap cleanup EXIT

# 1. The Debian base, cached by suite and package list.
key=$(printf '%s\n' "$SUITE" "${PACKAGES[@]}" | sha256sum | cut -c1-16)
BASE=$CACHE/rootfs-$key.tar
if [ ! -f "$BASE" ]; then
  step "debootstrap $SUITE (minbase) into a fresh root"
  root=$WORK/base
  debootstrap --variant=minbase "$SUITE" "$root" ${DEBOOTSTRAP_MIRROR:+"$DEBOOTSTRAP_MIRROR"} >"$WORK/debootstrap.log" 2>&1 ||
    { tail -30 "$WORK/debootstrap.log" >&2; exit 1; }
  # No documentation in the image; no services started while packages install.
  install -m 0644 scripts/dpkg-nodoc.cfg "$root/etc/dpkg/dpkg.cfg.d/01-hangar-nodoc"
  printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d" && chmod +x "$root/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  step "install ${#PACKAGES[@]} packages (kernel, systemd, the desktop)"
  mount_api "$root"
  in_chroot "$root" apt-get update -q >"$WORK/apt.log" 2>&1 &&
    in_chroot "$root" apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >>"$WORK/apt.log" 2>&1 ||
    { tail -30 "$WORK/apt.log" >&2; exit 1; }
  in_chroot "$root" apt-get clean
  unmount_api
  rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
  step "cache the base ($(du -sh "$root" | cut -f1))"
  tar -C "$root" --numeric-owner -cf "$BASE.tmp" . && mv "$BASE.tmp" "$BASE"
  remove_tree "$root"
else
  step "Debian base from the cache ($(basename "$BASE"))"
fi

ROOT=$WORK/rootfs
mkdir -p "$ROOT"
tar -C "$ROOT" --numeric-owner -xf "$BASE"

# 2. Node 20 (this machine's binary; Debian 12's nodejs is 18) and Hangar with its runtime modules.
NODE=$(realpath "$(command -v node)")
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' ||
  { echo "build-guest-image.sh: Node 20 or later is needed, this is $(node --version)" >&2; exit 1; }
step "Node $(node --version) and Hangar"
install -m 0755 "$NODE" "$ROOT/usr/local/bin/node"
npm pack --silent --pack-destination "$WORK" >"$WORK/pack.log" 2>&1 || { cat "$WORK/pack.log" >&2; exit 1; }
APP=$ROOT/opt/hangar
mkdir -p "$APP"
tar -C "$APP" --strip-components=1 -xzf "$WORK"/hangar-*.tgz
cp package-lock.json "$APP/"
(cd "$APP" && npm install --omit=dev --ignore-scripts --no-audit --no-fund --prefer-offline >"$WORK/npm.log" 2>&1) ||
  { tail -30 "$WORK/npm.log" >&2; exit 1; }
ln -sf /opt/hangar/bin/hangar.js "$ROOT/usr/local/bin/hangar"
chown -R 0:0 "$APP"

# 3. The system: host name, network (DHCP on the first wired link), the hangar user, the unit.
step "configure the system"
echo hangar-guest >"$ROOT/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 hangar-guest\n::1 localhost\n' >"$ROOT/etc/hosts"
mkdir -p "$ROOT/etc/systemd/network"
printf '[Match]\nName=en* eth*\n\n[Network]\nDHCP=yes\n' >"$ROOT/etc/systemd/network/20-wired.network"
in_chroot "$ROOT" systemctl enable systemd-networkd.service >/dev/null 2>&1
in_chroot "$ROOT" systemctl mask systemd-networkd-wait-online.service >/dev/null 2>&1
# No daily maintenance of its own: package lists and upgrades, TRIM, e2scrub and dpkg's backup ran at
# random times and, on a restore or fork of an older snapshot, all at once when the clock agent set
# the time forward (apt-daily catches up what it missed): minutes of emulated CPU and network traffic
# nobody asked for, under the agent's feet. The desktop's image is updated by rebuilding it.
in_chroot "$ROOT" systemctl mask apt-daily.timer apt-daily-upgrade.timer fstrim.timer e2scrub_all.timer \
  dpkg-db-backup.timer >/dev/null 2>&1
in_chroot "$ROOT" useradd --create-home --uid 1000 --user-group --shell /bin/bash hangar
in_chroot "$ROOT" passwd --lock root >/dev/null
install -m 0644 deploy/systemd/hangar-computer.service "$ROOT/etc/systemd/system/hangar-computer.service"
install -D -m 0755 deploy/systemd/hangar-vm-display "$ROOT/usr/local/libexec/hangar-vm-display"
# The container's desktop settings: Chromium's accessibility flags, what xdg-open starts.
install -D -m 0644 deploy/desktop/chromium-flags "$ROOT/etc/chromium.d/hangar"
install -D -m 0644 deploy/desktop/mimeapps.list "$ROOT/etc/xdg/mimeapps.list"
{
  echo "# Settings of hangar-computer.service, e.g. HANGAR_DISPLAY=1920x1080 (default: the VM's display)."
  [ -z "$DISPLAY_SIZE" ] || echo "HANGAR_DISPLAY=$DISPLAY_SIZE"
} >"$ROOT/etc/default/hangar"
in_chroot "$ROOT" systemctl enable hangar-computer.service >/dev/null 2>&1
# A caged VM (a network policy): names through its egress gate, its egress CA trusted (docs/egress.md).
install -m 0644 deploy/systemd/hangar-egress-trust.service "$ROOT/etc/systemd/system/"
install -D -m 0755 deploy/systemd/hangar-egress-trust "$ROOT/usr/local/libexec/hangar-egress-trust"
in_chroot "$ROOT" systemctl enable hangar-egress-trust.service >/dev/null 2>&1
# After a restore or fork from a snapshot, the clock from the host's (docs/host.md).
install -m 0644 deploy/systemd/hangar-snapshot-clock.service "$ROOT/etc/systemd/system/"
install -D -m 0755 deploy/systemd/hangar-snapshot-clock "$ROOT/usr/local/libexec/hangar-snapshot-clock"
in_chroot "$ROOT" systemctl enable hangar-snapshot-clock.service >/dev/null 2>&1

# 4. The disk: GPT with a 256 MiB ESP and the root after it.
ROOT_UUID=$(cat /proc/sys/kernel/random/uuid)
ESP_START=2048 ESP_SECTORS=$((256 * 2048))
ROOT_START=$((ESP_START + ESP_SECTORS))
echo "PARTUUID=$ROOT_UUID / ext4 defaults,errors=remount-ro 0 1" >"$ROOT/etc/fstab"
DISK=$WORK/disk.img
truncate -s "$SIZE" "$DISK"
sfdisk --quiet --label gpt "$DISK" <<EOF
start=$ESP_START, size=$ESP_SECTORS, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name=esp, attrs=LegacyBIOSBootable
start=$ROOT_START, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, uuid=$ROOT_UUID, name=root
EOF
ROOT_SECTORS=$(sfdisk --json "$DISK" | node -e \
  'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).partitiontable.partitions[1].size))')

step "root file system (ext4 from the directory, $(du -sh "$ROOT" | cut -f1))"
mkfs.ext4 -q -F -L hangar-root -E offset=$((ROOT_START * 512)),nodiscard -d "$ROOT" "$DISK" $((ROOT_SECTORS / 2))k

step "ESP: systemd-boot (UEFI) and syslinux (BIOS), kernel and initrd"
KERNEL=$(ls "$ROOT"/boot/vmlinuz-* | sort -V | tail -1)
INITRD=$ROOT/boot/initrd.img-${KERNEL##*/vmlinuz-}
[ -f "$INITRD" ] || { echo "build-guest-image.sh: no initrd for $KERNEL" >&2; exit 1; }
# Transparent huge pages only where asked for (madvise, as Ubuntu has it): Debian's kernel gives them
# to every large enough mapping, and the computer server then held 8-14 MB more in 2 MB pages it
# barely used (88 / 114 / 91 MB idle / after a burst / 60 s later, against 80 / 100 / 79; see
# docs/performance.md).
CMDLINE="root=PARTUUID=$ROOT_UUID rw console=tty0 console=ttyS0,115200 quiet transparent_hugepage=madvise"
ESP=$WORK/esp
mkdir -p "$ESP/EFI/BOOT" "$ESP/loader/entries"
cp "$KERNEL" "$ESP/vmlinuz"
cp "$INITRD" "$ESP/initrd.img"
cp "$ROOT/usr/lib/systemd/boot/efi/systemd-bootx64.efi" "$ESP/EFI/BOOT/BOOTX64.EFI"
printf 'default hangar.conf\ntimeout 0\n' >"$ESP/loader/loader.conf"
printf 'title Hangar guest\nlinux /vmlinuz\ninitrd /initrd.img\noptions %s\n' "$CMDLINE" >"$ESP/loader/entries/hangar.conf"
printf 'DEFAULT hangar\nPROMPT 0\nTIMEOUT 0\nLABEL hangar\n  LINUX /vmlinuz\n  INITRD /initrd.img\n  APPEND %s\n' \
  "$CMDLINE" >"$ESP/syslinux.cfg"
# One sector a cluster keeps FAT32 above its minimum cluster count on a 256 MiB partition.
mkfs.vfat -F 32 -s 1 -n HANGAR-ESP --offset "$ESP_START" "$DISK" $((ESP_SECTORS / 2)) >"$WORK/mkfs.log" 2>&1 ||
  { cat "$WORK/mkfs.log" >&2; exit 1; }
export MTOOLS_SKIP_CHECK=1
mcopy -s -i "$DISK@@$((ESP_START * 512))" "$ESP"/* ::/
syslinux --offset $((ESP_START * 512)) --install "$DISK"
dd if="$GPTMBR" of="$DISK" bs=440 count=1 conv=notrunc status=none

mv "$DISK" "$OUTPUT"
step "done: $OUTPUT ($(du -h "$OUTPUT" | cut -f1) allocated of $SIZE)"
