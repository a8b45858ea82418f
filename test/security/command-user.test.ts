/**
 * `hangar serve --command-user nobody` (src/os/command-user.ts), started as root as a user would:
 * every process the agent starts — run_command, launch, a PTY, OSWorld's /execute, envd's processes
 * — runs as nobody; the agent cannot signal the server or read its key file or environment, and
 * still has the desktop: its X clients draw on the display, its apps reach the session bus, the
 * accessibility tree and the sound.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import {
  chmodSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Sandbox } from "e2b";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningCli, startCli } from "../support/cli-process.js";
import { eventually, PYTHON } from "../support/desktop.js";
import { uidOf } from "../support/processes.js";
import { postCmd } from "../support/server.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const appScript = fileURLToPath(new URL("../support/a11y-app.py", import.meta.url));
const NOBODY = 65534;
const TOKEN = "envd-token-the-agent-must-not-read";

let serve: RunningCli;
let dir: string;
/** The server's temp dir: nobody must pass through it to the sound's socket (the suite's own is 0700). */
let serverTmp: string;
/** A directory nobody may write in (mode 1777), for the files the agent's requests make. */
let agentDir: string;
let tokenFile: string;
let osworldUrl: string;
let envdUrl: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hangar-command-user-"));
  tokenFile = join(dir, "envd-token");
  writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
  agentDir = join(dir, "agent");
  mkdirSync(agentDir);
  chmodSync(agentDir, 0o1777);
  serverTmp = join(dir, "tmp");
  mkdirSync(serverTmp, { mode: 0o1777 });
  chmodSync(serverTmp, 0o1777);
  chmodSync(dir, 0o711);
  // The suite's temp dir (leftovers.ts) is 0700: nobody may pass through it, not list it.
  chmodSync(tmpdir(), 0o711);
  serve = await startCli(
    [
      "serve",
      "--port",
      "0",
      "--command-user",
      "nobody",
      "--virtual-display",
      "800x600",
      "--panel",
      "--osworld",
      "0",
      "--envd-port",
      "0",
      "--envd-token-file",
      tokenFile,
    ],
    { ...process.env, TMPDIR: serverTmp },
  );
  const urls = await eventually(() => {
    const osworld = /OSWorld controller API on (\S+)/.exec(serve.stdout())?.[1];
    const envd = /E2B envd on (\S+)/.exec(serve.stdout())?.[1];
    if (!osworld || !envd) throw new Error(`not listening yet: ${serve.stdout()}`);
    return { osworld, envd };
  });
  osworldUrl = urls.osworld;
  envdUrl = urls.envd;
}, 60_000);

afterAll(async () => {
  await serve?.stop();
  // What the server made in its temp dir (the bus's configuration, the sound's socket) is gone.
  const left = serverTmp ? readdirSync(serverTmp) : [];
  if (dir) rmSync(dir, { recursive: true, force: true });
  expect(left).toEqual([]);
});

async function run(command: string) {
  const { event } = await postCmd(serve.url, { command: "run_command", params: { command } });
  expect(event.success).toBe(true);
  return event.content as { stdout: string; stderr: string; return_code: number };
}

async function osworldExecute(command: string) {
  const res = await fetch(`${osworldUrl}/execute`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ command, shell: true }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { output: string; error: string; returncode: number };
}

/** A PTY session's whole output, read from its event stream until it exits. */
async function ptyOutput(command: string): Promise<string> {
  const started = await fetch(`${serve.url}/pty`, { method: "POST", body: JSON.stringify({ command }) });
  expect(started.status).toBe(200);
  const { pid } = (await started.json()) as { pid: number };
  const res = await fetch(`${serve.url}/pty/${pid}/stream`);
  let output = "";
  let text = "";
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    text += Buffer.from(chunk).toString();
    let end = text.indexOf("\n\n");
    while (end >= 0) {
      const event = JSON.parse(text.slice(6, end)) as { type: string; data?: string };
      text = text.slice(end + 2);
      if (event.type === "output") output += Buffer.from(event.data ?? "", "base64").toString();
      else return output;
      end = text.indexOf("\n\n");
    }
  }
  return output;
}

function envdSandbox(): Sandbox {
  const SandboxClass = Sandbox as unknown as new (opts: Record<string, unknown>) => Sandbox;
  return new SandboxClass({
    sandboxId: "hangar-test",
    envdVersion: "0.6.4",
    envdAccessToken: TOKEN,
    sandboxUrl: envdUrl,
    apiKey: "unused-by-envd",
  });
}

/** A child of `parent` whose program is `name`, or undefined. */
function childNamed(parent: number, name: string): number | undefined {
  const children = readFileSync(`/proc/${parent}/task/${parent}/children`, "utf8").trim().split(/\s+/);
  return children.map(Number).find((pid) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, "utf8").trim() === name;
    } catch {
      return false;
    }
  });
}

