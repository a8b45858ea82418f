/**
 * The desktop container's entrypoint run for real (as the image runs it, minus tini and Docker):
 * a virtual desktop of the asked size, VNC and noVNC with a password, `hangar serve` with the mounted
 * secrets turned into flags, the HEALTHCHECK script, and a clean stop on SIGTERM.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync, readFileSync, statSync } from "node:fs";
import { chmod, copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import { afterEach, describe, expect, it, vi } from "vitest";
import { WebSocket } from "ws";
import { send } from "../support/clients.js";
import { isAlive } from "../support/processes.js";
import { rawRequest, tryUpgrade } from "../support/raw-http.js";
import { postCmd } from "../support/server.js";
import { makeTestCertificate } from "../support/tls.js";

const REPO = resolve(import.meta.dirname, "..", "..");
const MAIN = join(REPO, "dist", "src", "container", "main.js");
const HEALTH = join(REPO, "dist", "src", "container", "health.js");

async function freePort(): Promise<number> {
  const server = createServer().listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  await new Promise((done) => server.close(done));
  return port;
}

interface Started {
  child: ChildProcess;
  dir: string;
  output: () => string;
}
const started: Started[] = [];

afterEach(async () => {
  for (const s of started.splice(0)) {
    if (s.child.exitCode === null && s.child.signalCode === null) {
      s.child.kill("SIGTERM");
      await once(s.child, "exit");
    }
    await rm(s.dir, { recursive: true, force: true });
  }
});

/** VNC with a password file in `dir`, on these ports, and the server on loopback. */
function vncEnv(dir: string, vncPort: number, webPort: number): Record<string, string> {
  return {
    HANGAR_HOST: "127.0.0.1",
    HANGAR_SECRETS_DIR: join(dir, "no-secrets"),
    HANGAR_VNC: "1",
    HANGAR_VNC_PASSWORD_FILE: join(dir, "vnc-password"),
    HANGAR_VNC_PORT: String(vncPort),
    HANGAR_NOVNC_PORT: String(webPort),
  };
}

