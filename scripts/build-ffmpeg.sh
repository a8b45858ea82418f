#!/usr/bin/env bash
# Builds the desktop container's ffmpeg and ffprobe from Debian's own source package of ffmpeg, with
# the parts Hangar and a desktop's everyday use need, linked to Debian's x264, libvpx, Opus and
# PulseAudio libraries. Debian's `ffmpeg` package links about 80 libraries (speech synthesis, AV1,
# HEVC and AMR encoders, Blu-ray, Samba, OpenCL…): about 170 MB of the image for programs that use
# a few of them. This build is about 20 MB (docs/deploy.md); the host and the guest image keep
# Debian's package.
#
#   ./scripts/build-ffmpeg.sh PREFIX     build and install PREFIX/bin/ffmpeg and PREFIX/bin/ffprobe
#
# Run as root in the Dockerfile's `ffmpeg` stage (Debian 12): it adds Debian's source archive to
# apt's sources (apt verifies the source package as it verifies binary ones), installs the build
# tools and the libraries' headers, and builds with every core. `ffmpeg -buildconf` shows the
# configuration; what is left out says "Unknown encoder" (or decoder, format, filter) and
# `apt-get install ffmpeg` brings Debian's whole one to /usr/bin.
set -euo pipefail

PREFIX=${1:?usage: build-ffmpeg.sh PREFIX}

# What Hangar runs (src/desktop/recording/encoder.ts, src/desktop/live/live-encoder.ts): raw BGR
# frames and PCM in Matroska, to H.264 (x264) or VP8 with AAC or Opus, in fragmented MP4, WebM, FLV,
# MPEG-TS and ADTS; the image test plays a tone into PulseAudio and reads the recording's tracks.
# Beside it, what an agent commonly asks of ffmpeg on a desktop: convert or cut a video, a sound or
# a GIF between the usual formats, take stills, scale, crop, join.
DECODERS='rawvideo,pcm*,h264,hevc,vp8,vp9,mpeg4,mpeg2video,mpeg1video,mjpeg,png,gif,bmp,webp,theora,aac,aac_latm,mp3,mp3float,opus,vorbis,flac,ac3,alac'
ENCODERS='libx264,libvpx_vp8,libvpx_vp9,libopus,aac,pcm*,rawvideo,png,mjpeg,gif,flac,bmp'
MUXERS='mp4,mov,ipod,matroska,webm,flv,mpegts,adts,tee,null,wav,ogg,opus,flac,gif,image2,image2pipe,mjpeg,rawvideo,h264,hevc,pcm*,segment,hls,framemd5,md5'
DEMUXERS='matroska,mov,flv,mpegts,aac,wav,ogg,mp3,flac,gif,image2,image_png_pipe,image_jpeg_pipe,image_gif_pipe,image_bmp_pipe,image_webp_pipe,mjpeg,rawvideo,h264,hevc,pcm*,concat,ivf,webm_dash_manifest,avi,ac3,hls'
PARSERS='h264,hevc,aac,aac_latm,mpegaudio,vp8,vp9,opus,vorbis,flac,png,mjpeg,gif,mpeg4video,mpegvideo,ac3,bmp,webp'
FILTERS='scale,format,fps,null,anull,aresample,aformat,setpts,asetpts,trim,atrim,crop,pad,transpose,hflip,vflip,rotate,split,asplit,concat,overlay,amix,amerge,volume,loudnorm,atempo,setsar,setdar,palettegen,paletteuse,sine,anullsrc,aevalsrc,color,testsrc,testsrc2,nullsrc,select,aselect,tpad,apad,fade,afade,drawbox,showinfo,ashowinfo,copy,acopy,vflip,boxblur,eq,hue,colorkey,chromakey,xfade,framerate,minterpolate,reverse,areverse,silencedetect,silenceremove,volumedetect,astats,thumbnail,tile,zoompan,pan,channelmap,channelsplit,join'
PROTOCOLS='file,pipe,tcp,udp,rtp,http,hls,crypto,data,concat,subfile,fd'

export DEBIAN_FRONTEND=noninteractive
# Debian's source archive beside its binary one: the images' deb822 file (debian:bookworm's), or a
# one-line sources.list (debootstrap's).
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
  sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
    > /etc/apt/sources.list.d/hangar-ffmpeg-source.sources
else
  sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > /etc/apt/sources.list.d/hangar-ffmpeg-source.list
fi
apt-get update -q
apt-get install -y -q --no-install-recommends dpkg-dev gcc make nasm pkg-config \
  libx264-dev libvpx-dev libopus-dev libpulse-dev zlib1g-dev

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get source -q ffmpeg
cd ffmpeg-*/

echo "build-ffmpeg.sh: configuring $(basename "$PWD")"
./configure --prefix="$PREFIX" \
  --extra-version="hangar-$(dpkg-parsechangelog -S Version)" \
  --disable-everything --disable-autodetect --disable-doc --disable-debug --disable-ffplay \
  --enable-gpl --enable-libx264 --enable-libvpx --enable-libopus --enable-libpulse --enable-zlib \
  --enable-decoder="$DECODERS" --enable-encoder="$ENCODERS" \
  --enable-muxer="$MUXERS" --enable-demuxer="$DEMUXERS" \
  --enable-parser="$PARSERS" --enable-bsfs --enable-filter="$FILTERS" \
  --enable-protocol="$PROTOCOLS" \
  --enable-indev=lavfi,pulse --enable-outdev=pulse \
  --enable-swscale --enable-swresample > configure.log ||
  { tail -20 configure.log ffbuild/config.log >&2; exit 1; }

echo "build-ffmpeg.sh: compiling with $(nproc) jobs"
make -j"$(nproc)" > make.log 2>&1 || { tail -40 make.log >&2; exit 1; }
make install > /dev/null
strip "$PREFIX/bin/ffmpeg" "$PREFIX/bin/ffprobe"
rm -rf "${PREFIX:?}/include" "$PREFIX/lib" "$PREFIX/share"
"$PREFIX/bin/ffmpeg" -hide_banner -version | head -1
du -sh "$PREFIX/bin/ffmpeg" "$PREFIX/bin/ffprobe"
