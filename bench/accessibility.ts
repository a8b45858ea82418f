/**
 * Accessibility tree latency: the GTK test window on a private virtual desktop, read through
 * AT-SPI directly and through `POST /cmd`, then the same window with 500 more labels.
 * Run: node --import tsx bench/accessibility.ts
 */
import { startComputerServer } from "../src/computer/server.js";
import { atspiProvider } from "../src/desktop/atspi/index.js";
import { startVirtualDisplay } from "../src/desktop/virtual-display.js";
import { startA11yApp } from "../test/support/a11y-app.js";
import { printTable, type Row, timeIt } from "./lib.js";

const display = await startVirtualDisplay({ width: 1920, height: 1080, accessibility: true });
const small = await startA11yApp(display.env);
const a11y = atspiProvider(display.env);
const server = await startComputerServer({ port: 0, accessibility: a11y });
const rows: Row[] = [];
try {
  const backend = await a11y();
  const post = (command: string, params: unknown) =>
    fetch(`${server.url}/cmd`, { method: "POST", body: JSON.stringify({ command, params }) }).then((r) =>
      r.text(),
    );
  const nodes = async () =>
    (await backend.tree({ app: "a11y-app", maxDepth: 30, maxNodes: 20_000 })).nodeCount;
  const smallNodes = await nodes();
  rows.push(
    await timeIt(
      `tree of the app, ${smallNodes} nodes (in process)`,
      () => backend.tree({ app: "a11y-app", maxDepth: 30, maxNodes: 2000 }),
      { target: "≤ 300 ms" },
    ),
    await timeIt(
      `get_accessibility_tree over POST /cmd, ${smallNodes} nodes`,
      () => post("get_accessibility_tree", { app: "a11y-app" }),
      { target: "≤ 300 ms" },
    ),
    await timeIt("find_element (button by title)", () =>
      post("find_element", { role: "button", title: "Press me" }),
    ),
  );
  await small.stop();
  const big = await startA11yApp(display.env, 500);
  try {
    const bigNodes = await nodes();
    rows.push(
      await timeIt(
        `get_accessibility_tree over POST /cmd, ${bigNodes} nodes`,
        () => post("get_accessibility_tree", { app: "a11y-app", max_nodes: 20_000 }),
        { runs: 10, warmup: 2 },
      ),
    );
  } finally {
    await big.stop();
  }
  printTable("Accessibility (GTK test app under Xvfb, AT-SPI over D-Bus)", rows);
} finally {
  a11y.close();
  await server.close();
  await small.stop();
  await display.stop();
}
