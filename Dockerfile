# Hangar's desktop container: a virtual X desktop (Xvfb, openbox, an lxpanel panel, D-Bus + AT-SPI,
# Chromium, Mousepad, PCManFM) with the computer server on 8000, or on 8443 with TLS in cloud mode;
# VNC and noVNC to watch it (HANGAR_VNC=1). docs/deploy.md has the details; scripts/test-image.sh
# runs every `docker run` line below as written.
#
#   docker build -t hangar .
#   docker run --rm -p 8000:8000 hangar
#   docker run --rm -p 8443:8443 -e CONTAINER_NAME=my-desktop --group-add "$(id -g)" -v "$PWD/tls:/run/secrets/hangar/tls:ro" -v "$PWD/api-keys:/run/secrets/hangar/api-keys:ro" hangar
#
# Cloud mode (API keys, HTTPS on 8443) starts when keys are given: a file of keys, one a line, at
# /run/secrets/hangar/api-keys (or HANGAR_API_KEYS, which PID 1 keeps: see docs/deploy.md). Without
# tls/tls.crt + tls/tls.key a self-signed certificate for CONTAINER_NAME is made and its fingerprint
# logged. The container runs as uid 10001: mounted files must be readable by it, e.g. mode 0640 and
# the host group added with --group-add "$(id -g)" as above.
# Started as root (--user 0), the server stays root and the desktop and everything the agent runs
# are uid 10001's (HANGAR_COMMAND_USER; docs/egress.md): the agent cannot kill the server or read its keys.
# Arguments after the image name go to `hangar serve` (e.g. --log-level debug, --insecure-http).

# Build: the dependencies (a layer kept while package-lock.json stays), then the TypeScript.
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY commands ./commands
COPY bin ./bin
COPY web ./web
# The command line is bundled by `npm run build` (dist/cli).
COPY scripts/build.mjs scripts/bundle-cli.mjs ./scripts/
# The nut-js backend (macOS, Windows; `--backend nut` elsewhere) is left out: on Linux the X11 one serves.
# The packages bundled into dist/cli (zod, hono, the MCP SDK, pino…: ~25 MB) are not kept twice.
# (The host service stays: deploy/kubernetes/host runs it in the cluster from this image.)
# The packages' type declarations, source maps and Markdown (their licences stay) are for
# development: about 43 MB, 28 of them the Kubernetes client's declarations.
RUN npm run build && npm pkg delete "dependencies.@nut-tree-fork/nut-js" \
 && npm prune --omit=dev --no-audit --no-fund && npm cache clean --force \
 && node scripts/bundle-cli.mjs --prune-bundled \
 && find node_modules -type f \( -name '*.d.ts' -o -name '*.d.mts' -o -name '*.d.cts' -o -name '*.map' \
      -o \( -iname '*.md' ! -iname 'licen[cs]e*' \) \) -delete

# ffmpeg, the encoder of start_recording and the live stream: built from Debian's source package
# with what the desktop uses (scripts/build-ffmpeg.sh; about 20 MB against about 170 MB for Debian's
# package and the libraries it links). Its own stage, kept while the script stays the same.
FROM node:20-bookworm-slim AS ffmpeg
COPY scripts/build-ffmpeg.sh /tmp/
RUN /tmp/build-ffmpeg.sh /opt/ffmpeg

# Run: Debian bookworm-slim with Node 20, packages from install-deps.sh (no Debian nodejs or Python), then
# slim-image.sh removes what nothing in the container uses (Mesa's LLVM, Python, Ghostscript…).
FROM node:20-bookworm-slim
COPY scripts/install-deps.sh scripts/slim-image.sh /opt/hangar/scripts/
RUN /opt/hangar/scripts/install-deps.sh --container && /opt/hangar/scripts/slim-image.sh \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && useradd --uid 10001 --user-group --create-home --shell /bin/bash hangar \
 && mkdir -p /tmp/.X11-unix && chmod 1777 /tmp/.X11-unix
COPY --from=ffmpeg /opt/ffmpeg/bin/ffmpeg /opt/ffmpeg/bin/ffprobe /usr/local/bin/
RUN ffmpeg -hide_banner -version > /dev/null
COPY deploy/desktop/chromium-flags /etc/chromium.d/hangar
COPY deploy/desktop/mimeapps.list /etc/xdg/mimeapps.list
WORKDIR /opt/hangar
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/bin ./bin
# Hangar's pyautogui and the `python` shim for OSWorld's controller (docs/osworld.md).
COPY python ./python
RUN ln -s /opt/hangar/bin/hangar.js /usr/local/bin/hangar

USER 10001:10001
# GTK 2 apps (PCManFM, the panel) load their AT-SPI bridge only when asked.
# OSWorld's controller API on 5000 (HANGAR_OSWORLD=off turns it off); E2B's envd on 49983, on the container's
# loopback unless a token file is mounted (HANGAR_ENVD=off turns it off; docs/e2b.md).
ENV HOME=/home/hangar HANGAR_DISPLAY=1280x800 HANGAR_HOST=0.0.0.0 GTK_MODULES=gail:atk-bridge HANGAR_OSWORLD=5000 HANGAR_ENVD=49983
WORKDIR /home/hangar
# 8000: the computer server (HTTP); 8443: the same with TLS (cloud mode); 6080: noVNC when HANGAR_VNC=1;
# 5000: OSWorld's controller API.
EXPOSE 8000 8443 6080 5000
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "/opt/hangar/dist/src/container/health.js", "/status"]
# The computer server's memory settings (src/common/memory-env.ts), for the entry point alone: it
# runs the server in its own process and takes them out of the environment of everything it starts.
ENTRYPOINT ["/usr/bin/tini", "--", "env", "LD_PRELOAD=libjemalloc.so.2", "HANGAR_PRELOADED_ALLOCATOR=libjemalloc.so.2", \
  "MALLOC_CONF=narenas:1,tcache:false,dirty_decay_ms:500,muzzy_decay_ms:0", \
  "node", "--max-semi-space-size=8", "/opt/hangar/dist/cli/container.js"]
CMD []
