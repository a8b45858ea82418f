/**
 * The allocator `hangar serve` is started with (src/common/allocator-env.ts): jemalloc in the
 * server's own process, and not in the commands it runs.
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  allocatorEnv,
  findJemalloc,
  forgetPreloadedAllocator,
  JEMALLOC_CONF,
  PRELOADED_ENV,
} from "../../src/common/allocator-env.js";
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

describe("the server's allocator", () => {
  it("is jemalloc where it is installed (CI installs libjemalloc2)", () => {
    const library = findJemalloc();
    expect(library).toMatch(/libjemalloc\.so\.2$/);
    expect(allocatorEnv({})).toMatchObject({ LD_PRELOAD: library, MALLOC_CONF: JEMALLOC_CONF });
  });

  it("leaves an LD_PRELOAD or MALLOC_CONF chosen by whoever starts the server as it is", () => {
    expect(allocatorEnv({ LD_PRELOAD: "libother.so" })).not.toHaveProperty("LD_PRELOAD");
    expect(allocatorEnv({ MALLOC_CONF: "narenas:4" })).not.toHaveProperty("MALLOC_CONF");
  });

  it("is taken out of the environment the server's children get, and only it", () => {
    const env: NodeJS.ProcessEnv = {
      LD_PRELOAD: "libfirst.so /usr/lib/libjemalloc.so.2:liblast.so",
      MALLOC_CONF: JEMALLOC_CONF,
      [PRELOADED_ENV]: "/usr/lib/libjemalloc.so.2",
    };
    forgetPreloadedAllocator(env);
    expect(env).toEqual({ LD_PRELOAD: "libfirst.so liblast.so" });
    const untouched = { LD_PRELOAD: "libjemalloc.so.2", MALLOC_CONF: "narenas:4" };
    forgetPreloadedAllocator(untouched);
    expect(untouched).toEqual({ LD_PRELOAD: "libjemalloc.so.2", MALLOC_CONF: "narenas:4" });
  });

  it("runs in the server's process while its commands see neither it nor its settings", async () => {
    const env = { ...process.env, DISPLAY: ":999", ...allocatorEnv(process.env) };
    const cli = await startCli(["serve", "--port", "0", "--no-virtual-display"], env);
    try {
      const maps = readFileSync(`/proc/${cli.child.pid}/maps`, "utf8");
      expect(maps).toContain("libjemalloc.so.2");
      const seen = await runCommand(
        cli.url,
        `echo "[$LD_PRELOAD][$MALLOC_CONF][$${PRELOADED_ENV}]"; grep -c jemalloc /proc/$$/maps`,
      );
      expect(seen.stdout).toBe(`[${process.env.LD_PRELOAD ?? ""}][${process.env.MALLOC_CONF ?? ""}][]\n0\n`);
    } finally {
      await cli.stop();
    }
  });
});
