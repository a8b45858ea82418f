#!/usr/bin/env bash
# Installs what Hangar needs on a Debian 12 machine: the system packages for the virtual desktop,
# accessibility, QEMU and the test registry, then the npm dependencies (which also build the code).
# Safe to run again; skips apt when everything is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  # virtual desktop and the tools the tests read effects back with
  xvfb openbox xdotool xclip wmctrl x11-utils x11-xserver-utils xterm xauth
  # accessibility (AT-SPI over D-Bus) and the GTK test application
  dbus dbus-x11 at-spi2-core python3-gi gir1.2-gtk-3.0 gir1.2-atspi-2.0
  # the host service's VMs
  qemu-system-x86 qemu-utils ovmf
  # images: a real OCI registry for the tests, htpasswd for its Basic auth
  docker-registry apache2-utils
  # TLS certificates, guest images
  openssl debootstrap
  # fonts so that windows render text
  fonts-dejavu-core
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "Installing system packages: ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ "${SKIP_NPM:-}" != "1" ]; then
  npm ci --no-audit --no-fund
fi
