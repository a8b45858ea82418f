/**
 * Starts one real single-node Kubernetes (v1.20, from `<repo>/../shared/k8s`, or `$HANGAR_K8S_DIR`
 * for a checkout elsewhere, a git worktree say: see its README) for
 * the whole run of the Kubernetes tests, with its registry, and pushes the light desktop image
 * (light-image.sh) into it; stops it at the end, which leaves nothing behind. Each test file makes
 * a namespace of its own. State in a temporary directory; ports from HANGAR_K8S_PORT_BASE
 * (default 17400: BASE+1…+9 on 127.0.0.1).
 */
import { execFile } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import type { TestProject } from "vitest/node";
import { imageStore, TEST_IMAGE } from "../support/project-image.js";

const run = promisify(execFile);

export interface TestCluster {
  kubeconfig: string;
  /** The registry the cluster pulls from (`127.0.0.1:PORT`). */
  registry: string;
  /** The light desktop image in that registry. */
  lightImage: string;
  state: string;
  portBase: number;
}

declare module "vitest" {
  export interface ProvidedContext {
    cluster: TestCluster;
  }
}

const REPO = resolve(import.meta.dirname, "..", "..");
export const K8S_DIR = process.env.HANGAR_K8S_DIR ?? resolve(REPO, "..", "shared", "k8s");

export default async function setup(project: TestProject) {
  const { cluster, stop } = await startTestCluster(Number(process.env.HANGAR_K8S_PORT_BASE ?? 17400));
  project.provide("cluster", cluster);
  return stop;
}

/** Starts the cluster (ports BASE+1…+9) with its registry and the light image; `stop` removes everything. */
export async function startTestCluster(
  portBase: number,
): Promise<{ cluster: TestCluster; stop: () => Promise<void> }> {
  if (!existsSync(join(K8S_DIR, "start-cluster.sh"))) {
    throw new Error(
      `The test cluster is not there: ${K8S_DIR}/start-cluster.sh is missing. The Kubernetes tests need ` +
        "the shared/k8s directory beside the repository, or HANGAR_K8S_DIR naming it (its README says what it is), and its Debian " +
        "packages (scripts/install-deps.sh installs them)",
    );
  }
  const root = mkdtempSync(join(tmpdir(), "hangar-k8s-test-"));
  // The cluster's programs (buildah, containerd, the kubelet…) keep their temporary files under
  // the root that stop() removes, not in the run's directory, where one killed mid-way left one.
  const scratch = join(root, "tmp");
  mkdirSync(scratch);
  const env = {
    ...process.env,
    TMPDIR: scratch,
    K8S_STATE: join(root, "cluster"),
    K8S_PORT_BASE: String(portBase),
    K8S_REGISTRY: "1",
    K8S_POD_SUBNET: process.env.HANGAR_K8S_POD_SUBNET ?? "10.244.0.0/24",
  };
  const stop = async () => {
    await run(join(K8S_DIR, "stop-cluster.sh"), [], { env, timeout: 60_000 }).catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  };
  let kubeconfig: string;
  try {
    const started = await run(join(K8S_DIR, "start-cluster.sh"), [], { env, timeout: 180_000 });
    kubeconfig = started.stdout.trim().split("\n").at(-1) ?? "";
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    await stop();
    throw new Error(`The test cluster did not start: ${e.stderr?.slice(-3000) ?? e.message}`);
  }
  const registry = `127.0.0.1:${portBase + 5}`;
  let lightImage: string;
  try {
    const images = process.env.K8S_IMAGES ?? "/tmp/k8s-images";
    const pushed = await run(
      join(import.meta.dirname, "light-image.sh"),
      [join(images, "busybox.tar"), registry],
      { env, timeout: 120_000 },
    );
    lightImage = pushed.stdout.trim().split("\n").at(-1) ?? "";
  } catch (err) {
    await stop();
    throw new Error(`The light desktop image could not be pushed: ${(err as Error).message}`);
  }
  return { cluster: { kubeconfig, registry, lightImage, state: env.K8S_STATE, portBase }, stop };
}

/**
 * Pushes the project's desktop image from the image cache scripts/test-image.sh builds (used as a
 * read-only additional store; test/support/project-image.ts builds it when it is missing) into the cluster's registry, uncompressed (the registry is local);
 * resolves to its reference there.
 */
export async function pushDesktopImage(registry: string, workDir: string): Promise<string> {
  const store = imageStore();
  const conf = join(workDir, "storage.conf");
  writeFileSync(
    conf,
    [
      "[storage]",
      `driver = "${store.driver}"`,
      `graphroot = "${join(workDir, "storage")}"`,
      `runroot = "${join(workDir, "run")}"`,
      "[storage.options]",
      `additionalimagestores = ["${store.path}"]`,
      "",
    ].join("\n"),
  );
  const image = TEST_IMAGE;
  const target = `${registry}/hangar:test`;
  await run(
    "buildah",
    ["push", "-q", "--disable-compression", "--tls-verify=false", image, `docker://${target}`],
    {
      env: { ...process.env, CONTAINERS_STORAGE_CONF: conf, TMPDIR: workDir },
      timeout: 600_000,
    },
  );
  return target;
}
