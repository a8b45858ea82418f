/**
 * What the Kubernetes tests share: the cluster global-setup.ts started, a namespace per test file
 * (deleted at the end, its Pods first with no grace), the official client to look at the cluster
 * as an operator would, and host services on it (in this process, or in a child process to kill).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { CoreV1Api, Exec, KubeConfig, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { inject } from "vitest";
import type { HostServiceOptions } from "../../src/host/server.js";
import { withParentDeathSignal } from "../../src/os/parent-death.js";
import { startTestHost, type TestHost } from "../host/support.js";

export interface TestNamespace {
  name: string;
  kubeconfig: string;
  lightImage: string;
  registry: string;
  config: KubeConfig;
  core: CoreV1Api;
  rbac: RbacAuthorizationV1Api;
  /** Names of the Pods in the namespace (any phase). */
  pods(): Promise<string[]>;
  cleanup(): Promise<void>;
}

export async function testNamespace(prefix: string): Promise<TestNamespace> {
  const cluster = inject("cluster");
  const config = new KubeConfig();
  config.loadFromFile(cluster.kubeconfig);
  const core = config.makeApiClient(CoreV1Api);
  const rbac = config.makeApiClient(RbacAuthorizationV1Api);
  const name = `${prefix}-${randomBytes(3).toString("hex")}`;
  await core.createNamespace({ body: { metadata: { name } } });
  return {
    name,
    kubeconfig: cluster.kubeconfig,
    lightImage: cluster.lightImage,
    registry: cluster.registry,
    config,
    core,
    rbac,
    async pods() {
      const list = await core.listNamespacedPod({ namespace: name });
      return list.items.map((p) => p.metadata?.name ?? "").sort();
    },
    async cleanup() {
      await core
        .deleteCollectionNamespacedPod({ namespace: name, gracePeriodSeconds: 0 })
        .catch(() => undefined);
      await core.deleteNamespace({ name, gracePeriodSeconds: 0 }).catch(() => undefined);
    },
  };
}

/** A host service in this process with the Kubernetes runtime as its default. */
export function startKubernetesHost(ns: TestNamespace, extra: HostServiceOptions = {}): Promise<TestHost> {
  return startTestHost({
    defaultRuntime: "kubernetes",
    kubernetes: { kubeconfig: ns.kubeconfig, namespace: ns.name },
    desktopImage: ns.lightImage,
    stopGraceMs: 0,
    containerEngine: false,
    ...extra,
  });
}

export interface ChildHost {
  url: string;
  child: ChildProcess;
  api: TestHost["api"];
}

/** A host service in a child process (test/host/fixtures/serve.ts), so that a test can kill -9 it. */
export async function startChildHost(root: string, options: HostServiceOptions): Promise<ChildHost> {
  const serve = join(import.meta.dirname, "..", "host", "fixtures", "serve.ts");
  const child = spawn(
    ...withParentDeathSignal(
      process.execPath,
      ["--import", "tsx", serve, root, JSON.stringify(options)],
      "TERM",
    ),
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (c: string) => {
    stderr = (stderr + c).slice(-4000);
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout?.setEncoding("utf8").on("data", (c: string) => {
      out += c;
      if (out.includes("\n")) resolve(out.trim());
    });
    child.once("exit", (code) => reject(new Error(`the service exited (${code}): ${stderr}`)));
  });
  return {
    url,
    child,
    api: async (method, path, body) => {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: body === undefined ? {} : { "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      let parsed: unknown = null;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        parsed = text;
      }
      return { status: res.status, body: parsed as any, text, headers: res.headers };
    },
  };
}

export function tempRoot(prefix: string): { root: string; remove(): void } {
  const root = mkdtempSync(join(tmpdir(), prefix));
  return { root, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** A desktop request with the light image's small sizes. */
export function lightDesktop(name: string, extra: Record<string, unknown> = {}) {
  return { name, os: "linux", cpu: 1, memory: "128MB", diskSize: "256MB", display: "1024x768", ...extra };
}

/**
 * Offers a hostPath PersistentVolume bound ahead to the claim `claim` (the test cluster has no
 * provisioner): a desktop made with `storage: "persistent"` gets it as its home. Its name, to
 * delete it after the namespace.
 */
export async function offerHomeVolume(ns: TestNamespace, root: string, claim: string): Promise<string> {
  const volume = `${claim}-${process.pid}`;
  const dir = join(root, claim);
  mkdirSync(dir);
  chmodSync(dir, 0o777);
  await ns.core.createPersistentVolume({
    body: {
      metadata: { name: volume },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        persistentVolumeReclaimPolicy: "Retain",
        hostPath: { path: dir, type: "Directory" },
        claimRef: { namespace: ns.name, name: claim },
      },
    },
  });
  return volume;
}

/**
 * Runs a shell command in a desktop's Pod; resolves to its output. A command the container
 * runtime killed (exit 137, seen once in a full run on this 2-core machine, cause not found: the Pod
 * has no liveness probe and the light image's limit is far above busybox), or an exec it failed to
 * create (`failed to create exec`, seen once in a full run at load 15), is run once more; its
 * second failure is the test's.
 */
export async function podShell(ns: TestNamespace, pod: string, script: string): Promise<string> {
  // The runtime can fail an exec it was asked for: a killed exec process, or the API server's
  // upgrade to the kubelet answering 500 ("container not found") while the kubelet's view of a
  // Pod made again under the same name lags behind (its relist is slow on a loaded machine). Such
  // a failure is not the script's: it is tried again, for up to half a minute.
  const transient =
    /exit code 137\b|failed to create exec|failed to exec in container|Unexpected server response: 5\d\d/;
  const deadline = Date.now() + 30_000;
  for (let wait = 500; ; wait = Math.min(wait * 2, 8000)) {
    try {
      return await podShellOnce(ns, pod, script);
    } catch (err) {
      const message = (err as Error).message;
      if (Date.now() + wait > deadline || !transient.test(message)) throw err;
      console.log(`${script}: the runtime failed it (${message.slice(0, 120)}), again in ${wait} ms`);
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  }
}

async function podShellOnce(ns: TestNamespace, pod: string, script: string): Promise<string> {
  const out = new PassThrough();
  let text = "";
  out.on("data", (c: Buffer) => {
    text += c.toString();
  });
  await new Promise<void>((resolve, reject) => {
    new Exec(ns.config)
      .exec(ns.name, pod, "desktop", ["sh", "-c", script], out, out, null, false, (status) =>
        status.status === "Success"
          ? resolve()
          : reject(new Error(`${script}: ${JSON.stringify(status)} ${text}`)),
      )
      .catch(reject);
  });
  return text;
}
