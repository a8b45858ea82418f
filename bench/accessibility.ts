/**
 * Accessibility tree latency: the GTK test window on a private virtual desktop, read through
 * AT-SPI directly and through `POST /cmd`. Run: node --import tsx bench/accessibility.ts
 */
import { startComputerServer } from "../src/computer/server.js";
import { atspiProvider } from "../src/desktop/atspi/index.js";
import { startVirtualDisplay } from "../src/desktop/virtual-display.js";
import { startA11yApp } from "../test/support/a11y-app.js";
import { printTable, timeIt } from "./lib.js";

const display = await startVirtualDisplay({ accessibility: true });
const app = await startA11yApp(display.env);
const a11y = atspiProvider(display.env);
const server = await startComputerServer({ port: 0, accessibility: a11y });
try {
  const backend = await a11y();
  const post = (command: string, params: unknown) =>
    fetch(`${server.url}/cmd`, { method: "POST", body: JSON.stringify({ command, params }) }).then((r) =>
      r.text(),
    );
  const { nodeCount } = await backend.tree({ maxDepth: 30, maxNodes: 2000 });
  printTable(`Accessibility (GTK test app, ${nodeCount} nodes in the whole tree)`, [
    await timeIt(
      "tree of the app (AT-SPI, in process)",
      () => backend.tree({ app: "a11y-app", maxDepth: 30, maxNodes: 2000 }),
      { target: "≤ 300 ms" },
    ),
    await timeIt(
      "get_accessibility_tree over POST /cmd",
      () => post("get_accessibility_tree", { app: "a11y-app" }),
      {
        target: "≤ 300 ms",
      },
    ),
    await timeIt("find_element (button by title)", () =>
      post("find_element", { role: "button", title: "Press me" }),
    ),
  ]);
} finally {
  a11y.close();
  await server.close();
  await app.stop();
  await display.stop();
}
