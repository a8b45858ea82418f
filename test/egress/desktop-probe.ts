/**
 * Programs run in a desktop as an agent runs them: a Node script through the computer server's
 * `run_command`, whose printed JSON is the answer.
 */
import { expect } from "vitest";
import { type DesktopAddress, desktopCommand } from "../host/desktop-client.js";

/**
 * Runs a Node script in the desktop through `run_command` and gives what it printed as JSON. The
 * script's helpers: `byName(url)` (HTTPS or HTTP straight to the name, no proxy: the desktop's DNS
 * decides; the certificate's issuer is given, not checked), `verified(url)` (the same, checked
 * against the desktop's trust), `viaProxy(host, port)` (CONNECT through `https_proxy`), `tcp(address, port)`, `dns(name)`.
 */
export async function inDesktop(desktop: DesktopAddress, body: string): Promise<any> {
  const script = `
const http = require("node:http"), https = require("node:https"), net = require("node:net"), dns = require("node:dns");
const grab = (mod, url, verify = false) => new Promise((resolve) => {
  const req = mod.get(url, { rejectUnauthorized: verify, timeout: 8000 }, (res) => {
    const issuer = res.socket.getPeerCertificate ? res.socket.getPeerCertificate().issuer?.CN : null;
    let body = ""; res.on("data", (c) => { body += c; }); res.on("end", () => resolve({ status: res.statusCode, body, issuer }));
  });
  req.on("timeout", () => req.destroy(new Error("timeout")));
  req.on("error", (e) => resolve({ error: e.code || e.message }));
});
const byName = (url) => grab(url.startsWith("https") ? https : http, url);
const verified = (url) => grab(https, url, true);
const viaProxy = (target) => new Promise((resolve) => {
  const proxy = new URL(process.env.https_proxy);
  const req = http.request({ host: proxy.hostname, port: proxy.port, method: "CONNECT", path: target, timeout: 8000 });
  req.on("connect", (res, socket, head) => { socket.destroy(); resolve({ status: res.statusCode, body: head.toString() }); });
  req.on("error", (e) => resolve({ error: e.code || e.message }));
  req.end();
});
const tcp = (address, port) => new Promise((resolve) => {
  const s = net.connect({ host: address, port, timeout: 4000 });
  s.on("connect", () => { s.destroy(); resolve("connected"); });
  s.on("timeout", () => { s.destroy(); resolve("timeout"); });
  s.on("error", (e) => resolve(e.code));
});
const lookup = (name) => dns.promises.resolve4(name).catch((e) => e.code);
(async () => { console.log(JSON.stringify(await (async () => { ${body} })())); })();
`;
  const encoded = Buffer.from(script).toString("base64");
  const { status, result } = await desktopCommand(
    desktop,
    "run_command",
    { command: `node -e "eval(Buffer.from('${encoded}', 'base64').toString())"`, timeout: 60 },
    70_000,
  );
  expect(status).toBe(200);
  expect(result.return_code, result.stderr).toBe(0);
  return JSON.parse(result.stdout);
}

/**
 * What every caged desktop allowed `allowed.example.test` shows: that name answers by name (HTTPS and
 * HTTP) and through its proxy; `evil.example.net` has no address and is refused by the proxy, saying
 * why. The answers, for more checks.
 */
export async function expectAllowedNameOnly(desktop: DesktopAddress): Promise<any> {
  const seen = await inDesktop(
    desktop,
    `return {
      https: await byName("https://allowed.example.test/hello"),
      http: await byName("http://allowed.example.test/plain"),
      proxied: await viaProxy("allowed.example.test:443"),
      evilDns: await lookup("evil.example.net"),
      evilProxied: await viaProxy("evil.example.net:443"),
    }`,
  );
  expect(JSON.parse(seen.https.body)).toMatchObject({ server: "allowed.example.test", path: "/hello" });
  expect(JSON.parse(seen.http.body)).toMatchObject({ host: "allowed.example.test", path: "/plain" });
  expect(seen.proxied.status).toBe(200);
  expect(seen.evilDns).toBe("ENOTFOUND");
  expect(seen.evilProxied.status).toBe(403);
  expect(seen.evilProxied.body).toContain("refused evil.example.net:443 (not in the allow list)");
  return seen;
}

/**
 * The host told the desktop's own timeline (`GET /activity` of its computer server) of a refusal
 * whose text starts with `text` ("refused evil.example.net:443"): an entry of its own, next to the
 * agent's `run_command` that made it. With `sameClock` (a container or Pod: the host's clock), that
 * command also ran when the proxy refused it (an entry's time is its end); a guest keeps its own clock.
 */
export async function expectRefusalInTimeline(desktop: DesktopAddress, text: string, sameClock = true) {
  const timeline = async () => {
    const res = await fetch(new URL("/activity", desktop.computerServerUrl as string), {
      headers: desktop.apiKey ? { "x-api-key": desktop.apiKey, "x-container-name": desktop.name } : {},
    });
    return ((await res.json()) as { entries: any[] }).entries;
  };
  const found = (list: any[]) => list.find((e) => typeof e.text === "string" && e.text.startsWith(text));
  await expect.poll(async () => found(await timeline())?.text, { timeout: 20_000 }).toMatch(/^refused /);
  const list = await timeline();
  const note = found(list);
  const shown = JSON.stringify(list.map((e) => [e.id, e.time, e.ms, e.command, e.text]));
  expect(note).toMatchObject({ transport: "egress", command: "refused", success: false });
  const commands = list.filter((e) => e.text === undefined);
  const before = commands.filter((e) => e.id < note.id).at(-1);
  const after = commands.find((e) => e.id > note.id);
  const next = [before, after].filter((e) => e?.command === "run_command");
  expect(next.length, shown).toBeGreaterThan(0);
  if (sameClock) {
    const at = Date.parse(note.params.time);
    const ran = (e: any) => Date.parse(e.time) - e.ms - 5 <= at && at <= Date.parse(e.time) + 5;
    expect(next.some(ran), shown).toBe(true);
  }
}
