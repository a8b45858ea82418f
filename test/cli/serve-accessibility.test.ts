import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type RunningCli, startCli } from "../support/cli-process.js";
import { PYTHON } from "../support/desktop.js";
import { postCmd } from "../support/server.js";

const appScript = fileURLToPath(new URL("../support/a11y-app.py", import.meta.url));

let serve: RunningCli;
let url: string;
beforeAll(async () => {
  serve = await startCli(["serve", "--port", "0", "--virtual-display", "1024x768"]);
  url = serve.url;
});
afterAll(() => serve?.stop());

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
