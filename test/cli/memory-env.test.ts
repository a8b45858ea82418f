/**
 * The memory settings `hangar serve` is started with (src/common/memory-env.ts): jemalloc and V8's
 * smaller young generation in the server's own process, and not in the commands it runs.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { describe, expect, it } from "vitest";
import { ALLOCATOR_ENV } from "../../src/cli/launcher.js";
import {
  findJemalloc,
  forgetMemorySettings,
  JEMALLOC_CONF,
  memoryEnv,
  PRELOADED_ENV,
  SERVER_NODE_OPTIONS,
} from "../../src/common/memory-env.js";
import { startCli } from "../support/cli-process.js";

async function runCommand(url: string, command: string) {
  const response = await fetch(`${url}/cmd`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ command: "run_command", params: { command } }),
  });
  const text = await response.text();
  return JSON.parse(text.slice(text.indexOf("data: ") + 6)).content;
}

describe("the server's memory settings", () => {
  it("is jemalloc where it is installed (CI installs libjemalloc2)", () => {
    const library = findJemalloc();
    expect(library).toMatch(/libjemalloc\.so\.2$/);
    expect(memoryEnv({})).toMatchObject({ LD_PRELOAD: library, MALLOC_CONF: JEMALLOC_CONF });
  });

  it("leaves an LD_PRELOAD or MALLOC_CONF chosen by whoever starts the server as it is", () => {
    expect(memoryEnv({ LD_PRELOAD: "libother.so" })).not.toHaveProperty("LD_PRELOAD");
    expect(memoryEnv({ MALLOC_CONF: "narenas:4" })).not.toHaveProperty("MALLOC_CONF");
  });

  it("limits V8's young generation unless NODE_OPTIONS was chosen by whoever starts the server", () => {
    expect(memoryEnv({})).toMatchObject({ NODE_OPTIONS: "--max-semi-space-size=8" });
    expect(memoryEnv({ NODE_OPTIONS: "--max-old-space-size=512" })).not.toHaveProperty("NODE_OPTIONS");
    const ours: NodeJS.ProcessEnv = { NODE_OPTIONS: SERVER_NODE_OPTIONS };
    forgetMemorySettings(ours);
    expect(ours).toEqual({});
    const theirs: NodeJS.ProcessEnv = { NODE_OPTIONS: "--max-old-space-size=512" };
    forgetMemorySettings(theirs);
    expect(theirs).toEqual({ NODE_OPTIONS: "--max-old-space-size=512" });
  });

  it("is taken out of the environment the server's children get, and only it", () => {
    const env: NodeJS.ProcessEnv = {
      LD_PRELOAD: "libfirst.so /usr/lib/libjemalloc.so.2:liblast.so",
      MALLOC_CONF: JEMALLOC_CONF,
      [PRELOADED_ENV]: "/usr/lib/libjemalloc.so.2",
    };
    forgetMemorySettings(env);
    expect(env).toEqual({ LD_PRELOAD: "libfirst.so liblast.so" });
    const untouched = { LD_PRELOAD: "libjemalloc.so.2", MALLOC_CONF: "narenas:4" };
    forgetMemorySettings(untouched);
    expect(untouched).toEqual({ LD_PRELOAD: "libjemalloc.so.2", MALLOC_CONF: "narenas:4" });
  });

  it("run in the server's process while its commands see neither them nor their settings", async () => {
    const { NODE_OPTIONS: _, ...parent } = process.env;
    const env = { ...parent, DISPLAY: ":999", ...memoryEnv(parent) };
    const cli = await startCli(["serve", "--port", "0", "--no-virtual-display"], env);
    try {
      const maps = readFileSync(`/proc/${cli.child.pid}/maps`, "utf8");
      expect(maps).toContain("libjemalloc.so.2");
      const started = readFileSync(`/proc/${cli.child.pid}/environ`, "utf8").split("\0");
      expect(started).toContain(`NODE_OPTIONS=${SERVER_NODE_OPTIONS}`);
      const seen = await runCommand(
        cli.url,
        `echo "[$LD_PRELOAD][$MALLOC_CONF][$${PRELOADED_ENV}][$NODE_OPTIONS]"; grep -c jemalloc /proc/$$/maps`,
      );
      expect(seen.stdout).toBe(
        `[${process.env.LD_PRELOAD ?? ""}][${process.env.MALLOC_CONF ?? ""}][][]\n0\n`,
      );
    } finally {
      await cli.stop();
    }
  });
});

/** The environment of a user's shell: no memory settings of anybody's. */
function userEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ["NODE_OPTIONS", "LD_PRELOAD", "MALLOC_CONF", PRELOADED_ENV]) delete env[name];
  return env;
}

