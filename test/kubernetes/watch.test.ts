/**
 * The host service's view of the cluster when the API server goes away and comes back (a restart,
 * as an upgrade of the control plane does): its watches start again by themselves, and what
 * happens afterwards (a Pod deleted from outside) is seen without restarting the service.
 */
import { spawn } from "node:child_process";
import { closeSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import type { TestHost } from "../host/support.js";
import { lightDesktop, startKubernetesHost, type TestNamespace, testNamespace } from "./cluster.js";

let ns: TestNamespace;
let host: TestHost;

beforeAll(async () => {
  ns = await testNamespace("hangar-watch");
  host = await startKubernetesHost(ns);
}, 60_000);
afterAll(async () => {
  await host?.cleanup();
  await ns?.cleanup();
});

/** Kills the cluster's API server (SIGKILL: a crash; its graceful stop waits long for open watches) and starts it again with the same command line. */
async function restartApiServer() {
  const { state } = inject("cluster");
  const pidFile = join(state, "pids", "kube-apiserver.pid");
  const pid = Number(readFileSync(pidFile, "utf8").trim());
  const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  process.kill(pid, "SIGKILL");
  // Ended: gone, or a zombie (its parent, the start script, has exited; PID 1 reaps it or not).
  await vi.waitFor(
    () => {
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      } catch {
        return;
      }
      if (stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z")) return;
      throw new Error("the API server still runs");
    },
    { timeout: 30_000, interval: 50 },
  );
  // Started again, and again if it ends before it answers (up to three times), with its log's
  // last lines in the failure: a restart that never answers fails every later file of the cluster.
  const logFile = join(state, "logs", "kube-apiserver.log");
  for (let attempt = 1; ; attempt++) {
    const log = openSync(logFile, "a");
    const child = spawn(argv[0], argv.slice(1), { detached: true, stdio: ["ignore", log, log] });
    closeSync(log);
    child.unref();
    // stop-cluster.sh kills what the pid file names.
    writeFileSync(pidFile, `${child.pid}\n`);
    const ended = new Promise<string>((resolve) => {
      child.once("exit", (code, signal) => resolve(`${code ?? signal}`));
      child.once("error", (err) => resolve(err.message));
    });
    const answered = vi.waitFor(() => ns.core.listNamespacedPod({ namespace: ns.name }), {
      timeout: 120_000,
      interval: 200,
    });
    const outcome = await Promise.race([answered.then(() => "answers"), ended]);
    if (outcome === "answers") return;
    const tail = readFileSync(logFile, "utf8").split("\n").slice(-15).join("\n");
    if (attempt === 3) throw new Error(`the API server ended (${outcome}) before it answered:\n${tail}`);
    console.log(`the API server ended (${outcome}) before it answered; started again:\n${tail}`);
  }
}

describe("the API server restarted during a watch", () => {
  it("the view recovers without a restart of the host service", async () => {
    expect((await host.api("POST", "/svc/vms", lightDesktop("steady"))).status).toBe(200);
    expect((await host.api("POST", "/svc/vms/steady/run", {})).status).toBe(202);
    await vi.waitFor(
      async () => {
        if (!(await host.api("GET", "/svc/vms/steady")).body.ready) throw new Error("not ready");
      },
      { timeout: 60_000, interval: 100 },
    );

    await restartApiServer();
    // What the service knew is still there, and what happens now is seen: a Pod deleted from outside.
    expect((await host.api("GET", "/svc/vms/steady")).body.status).toBe("running");
    await ns.core.deleteNamespacedPod({ name: "hangar-steady", namespace: ns.name, gracePeriodSeconds: 0 });
    await vi.waitFor(
      async () =>
        expect((await host.api("GET", "/svc/vms/steady")).body).toMatchObject({ status: "stopped" }),
      { timeout: 60_000, interval: 100 },
    );
    // And it works as before: run again, ready, reached.
    expect((await host.api("POST", "/svc/vms/steady/run", {})).status).toBe(202);
    const ready = await vi.waitFor(
      async () => {
        const r = (await host.api("GET", "/svc/vms/steady")).body;
        if (!r.ready) throw new Error(`not ready: ${r.status}`);
        return r;
      },
      { timeout: 60_000, interval: 100 },
    );
    expect((await fetch(`${ready.computerServerUrl}/status`)).status).toBe(200);
    expect((await host.api("DELETE", "/svc/vms/steady")).status).toBe(200);
  }, 420_000);
});
