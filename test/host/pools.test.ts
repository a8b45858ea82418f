/**
 * Warm pools through a real engine (podman's API service, started here). A pool of the project's
 * image hands out a desktop whose computer server answers a screenshot and a click, with a key of
 * its own. The pool's life is run with a light image (a tiny server as entry point, podman.ts) so
 * that many containers cost seconds: claims that wait, release and refill, ttl expiry, a container
 * killed from outside, a host service killed with -9 and restarted with desktops claimed, and
 * 200 claims and releases that leave no container, volume, port or descriptor behind. QEMU pools
 * clone a stopped blank VM. Bad input gets clear 400s with nothing started.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { buildProgram } from "../../src/cli/main.js";
import { desktopCommand, pngSize } from "./desktop-client.js";
import { makeLightImage, startPodman, TEST_IMAGE, type TestEngine, testUlimits } from "./podman.js";
import { killQemusUnder, LINUX_VM, startTestHost, type TestHost } from "./support.js";

let engine: TestEngine;
let host: TestHost;
let light: string;

beforeAll(async () => {
  engine = await startPodman();
  light = await makeLightImage(engine);
  host = await startTestHost({
    containerEngine: engine.address,
    desktopImage: TEST_IMAGE,
    containerUlimits: testUlimits(),
    defaultRuntime: "container",
    desktopKeys: true,
    pools: { checkIntervalMs: 500 },
  });
}, 120_000);
afterAll(async () => {
  await host?.cleanup();
  await engine?.cleanup();
});

const pool = async (name: string, h: { api: TestHost["api"] } = host) =>
  (await h.api("GET", `/svc/pools/${name}`)).body;
const containers = async () =>
  (await engine.podman("ps", "--all", "--format", "{{.Names}}")).split("\n").filter(Boolean).sort();
/** The starts under way, as the pool's record tells them: where a start that never ends stopped. */
const startSteps = (p: { desktops: { name: string; startStep: string | null }[] }) =>
  p.desktops
    .filter((d) => d.startStep)
    .map((d) => `; ${d.name}: ${d.startStep}`)
    .join("");
const readyCount = (name: string, count: number, h: { api: TestHost["api"] } = host, timeout = 60_000) =>
  vi.waitFor(
    async () => {
      const p = await pool(name, h);
      if (p.ready < count)
        throw new Error(`${p.ready} ready of ${count} (${p.lastError ?? "no error"}${startSteps(p)})`);
      return p;
    },
    { timeout, interval: 100 },
  );

describe("a pool of the project's desktop", () => {
  it("hands out a ready desktop at once, with a key of its own; release removes it and the pool refills", async () => {
    const created = await host.api("POST", "/svc/pools", { name: "desk", size: 1, display: "1024x768" });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({
      name: "desk",
      runtime: "container",
      template: TEST_IMAGE,
      templateKind: "image",
      size: 1,
    });
    await readyCount("desk", 1, host, 120_000);

    const started = performance.now();
    const claim = await host.api("POST", "/svc/pools/desk/claim", { owner: "agent-1" });
    const claimMs = performance.now() - started;
    expect(claim.status).toBe(200);
    const desktop = claim.body;
    expect(desktop).toMatchObject({ pool: "desk", ready: true, status: "running", runtime: "container" });
    expect(desktop.claim).toMatchObject({ by: "agent-1", expiresAt: null });
    expect(desktop.apiKey).toMatch(/^[\w-]{32}$/);
    expect(claimMs).toBeLessThan(1000); // the bench measures the 50 ms target on a quiet machine

    const shot = await desktopCommand(desktop, "screenshot", { format: "png" });
    expect(shot.result.success).toBe(true);
    expect(pngSize(shot.result.content.image_data)).toEqual({ width: 1024, height: 768 });
    expect((await desktopCommand(desktop, "left_click", { x: 40, y: 50 })).result.success).toBe(true);
    expect((await desktopCommand(desktop, "get_cursor_position")).result.content.position).toEqual({
      x: 40,
      y: 50,
    });
    // Its key is its own: without it, or with another desktop's name, the server refuses.
    expect((await desktopCommand({ ...desktop, apiKey: undefined }, "screenshot")).status).toBe(401);
    const wrong = await fetch(new URL("/cmd", desktop.computerServerUrl), {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-api-key": "not-the-key",
        "x-container-name": desktop.name,
      },
      body: JSON.stringify({ command: "screenshot", params: {} }),
    });
    expect(wrong.status).toBe(401);
    expect(
      (await pool("desk")).desktops.find((d: { name: string }) => d.name === desktop.name),
    ).toMatchObject({
      state: "claimed",
      claimedBy: "agent-1",
    });

    const released = await host.api("POST", `/svc/vms/${desktop.name}/release`);
    expect(released.body).toEqual({ message: "Desktop released", name: desktop.name, pool: "desk" });
    expect((await host.api("GET", `/svc/vms/${desktop.name}`)).status).toBe(400);
    expect(await containers()).not.toContain(`hangar-${desktop.name}`);
    const twice = await host.api("POST", `/svc/vms/${desktop.name}/release`);
    expect(twice.status).toBe(400);
    expect(twice.body.message).toMatch(/is not a desktop of a pool/);
    await readyCount("desk", 1, host, 120_000);
    expect((await host.api("DELETE", "/svc/pools/desk")).status).toBe(200);
    expect((await containers()).filter((c) => c.startsWith("hangar-desk-"))).toEqual([]);
  }, 300_000);
});

