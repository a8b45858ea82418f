/**
 * The deployment files agree with the program they deploy: every flag in the Kubernetes
 * manifests, the systemd units and the Dockerfile is one `hangar serve --help` / `hangar host serve
 * --help` lists; ports, probe paths and the paths of mounted Secrets match the flags' values.
 */
import { execFileSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import {
  JEMALLOC,
  JEMALLOC_CONF,
  memoryEnv,
  PRELOADED_ENV,
  SERVER_NODE_OPTIONS,
} from "../src/common/memory-env.js";

const REPO = resolve(import.meta.dirname, "..");
const read = (path: string) => readFileSync(join(REPO, path), "utf8");

/** The long flags a `--help` page lists (`--no-spread` included), from the built CLI. */
function cliFlags(...command: string[]): Set<string> {
  const help = execFileSync(process.execPath, [join(REPO, "bin", "hangar.js"), ...command, "--help"], {
    encoding: "utf8",
  });
  const flags = new Set<string>();
  for (const line of help.split("\n")) {
    const match = /^\s+(?:-\w, )?(--[a-z0-9-]+)/.exec(line);
    if (match) flags.add(match[1]);
  }
  return flags;
}

const serveFlags = cliFlags("serve");
const hostFlags = cliFlags("host", "serve");

/** `--flag value` and `--flag=value` pairs of an argument list (a flag without a value maps to ""). */
function flagValues(args: string[], known: Set<string>): Map<string, string> {
  const values = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (!arg.startsWith("--")) continue;
    const [flag, inline] = arg.split("=", 2);
    expect(known, `${flag} is not a flag of the CLI`).toContain(flag);
    const next = args[i + 1];
    if (inline !== undefined) values.set(flag, inline);
    else if (next !== undefined && !next.startsWith("--")) values.set(flag, args[++i]);
    else values.set(flag, "");
  }
  return values;
}

describe("the CLI's flags", () => {
  it("are read from the built program's help", () => {
    for (const flag of [
      "--host",
      "--port",
      "--tls-cert",
      "--tls-key",
      "--api-key-file",
      "--container-name",
    ]) {
      expect(serveFlags).toContain(flag);
    }
    expect(hostFlags).toContain("--port");
    expect(hostFlags).toContain("--host");
  });
});

describe("the Kubernetes manifests (deploy/kubernetes)", () => {
  const dir = join(REPO, "deploy", "kubernetes");
  const docs = readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .flatMap((file) =>
      parseAllDocuments(readFileSync(join(dir, file), "utf8")).map((doc) => {
        expect(doc.errors, file).toEqual([]);
        return doc.toJS() as Record<string, any>;
      }),
    );
  const byKind = (kind: string) => {
    const found = docs.filter((d) => d.kind === kind);
    expect(found, kind).toHaveLength(1);
    return found[0];
  };
  const deployment = byKind("Deployment");
  const pod = deployment.spec.template.spec;
  const container = pod.containers[0];
  const serveArgs = () => flagValues(container.args, serveFlags);

  it("serve HTTPS on 8443, the port the container, the probes and the Service use", () => {
    const args = serveArgs();
    expect(args.get("--port")).toBe("8443");
    expect(args.has("--tls-cert") && args.has("--tls-key")).toBe(true);
    const port = container.ports.find((p: any) => p.containerPort === 8443);
    expect(port?.name).toBe("https");
    for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
      expect(container[probe].httpGet, probe).toEqual({ path: "/status", port: "https", scheme: "HTTPS" });
    }
    const service = byKind("Service");
    expect(service.spec.ports).toEqual([{ name: "https", port: 8443, targetPort: "https", protocol: "TCP" }]);
    expect(service.spec.selector).toEqual(deployment.spec.selector.matchLabels);
    expect(deployment.spec.template.metadata.labels).toMatchObject(deployment.spec.selector.matchLabels);
  });

  it("mount each Secret's files at the paths the flags name, from Secrets the kustomization makes", () => {
    const args = serveArgs();
    const generated = new Map<string, string[]>(
      byKind("Kustomization").secretGenerator.map((s: any) => [
        s.name,
        s.files.map((f: string) => f.split("=")[0]),
      ]),
    );
    for (const flag of ["--tls-cert", "--tls-key", "--api-key-file"]) {
      const path = args.get(flag)!;
      const mount = container.volumeMounts.find((m: any) => path.startsWith(`${m.mountPath}/`));
      expect(mount, `${flag} ${path} is under no volume mount`).toBeDefined();
      expect(mount.readOnly).toBe(true);
      const volume = pod.volumes.find((v: any) => v.name === mount.name);
      const file = path.slice(mount.mountPath.length + 1);
      const item = volume.secret.items.find((i: any) => i.path === file);
      expect(item, `${file} is not an item of ${volume.secret.secretName}`).toBeDefined();
      expect(generated.get(volume.secret.secretName)).toContain(item.key);
    }
  });

  it("run as the image's non-root user with a read-only root and scratch space where it writes", () => {
    const uid = Number(/^USER\s+(\d+)/m.exec(read("Dockerfile"))?.[1]);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: uid });
    expect(uid).toBeGreaterThan(0);
    expect(container.securityContext).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ["ALL"] },
    });
    const emptyDirs = new Set(pod.volumes.filter((v: any) => v.emptyDir).map((v: any) => v.name));
    for (const path of ["/tmp", "/tmp/.X11-unix", "/home/hangar"]) {
      const mount = container.volumeMounts.find((m: any) => m.mountPath === path);
      expect(emptyDirs.has(mount?.name), `${path} is an emptyDir`).toBe(true);
    }
    expect(container.resources.requests.cpu).toBeDefined();
    expect(container.resources.limits.memory).toBeDefined();
  });

  it("let in only the HTTPS port, for the Deployment's pods", () => {
    const policy = byKind("NetworkPolicy");
    expect(policy.spec.podSelector.matchLabels).toEqual(deployment.spec.selector.matchLabels);
    expect(policy.spec.policyTypes).toEqual(["Ingress", "Egress"]);
    expect(policy.spec.ingress.flatMap((rule: any) => rule.ports)).toEqual([{ port: 8443, protocol: "TCP" }]);
  });

  it("name every manifest in the kustomization", () => {
    const files = readdirSync(dir).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
    expect([...byKind("Kustomization").resources].sort()).toEqual(files.sort());
  });
});

