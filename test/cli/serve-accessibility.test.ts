import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PYTHON } from "../support/desktop.js";
import { postCmd } from "../support/server.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const appScript = fileURLToPath(new URL("../support/a11y-app.py", import.meta.url));

let serve: ChildProcess;
let url: string;
beforeAll(async () => {
  serve = spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      "test/support/hangar-cli.ts",
      "serve",
      "--port",
      "0",
      "--virtual-display",
      "1024x768",
    ],
    { cwd: root, stdio: ["ignore", "ignore", "pipe"] },
  );
  url = await new Promise<string>((resolve, reject) => {
    let log = "";
    serve.stderr!.on("data", (d) => {
      log += String(d);
      const found = /"url":"(http:[^"]+)"/.exec(log);
      if (found) resolve(found[1]);
    });
    serve.once("exit", (code) => reject(new Error(`hangar serve exited (${code}): ${log}`)));
  });
});
afterAll(async () => {
  if (serve.exitCode === null) {
    const exited = once(serve, "exit");
    serve.kill("SIGTERM");
    await exited;
  }
});

describe("hangar serve --virtual-display", () => {
  it("starts the accessibility bus with the desktop: an app launched through it shows in the tree", async () => {
    const launched = await postCmd(url, {
      command: "run_command",
      params: { command: `nohup ${PYTHON} '${appScript}' >/dev/null 2>&1 &` },
    });
    expect(launched.event.success).toBe(true);

    let found: Record<string, any> | undefined;
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      found = (await postCmd(url, { command: "find_element", params: { role: "button", title: "Press me" } }))
        .event;
      if (found.success) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(found).toMatchObject({ success: true, element: { role: "push button", name: "Press me" } });
    const { x, y, width, height } = found!.element.bounds;
    expect(x >= 0 && y >= 0 && x + width <= 1024 && y + height <= 768).toBe(true);
  });
});
