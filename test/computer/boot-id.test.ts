/**
 * A guest's forks answer as themselves: `/status` carries the launch's id that the guest's agent
 * writes (hangar-snapshot-clock), read at each request, on both doors (the early listener that
 * answers probes and the app that answers pages), and nothing when there is none.
 */
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTestServer } from "../support/server.js";

let dir: string;
let file: string;
let server: Awaited<ReturnType<typeof startTestServer>>;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "hangar-boot-id-"));
  file = join(dir, "boot-id");
  server = await startTestServer({ bootIdFile: file, allowOrigins: ["http://page.test"] });
});
afterAll(async () => {
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

const status = async (headers: Record<string, string> = {}) =>
  (await fetch(`${server.url}/status`, { headers })).json() as Promise<Record<string, unknown>>;

/** Written as the agent writes it: a temp file renamed into place. */
function launch(id: string) {
  writeFileSync(`${file}.tmp`, `${id}\n`);
  renameSync(`${file}.tmp`, file);
}

describe("/status boot_id", () => {
  it("is absent where no launch id was written", async () => {
    const body = await status();
    expect(body.status).toBe("ok");
    expect(body).not.toHaveProperty("boot_id");
  });

  it("follows the launch id as a restore changes it, on both doors", async () => {
    launch("3f9a1c2e4b5d6f708192a3b4c5d6e7f8");
    expect((await status()).boot_id).toBe("3f9a1c2e4b5d6f708192a3b4c5d6e7f8");
    launch("0123456789abcdef0123456789abcdef");
    expect((await status()).boot_id).toBe("0123456789abcdef0123456789abcdef");
    // An allowed page's request is answered by the app (with CORS headers), with the same body.
    expect((await status({ origin: "http://page.test" })).boot_id).toBe("0123456789abcdef0123456789abcdef");
  });

  it("ignores a file that does not hold an id", async () => {
    launch("not an id; rm -rf /");
    expect(await status()).not.toHaveProperty("boot_id");
  });
});
