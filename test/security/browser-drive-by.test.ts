/**
 * A real browser visits a page of another local server that tries to drive Hangar with a "simple"
 * no-cors POST, exactly what a malicious page would do. Against the default policy nothing runs and
 * no VM is made; with that page's origin allowed, the same page (reading its replies, as CORS now
 * lets it) does both, so the test can fail.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startComputerServer } from "../../src/computer/server.js";
import { startTestHost } from "../host/support.js";
import { launchBrowser } from "../support/browser.js";

let browser: Browser;
let page: Server;
let pageOrigin: string;
let dir: string;

/**
 * The page: POSTs `body` to `target` as a "simple" request (no preflight), reads the whole reply
 * when it may (an allowed page) and then sets its title. A foreign page's no-cors reply is opaque.
 */
function attackPage(target: string, body: unknown) {
  return `<!doctype html><title>loading</title><script>
    const mode = new URLSearchParams(location.search).get("mode");
    fetch(${JSON.stringify(target)}, { method: "POST", mode, headers: { "content-type": "text/plain" },
      body: ${JSON.stringify(JSON.stringify(body))} })
      .then((r) => (r.type === "opaque" ? "" : r.text()))
      .then(() => "answered", () => "failed").then((how) => { document.title = how; });
  </script>`;
}

let html = "";
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hangar-drive-by-"));
  page = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end(html));
  await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
  pageOrigin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
  page.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A logger that keeps the messages of warnings, to see the refusals. */
function recordingLog() {
  const warnings: string[] = [];
  const log = pino({ level: "warn" }, { write: (line: string) => warnings.push(JSON.parse(line).msg) });
  return { log, warnings };
}

/**
 * Loads the attack page in a fresh tab, waits until its request has been answered, then runs
 * `check` with the tab still open (closing it would cancel a command that is still running).
 */
async function visit(
  target: string,
  body: unknown,
  check: (how: string) => Promise<void>,
  mode: RequestMode,
) {
  html = attackPage(target, body);
  const tab = await browser.newPage();
  try {
    await tab.goto(`${pageOrigin}/?mode=${mode}`);
    await tab.waitForFunction(() => document.title !== "loading");
    await check(await tab.title());
  } finally {
    await tab.close();
  }
}

describe("a page the user merely visits", () => {
  it.each([
    ["cannot", []],
    ["can, once its origin is allowed,", ["page"]],
  ])("%s run a command through the computer server", async (_how, allow) => {
    const marker = join(dir, `marker-${allow.length}`);
    const { log, warnings } = recordingLog();
    const server = await startComputerServer({ port: 0, log, allowOrigins: allow.map(() => pageOrigin) });
    try {
      await visit(
        `${server.url}/cmd`,
        { command: "run_command", params: { command: `touch ${marker}` } },
        async (how) => {
          expect(how).toBe("answered");
          if (allow.length > 0) {
            // The page read the whole reply: the command has run.
            expect(existsSync(marker)).toBe(true);
          } else {
            // Refused before anything ran: the refusal is the whole answer.
            expect(warnings).toEqual(["request from a browser refused"]);
            expect(existsSync(marker)).toBe(false);
          }
        },
        allow.length > 0 ? "cors" : "no-cors",
      );
    } finally {
      await server.close();
    }
  });

  it.each([
    ["cannot", []],
    ["can, once its origin is allowed,", ["page"]],
  ])("%s create a VM through the host service", async (_how, allow) => {
    const host = await startTestHost({ allowOrigins: allow.map(() => pageOrigin) });
    try {
      const vm = {
        name: "drive-by",
        os: "linux",
        cpu: 1,
        memory: "1GB",
        diskSize: "1GB",
        display: "800x600",
      };
      await visit(
        `${host.url}/svc/vms`,
        vm,
        async (how) => {
          expect(how).toBe("answered");
          const vms = (await host.api("GET", "/svc/vms")).body as { name: string }[];
          expect(vms.map((v) => v.name)).toEqual(allow.length > 0 ? ["drive-by"] : []);
        },
        allow.length > 0 ? "cors" : "no-cors",
      );
    } finally {
      await host.cleanup();
    }
  });
});