/** `[Section]` → key → values (a key may repeat) of a systemd unit file. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (!line || line.startsWith("#") || line.startsWith(";")) continue;
    const header = /^\[(.+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1], current);
      continue;
    }
    const eq = line.indexOf("=");
    expect(eq > 0 && current, `not a unit line: ${line}`).toBeTruthy();
    const key = line.slice(0, eq);
    current!.set(key, [...(current!.get(key) ?? []), line.slice(eq + 1)]);
  }
  return sections;
}

describe("the systemd units (deploy/systemd)", () => {
  it("start the guest's computer server on 0.0.0.0:8000 with its virtual display", () => {
    const unit = parseUnit(read("deploy/systemd/hangar-computer.service"));
    const [exec] = unit.get("Service")!.get("ExecStart")!;
    const [bin, command, ...args] = exec.split(/\s+/);
    expect([bin, command]).toEqual(["/usr/local/bin/hangar", "serve"]);
    const flags = flagValues(args, serveFlags);
    expect(flags.get("--host")).toBe("0.0.0.0");
    expect(flags.get("--port")).toBe("8000");
    // ${HANGAR_DISPLAY} comes from the unit's environment, which sets a default.
    expect(flags.get("--virtual-display")).toBe(`\${HANGAR_DISPLAY}`);
    // The container's desktop: a panel and a wallpaper.
    expect(flags.has("--panel")).toBe(true);
    expect(unit.get("Service")!.get("Environment")).toContain("HANGAR_DISPLAY=1280x800");
    // The memory settings the container and the benchmarks start the server with, too.
    expect(unit.get("Service")!.get("Environment")).toEqual(
      expect.arrayContaining([
        `MALLOC_CONF=${JEMALLOC_CONF}`,
        `NODE_OPTIONS=${SERVER_NODE_OPTIONS}`,
        ...Object.entries(memoryEnv({ LD_PRELOAD: "set" })).map(([k, v]) => `${k}=${v}`),
      ]),
    );
    // The server is root; everything the agent starts is hangar's.
    expect(unit.get("Service")!.get("User")).toBeUndefined();
    expect(flags.get("--command-user")).toBe("hangar");
    expect(unit.get("Install")!.get("WantedBy")).toEqual(["multi-user.target"]);
    // The VM's display size comes first from the script, then /etc/default/hangar may override it.
    expect(unit.get("Service")!.get("ExecStartPre")).toEqual([
      "/usr/local/libexec/hangar-vm-display /run/hangar/display.env",
    ]);
    expect(unit.get("Service")!.get("RuntimeDirectory")).toEqual(["hangar"]);
    expect(unit.get("Service")!.get("EnvironmentFile")).toEqual([
      "-/run/hangar/display.env",
      "-/etc/default/hangar",
      "-/run/hangar-egress/env",
    ]);
    // The guest image installs these very files.
    const builder = read("scripts/build-guest-image.sh");
    expect(builder).toContain("deploy/systemd/hangar-computer.service");
    expect(builder).toContain('deploy/systemd/hangar-vm-display "$ROOT/usr/local/libexec/hangar-vm-display"');
  });

  it("take the guest's screen size from the VM display's preferred mode", () => {
    const drm = mkdtempSync(join(tmpdir(), "hangar-drm-"));
    try {
      mkdirSync(join(drm, "card0-HDMI-A-1")); // a connector with no screen: no modes
      writeFileSync(join(drm, "card0-HDMI-A-1", "modes"), "");
      mkdirSync(join(drm, "card0-Virtual-1"));
      writeFileSync(join(drm, "card0-Virtual-1", "modes"), "1024x768\n1920x1080\n1280x800\n");
      const script = join(REPO, "deploy", "systemd", "hangar-vm-display");
      const out = join(drm, "display.env");
      execFileSync(script, [out], { env: { ...process.env, HANGAR_DRM_DIR: drm } });
      expect(readFileSync(out, "utf8")).toBe("HANGAR_DISPLAY=1024x768\n");
      // No screen at all: no file, so the unit's default applies.
      rmSync(join(drm, "card0-Virtual-1"), { recursive: true });
      execFileSync(script, [out], { env: { ...process.env, HANGAR_DRM_DIR: drm, HANGAR_DRM_WAIT: "1" } });
      expect(existsSync(out)).toBe(false);
    } finally {
      rmSync(drm, { recursive: true, force: true });
    }
  });

  it("start the host service on loopback port 7777, not as root", () => {
    const unit = parseUnit(read("deploy/systemd/hangar-host.service"));
    const [exec] = unit.get("Service")!.get("ExecStart")!;
    const [bin, group, command, ...args] = exec.split(/\s+/);
    expect([bin, group, command]).toEqual(["/usr/local/bin/hangar", "host", "serve"]);
    const flags = flagValues(args, hostFlags);
    expect(flags.get("--host")).toBe("127.0.0.1");
    expect(flags.get("--port")).toBe("7777");
    expect(unit.get("Service")!.get("User")).toEqual(["hangar"]);
    // Running VMs outlive a restart of the service, which finds them again.
    expect(unit.get("Service")!.get("KillMode")).toEqual(["process"]);
  });
});

/** The Dockerfile's instructions, continuation lines joined; `FROM` splits the stages. */
function parseDockerfile(text: string): { instruction: string; value: string }[] {
  return text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith("#"))
    .map((line) => {
      const [instruction, ...rest] = line.split(/\s+/);
      return { instruction: instruction.toUpperCase(), value: rest.join(" ") };
    });
}

