# Hangar's desktop container: a virtual X desktop (Xvfb, openbox, D-Bus + AT-SPI) with the computer
# server on 8000, or on 8443 with TLS in cloud mode; VNC and noVNC to watch it (HANGAR_VNC=1).
#
#   docker build -t hangar .
#   docker run --rm -p 8000:8000 hangar
#   docker run --rm -p 8443:8443 -e CONTAINER_NAME=my-desktop \
#     -v "$PWD/tls:/run/secrets/hangar/tls:ro" \
#     -v "$PWD/keys:/run/secrets/hangar/api-keys:ro" hangar    # tls.crt + tls.key → HTTPS on 8443
#   API keys go in a mounted file (keys/keys), not in -e HANGAR_API_KEYS: any process of the
#   container's user, the commands agents run included, can read /proc/1/environ (docs/deploy.md).
#   (or the certificate and key as PEM text in HANGAR_TLS_CERT and HANGAR_TLS_KEY)
#
# Arguments after the image name go to `hangar serve` (e.g. --cloud, --api-key-file, --log-level).
# docs/deploy.md lists the environment variables and the mounted files the entrypoint reads.

# Build: compile the TypeScript, then keep only the runtime dependencies.
FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY commands ./commands
COPY bin ./bin
RUN npm ci --no-audit --no-fund && npm prune --omit=dev --no-audit --no-fund

# Run: Debian bookworm-slim with Node 20 (Debian's own nodejs is 18), packages from install-deps.sh.
# Debian's novnc package depends on Debian's nodejs; /usr/local/bin/node (20) stays first in PATH.
FROM node:20-bookworm-slim
COPY scripts/install-deps.sh /opt/hangar/scripts/install-deps.sh
RUN /opt/hangar/scripts/install-deps.sh --container \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 10001 --user-group --create-home --shell /bin/bash hangar \
 && mkdir -p /tmp/.X11-unix && chmod 1777 /tmp/.X11-unix
WORKDIR /opt/hangar
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/bin ./bin
RUN ln -s /opt/hangar/bin/hangar.js /usr/local/bin/hangar

USER 10001:10001
ENV HOME=/home/hangar HANGAR_DISPLAY=1280x800 HANGAR_HOST=0.0.0.0
WORKDIR /home/hangar
# 8000: the computer server (HTTP); 8443: the same with TLS (cloud mode); 6080: noVNC when HANGAR_VNC=1.
EXPOSE 8000 8443 6080
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "/opt/hangar/dist/src/container/health.js", "/status"]
ENTRYPOINT ["/usr/bin/tini", "--", "node", "/opt/hangar/dist/src/container/main.js"]
CMD []
