/**
 * A caged Pod (docs/egress.md, src/host/egress/kubernetes-cage.ts) on the test cluster: a host
 * service whose egress gates listen on the cluster's Pod bridge (`--egress-gate`), a world
 * namespace of the test's own (test/egress/world.ts) as the only "internet", and the project's
 * desktop image as the Pod. The desktop's programs, run through its computer server as an agent
 * runs them, try names and addresses; what they get, the audit and the Pod are checked, and a
 * restarted service opens the running Pod's gate again.
 */
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { type AddressInfo, connect, createServer } from "node:net";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { GATE_ANNOTATION } from "../../src/host/egress/kubernetes-cage.js";
import { expectAllowedNameOnly, expectRefusalInTimeline, inDesktop } from "../egress/desktop-probe.js";
import { startWorld, type World } from "../egress/world.js";
import { desktopCommand } from "../host/desktop-client.js";
import { eventually, type TestHost } from "../host/support.js";
import { startKubernetesHost, type TestNamespace, tempRoot, testNamespace } from "./cluster.js";
import { pushDesktopImage } from "./global-setup.js";

const run = promisify(execFile);
const NAME = "caged";
const POLICY = { egress: { allow: ["allowed.example.test", "loop.example.test"] } };
let ns: TestNamespace;
let host: TestHost;
let world: World;
let gate: string;
let desktop: { name: string; computerServerUrl: string };
const temp = tempRoot("hangar-k8s-egress-");

/** The host's address on the cluster's Pod bridge (it has one once a Pod ran on it). */
async function bridgeAddress(): Promise<string | undefined> {
  const bridge = `k8ssn${inject("cluster").portBase}`;
  const { stdout } = await run("ip", ["-4", "-o", "addr", "show", "dev", bridge]).catch(() => ({
    stdout: "",
  }));
  return /inet (\d+\.\d+\.\d+\.\d+)\//.exec(stdout)?.[1];
}

/** The bridge's address, a light Pod run first when no Pod has made it yet. */
async function podBridge(): Promise<string> {
  const known = await bridgeAddress();
  if (known) return known;
  await ns.core.createNamespacedPod({
    namespace: ns.name,
    body: {
      metadata: { name: "bridge-up" },
      spec: { containers: [{ name: "light", image: ns.lightImage }] },
    },
  });
  const address = await eventually(bridgeAddress, 120_000);
  await ns.core.deleteNamespacedPod({ name: "bridge-up", namespace: ns.name, gracePeriodSeconds: 0 });
  return address;
}

const record = async () => (await host.api("GET", `/svc/vms/${NAME}`)).body;
const events = async () => (await host.api("GET", `/svc/vms/${NAME}/egress`)).body.events as any[];

/** What the gate's port answers a CONNECT from this process (not the Pod): "closed" when it says nothing. */
function connectFromHost(address: string, port: number): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ host: address, port });
    let answer = "";
    socket.setTimeout(10_000, () => socket.destroy());
    socket.on("connect", () => socket.write("CONNECT allowed.example.test:443 HTTP/1.1\r\nHost: x\r\n\r\n"));
    socket.on("data", (chunk) => {
      answer += chunk.toString();
    });
    socket.on("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    socket.on("close", () => resolve(answer || "closed"));
  });
}

beforeAll(async () => {
  world = await startWorld(["allowed.example.test", "evil.example.net"], {
    "loop.example.test": "127.0.0.1",
  });
  ns = await testNamespace("hangar-egress");
  const image = await pushDesktopImage(ns.registry, temp.root);
  gate = await podBridge();
  host = await startKubernetesHost(ns, {
    desktopImage: image,
    egressResolvers: [world.dns],
    egressTrust: [world.caPem],
    egressGate: gate,
  });
  const created = await host.api("POST", "/svc/vms", {
    name: NAME,
    os: "linux",
    cpu: 1,
    memory: "1GB",
    diskSize: "1GB",
    display: "1024x768",
    network: POLICY,
  });
  expect(created.status, created.text).toBe(200);
  expect((await host.api("POST", `/svc/vms/${NAME}/run`, {})).status).toBe(202);
  const ready = await host.api("GET", `/svc/vms/${NAME}?wait=ready&timeout=240`);
  expect(ready.status, ready.text).toBe(200);
  desktop = ready.body;
}, 600_000);

