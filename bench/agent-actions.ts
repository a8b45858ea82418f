/**
 * `computer_action` as an agent loop calls it: a left click and the screenshot reply at a 1280x800
 * model display on a busy 1920x1080 screen (the screen changed before each call, so every reply is a
 * fresh capture, resize and PNG encoding of what changed; and unchanged, a click on the bare desktop,
 * as when the click changes nothing), and the JPEG q80 of the whole changed screen. Then the typed
 * client's cost per call over a raw `fetch` of the same `/cmd` request.
 */
import { Hangar } from "../src/client/index.js";
import { post, timedPost } from "./client.js";
import { printTable, type Row, summarize, timeIt } from "./lib.js";
import { screenChanger, startScene, timeWithSetup } from "./scene.js";

const RUNS = 30;
const CLIENT_RUNS = 2000;

async function clientOverhead(url: string): Promise<Row[]> {
  const hangar = new Hangar({ url });
  const raw = async () => {
    const response = await fetch(`${url}/cmd`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ command: "version", params: {} }),
    });
    return JSON.parse((await response.text()).slice(6)).content;
  };
  const typed = () => hangar.version();
  for (let i = 0; i < 200; i++) await Promise.all([raw(), typed()]);
  // Interleaved, so that both see the same machine.
  const samples = { raw: [] as number[], typed: [] as number[] };
  for (let i = 0; i < CLIENT_RUNS; i++) {
    for (const [name, fn] of [
      ["raw", raw],
      ["typed", typed],
    ] as const) {
      const start = performance.now();
      await fn();
      samples[name].push(performance.now() - start);
    }
  }
  const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
  const overhead = median(samples.typed) - median(samples.raw);
  return [
    { name: "raw fetch POST /cmd version", ...summarize(samples.raw) },
    { name: "hangar.version() (typed client, /cmd)", ...summarize(samples.typed) },
    {
      name: "client overhead (difference of medians)",
      median: `${overhead.toFixed(3)} ms`,
      p95: "",
      target: "≤ 0.3 ms",
    },
  ];
}

async function main() {
  const scene = await startScene(1920, 1080);
  const url = scene.server.url;
  try {
    const click = {
      action: { action: "left_click", coordinate: [640, 780] },
      display: { width: 1280, height: 800 },
    };
    const reply = await post(url, "computer_action", click);
    const kib = Math.round((reply.tool_result.content[0].source.data.length * 3) / 4 / 1024);
    const call = timedPost(url, "computer_action", click);
    const changeScreen = await screenChanger(url);
    const jpeg = timedPost(url, "screenshot", { format: "jpeg", quality: 80 });
    const rows: Row[] = [
      await timeWithSetup(
        "computer_action left_click + screenshot, 1280x800 of 1920x1080, screen changed",
        RUNS,
        changeScreen,
        call.run,
        { target: "≤ 15 ms", note: `PNG ${kib} KiB` },
      ),
      await timeWithSetup("screenshot JPEG q80 1920x1080, screen changed", RUNS, changeScreen, jpeg.run, {
        target: "≤ 8 ms",
      }),
      await timeIt(
        "left_click alone (for comparison)",
        timedPost(url, "left_click", { x: 960, y: 1050 }).run,
        {
          runs: RUNS,
        },
      ),
    ];
    call.check();
    jpeg.check();
    // Last: a click on the bare desktop changes nothing on the screen (a click in the entry would
    // restart its blinking caret), but it takes the focus from the entry the screen changer types in.
    const still = timedPost(url, "computer_action", {
      ...click,
      action: { action: "left_click", coordinate: [1150, 400] },
    });
    rows.splice(
      1,
      0,
      await timeIt("same, clicking where nothing changes on the screen", still.run, { runs: RUNS }),
    );
    still.check();
    rows.push(...(await clientOverhead(url)));
    printTable("computer_action and the typed client", rows);
  } finally {
    await scene.stop();
  }
}

await main();