describe("hangar serve --command-user nobody (as root)", () => {
  it("runs run_command, launch, a PTY, OSWorld's /execute and envd's processes as nobody", async () => {
    const shell = await run('id -u; id -g; echo "$HOME:$USER:$LOGNAME"; pwd');
    expect(shell.stdout).toBe(`${NOBODY}\n${NOBODY}\n/nonexistent:nobody:nobody\n/\n`);
    // The server itself stays root; the panel, whose menu starts programs, is nobody's.
    expect(uidOf(serve.pid)).toBe(0);
    const panel = await eventually(() => childNamed(serve.pid, "lxpanel"));
    expect(uidOf(panel)).toBe(NOBODY);
    // The window manager too: its menu starts programs.
    const wm = await eventually(() => childNamed(serve.pid, "openbox"));
    expect(uidOf(wm)).toBe(NOBODY);

    expect((await ptyOutput("id -u")).trim()).toBe(String(NOBODY));
    expect((await osworldExecute("id -u")).output).toBe(`${NOBODY}\n`);

    const envd = await envdSandbox().commands.run("id -u; echo $HOME; pwd");
    expect(envd.stdout).toBe(`${NOBODY}\n/nonexistent\n/\n`);

    const { event } = await postCmd(serve.url, { command: "launch", params: { app: "sleep", args: ["30"] } });
    expect(event.success).toBe(true);
    const pid = event.content.pid as number;
    try {
      // The pid is setpriv's until it has dropped to the user and become the program.
      await eventually(() => readFileSync(`/proc/${pid}/comm`, "utf8").trim() === "sleep");
      expect(uidOf(pid)).toBe(NOBODY);
    } finally {
      process.kill(pid, "SIGKILL");
    }
  });

  it("the agent cannot read the server's key file or environment, nor kill it", async () => {
    const key = await run(`cat '${tokenFile}'`);
    expect(key.return_code).not.toBe(0);
    expect(key.stderr).toMatch(/Permission denied/);
    expect(key.stdout).not.toContain(TOKEN);
    const environ = await run(`cat /proc/${serve.pid}/environ`);
    expect(environ.stderr).toMatch(/Permission denied/);
    expect((await osworldExecute(`cat '${tokenFile}'`)).output).not.toContain(TOKEN);

    const kills = await run(`kill -9 ${serve.pid}; pkill -9 -f hangar; killall -9 node; true`);
    expect(kills.stderr).toMatch(/Operation not permitted/);
    await osworldExecute(`kill -9 ${serve.pid}; pkill -9 -f hangar; killall -9 node`);
    await envdSandbox()
      .commands.run(`kill -9 ${serve.pid}; pkill -9 -f hangar`)
      .catch(() => undefined);

    expect(serve.child.exitCode).toBe(null);
    const status = await fetch(`${serve.url}/status`);
    expect(status.status).toBe(200);
    expect((await run("echo still here")).stdout).toBe("still here\n");
  });

  it("file commands, /files, OSWorld's file routes and envd's files act as nobody", async () => {
    // Reads: the server's key file is not nobody's to read, whichever way it is asked for.
    const read = await postCmd(serve.url, { command: "read_text", params: { path: tokenFile } });
    expect(read.event.success).toBe(false);
    expect(read.event.error).toMatch(/[Pp]ermission denied/);
    const got = await fetch(`${serve.url}/files${tokenFile}`);
    expect(got.status).toBe(403);
    expect(await got.text()).not.toContain(TOKEN);
    const form = new FormData();
    form.set("file_path", tokenFile);
    const osworldFile = await fetch(`${osworldUrl}/file`, { method: "POST", body: form });
    expect(osworldFile.status).not.toBe(200);
    expect(await osworldFile.text()).not.toContain(TOKEN);
    await expect(envdSandbox().files.read(tokenFile)).rejects.toThrow(/permission denied/i);

    // Writes: refused where nobody may not write (the test's root-owned directory) …
    const planted = await postCmd(serve.url, {
      command: "write_text",
      params: { path: join(dir, "planted"), content: "x" },
    });
    expect(planted.event.success).toBe(false);
    expect(() => readFileSync(join(dir, "planted"))).toThrow();
    // … and what the agent's files get is the agent's own.
    const made = join(agentDir, "made");
    expect(
      (await postCmd(serve.url, { command: "write_text", params: { path: `${made}-cmd`, content: "a" } }))
        .event.success,
    ).toBe(true);
    expect((await fetch(`${serve.url}/files${made}-files`, { method: "PUT", body: "b" })).status).toBe(201);
    const upload = new FormData();
    upload.set("file_path", `${made}-osworld`);
    upload.set("file_data", new Blob(["c"]), "c.txt");
    expect((await fetch(`${osworldUrl}/setup/upload`, { method: "POST", body: upload })).status).toBe(200);
    await envdSandbox().files.write(`${made}-envd/inner`, "d");
    for (const name of ["made-cmd", "made-files", "made-osworld", "made-envd", "made-envd/inner"]) {
      expect([name, statSync(join(agentDir, name)).uid]).toEqual([name, NOBODY]);
    }
    expect(await envdSandbox().files.read(`${made}-envd/inner`)).toBe("d");
    expect(uidOf(serve.pid)).toBe(0);
  });

  it("a recording to the agent's path and a wallpaper's file are the agent's to write and read", async () => {
    const refused = await postCmd(serve.url, {
      command: "start_recording",
      params: { path: join(dir, "video.mp4") },
    });
    expect(refused.event.success).toBe(false);
    expect(refused.event.error).toMatch(/[Pp]ermission denied/);
    expect(() => readFileSync(join(dir, "video.mp4"))).toThrow();

    const path = join(agentDir, "video.mp4");
    const started = await postCmd(serve.url, { command: "start_recording", params: { path } });
    expect(started.event.success, JSON.stringify(started.event)).toBe(true);
    expect(started.event.content.path).toBe(path);
    await eventually(async () => {
      const status = await postCmd(serve.url, { command: "recording_status", params: {} });
      return (status.event.content?.recording?.frames ?? 0) > 0;
    });
    const stopped = await postCmd(serve.url, { command: "stop_recording", params: {} });
    expect(stopped.event.success, JSON.stringify(stopped.event)).toBe(true);
    expect(stopped.event.content.path).toBe(path);
    expect(stopped.event.content.error).toBeUndefined();
    expect(statSync(path).uid).toBe(NOBODY);
    expect(statSync(path).size).toBeGreaterThan(1000);

    const wallpaper = await postCmd(serve.url, { command: "set_wallpaper", params: { path: tokenFile } });
    expect(wallpaper.event.success).toBe(false);
    expect(wallpaper.event.error).toMatch(/[Pp]ermission denied/);
  });

  it("the agent's X clients draw on the display, and its apps reach the session bus, AT-SPI and the sound", async () => {
    expect((await run("xsetroot -solid '#ff0000'")).return_code).toBe(0);
    const shot = await postCmd(serve.url, { command: "screenshot", params: { format: "png" } });
    expect(shot.event.success).toBe(true);
    const png = Buffer.from(shot.event.content.image_data as string, "base64");
    const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
    // The top right corner of the root window, away from any window and the panel (at the bottom).
    const at = (2 * info.width + (info.width - 2)) * info.channels;
    expect([data[at], data[at + 1], data[at + 2]]).toEqual([255, 0, 0]);

    const bus = await run(
      "dbus-send --session --print-reply --dest=org.freedesktop.DBus / org.freedesktop.DBus.ListNames",
    );
    expect(bus, bus.stderr).toMatchObject({
      return_code: 0,
      stdout: expect.stringContaining("org.a11y.Bus"),
    });
    // The bus is root's and starts no service for the agent (it would run as root).
    const started = await run(
      "dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus " +
        "org.freedesktop.DBus.StartServiceByName string:ca.desrt.dconf uint32:0 2>&1",
    );
    expect(started.return_code).not.toBe(0);
    expect(started.stdout).toMatch(/ServiceUnknown|not provided by any .service files/);
    const sound = await run("pactl list short sinks");
    expect(sound).toEqual({
      return_code: 0,
      stdout: expect.stringContaining("hangar"),
      stderr: expect.any(String),
    });
    // The sound server's modules stay as they are: a pipe sink would write a file as root.
    const module = await run("pactl load-module module-pipe-sink file=/tmp/from-root 2>&1");
    expect(module.return_code).not.toBe(0);

    // A GTK app started by nobody is in the tree the server (root) reads over AT-SPI.
    await run(`nohup ${PYTHON} '${appScript}' >/dev/null 2>&1 &`);
    const found = await eventually(async () => {
      const { event } = await postCmd(serve.url, {
        command: "find_element",
        params: { role: "button", title: "Press me" },
      });
      if (!event.success) throw new Error(JSON.stringify(event));
      return event;
    });
    expect(found).toMatchObject({ success: true, element: { role: "push button", name: "Press me" } });
  });
});