afterAll(async () => {
  await host?.api("DELETE", `/svc/vms/${NAME}`).catch(() => undefined);
  await host?.cleanup();
  await ns?.cleanup();
  await world?.cleanup();
  temp.remove();
});

describe("a Pod caged by its policy", () => {
  it("is made with the cage: an init container with NET_ADMIN alone, the gate as its DNS and proxy", async () => {
    expect((await record()).network).toMatchObject({
      ...POLICY,
      caged: true,
      proxy: expect.stringMatching(`^${gate}:\\d+$`),
    });
    const pod = await ns.core.readNamespacedPod({ name: `hangar-${NAME}`, namespace: ns.name });
    const [init] = pod.spec?.initContainers ?? [];
    expect(init.securityContext?.capabilities).toEqual({ drop: ["ALL"], add: ["NET_ADMIN"] });
    // The desktop's own container cannot change the filter: no NET_ADMIN (its root has only what
    // running the agent as the desktop user takes, and the agent none).
    expect(pod.spec?.containers[0].securityContext?.capabilities).toEqual({
      drop: ["ALL"],
      add: ["CHOWN", "DAC_OVERRIDE", "FOWNER", "KILL", "SETGID", "SETUID"],
    });
    expect(pod.spec?.dnsConfig?.nameservers).toEqual([gate]);
    expect(JSON.parse(pod.metadata?.annotations?.[GATE_ANNOTATION] ?? "{}")).toMatchObject({
      proxy: expect.any(Number),
      dns: expect.any(Number),
    });
    const statuses = pod.status?.initContainerStatuses ?? [];
    expect(statuses[0]?.state?.terminated?.exitCode).toBe(0);
  });

  it("reaches an allowed name by its name and through the proxy; others are refused with the reason audited", async () => {
    await expectAllowedNameOnly(desktop);
    expect(await events()).toContainEqual(
      expect.objectContaining({ via: "connect", name: "evil.example.net", allowed: false }),
    );
    await eventually(async () =>
      (await events()).some((e) => e.via === "tls" && e.name === "allowed.example.test" && e.allowed),
    );
    // And in the desktop's own timeline, beside the command that tried it.
    await expectRefusalInTimeline(desktop, "refused evil.example.net:443 (not in the allow list)");
  });

  it("refuses a name pointing at the host's loopback and raw TCP anywhere; the gate takes no one else's connection", async () => {
    // A server of the test's own on the bridge, which the Pod reaches (it is the host) but for its filter.
    let reached = 0;
    const other = createServer((socket) => {
      reached++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => other.listen(0, gate, resolve));
    const port = (other.address() as AddressInfo).port;
    const seen = await inDesktop(
      desktop,
      `return {
      loop: await viaProxy("loop.example.test:443"),
      bridge: await tcp("${gate}", ${port}),
      world: await tcp("${world.unlisted}", 7000),
    }`,
    );
    other.close();
    expect(seen.loop.status).toBe(403);
    expect(seen.loop.body).toContain("resolves to 127.0.0.1");
    // The Pod's own filter resets it: nothing leaves the Pod but for its gate.
    expect(seen.bridge).toBe("ECONNREFUSED");
    expect(reached).toBe(0);
    // The world is not even routed from the test cluster's Pods: refused either way.
    expect(["ECONNREFUSED", "ENETUNREACH"]).toContain(seen.world);
    // The gate listens on the bridge, which other Pods (and the host) reach too: it answers only its Pod.
    const proxy = (await record()).network.proxy as string;
    expect(await connectFromHost(gate, Number(proxy.split(":")[1]))).toBe("closed");
  });

  it("takes a changed policy for its next connection, while it runs", async () => {
    const changed = await host.api("PUT", `/svc/vms/${NAME}/network`, {
      egress: { allow: ["allowed.example.test", "evil.example.net"] },
    });
    expect(changed.status, changed.text).toBe(200);
    const seen = await inDesktop(desktop, `return { evil: await byName("https://evil.example.net/now") }`);
    expect(JSON.parse(seen.evil.body)).toMatchObject({ server: "evil.example.net", path: "/now" });
    expect((await host.api("PUT", `/svc/vms/${NAME}/network`, POLICY)).status).toBe(200);
  });

  it("adds a credential it never sees to requests for a domain, over a CA the Pod's stores trust", async () => {
    const secret = `tok_${randomBytes(12).toString("hex")}`;
    const sent = createHash("sha256").update(`Bearer ${secret}`).digest("hex");
    expect((await host.api("POST", "/svc/secrets", { name: "token", value: secret })).status).toBe(201);
    const changed = await host.api("PUT", `/svc/vms/${NAME}/network`, {
      ...POLICY,
      credentials: [{ domain: "allowed.example.test", secret: "token" }],
    });
    expect(changed.status, changed.text).toBe(200);
    // Node (NODE_EXTRA_CA_CERTS), by name through the Pod's filter.
    const seen = await inDesktop(
      desktop,
      `return { node: await verified("https://allowed.example.test/me") }`,
    );
    expect(seen.node.status, JSON.stringify(seen)).toBe(200);
    expect(JSON.parse(seen.node.body)).toMatchObject({ server: "allowed.example.test", authorization: sent });
    expect(seen.node.issuer).toBe(`Hangar egress CA (${NAME})`);
    // The system's store (the init container's copy of /etc/ssl/certs): Python's default context,
    // through the proxy in the environment; and the user's NSS database, Chromium's.
    const python = await desktopCommand(desktop, "run_command", {
      command:
        "python3 -c 'import ssl, urllib.request; print(urllib.request.urlopen(\"https://allowed.example.test/py\", context=ssl.create_default_context(), timeout=10).read().decode())'",
    });
    expect(python.result.stderr).toBe("");
    expect(JSON.parse(python.result.stdout)).toMatchObject({ path: "/py", authorization: sent });
    const nss = await desktopCommand(desktop, "run_command", {
      command: 'certutil -d "sql:$HOME/.pki/nssdb" -L',
    });
    expect(nss.result.stdout).toContain("Hangar egress");
    // The secret is in no process's environment or arguments in the Pod (looked for by a script
    // that holds it encoded, so that it is not in its own).
    const encoded = Buffer.from(secret).toString("base64");
    const hits = await inDesktop(
      desktop,
      `const fs = require("node:fs");
      const secret = Buffer.from("${encoded}", "base64").toString();
      const hits = [];
      for (const pid of fs.readdirSync("/proc").filter((p) => /^\\d+$/.test(p))) {
        for (const part of ["environ", "cmdline"]) {
          try { if (fs.readFileSync("/proc/" + pid + "/" + part).includes(secret)) hits.push(pid + "/" + part); } catch {}
        }
      }
      return hits;`,
    );
    expect(hits).toEqual([]);
    expect((await host.api("PUT", `/svc/vms/${NAME}/network`, POLICY)).status).toBe(200);
  });

  it("a restarted service opens the running Pod's gate again, on the ports its filter sends to", async () => {
    const before = (await record()).network.proxy;
    await host.restart();
    await eventually(async () => (await record()).network.proxy === before);
    // Its relay is a new loopback port of the new service.
    desktop = await record();
    const seen = await inDesktop(
      desktop,
      `return { https: await byName("https://allowed.example.test/again") }`,
    );
    expect(JSON.parse(seen.https.body)).toMatchObject({ server: "allowed.example.test", path: "/again" });
  });

  it("deleting the desktop closes its gate", async () => {
    const proxy = (await record()).network.proxy as string;
    expect((await host.api("DELETE", `/svc/vms/${NAME}`)).status).toBe(200);
    expect(await connectFromHost(gate, Number(proxy.split(":")[1]))).toBe("ECONNREFUSED");
  });
});
