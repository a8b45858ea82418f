#!/usr/bin/env bash
# Makes the desktop container smaller: removes the files of packages that other packages depend on
# but that nothing in the container ever runs or loads (about 390 MB), then checks that every
# program and library that stays finds the libraries it links. Run by the
# Dockerfile after install-deps.sh --container; docs/deploy.md lists what each one takes.
#
#   ./scripts/slim-image.sh [PACKAGE...]          remove them, and the files of the packages named
#   ./scripts/slim-image.sh --list [PACKAGE...]   print the packages and their sizes, remove nothing
#
# An image built on this one names its own (deploy/e2b-desktop/Dockerfile: websockify's numpy).
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
  # imlib2's PostScript and HEIF image loaders (openbox's libraries): Ghostscript and libde265
  libspectre1 libgs10 libgs10-common poppler-data fonts-urw-base35 libheif1 libde265-0
  # libavcodec and the codecs it links (about 70 MB): the container's ffmpeg is built with its own
  # (scripts/build-ffmpeg.sh); PulseAudio's ALSA plugins pull libavcodec for their AC-3 output
  # (removed below), and libx265, libaom and libjxl were there for it and for imlib2's loaders
  libavcodec59 libcodec2-1.0 libx265-199 libsvtav1enc1 libaom3 librav1e0 libjxl0.7 libhwy1
  libxvidcore4 libzvbi0 libtheora0 libtwolame0 libshine3 libsnappy1v5 libgsm1 libspeex1
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
  # ALSA's AC-3 (S/PDIF) output through libavcodec, and its settings: no sound card here
  /usr/lib/x86_64-linux-gnu/alsa-lib/libasound_module_pcm_a52.so
  /usr/share/alsa/alsa.conf.d/60-a52-encoder.conf /etc/alsa/conf.d/60-a52-encoder.conf
  # imlib2's loaders of the image formats whose libraries go above (HEIF, JPEG XL, PostScript)
  /usr/lib/x86_64-linux-gnu/imlib2/loaders/heif.so /usr/lib/x86_64-linux-gnu/imlib2/loaders/jxl.so
  /usr/lib/x86_64-linux-gnu/imlib2/loaders/ps.so
)
# Translations of the desktop's programs (about 32 MB): the desktop speaks English, and a program
# without its translation shows its English text.
unused_files() {
  find /usr/share/locale -mindepth 1 -maxdepth 1 ! -name 'en*' ! -name locale.alias -print0
}

list=0
[ "${1:-}" = "--list" ] && { list=1; shift; }
for p in "$@"; do
  case "$p" in
    -*) echo "slim-image.sh: unknown option $p (try --list, or package names)" >&2; exit 2 ;;
  esac
  UNUSED+=("$p")
done

installed=()
for p in "${UNUSED[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" && installed+=("$p")
done

if [ "$list" -eq 1 ]; then
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
# Nothing that stays may miss a library: every program and library, loaders and plugins included.
missing=$(
  find /usr/bin /usr/sbin /usr/local/bin /usr/lib /opt -xdev -type f \( -perm -u+x -o -name '*.so*' \) \
    -print0 2>/dev/null | while IFS= read -r -d '' f; do
    [ "$(head -c4 "$f" | tr -d '\0')" = $'\x7fELF' ] || continue
    out=$(ldd "$f" 2>/dev/null | awk '/not found/ { printf " %s", $1 }')
    [ -z "$out" ] || echo "$f needs$out"
  done
)
if [ -n "$missing" ]; then
  echo "slim-image.sh: these would miss a library that was removed:" >&2
  echo "$missing" >&2
  exit 1
fi
after=$(du -sx --block-size=1M / 2>/dev/null | cut -f1)
echo "slim-image.sh: removed the files of ${#installed[@]} unused packages: $((before - after)) MB"
