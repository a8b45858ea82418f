/**
 * The memory settings `hangar serve` is started with (src/common/memory-env.ts): jemalloc and V8's
 * smaller young generation in the server's own process, and not in the commands it runs.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
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