describe("the Dockerfile", () => {
  const all = parseDockerfile(read("Dockerfile"));
  const lastFrom = all.map((i) => i.instruction).lastIndexOf("FROM");
  const final = all.slice(lastFrom);
  const get = (name: string) => final.filter((i) => i.instruction === name).map((i) => i.value);

  it("builds on Debian bookworm-slim with Node 20, in every stage", () => {
    const bases = all.filter((i) => i.instruction === "FROM").map((i) => i.value.split(/\s+/)[0]);
    expect(bases.length).toBeGreaterThan(0);
    for (const base of bases) expect(base).toBe("node:20-bookworm-slim");
  });

  it("installs its system packages with install-deps.sh, which CI runs too", () => {
    expect(get("RUN").some((run) => /scripts\/install-deps\.sh --container/.test(run))).toBe(true);
    expect(get("COPY").some((copy) => copy.startsWith("scripts/install-deps.sh "))).toBe(true);
    const listed = execFileSync(join(REPO, "scripts", "install-deps.sh"), ["--container", "--list"], {
      encoding: "utf8",
    }).split("\n");
    for (const pkg of [
      "tini",
      "x11vnc",
      "xvfb",
      "openbox",
      "at-spi2-core",
      "dbus",
      "lxpanel",
      "chromium",
      "mousepad",
    ]) {
      expect(listed).toContain(pkg);
    }
    // noVNC's pages only: the package's Python and Debian nodejs stay out of the image.
    expect(listed).not.toContain("novnc");
    // With no arguments the script installs a superset of the container's packages.
    const everything = execFileSync(join(REPO, "scripts", "install-deps.sh"), ["--list"], {
      encoding: "utf8",
    });
    for (const pkg of listed.filter(Boolean)) expect(everything.split("\n")).toContain(pkg);
  });

  it("runs the entrypoint under tini as a non-root user", () => {
    const [entrypoint] = get("ENTRYPOINT").map((v) => JSON.parse(v) as string[]);
    expect(entrypoint.slice(0, 2)).toEqual(["/usr/bin/tini", "--"]);
    // The server runs in the entry point's process, started with the server's memory settings
    // (jemalloc preloaded through env, which execs node: no process in between).
    expect(entrypoint.slice(2)).toEqual([
      "env",
      `LD_PRELOAD=${JEMALLOC}`,
      `${PRELOADED_ENV}=${JEMALLOC}`,
      `MALLOC_CONF=${JEMALLOC_CONF}`,
      "node",
      SERVER_NODE_OPTIONS,
      "/opt/hangar/dist/cli/container.js",
    ]);
    expect(existsSync(join(REPO, "src", "container", "main.ts"))).toBe(true);
    const [user] = get("USER");
    expect(user.split(":")[0]).not.toMatch(/^(root|0)$/);
  });

  it("exposes 8000 and 8443 and checks its health on /status", () => {
    const exposed = get("EXPOSE").flatMap((v) => v.split(/\s+/));
    expect(exposed).toEqual(expect.arrayContaining(["8000", "8443"]));
    const [healthcheck] = get("HEALTHCHECK");
    const cmd = JSON.parse(healthcheck.slice(healthcheck.indexOf("CMD") + 3).trim()) as string[];
    expect(cmd).toEqual(["node", "/opt/hangar/dist/src/container/health.js", "/status"]);
    expect(existsSync(join(REPO, "src", "container", "health.ts"))).toBe(true);
  });
});
