#!/usr/bin/env bash
# Makes the desktop container smaller: removes the files of packages that other packages depend on
# but that nothing in the container ever runs or loads (about 320 MB of its 1.2 GB). Run by the
# Dockerfile after install-deps.sh --container; docs/deploy.md lists what each one takes.
#
#   ./scripts/slim-image.sh           remove them
#   ./scripts/slim-image.sh --list    print the packages and their sizes, remove nothing
#
# The packages stay registered with dpkg, so `apt-get install` in an image built FROM this one
# works as usual; `apt-get install --reinstall PACKAGE` brings one back whole (for example
# libgl1-mesa-dri for OpenGL in Xvfb).
set -euo pipefail

UNUSED=(
  # Mesa's OpenGL drivers and the LLVM they are built on: Xvfb runs without GLX acceleration and
  # Chromium draws with its own SwiftShader.
  libgl1-mesa-dri libllvm15 libz3-4
  # the C preprocessor, for xrdb (x11-xserver-utils); nothing here runs xrdb
  cpp cpp-12
  # x11vnc's optional Tk settings window
  tk tk8.6 libtk8.6 tcl tcl8.6 libtcl8.6
  # (Python stays: OSWorld's controller runs the agents' pyautogui code with it, docs/osworld.md.)
  # imlib2's PostScript and HEIF image loaders (openbox's libraries): Ghostscript and libde265 (x265
  # and aom stay: ffmpeg, the video encoder of start_recording, loads them)
  libspectre1 libgs10 libgs10-common poppler-data fonts-urw-base35 libheif1 libde265-0
)
# Files of packages that stay.
UNUSED_PATHS=(
  # Chromium's Vulkan validation layer, a debugging aid
  /usr/lib/chromium/libVkLayer_khronos_validation.so
  # Intel Media SDK's hardware runtime, its plugins and tracer (about 27 MB): libmfx, which ffmpeg
  # links, loads them only to encode on an Intel GPU (QSV), which the container never has
  /usr/lib/x86_64-linux-gnu/libmfxhw64.so.*
  /usr/lib/x86_64-linux-gnu/libmfx-tracer.so.*
  /usr/lib/x86_64-linux-gnu/mfx
)
# Translations of the desktop's programs (about 32 MB): the desktop speaks English, and a program
# without its translation shows its English text.
unused_files() {
  find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'en*' ! -name locale.alias -print0
}

installed=()
for p in "${UNUSED[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && installed+=("$p")
done

if [ "${1:-}" = "--list" ]; then
  for p in "${installed[@]}"; do dpkg-query -W -f='${Installed-Size}\t${Package}\n' "$p"; done |
    awk '{ printf "%8.1f MB  %s\n", $1 / 1024, $2; total += $1 } END { printf "%8.1f MB  in all\n", total / 1024 }'
  { printf '%s\0' "${UNUSED_PATHS[@]}"; unused_files; } | du -cm --files0-from=- 2>/dev/null | tail -1 |
    awk '{ printf "%8.1f MB  in files of packages that stay\n", $1 }'
  exit 0
fi

before=$(du -sx --block-size=1M / 2>/dev/null | cut -f1)
for p in "${installed[@]}"; do
  # Files and links only: directories (and links to them, like /lib with merged /usr) may be
  # shared with packages that stay.
  dpkg-query -L "$p" | while IFS= read -r path; do
    if [ ! -d "$path" ] && { [ -f "$path" ] || [ -L "$path" ]; }; then rm -f "$path"; fi
  done
done
rm -rf "${UNUSED_PATHS[@]}"
unused_files | xargs -0 -r rm -rf
# Fonts were removed: the font cache is made again, so that no application looks for them.
! command -v fc-cache >/dev/null || fc-cache -s -f
after=$(du -sx --block-size=1M / 2>/dev/null | cut -f1)
echo "slim-image.sh: removed the files of ${#installed[@]} unused packages: $((before - after)) MB"
