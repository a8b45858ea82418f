/**
 * What the /cmd spread copy (`{"success", "content": result, ...result}`) costs on a screenshot:
 * the reply's bytes and the time to serialize it and to fetch and parse it end to end, with the
 * copy on and off (`--no-spread`). Three 1920×1080 PNG results: a real `screenshot` of a virtual
 * display with terminals full of text, a drawn desktop, and noise (the worst case). Each is served
 * by a bench-only command returning that fixed result, so the figures are the envelope's, not the
 * capture's.
 */
import { spawn } from "node:child_process";
import type { AddressInfo } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { serve } from "@hono/node-server";
import sharp from "sharp";
import { z } from "zod";
import { allCommands } from "../commands/index.js";
import { createComputerApp } from "../src/computer/app.js";
import { Bytes } from "../src/computer/core/bytes.js";
import { defineCommand } from "../src/computer/core/command.js";
import type { Outcome } from "../src/computer/core/outcome.js";
import { CommandRegistry } from "../src/computer/core/registry.js";
import { cmdEventBytes, eventLength } from "../src/computer/transports/cmd/cmd-event.js";
import { DesktopManager } from "../src/desktop/manager.js";
import { startVirtualDisplay } from "../src/desktop/virtual-display.js";
import { type Row, timeIt } from "./lib.js";

const WIDTH = 1920;
const HEIGHT = 1080;

/** A desktop-like 1080p PNG: a panel, windows, text. */
async function drawnDesktop(): Promise<Buffer> {
  const windows = Array.from({ length: 6 }, (_, i) => {
    const x = 80 + i * 270;
    const y = 90 + (i % 3) * 260;
    const lines = Array.from(
      { length: 14 },
      (_, j) =>
        `<text x="${x + 16}" y="${y + 60 + j * 22}" font-size="15" font-family="monospace" fill="#222">` +
        `line ${j}: the quick brown fox ${i * 31 + j} jumps over the lazy dog</text>`,
    ).join("");
    return `<rect x="${x}" y="${y}" width="520" height="380" fill="#f4f4f4" stroke="#555"/><rect x="${x}" y="${y}" width="520" height="28" fill="#3465a4"/>${lines}`;
  }).join("");
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}"><defs><linearGradient id="g" x1="0" y1="0" x2="1" y2="1"><stop offset="0" stop-color="#204a87"/><stop offset="1" stop-color="#729fcf"/></linearGradient></defs><rect width="100%" height="100%" fill="url(#g)"/><rect width="100%" height="32" fill="#2e3436"/>${windows}</svg>`;
  return sharp(Buffer.from(svg)).png().toBuffer();
}

/** Gaussian noise: a PNG that does not compress (an upper bound, like a photo wallpaper). */
function noisy(): Promise<Buffer> {
  return sharp({
    create: {
      width: WIDTH,
      height: HEIGHT,
      channels: 3,
      background: "#808080",
      noise: { type: "gaussian", mean: 128, sigma: 40 },
    },
  })
    .png()
    .toBuffer();
}

/** A real `screenshot` result of a 1080p virtual display showing three terminals full of text. */
async function realScreenshot(): Promise<Record<string, unknown> | undefined> {
  const display = await startVirtualDisplay({ width: WIDTH, height: HEIGHT }).catch(() => undefined);
  if (!display) return undefined;
  const manager = new DesktopManager({ display: display.display });
  const terms = [0, 1, 2].map((i) =>
    spawn(
      "xterm",
      [
        "-geometry",
        `100x40+${i * 620}+${60 + i * 80}`,
        "-e",
        "sh",
        "-c",
        "ls -la /usr/bin /usr/lib; sleep 60",
      ],
      {
        env: { ...process.env, ...display.env },
        stdio: "ignore",
      },
    ),
  );
  try {
    await sleep(1500);
    const registry = new CommandRegistry(allCommands, { desktop: manager.provider });
    const outcome = await registry.run("screenshot", {});
    return outcome.success ? (outcome.result as Record<string, unknown>) : undefined;
  } finally {
    for (const t of terms) t.kill();
    await manager.close();
    await display.stop();
  }
}

async function startWith(result: Record<string, unknown>, spreadResult: boolean) {
  const shot = defineCommand({
    name: "bench_screenshot",
    description: "bench only: returns a fixed 1080p PNG screenshot result",
    params: z.object({}),
    result: z.record(z.string(), z.unknown()),
    handler: () => result,
  });
  const app = createComputerApp({ registry: new CommandRegistry([shot]), spreadResult });
  const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 });
  await new Promise((resolve) => server.once("listening", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((r) => server.close(r)) };
}

export async function measureSpreadCopy(): Promise<Row[]> {
  const rows: Row[] = [];
  const asResult = (png: Buffer) => ({
    image_data: new Bytes(png, "image/png"),
    format: "png",
    width: WIDTH,
    height: HEIGHT,
    scale: 1,
  });
  const cases: [string, Record<string, unknown>][] = [];
  const real = await realScreenshot();
  if (real) cases.push(["real screenshot (Xvfb, 3 xterms)", real]);
  else
    rows.push({
      name: "real screenshot",
      median: "skipped",
      p95: "",
      note: "no virtual display could start",
    });
  cases.push(
    ["drawn desktop", asResult(await drawnDesktop())],
    ["noise (worst case)", asResult(await noisy())],
  );
  for (const [label, result] of cases) {
    const png = (result.image_data as Bytes).data;
    const outcome: Outcome = { success: true, result };
    const bytes = (spread: boolean) => eventLength(cmdEventBytes(outcome, spread));
    const withCopy = bytes(true);
    const without = bytes(false);
    rows.push({
      name: `${label}: reply size with / without the copy`,
      median: `${(withCopy / 1e6).toFixed(2)} MB / ${(without / 1e6).toFixed(2)} MB`,
      p95: "",
      note: `PNG ${(png.length / 1e6).toFixed(2)} MB; the copy adds ${((withCopy - without) / 1e6).toFixed(2)} MB (+${(((withCopy - without) / without) * 100).toFixed(0)}%)`,
    });
    for (const spread of [true, false]) {
      rows.push(
        await timeIt(
          `${label}: serialize the event, copy ${spread ? "on" : "off"}`,
          async () => cmdEventBytes(outcome, spread),
          {
            runs: 50,
          },
        ),
      );
    }
    for (const spread of [true, false]) {
      const server = await startWith(result, spread);
      rows.push(
        await timeIt(
          `${label}: /cmd end to end (fetch + JSON.parse), copy ${spread ? "on" : "off"}`,
          async () => {
            const res = await fetch(`${server.url}/cmd`, {
              method: "POST",
              body: '{"command":"bench_screenshot"}',
            });
            const event = JSON.parse((await res.text()).slice(6));
            if (!(event.content?.image_data ?? event.image_data)) throw new Error("no image");
          },
          { runs: 30 },
        ),
      );
      await server.close();
    }
  }
  return rows;
}