/** The pids of a process's children. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe("hangar serve started as the npm bin (bin/hangar.js through its #! line)", () => {
  it("serves from a child started with the memory settings, whose commands see none of them", async () => {
    const cli = await startCli(["serve", "--port", "0", "--no-virtual-display"], {
      ...userEnv(),
      DISPLAY: ":999",
    });
    try {
      const [server] = childrenOf(cli.child.pid!);
      expect(server).toBeGreaterThan(0);
      expect(readFileSync(`/proc/${server}/maps`, "utf8")).toContain("libjemalloc.so.2");
      expect(readFileSync(`/proc/${cli.child.pid}/maps`, "utf8")).not.toContain("libjemalloc.so.2");
      const seen = await runCommand(
        cli.url,
        'echo "[$LD_PRELOAD][$MALLOC_CONF][$NODE_OPTIONS][$HANGAR_LAUNCHER_PID]"; echo $PPID',
      );
      const [settings, parent] = seen.stdout.trim().split("\n");
      expect(settings).toBe("[][][][]");
      // The commands are the server's, not the launcher's.
      expect(childrenOf(cli.child.pid!)).toEqual([server]);
      expect(Number(parent)).not.toBe(cli.child.pid);
    } finally {
      await cli.stop();
    }
    expect(cli.child.exitCode).toBe(0);
  });

  it("stops its server and the server's display when the launcher is killed with SIGKILL", async () => {
    const cli = await startCli(["serve", "--port", "0", "--virtual-display=640x480"], {
      ...userEnv(),
      DISPLAY: "",
    });
    const [server] = childrenOf(cli.child.pid!);
    // Started by its path through setpriv (it dies with the server, src/os/parent-death.ts).
    const display = childrenOf(server).find((pid) =>
      /(^|\/)Xvfb$/.test(readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0")[0] ?? ""),
    );
    expect(display).toBeGreaterThan(0);
    cli.child.kill("SIGKILL");
    await expect.poll(() => alive(server), { timeout: 10_000 }).toBe(false);
    await expect.poll(() => alive(display!), { timeout: 10_000 }).toBe(false);
    await expect(fetch(`${cli.url}/status`)).rejects.toThrow();
  });

  it("exits with its server's status and says why once", async () => {
    const taken = createServer().listen(0, "127.0.0.1");
    await once(taken, "listening");
    const port = (taken.address() as { port: number }).port;
    try {
      const child = spawn(
        process.execPath,
        ["bin/hangar.js", "serve", "--port", String(port), "--no-virtual-display"],
        {
          env: { ...userEnv(), DISPLAY: ":999" },
          stdio: ["ignore", "ignore", "pipe"],
        },
      );
      let err = "";
      child.stderr.on("data", (d) => {
        err += String(d);
      });
      const [code] = await once(child, "exit");
      expect(code).toBe(1);
      expect(err.match(/EADDRINUSE|in use/g)?.length).toBeGreaterThanOrEqual(1);
      expect(err.split("\n").filter((l) => l.startsWith("hangar:"))).toHaveLength(1);
    } finally {
      taken.close();
    }
  });

  it("exits as 128 + the signal when its server is killed by one", async () => {
    const cli = await startCli(["serve", "--port", "0", "--no-virtual-display"], {
      ...userEnv(),
      DISPLAY: ":999",
    });
    const [server] = childrenOf(cli.child.pid!);
    const exited = once(cli.child, "exit");
    process.kill(server, "SIGKILL");
    expect((await exited)[0]).toBe(137);
  });

  it("does not load sharp for the panel's wallpaper: an idle desktop has no image library in memory", async () => {
    const cli = await startCli(["serve", "--port", "0", "--virtual-display=640x480", "--panel"], {
      ...userEnv(),
      DISPLAY: "",
      [ALLOCATOR_ENV]: "system",
    });
    try {
      const pid = cli.child.pid!;
      expect(
        JSON.parse(
          cli
            .log()
            .split("\n")
            .find((l) => l.includes("listening")) ?? "{}",
        ).url,
      ).toBe(cli.url);
      expect(cli.log()).not.toContain("no wallpaper");
      expect(readFileSync(`/proc/${pid}/maps`, "utf8")).not.toMatch(/libvips|sharp/);
      // The first JPEG screenshot loads it (PNG is deflated by zlib, docs/performance.md).
      await runCommand(cli.url, "true");
      const shot = await fetch(`${cli.url}/cmd`, {
        method: "POST",
        body: JSON.stringify({ command: "screenshot", params: { format: "jpeg" } }),
      });
      expect(await shot.text()).toContain('"success":true');
      expect(readFileSync(`/proc/${pid}/maps`, "utf8")).toMatch(/libvips/);
    } finally {
      await cli.stop();
    }
  });

  it("is one process with HANGAR_ALLOCATOR=system", async () => {
    const cli = await startCli(["serve", "--port", "0", "--no-virtual-display"], {
      ...userEnv(),
      DISPLAY: ":999",
      [ALLOCATOR_ENV]: "system",
    });
    try {
      expect(
        childrenOf(cli.child.pid!).filter((pid) =>
          readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("hangar.js"),
        ),
      ).toEqual([]);
      expect(readFileSync(`/proc/${cli.child.pid}/maps`, "utf8")).not.toContain("libjemalloc.so.2");
    } finally {
      await cli.stop();
    }
  });
});

describe("hangar mcp started as the npm bin", () => {
  it("serves its tools from a child with the memory settings, and ends when the client closes", async () => {
    const client = new Client({ name: "hangar-test", version: "1.0.0" });
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: ["bin/hangar.js", "mcp"],
      env: { ...(userEnv() as Record<string, string>), DISPLAY: ":999" },
      stderr: "pipe",
    });
    await client.connect(transport);
    const launcher = transport.pid!;
    try {
      const [server] = childrenOf(launcher);
      expect(readFileSync(`/proc/${server}/maps`, "utf8")).toContain("libjemalloc.so.2");
      const reply = (await client.callTool({
        name: "run_command",
        arguments: { command: 'printf "[$LD_PRELOAD][$NODE_OPTIONS]"' },
      })) as { structuredContent?: unknown };
      expect(reply.structuredContent).toMatchObject({ stdout: "[][]", return_code: 0 });
    } finally {
      await client.close();
    }
    await expect.poll(() => alive(launcher), { timeout: 10_000 }).toBe(false);
  });

  it("collects what loading the program left a few seconds after its start, before any request", async () => {
    const cli = await startCli(["serve", "--port", "0", "--no-virtual-display"], {
      ...userEnv(),
      DISPLAY: ":999",
      HANGAR_LOG_LEVEL: "debug",
    });
    try {
      await expect
        .poll(() => cli.log(), { timeout: 20_000, interval: 200 })
        .toContain("idle: memory after a full garbage collection");
      // Nothing asked it anything: the log has no request in it.
      expect(cli.log()).not.toMatch(/"(method|path)":/);
    } finally {
      await cli.stop();
    }
  }, 30_000);
});