describe("hangar serve --command-user refused", () => {
  async function failedStart(args: string[], asNobody = false) {
    const command = [
      process.execPath,
      "bin/hangar.js",
      "serve",
      "--port",
      "0",
      "--no-virtual-display",
      ...args,
    ];
    const [file, ...rest] = asNobody
      ? ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "--", ...command]
      : command;
    const child = spawn(file, rest, {
      cwd: ROOT,
      env: { ...process.env, HOME: dir },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let said = "";
    child.stdout.on("data", (d) => {
      said += String(d);
    });
    child.stderr.on("data", (d) => {
      said += String(d);
    });
    const [code] = await once(child, "exit");
    return { code, said };
  }

  it("names a user that does not exist", async () => {
    const { code, said } = await failedStart(["--command-user", "no-such-user-hangar"]);
    expect(code).not.toBe(0);
    expect(said).toMatch(/no user named 'no-such-user-hangar'/);
    expect(said).not.toMatch(/\n\s+at /);
  });

  it("refuses root, and a server that is not root", async () => {
    expect((await failedStart(["--command-user", "root"])).said).toMatch(/'root' is root/);
    const { code, said } = await failedStart(["--command-user", "nobody"], true);
    expect(code).not.toBe(0);
    expect(said).toMatch(/runs as uid 65534, and only root can start processes as another user/);
  });
});