describe("a pool's life", () => {
  it("claims wait for the next desktop or answer 503 at once; claims expire after their ttl", async () => {
    expect(
      (await host.api("POST", "/svc/pools", { name: "life", size: 1, template: light, ttl: 3600 })).status,
    ).toBe(201);
    await readyCount("life", 1);
    const first = await host.api("POST", "/svc/pools/life/claim", { ttl: 1 });
    expect(first.body.claim.expiresAt).not.toBeNull();
    const empty = await host.api("POST", "/svc/pools/life/claim", { wait: false });
    expect(empty.status).toBe(503);
    expect(empty.body.message).toMatch(/Pool life has no ready desktop now/);
    const waited = await host.api("POST", "/svc/pools/life/claim", { timeout: 60 });
    expect(waited.status).toBe(200);
    expect(waited.body.name).not.toBe(first.body.name);
    expect(Date.parse(waited.body.claim.expiresAt) - Date.parse(waited.body.claim.at)).toBe(3600_000);
    // The desktop the claim waited for was handed over once it answered, without the pool's
    // warm-up (its screenshots would have been taken while the claim waited); the first was warmed.
    const readyLine = (vm: string) =>
      vi.waitFor(() => {
        const line = readFileSync(join(host.home, ".logs", "info.log"), "utf8")
          .split("\n")
          .find((l) => l.includes("Pool desktop ready pool=life ") && l.includes(` vm=${vm} `));
        if (!line) throw new Error(`no ready line for ${vm}`);
        return line;
      });
    expect(await readyLine(waited.body.name)).toMatch(/ warmMs=\d+ .*forWaitingClaim=true/);
    expect(await readyLine(first.body.name)).not.toContain("forWaitingClaim");
    // The ttl of one second releases the first claim by itself.
    await vi.waitFor(
      async () => {
        if ((await host.api("GET", `/svc/vms/${first.body.name}`)).status !== 400)
          throw new Error("still there");
      },
      { timeout: 15_000, interval: 100 },
    );
    expect(await containers()).not.toContain(`hangar-${first.body.name}`);
    expect((await host.api("POST", `/svc/vms/${waited.body.name}/release`)).status).toBe(200);
    expect((await host.api("DELETE", "/svc/pools/life")).status).toBe(200);
  }, 120_000);

  it("replaces a desktop killed from outside (podman kill), and grows and shrinks on PATCH", async () => {
    expect((await host.api("POST", "/svc/pools", { name: "watch", size: 2, template: light })).status).toBe(
      201,
    );
    const before = await readyCount("watch", 2);
    const victim = before.desktops[0].name;
    await engine.podman("kill", `hangar-${victim}`);
    await vi.waitFor(
      async () => {
        const p = await pool("watch");
        const names = p.desktops.map((d: { name: string }) => d.name);
        if (names.includes(victim) || p.ready < 2) throw new Error(`not replaced yet: ${names}`);
      },
      { timeout: 30_000, interval: 100 },
    );
    expect(await containers()).not.toContain(`hangar-${victim}`);

    expect((await host.api("PATCH", "/svc/pools/watch", { size: 3 })).body.size).toBe(3);
    await readyCount("watch", 3);
    expect((await host.api("PATCH", "/svc/pools/watch", { size: 1 })).status).toBe(200);
    await vi.waitFor(
      async () => {
        const p = await pool("watch");
        if (p.desktops.length !== 1) throw new Error(`${p.desktops.length} desktops`);
      },
      { timeout: 30_000, interval: 100 },
    );
    expect((await host.api("DELETE", "/svc/pools/watch")).status).toBe(200);
    expect((await containers()).filter((c) => c.startsWith("hangar-watch-"))).toEqual([]);
  }, 120_000);

  it("refuses bad input with clear 400s and starts nothing", async () => {
    const before = await containers();
    const cases: [string, string, unknown, RegExp][] = [
      [
        "POST",
        "/svc/pools",
        { name: "zero", size: 0, template: light },
        /size: a pool holds from 1 to 256 desktops/,
      ],
      [
        "POST",
        "/svc/pools",
        { name: "huge", size: 10_000, template: light },
        /size: a pool holds from 1 to 256 desktops/,
      ],
      [
        "POST",
        "/svc/pools",
        { name: "ghost", size: 1, template: "no-such-image:1" },
        /Template not found: no-such-image:1/,
      ],
      [
        "POST",
        "/svc/pools",
        { name: "shell", size: 1, template: "debian;reboot" },
        /';' is not allowed in an image reference/,
      ],
      ["POST", "/svc/pools", { name: "../x", size: 1, template: light }, /Invalid pool name/],
      ["POST", "/svc/pools", { size: 1 }, /name is required/],
      ["POST", "/svc/pools/missing/claim", {}, /Pool not found: missing/],
      ["PATCH", "/svc/pools/missing", { size: 2 }, /Pool not found: missing/],
      ["POST", "/svc/pull", { image: "debian|cat", runtime: "container" }, /'\|' is not allowed/],
    ];
    for (const [method, path, body, message] of cases) {
      const res = await host.api(method, path, body);
      expect(res.status, `${method} ${path} ${JSON.stringify(body)}`).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    expect((await host.api("GET", "/svc/pools")).body).toEqual([]);
    expect(await containers()).toEqual(before);
  });

  it("refuses a foreign Origin or Host on the pool routes", async () => {
    const origin = await fetch(`${host.url}/svc/pools`, {
      method: "POST",
      headers: { origin: "http://attacker.example", "content-type": "application/json" },
      body: JSON.stringify({ name: "x", size: 1, template: light }),
    });
    expect(origin.status).toBe(403);
    const release = await fetch(`${host.url}/svc/vms/x/release`, {
      method: "POST",
      headers: { origin: "http://attacker.example" },
    });
    expect(release.status).toBe(403);
    const { request } = await import("node:http");
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${host.url}/svc/pools`, { headers: { host: "attacker.example" } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(403);
    expect((await host.api("GET", "/svc/pools")).body).toEqual([]);
  });

  it("200 claims and releases leave no container, volume, port, process or descriptor behind", async () => {
    const fds = () => readdirSync("/proc/self/fd").length;
    // Container monitors (conmon) of this storage that other tests' desktops still have.
    const monitors = () => processesUnder(join(engine.root, "storage"));
    const monitorsBefore = new Set(monitors());
    expect((await host.api("POST", "/svc/pools", { name: "churn", size: 4, template: light })).status).toBe(
      201,
    );
    await readyCount("churn", 4);
    const fdsBefore = fds();
    const volumesBefore = await engine.podman("volume", "ls", "--quiet");
    const ports = new Set<number>();
    let slowest = 0;
    // Four clients, fifty cycles each: claims race each other for the pool's desktops.
    const client = async () => {
      for (let i = 0; i < 50; i++) {
        const started = performance.now();
        const claim = await host.api("POST", "/svc/pools/churn/claim", { timeout: 60 });
        slowest = Math.max(slowest, performance.now() - started);
        expect(claim.status, claim.text).toBe(200);
        ports.add(Number(new URL(claim.body.computerServerUrl).port));
        expect((await host.api("POST", `/svc/vms/${claim.body.name}/release`)).status).toBe(200);
      }
    };
    await Promise.all([client(), client(), client(), client()]);
    // The last refills start two at a time behind the churn: on a loaded machine that takes minutes.
    await readyCount("churn", 4, host, 240_000);
    expect((await host.api("DELETE", "/svc/pools/churn")).status).toBe(200);
    expect((await containers()).filter((c) => c.startsWith("hangar-churn-"))).toEqual([]);
    expect(await engine.podman("volume", "ls", "--quiet")).toBe(volumesBefore);
    expect(readdirSync(join(host.home, ".containers")).filter((d) => d.startsWith("hangar-churn-"))).toEqual(
      [],
    );
    // No monitor of the churn's containers is left, and no published port answers. A
    // monitor may outlive its removed container for a moment on a loaded machine; a leak stays.
    await vi.waitFor(() => expect(monitors().filter((m) => !monitorsBefore.has(m))).toEqual([]), {
      timeout: 20_000,
      interval: 200,
    });
    // A port the engine gave back may be taken again by anything on the machine (other test files run
    // beside this one): one still answering is a leak when this engine's containers hold it (their
    // monitors' command lines name its storage), or when no process does (a forwarding rule left).
    const answering = (
      await Promise.all([...ports].map(async (port) => ((await connects(port)) ? port : 0)))
    ).filter(Boolean);
    const leaked = answering
      .map((port) => ({ port, holder: listenerOf(port) }))
      .filter(({ holder }) => holder === undefined || holder.includes(join(engine.root, "storage")));
    expect(leaked).toEqual([]);
    // Descriptors may take a moment to close; a leak never comes back down.
    await vi.waitFor(() => expect(fds()).toBeLessThanOrEqual(fdsBefore + 2), {
      timeout: 15_000,
      interval: 200,
    });
    console.log(
      `200 claim/release cycles: slowest claim ${Math.round(slowest)} ms, ${ports.size} ports used`,
    );
  }, 600_000);
});

describe("hangar pool", () => {
  it("creates, lists, shows, claims, releases, resizes and removes a pool", async () => {
    const url = ["--url", host.url];
    expect(
      await hangar("pool", "create", "cli", "--size", "1", "--template", light, "--ttl", "600", ...url),
    ).toMatch(/^Created pool cli: 1 container desktops from localhost\/hangar-light:test, starting.\n$/);
    await readyCount("cli", 1);
    expect(await hangar("pool", "ls", ...url)).toMatch(
      /NAME +RUNTIME +TEMPLATE +SIZE +READY\/STARTING\/CLAIMED +TTL[^\n]*\ncli +container +localhost\/hangar-light:test +1 +1\/0\/0 +600s/,
    );
    const claimed = JSON.parse(await hangar("pool", "claim", "cli", "--owner", "cli-test", "--json", ...url));
    expect(claimed).toMatchObject({ pool: "cli", claim: { by: "cli-test" } });
    expect(await hangar("pool", "get", "cli", ...url)).toMatch(
      new RegExp(`${claimed.name} +claimed +cli-test`),
    );
    expect(await hangar("pool", "release", claimed.name, ...url)).toBe(
      `Released ${claimed.name} (pool cli refills).\n`,
    );
    expect(await hangar("pool", "resize", "cli", "2", ...url)).toBe("Pool cli keeps 2 desktops ready.\n");
    expect(await hangar("pool", "rm", "cli", ...url)).toBe("Removed pool cli.\n");
    await expect(hangar("pool", "claim", "cli", "--no-wait", ...url)).rejects.toThrow("Pool not found: cli");
  }, 60_000);
});

/** Runs the CLI in-process and returns what it printed. */
async function hangar(...args: string[]) {
  let out = "";
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((chunk: string) => {
    out += chunk;
    return true;
  }) as typeof process.stdout.write;
  try {
    const program = buildProgram();
    program.exitOverride();
    await program.parseAsync(["node", "hangar", ...args]);
  } finally {
    process.stdout.write = write;
  }
  return out;
}

describe("QEMU pools", () => {
  it("clone a stopped VM and run the clones; an empty pool answers 503; removing it removes them", async () => {
    expect((await host.api("POST", "/svc/vms", { name: "tmpl", ...LINUX_VM, runtime: "qemu" })).status).toBe(
      200,
    );
    const created = await host.api("POST", "/svc/pools", { name: "vms", size: 1, template: "tmpl" });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ runtime: "qemu", template: "tmpl", templateKind: "desktop" });
    const member = await vi.waitFor(
      async () => {
        const p = await pool("vms");
        const name = p.desktops[0]?.name;
        const vm = name && (await host.api("GET", `/svc/vms/${name}`)).body;
        if (vm?.status !== "running") throw new Error("not running yet");
        return vm;
      },
      { timeout: 30_000, interval: 100 },
    );
    expect(member).toMatchObject({ runtime: "qemu", ready: false });
    // A blank disk never answers: the pool has nothing to hand out yet.
    expect((await host.api("POST", "/svc/pools/vms/claim", { wait: false })).status).toBe(503);
    const image = await host.api("POST", "/svc/pools", { name: "vms2", size: 1, runtime: "qemu" });
    expect(image.status).toBe(400);
    expect(image.body.message).toMatch(/A qemu pool needs a template/);
    expect((await host.api("DELETE", "/svc/pools/vms")).status).toBe(200);
    expect((await host.api("GET", `/svc/vms/${member.name}`)).status).toBe(400);
    expect((await host.api("DELETE", "/svc/vms/tmpl")).status).toBe(200);
  }, 60_000);
});

describe("a host service killed with -9", () => {
  let service: ChildProcess | undefined;
  const root = mkdtempSync(join(tmpdir(), "hangar-pool-kill-"));
  afterAll(async () => {
    if (service?.exitCode === null) service.kill("SIGKILL");
    await killQemusUnder(root);
    rmSync(root, { recursive: true, force: true });
  });

  async function startService(): Promise<{ api: TestHost["api"] }> {
    const options = {
      containerEngine: engine.address,
      desktopImage: TEST_IMAGE,
      containerUlimits: testUlimits(),
      defaultRuntime: "container",
      pools: { checkIntervalMs: 500 },
    };
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "fixtures", "serve.ts"), root, JSON.stringify(options)],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    service = child;
    const url = await new Promise<string>((resolve, reject) => {
      let out = "";
      child.stdout?.setEncoding("utf8").on("data", (c: string) => {
        out += c;
        if (out.includes("\n")) resolve(out.trim());
      });
      child.once("exit", (code) => reject(new Error(`the service exited (${code})`)));
    });
    return {
      api: async (method, path, body) => {
        const res = await fetch(`${url}${path}`, {
          method,
          headers: body === undefined ? {} : { "content-type": "application/json" },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        return { status: res.status, body: text ? JSON.parse(text) : null, text, headers: res.headers };
      },
    };
  }

  it("comes back with its claims, its ready desktops claimable, and its half-started ones removed", async () => {
    let svc = await startService();
    expect(
      (await svc.api("POST", "/svc/pools", { name: "keep", size: 2, template: light, ttl: 600 })).status,
    ).toBe(201);
    await readyCount("keep", 2, svc);
    const claimed = (await svc.api("POST", "/svc/pools/keep/claim", { owner: "survivor" })).body;
    // The claim starts a replacement: kill the service while it is being started.
    const starting = await vi.waitFor(
      async () => {
        const p = await pool("keep", svc);
        const names = p.desktops
          .filter((d: { state: string }) => d.state === "starting")
          .map((d: { name: string }) => d.name);
        if (names.length === 0) throw new Error("nothing starting");
        return names as string[];
      },
      { timeout: 10_000, interval: 20 },
    );
    service?.kill("SIGKILL");
    await new Promise((resolve) => service?.once("exit", resolve));

    svc = await startService();
    const after = await pool("keep", svc);
    expect(after.desktops.find((d: { name: string }) => d.name === claimed.name)).toMatchObject({
      state: "claimed",
      claimedBy: "survivor",
      expiresAt: claimed.claim.expiresAt,
    });
    await vi.waitFor(
      async () => {
        const names = await containers();
        for (const name of starting)
          if (names.includes(`hangar-${name}`)) throw new Error(`${name} still there`);
      },
      { timeout: 30_000, interval: 200 },
    );
    await readyCount("keep", 2, svc);
    // The claimed desktop still answers, and is released as before.
    expect((await desktopCommand(claimed, "screenshot")).result.success).toBe(true);
    const next = await svc.api("POST", "/svc/pools/keep/claim", { wait: false });
    expect(next.status).toBe(200);
    for (const name of [claimed.name, next.body.name]) {
      expect((await svc.api("POST", `/svc/vms/${name}/release`)).status).toBe(200);
    }
    expect((await svc.api("DELETE", "/svc/pools/keep")).status).toBe(200);
    expect((await containers()).filter((c) => c.startsWith("hangar-keep-"))).toEqual([]);
  }, 180_000);
});

/** Processes whose command line names `path` (a container's monitor names its bundle under the storage). */
function processesUnder(path: string): string[] {
  const found: string[] = [];
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ");
      if (cmdline.includes(path)) found.push(`${pid}: ${cmdline.slice(0, 120)}`);
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/**
 * The command line of the process listening on TCP `port` (IPv4 or IPv6, this network namespace),
 * or undefined when no process is found holding it.
 */
function listenerOf(port: number): string | undefined {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of readFileSync(table, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is ADDRESS:PORT; state 0A is LISTEN; the inode is the tenth field.
      if (fields[1]?.endsWith(`:${hexPort}`) && fields[3] === "0A") inodes.add(fields[9]);
    }
  }
  for (const pid of readdirSync("/proc").filter((p) => /^\d+$/.test(p))) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
        const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
        if (inode && inodes.has(inode)) {
          return `${pid}: ${readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ")}`;
        }
      }
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return undefined;
}

/** True when something accepts a connection on 127.0.0.1:port. */
function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
