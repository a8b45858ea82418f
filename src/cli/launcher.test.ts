import { describe, expect, it } from "vitest";
import { findJemalloc, PRELOADED_ENV } from "../common/memory-env.js";
import { API_KEYS_ENV, API_KEYS_FD_ENV } from "../computer/auth/key-env.js";
import { ALLOCATOR_ENV, LAUNCHER_PID_ENV, relaunchFor } from "./launcher.js";

const line = (...args: string[]) => ["node", "bin/hangar.js", ...args];
const jemalloc = findJemalloc();

describe("when bin/hangar.js runs the command line again in a child", () => {
  it("does for serve and mcp, with jemalloc and V8's setting, and tells the child its launcher", () => {
    expect(jemalloc).toBeDefined(); // CI installs libjemalloc2
    for (const command of ["serve", "mcp"]) {
      const plan = relaunchFor(line(command, "--port", "0"), {}, []);
      expect(plan?.env).toMatchObject({
        LD_PRELOAD: jemalloc,
        [PRELOADED_ENV]: jemalloc,
        NODE_OPTIONS: "--max-semi-space-size=8",
        [LAUNCHER_PID_ENV]: String(process.pid),
      });
      expect(plan?.keys).toBeUndefined();
    }
  });

  it("does not for short commands, help, a child of a launcher, or a process whose allocator was chosen", () => {
    expect(relaunchFor(line("vm", "ls"), {}, [])).toBeUndefined();
    expect(relaunchFor(line(), {}, [])).toBeUndefined();
    expect(relaunchFor(line("serve", "--help"), {}, [])).toBeUndefined();
    expect(relaunchFor(line("serve"), { [LAUNCHER_PID_ENV]: "12" }, [])).toBeUndefined();
    expect(relaunchFor(line("serve"), { [PRELOADED_ENV]: "libjemalloc.so.2" }, [])).toBeUndefined();
    expect(relaunchFor(line("serve"), { LD_PRELOAD: "libother.so" }, [])).toBeUndefined();
    expect(relaunchFor(line("serve"), { MALLOC_CONF: "narenas:2" }, [])).toBeUndefined();
    expect(relaunchFor(line("serve"), { [ALLOCATOR_ENV]: "system" }, [])).toBeUndefined();
    // node's own options (--inspect, --cpu-prof) apply to the process they were given to.
    expect(relaunchFor(line("serve"), {}, ["--cpu-prof"])).toBeUndefined();
    expect(relaunchFor(line("serve"), {}, [], { memory: false })).toBeUndefined();
  });

  it("keeps a caller's NODE_OPTIONS and adds jemalloc under them", () => {
    const plan = relaunchFor(line("serve"), { NODE_OPTIONS: "--max-old-space-size=512" }, []);
    expect(plan?.env.NODE_OPTIONS).toBe("--max-old-space-size=512");
    expect(plan?.env.LD_PRELOAD).toBe(jemalloc);
  });

  it("hands serve's keys over a descriptor, never in the child's environment", () => {
    const env = { [API_KEYS_ENV]: "sk-one,sk-two", [ALLOCATOR_ENV]: "system" };
    const plan = relaunchFor(line("serve"), env, ["--inspect"]);
    expect(plan?.keys).toBe("sk-one,sk-two");
    expect(plan?.env).not.toHaveProperty(API_KEYS_ENV);
    expect(plan?.env[API_KEYS_FD_ENV]).toBe("3");
    expect(plan?.env).not.toHaveProperty("LD_PRELOAD");
    // mcp takes no keys: they are left where they are.
    expect(relaunchFor(line("mcp"), env, [])).toBeUndefined();
  });
});