async function startEntrypoint(env: Record<string, string>, args: string[], dir: string): Promise<Started> {
  const child = spawn(process.execPath, [MAIN, ...args], {
    // The tests run as root: the entry point would give the agent a user of its own (the image's
    // hangar, not on this machine); the test of that names one.
    env: { ...process.env, DISPLAY: "", TMPDIR: dir, HANGAR_COMMAND_USER: "off", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout!.on("data", (d) => {
    output += d;
  });
  child.stderr!.on("data", (d) => {
    output += d;
  });
  const s = { child, dir, output: () => output };
  started.push(s);
  return s;
}

/** The processes `pid` started that run `name`. */
function childrenNamed(pid: number, name: string): number[] {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  return children.map(Number).filter((child) => {
    try {
      return readFileSync(`/proc/${child}/comm`, "utf8").trim() === name;
    } catch {
      return false;
    }
  });
}

/** Runs the HEALTHCHECK command as Docker would: exit code 0 means healthy. */
async function healthcheck(dir: string): Promise<{ code: number; stderr: string }> {
  try {
    await promisify(execFile)(process.execPath, [HEALTH, "/status"], {
      env: { ...process.env, TMPDIR: dir },
    });
    return { code: 0, stderr: "" };
  } catch (err) {
    return { code: (err as { code: number }).code, stderr: String((err as { stderr: string }).stderr) };
  }
}

async function waitHealthy(s: Started, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  let last = { code: -1, stderr: "" };
  while (Date.now() < deadline) {
    if (s.child.exitCode !== null) throw new Error(`the entrypoint exited: ${s.output()}`);
    last = await healthcheck(s.dir);
    if (last.code === 0) return;
    await sleep(200);
  }
  throw new Error(`not healthy after ${timeoutMs} ms: ${last.stderr}\n${s.output()}`);
}

/** The RFB greeting and the security types a VNC server offers (2 = VNC password, 1 = none). */
function vncSecurityTypes(port: number): Promise<{ version: string; types: number[] }> {
  return new Promise((done, fail) => {
    const socket = connect({ host: "127.0.0.1", port });
    let data = Buffer.alloc(0);
    socket.setTimeout(5000, () => socket.destroy(new Error("VNC server did not answer")));
    socket.on("error", fail);
    socket.on("data", (chunk) => {
      data = Buffer.concat([data, chunk]);
      if (data.length === 12) socket.write(data.subarray(0, 12)); // answer with the same version
      if (data.length > 13 && data.length >= 13 + data[12]) {
        socket.destroy();
        done({ version: data.subarray(0, 12).toString(), types: [...data.subarray(13, 13 + data[12])] });
      }
    });
  });
}

describe("the container entrypoint", () => {
  it("runs a desktop with VNC and noVNC behind a password, serves /cmd on it, and stops cleanly", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-container-"));
    const [port, vncPort, webPort] = [await freePort(), await freePort(), await freePort()];
    await writeFile(join(dir, "vnc-password"), "watch-it\n", { mode: 0o600 });
    const s = await startEntrypoint(
      { ...vncEnv(dir, vncPort, webPort), HANGAR_DISPLAY: "1024x700" },
      ["--port", String(port)],
      dir,
    );
    await waitHealthy(s);
    const url = `http://127.0.0.1:${port}`;

    const size = await postCmd(url, { command: "get_screen_size" });
    expect(size.event).toMatchObject({ success: true, size: { width: 1024, height: 700 } });
    const display = await postCmd(url, {
      command: "run_command",
      params: { command: 'echo "$DISPLAY"; test -n "$DBUS_SESSION_BUS_ADDRESS" && echo bus' },
    });
    const [displayName, bus] = display.event.stdout.trim().split("\n");
    expect(displayName).toMatch(/^:\d+$/);
    expect(bus).toBe("bus");

    const vnc = await vncSecurityTypes(vncPort);
    expect(vnc.version).toBe("RFB 003.008\n");
    expect(vnc.types).toEqual([2]);
    // `/` is the viewer, served by Hangar's relay; pages of other origins are refused.
    const page = await fetch(`http://127.0.0.1:${webPort}/`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("noVNC");
    const foreign = await fetch(`http://127.0.0.1:${webPort}/`, {
      headers: { origin: "http://evil.example" },
    });
    expect(foreign.status).toBe(403);
    // The viewer's WebSocket reaches x11vnc: the first bytes are its RFB greeting.
    const ws = new WebSocket(`ws://127.0.0.1:${webPort}/websockify`, {
      origin: `http://127.0.0.1:${webPort}`,
    });
    ws.on("error", () => undefined);
    const [greeting] = await once(ws, "message");
    expect(Buffer.from(greeting as Buffer).toString()).toBe("RFB 003.008\n");
    ws.close();
    const refused = new WebSocket(`ws://127.0.0.1:${webPort}/websockify`, { origin: "http://evil.example" });
    const [, reply] = await Promise.race([once(refused, "unexpected-response"), once(refused, "error")]);
    expect((reply as { statusCode?: number })?.statusCode).toBe(403);
    // A foreign Host (DNS rebinding) is refused on the pages and the socket alike.
    const web = `http://127.0.0.1:${webPort}`;
    expect((await rawRequest(web, "GET", "/", { host: `evil.example:${webPort}` })).status).toBe(403);
    expect(
      await tryUpgrade(`ws://127.0.0.1:${webPort}/websockify`, { host: `evil.example:${webPort}` }),
    ).toBe(403);
    // x11vnc took the password file away once it had read it.
    const leftovers = await promisify(execFile)("sh", ["-c", `ls ${dir}/hangar-vnc-* 2>/dev/null | wc -l`]);
    expect(leftovers.stdout.trim()).toBe("0");

    // Its X server's socket, known by its inode: another test's X server may take the display
    // number once it is free, with a socket of its own at the same path.
    const xSocket = `/tmp/.X11-unix/X${displayName.slice(1)}`;
    const ours = inodeOf(xSocket);
    expect(ours).not.toBeNull();
    s.child.kill("SIGTERM");
    const [code] = await once(s.child, "exit");
    expect(code).toBe(0);
    expect(inodeOf(xSocket)).not.toBe(ours);
    await expect(fetch(`${url}/status`)).rejects.toThrow();
    await expect(vncSecurityTypes(vncPort)).rejects.toThrow();
    expect((await healthcheck(dir)).stderr).toMatch(/unhealthy: the server has not started/);
  }, 60_000);

  it("takes the container down, with its desktop and x11vnc, when VNC cannot start beside the server", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-container-"));
    const [port, vncPort, webPort] = [await freePort(), await freePort(), await freePort()];
    await writeFile(join(dir, "vnc-password"), "watch-it\n", { mode: 0o600 });
    // Another program holds the viewer's port: the VNC port listens, the viewer's cannot.
    const squatter = createServer().listen(webPort, "127.0.0.1");
    await once(squatter, "listening");
    try {
      const s = await startEntrypoint(vncEnv(dir, vncPort, webPort), ["--port", String(port)], dir);
      const [code] = await once(s.child, "exit");
      expect(code, s.output()).toBe(2);
      expect(s.output()).toMatch(/the noVNC viewer cannot listen on 127\.0\.0\.1:\d+/);
      // Nothing it started is left: no x11vnc on its port, no X server of its display.
      await expect(vncSecurityTypes(vncPort)).rejects.toThrow();
      const display = /display (:\d+)/.exec(s.output())?.[1];
      if (display) expect(existsSync(`/tmp/.X11-unix/X${display.slice(1)}`)).toBe(false);
      await expect(fetch(`http://127.0.0.1:${port}/status`)).rejects.toThrow();
    } finally {
      squatter.close();
    }
  }, 60_000);

  it("killed with SIGKILL while a viewer watches, leaves no x11vnc and no X server behind", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-container-"));
    const [port, vncPort, webPort] = [await freePort(), await freePort(), await freePort()];
    await writeFile(join(dir, "vnc-password"), "watch-it\n", { mode: 0o600 });
    const s = await startEntrypoint(vncEnv(dir, vncPort, webPort), ["--port", String(port)], dir);
    await waitHealthy(s);
    // A viewer starts x11vnc, a child of the entry point.
    const viewer = connect({ host: "127.0.0.1", port: vncPort });
    viewer.on("error", () => undefined);
    await once(viewer, "data");
    const x11vnc = childrenNamed(s.child.pid!, "x11vnc");
    expect(x11vnc).toHaveLength(1);
    const display = /display (:\d+)/.exec(s.output())?.[1];
    s.child.kill("SIGKILL");
    await once(s.child, "exit");
    // The X server ends with it (a parent-death signal), and x11vnc with its X server (cleanly:
    // its shared memory goes too); the X server's socket goes with the X server.
    await expect.poll(() => x11vnc.filter(isAlive), { timeout: 10_000 }).toEqual([]);
    if (display) await expect.poll(() => existsSync(`/tmp/.X11-unix/X${display.slice(1)}`)).toBe(false);
    viewer.destroy();
  }, 60_000);

  it("started as root, keeps the server root and gives the agent's processes, files and desktop a user of their own", async () => {
    const outer = await mkdtemp(join(tmpdir(), "hangar-container-root-"));
    try {
      // nobody passes through to the desktop's sockets (the suite's temp dir is 0700).
      await chmod(tmpdir(), 0o711);
      await chmod(outer, 0o711);
      const tmp = join(outer, "tmp");
      await mkdir(tmp);
      await chmod(tmp, 0o1777);
      const agentDir = join(outer, "agent");
      await mkdir(agentDir);
      await chmod(agentDir, 0o1777);
      await mkdir(join(outer, "secrets"));
      const tokenFile = join(outer, "secrets", "envd-token");
      await writeFile(tokenFile, "token-the-agent-must-not-read\n", { mode: 0o600 });
      const port = await freePort();
      const s = await startEntrypoint(
        {
          HANGAR_HOST: "127.0.0.1",
          HANGAR_DISPLAY: "800x600",
          HANGAR_SECRETS_DIR: join(outer, "secrets"),
          HANGAR_COMMAND_USER: "nobody",
          HANGAR_ENVD: String(await freePort()),
          HANGAR_OSWORLD: "off",
        },
        ["--port", String(port)],
        tmp,
      );
      await waitHealthy(s);
      const url = `http://127.0.0.1:${port}`;
      const run = async (command: string) =>
        (await postCmd(url, { command: "run_command", params: { command } })).event as {
          stdout: string;
          stderr: string;
        };
      expect((await run("id -u")).stdout).toBe("65534\n");
      const key = await run(`cat '${tokenFile}'`);
      expect(key.stderr).toMatch(/Permission denied/);
      expect(key.stdout).not.toContain("token-the-agent");
      // The agent's X clients still draw on the desktop.
      expect((await run("xdpyinfo | grep -c dimensions")).stdout).toBe("1\n");
      const server = s.child.pid as number;
      // pkill -f hangar ends the agent's own shell too (its command line names hangar): only the server's fate counts.
      await run(`kill -9 ${server}; killall -9 node; pkill -9 -f hangar`);
      expect(s.child.exitCode).toBe(null);
      expect((await healthcheck(tmp)).code).toBe(0);
      // What the file commands write is the agent's.
      const made = join(agentDir, "note.txt");
      expect(
        (await postCmd(url, { command: "write_text", params: { path: made, content: "hi" } })).event.success,
      ).toBe(true);
      expect(statSync(made).uid).toBe(65534);
      s.child.kill("SIGTERM");
      await once(s.child, "exit");
    } finally {
      await rm(outer, { recursive: true, force: true });
    }
  });

  it("turns mounted certificate and key files into HTTPS with API keys (cloud mode)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-container-"));
    const cert = makeTestCertificate();
    const secrets = join(dir, "secrets");
    await mkdir(join(secrets, "tls"), { recursive: true });
    await mkdir(join(secrets, "api-keys"), { recursive: true });
    await copyFile(cert.certPath, join(secrets, "tls", "tls.crt"));
    await copyFile(cert.keyPath, join(secrets, "tls", "tls.key"));
    const ca = cert.cert;
    cert.remove();
    await writeFile(join(secrets, "api-keys", "keys"), "container-test-key\n");
    const port = await freePort();
    const s = await startEntrypoint(
      { HANGAR_HOST: "127.0.0.1", HANGAR_SECRETS_DIR: secrets, CONTAINER_NAME: "ct-desktop" },
      ["--port", String(port)],
      dir,
    );
    await waitHealthy(s);
    const url = `https://127.0.0.1:${port}`;
    const status = await send(`${url}/status`, { ca });
    expect(status.json()).toMatchObject({ status: "ok" });
    const post = (headers: Record<string, string>) =>
      send(`${url}/cmd`, {
        ca,
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ command: "version" }),
      });
    expect((await post({})).status).toBe(401);
    const ok = await post({ "X-Container-Name": "ct-desktop", "X-API-Key": "container-test-key" });
    expect(ok.status).toBe(200);
    expect(ok.text).toContain('"success":true');
    expect(s.output()).toMatch(/TLS certificate SHA-256 fingerprint/);
    expect(s.output()).not.toContain("container-test-key");
  }, 60_000);

  it("serves HTTPS with a certificate and key given as PEM text in the environment", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-container-"));
    const cert = makeTestCertificate();
    const [certPem, keyPem] = [await readFile(cert.certPath, "utf8"), await readFile(cert.keyPath, "utf8")];
    const ca = cert.cert;
    cert.remove();
    const port = await freePort();
    const s = await startEntrypoint(
      {
        HANGAR_HOST: "127.0.0.1",
        HANGAR_SECRETS_DIR: join(dir, "no-secrets"),
        HANGAR_TLS_CERT: certPem,
        HANGAR_TLS_KEY: keyPem,
      },
      ["--port", String(port)],
      dir,
    );
    await waitHealthy(s);
    const status = await send(`https://127.0.0.1:${port}/status`, { ca });
    expect(status.json()).toMatchObject({ status: "ok" });
    // The server's commands do not see the key in their environment.
    const env = await send(`https://127.0.0.1:${port}/cmd`, {
      ca,
      body: JSON.stringify({
        command: "run_command",
        params: { command: "env | grep -c '^HANGAR_TLS_' || true" },
      }),
    });
    expect(env.text).toContain('"stdout":"0\\n"');
    const keyFile = join(dir, "hangar", "tls", "key.pem");
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(s.output()).not.toContain("PRIVATE KEY");
    s.child.kill("SIGTERM");
    await once(s.child, "exit");
    expect(existsSync(keyFile)).toBe(false);
  }, 60_000);

  it("with HANGAR_EXTERNAL_DISPLAY, starts no desktop and drives the display E2B's SDK starts once it appears", async () => {
    const dir = await mkdtemp(join(tmpdir(), "hangar-container-"));
    const port = await freePort();
    const display = await freeDisplay();
    const s = await startEntrypoint(
      {
        HANGAR_HOST: "127.0.0.1",
        HANGAR_SECRETS_DIR: join(dir, "no-secrets"),
        HANGAR_EXTERNAL_DISPLAY: display,
        // Ignored: the SDK's own x11vnc and noVNC take VNC's ports.
        HANGAR_VNC: "1",
      },
      ["--port", String(port)],
      dir,
    );
    await waitHealthy(s);
    const url = `http://127.0.0.1:${port}`;
    const before = await postCmd(url, { command: "get_screen_size" });
    expect(before.event).toMatchObject({
      success: false,
      error: expect.stringMatching(/no X server is listening/),
    });
    expect(s.output()).toMatch(new RegExp(`the desktop is ${display}'s, started by another program`));

    // Xvfb as @e2b/desktop starts it, through the desktop template's wrapper (deploy/e2b-desktop/Xvfb).
    const xvfb = spawn(
      join(REPO, "deploy", "e2b-desktop", "Xvfb"),
      [
        display,
        "-ac",
        "-screen",
        "0",
        "800x600x24",
        "-retro",
        "-dpi",
        "96",
        "-nolisten",
        "tcp",
        "-nolisten",
        "unix",
      ],
      { stdio: "ignore" },
    );
    try {
      // Its socket file, which the wrapper kept, is where the server attaches.
      await vi.waitFor(() => expect(existsSync(`/tmp/.X11-unix/X${display.slice(1)}`)).toBe(true), {
        timeout: 10_000,
        interval: 100,
      });
      const after = await postCmd(url, { command: "get_screen_size" });
      expect(after.event).toMatchObject({ success: true, size: { width: 800, height: 600 } });
    } finally {
      xvfb.kill("SIGTERM");
      await once(xvfb, "exit");
    }
    s.child.kill("SIGTERM");
    const [code] = await once(s.child, "exit");
    expect(code).toBe(0);
  }, 60_000);
});

/** The file's inode, or null when there is none. */
function inodeOf(path: string): number | null {
  try {
    return statSync(path).ino;
  } catch {
    return null;
  }
}

/** A display number no X server uses. */
async function freeDisplay(): Promise<string> {
  for (let n = 200 + (process.pid % 300); ; n++) {
    if (!existsSync(`/tmp/.X${n}-lock`) && !existsSync(`/tmp/.X11-unix/X${n}`)) return `:${n}`;
  }
}
