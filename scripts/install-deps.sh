#!/usr/bin/env bash
# Installs what Hangar needs on a Debian 12 machine: the system packages for the virtual desktop,
# accessibility, QEMU and the test registry, then the npm dependencies (which also build the code).
# Safe to run again; skips apt when everything is already there.
#
#   ./scripts/install-deps.sh               everything CI and a developer need, then `npm ci`
#   ./scripts/install-deps.sh --runtime     only what the computer server needs at run time (no npm)
#   ./scripts/install-deps.sh --container   --runtime plus the container's extras: tini, x11vnc, iptables and
#                                           noVNC's web pages (without the Debian package's Python
#                                           and nodejs: Hangar relays the WebSocket itself), and
#                                           the libraries of its own ffmpeg instead of Debian's
#   ./scripts/install-deps.sh --list [...]  print the selected packages, one a line, install nothing
#
# The Dockerfile and the guest image builder take their package lists from here, so CI (which runs
# this script with no arguments) installs every package they name.
set -euo pipefail
cd "$(dirname "$0")/.."

# The computer server on a desktop: the X server, window manager, input/clipboard/window helpers,
# the accessibility bus, a terminal to launch, fonts (Latin, CJK and Hangul, colour emoji) and openssl
# for self-signed certificates.
RUNTIME=(
  xvfb xauth openbox xdotool xclip wmctrl x11-utils x11-xserver-utils xterm
  dbus dbus-x11 at-spi2-core
  xwallpaper fonts-dejavu-core fonts-wqy-microhei fonts-noto-color-emoji openssl ca-certificates
  # certutil: the host installs a caged desktop's egress CA into Chromium's NSS database (docs/egress.md)
  libnss3-tools
  # a desktop an agent can work in (the container's and the guest VM's): a panel with a task list
  # and a clock (lxpanel shares its libraries with pcmanfm; tint2 pulls ~70 MB of image loaders),
  # a browser, a GTK text editor and file manager, AT-SPI for GTK 2, and `xdg-open` (which needs
  # `file`) to start them
  lxpanel chromium mousepad pcmanfm libatk-adaptor xdg-utils file
  # the Python that runs agents' pyautogui code for OSWorld's controller (--osworld, docs/osworld.md)
  python3
  # the server's allocator: gives back what transfers and screenshots freed (src/common/memory-env.ts)
  libjemalloc2
  # the video encoder of start_recording and the live stream (H.264/MP4, VP8/WebM); with its
  # libraries about 150 MB installed on top of the packages above (the container builds its own:
  # CONTAINER_FFMPEG below)
  ffmpeg
  # the desktop's sound: a PulseAudio null sink that programs play into, recorded and streamed
  # live (src/desktop/audio.ts; with it pulseaudio-utils' parec, which reads it)
  pulseaudio
)

# The desktop container: an init that reaps the clipboard helpers' zombies, VNC for watching, and
# iptables for a caged Pod's init container, which sets the Pod's filter (docs/egress.md).
CONTAINER=(
  tini x11vnc iptables
)
# The container's ffmpeg is built from Debian's source with what the desktop uses
# (scripts/build-ffmpeg.sh, the Dockerfile's ffmpeg stage): of Debian's libraries it links x264,
# libvpx and Opus (PulseAudio's comes with pulseaudio). These replace the ffmpeg package there.
CONTAINER_FFMPEG=(
  libx264-164 libvpx7 libopus0
)
# Only the web pages of this package are taken (its dependencies are Python and Debian's nodejs).
NOVNC_PAGES=novnc

PACKAGES=(
  # accessibility (AT-SPI over D-Bus) and the GTK test application
  python3-gi gir1.2-gtk-3.0 gir1.2-atspi-2.0
  # the host service's VMs
  qemu-system-x86 qemu-utils ovmf
  # caged desktops (docs/egress.md): the bridge and filter of a container's cage (iproute2, iptables),
  # and socat, which relays each of a caged VM's connections to its egress gate
  iproute2 iptables socat
  # images: a real OCI registry for the tests, htpasswd for its Basic auth
  docker-registry apache2-utils
  # container desktops: the engine the tests start (podman's Docker-compatible API service) with
  # runc (crun fails on hybrid cgroup hierarchies, docs/containers.md), and buildah for the image
  podman runc buildah
  # Kubernetes desktops: the tests' single-node cluster (../shared/k8s, with runc, docker-registry
  # and buildah above): etcd, containerd, the CNI plugins, and busybox and a C compiler for its images
  # (busybox-static also makes the snapshot tests' tiny guest: scripts/tiny-guest.sh)
  etcd-server containerd containernetworking-plugins busybox-static gcc libc6-dev
  # the page tests: Debian's Chromium, driven by playwright-core (no browser download)
  chromium
  # guest images: debootstrap, file systems and partitions built without loop devices, BIOS boot
  debootstrap e2fsprogs dosfstools mtools fdisk syslinux syslinux-common
)

groups=() list=0 npm=1
for arg in "$@"; do
  case "$arg" in
    --runtime) groups+=(runtime) npm=0 ;;
    --container) groups+=(runtime container) npm=0 ;;
    --list) list=1 ;;
    -h | --help)
      awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"
      exit 0
      ;;
    *)
      echo "install-deps.sh: unknown option $arg (try --help)" >&2
      exit 2
      ;;
  esac
done
[ "${#groups[@]}" -gt 0 ] || groups=(runtime container all)

selected=()
for g in "${groups[@]}"; do
  case "$g" in
    runtime) selected+=("${RUNTIME[@]}") ;;
    container) selected+=("${CONTAINER[@]}" "${CONTAINER_FFMPEG[@]}") ;;
    all) selected+=("${PACKAGES[@]}") ;;
  esac
done
# The container alone (not a developer's machine, which runs the tests with Debian's ffmpeg) takes
# its own ffmpeg.
drop=()
[[ " ${groups[*]} " == *" container "* && " ${groups[*]} " != *" all "* ]] && drop=(ffmpeg)
mapfile -t selected < <(printf '%s\n' "${selected[@]}" | awk -v drop="${drop[*]}" \
  'BEGIN { n = split(drop, d, " "); for (i = 1; i <= n; i++) skip[d[i]] = 1 } !skip[$0] && !seen[$0]++')

if [ "$list" -eq 1 ]; then
  printf '%s\n' "${selected[@]}"
  exit 0
fi

missing=()
for p in "${selected[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "Installing system packages: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [[ " ${groups[*]} " == *" container "* ]] && [ ! -f /usr/share/novnc/vnc.html ]; then
  echo "Installing noVNC's web pages from the $NOVNC_PAGES package into /usr/share/novnc"
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q "$NOVNC_PAGES" && dpkg-deb -x ./*.deb root)
  # Debian links some of the pages' scripts to other packages; the copy keeps the files themselves.
  mkdir -p /usr/share/novnc
  cp -rL "$tmp/root/usr/share/novnc/." /usr/share/novnc/
  rm -rf "$tmp"
fi

if [ "$npm" -eq 1 ] && [ "${SKIP_NPM:-}" != "1" ]; then
  # Exactly the lock file's packages; `prepare` builds dist/.
  npm ci --no-audit --no-fund
fi
