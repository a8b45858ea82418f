/**
 * Checks a running desktop container from outside, as its user would (scripts/test-image.sh runs
 * this on the host, in the container's network namespace or against Docker's published ports).
 *
 *   node --import tsx test/image/check.ts desktop|cloud|local|vnc|warm [--pid-ns 'pid:[4026532…]']
 *
 * Exits 0 when every check of the mode passes; prints one line a check.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import sharp from "sharp";

const HOST = process.env.IMAGE_HOST ?? "127.0.0.1";
const NAME = process.env.IMAGE_CONTAINER_NAME ?? "image-test";
const KEY = process.env.IMAGE_KEY ?? "image-test-key";
const AUTH = { "X-Container-Name": NAME, "X-API-Key": KEY };
let failures = 0;

interface Reply {
  status: number;
  text: string;
}

function send(
  url: string,
  body?: unknown,
  headers: Record<string, string> = {},
  timeoutMs = 60_000,
): Promise<Reply> {
  const request = url.startsWith("https:") ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: body === undefined ? "GET" : "POST",
        headers: { "content-type": "application/json", ...headers },
        rejectUnauthorized: false,
        timeout: timeoutMs,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

/** One `/cmd` command's result (the last `data:` event). */
async function cmd(
  base: string,
  command: string,
  params: unknown = {},
  headers: Record<string, string> = AUTH,
) {
  const reply = await send(`${base}/cmd`, { command, params }, headers);
  const last = reply.text
    .split("\n\n")
    .filter((c) => c.startsWith("data: "))
    .map((c) => JSON.parse(c.slice(6)))
    .at(-1);
  return { status: reply.status, result: last as Record<string, any> | undefined, text: reply.text };
}

async function check(what: string, test: () => Promise<string | undefined>) {
  const started = Date.now();
  try {
    const problem = await test();
    const ms = Date.now() - started;
    if (problem) {
      failures++;
      console.log(`  FAIL ${what}: ${problem} (${ms} ms)`);
    } else console.log(`  ok   ${what} (${ms} ms)`);
  } catch (err) {
    failures++;
    console.log(`  FAIL ${what}: ${(err as Error).message}`);
  }
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline)
      throw new Error(`${what} not within ${timeoutMs} ms${last ? `: ${last}` : ""}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

function nsOf(pid: string): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

const treeText = (tree: unknown) => JSON.stringify(tree);

async function ready(base: string) {
  const startedAt = Number(process.env.IMAGE_STARTED_MS ?? Date.now());
  await check("/status answers within 5 s of the start", async () => {
    // Each probe gives up after 0.5 s: one sent while the server is still starting up would
    // otherwise hold the poll for its whole timeout after the server can answer.
    await until("/status", 30_000, async () =>
      (await send(`${base}/status`, undefined, {}, 500)).status === 200 ? true : undefined,
    );
    const took = Date.now() - startedAt;
    return took > 5000 ? `after ${took} ms` : undefined;
  });
  await check("run_command id runs as uid 10001", async () => {
    const { result } = await cmd(base, "run_command", { command: "id -u" });
    return result?.stdout?.trim() === "10001" ? undefined : `got ${JSON.stringify(result)}`;
  });
}

async function local() {
  const base = `http://${HOST}:8000`;
  await ready(base);
}

/** Cloud mode with the keys in the environment: the desktop, its apps and where the keys went. */
async function desktop(pidNamespace: string) {
  const base = `https://${HOST}:8443`;
  await ready(base);
  await check("the screenshot shows the wallpaper and the panel", async () => {
    const shot = await until("a panel", 15_000, async () => {
      const { result } = await cmd(base, "screenshot");
      const png = Buffer.from(result?.image_data ?? "", "base64");
      const { data, info } = await sharp(png).removeAlpha().raw().toBuffer({ resolveWithObject: true });
      const row = (y: number) => {
        let sum = 0;
        for (let x = 0; x < info.width; x++)
          sum += data[(y * info.width + x) * 3] + data[(y * info.width + x) * 3 + 2];
        return sum / info.width;
      };
      const middle = row(Math.floor(info.height / 2));
      const panel = row(info.height - 10);
      const above = row(info.height - 60);
      // The wallpaper is a blue gradient (not black); tint2's panel at the bottom is another colour.
      return middle > 60 && Math.abs(panel - above) > 20 ? { png } : undefined;
    });
    await sharp(shot.png).toFile(`${process.env.IMAGE_SHOTS ?? "."}/desktop.png`);
    return undefined;
  });
  await check("open of a .txt file shows the editor, its text in the accessibility tree", async () => {
    await cmd(base, "run_command", { command: "printf 'A note from the image test\\n' > ~/note.txt" });
    const opened = await cmd(base, "open", { target: "/home/hangar/note.txt" });
    if (opened.result?.success === false) return `open: ${opened.text.slice(0, 200)}`;
    await until("the note in the tree", 30_000, async () => {
      const { result } = await cmd(base, "get_accessibility_tree");
      return treeText(result).includes("A note from the image test") ? true : undefined;
    });
    return undefined;
  });
  await check("Chromium opens a local page whose heading is in the accessibility tree", async () => {
    await cmd(base, "run_command", {
      command: "printf '<title>Image test</title><h1>Heading seen by AT-SPI</h1>' > ~/page.html",
    });
    await cmd(base, "open", { target: "/home/hangar/page.html" });
    await until("the heading in the tree", 60_000, async () => {
      const { result } = await cmd(base, "get_accessibility_tree");
      return treeText(result).includes("Heading seen by AT-SPI") ? true : undefined;
    });
    const { result } = await cmd(base, "screenshot");
    await sharp(Buffer.from(result?.image_data ?? "", "base64")).toFile(
      `${process.env.IMAGE_SHOTS ?? "."}/apps.png`,
    );
    return undefined;
  });
  await check(
    "start_recording … stop_recording makes a video (ffmpeg and its libraries are there)",
    async () => {
      const started = await cmd(base, "start_recording", {});
      if (!started.result?.success) return `start: ${started.text.slice(0, 300)}`;
      await cmd(base, "run_command", { command: "sleep 1" });
      const { result, text } = await cmd(base, "stop_recording");
      if (!result?.success || result.error) return `stop: ${text.slice(0, 300)}`;
      return result.frames >= 1 && result.size_bytes > 1000 ? undefined : `got ${JSON.stringify(result)}`;
    },
  );
  /**
   * Records `path` while a tone plays into the desktop's sound (the image's own ffmpeg plays it), and
   * gives the codecs of the file's streams, sorted, as its ffprobe reads them (or what went wrong).
   */
  const recordTone = async (path: string): Promise<{ codecs?: string; error?: string }> => {
    const started = await cmd(base, "start_recording", { path });
    if (!started.result?.success) return { error: `start: ${started.text.slice(0, 300)}` };
    // At the tone's own pace (-re): a stream that ends is dropped with what PulseAudio had not played.
    // For 4 s: a recording's sound starts a second or two after it (the null sink's first block).
    await cmd(base, "run_command", {
      command: "ffmpeg -v error -re -f lavfi -i sine=frequency=440 -t 4 -f pulse tone",
      timeout: 30,
    });
    const stopped = await cmd(base, "stop_recording");
    if (!stopped.result?.success) return { error: `stop: ${stopped.text.slice(0, 300)}` };
    const probed = await cmd(base, "run_command", {
      command: `ffprobe -v error -show_entries stream=codec_name -of csv=p=0 ${path}`,
    });
    const codecs = (probed.result?.stdout ?? "").trim().split("\n").sort().join(",");
    if (!codecs) return { error: `ffprobe: ${probed.text.slice(0, 300)}` };
    // The tone is in it: silence measures -91 dB.
    const measured = await cmd(base, "run_command", {
      command: `ffmpeg -v info -nostats -i ${path} -map 0:a -af volumedetect -f null - 2>&1 | grep max_volume`,
    });
    const loudest = Number(/max_volume: (-?[\d.]+) dB/.exec(measured.result?.stdout ?? "")?.[1]);
    return loudest > -30
      ? { codecs }
      : { error: `the sound track is silent: ${measured.text.slice(0, 300)}` };
  };
  await check("the desktop has sound: a tone played while recording is the video's audio track", async () => {
    const { codecs, error } = await recordTone("/tmp/sound.mp4");
    return codecs === "aac,h264" ? undefined : (error ?? `streams: ${codecs}`);
  });
  await check("the image's own ffmpeg records WebM too: VP8 and Opus, read back by its ffprobe", async () => {
    const { codecs, error } = await recordTone("/tmp/clip.webm");
    return codecs === "opus,vp8" ? undefined : (error ?? `streams: ${codecs}`);
  });
  await check(
    "no process but PID 1 and Hangar's node processes has the keys in its environment",
    async () => {
      // Make sure apps and commands run: a command, and the editor of the next check.
      await cmd(base, "run_command", { command: "sleep 60 >/dev/null 2>&1 &" });
      const leaks: string[] = [];
      let hangar = 0;
      const pids = readdirSync("/proc").filter((p) => /^\d+$/.test(p) && nsOf(p) === pidNamespace);
      for (const pid of pids) {
        let environ: string;
        let args: string;
        try {
          environ = readFileSync(`/proc/${pid}/environ`, "utf8");
          args = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
        } catch {
          continue;
        }
        const leaked = environ.includes(KEY) || environ.includes("HANGAR_API_KEYS=");
        const isHangar = /^(\/usr\/local\/bin\/)?node .*\/opt\/hangar\//.test(args);
        const isInit = /^\/usr\/bin\/tini/.test(args);
        if (leaked && !isHangar && !isInit) leaks.push(`${pid} ${args.slice(0, 60)}`);
        if (isHangar) hangar++;
      }
      if (pids.length < 5) return `only ${pids.length} processes were given`;
      return leaks.length
        ? `leaked to ${leaks.join("; ")}`
        : hangar < 2
          ? "Hangar's processes were not found"
          : undefined;
    },
  );
}

async function cloud(port = 8443) {
  const base = `https://${HOST}:${port}`;
  await until("https /status", 30_000, async () =>
    (await send(`${base}/status`, undefined, {}, 2000)).status === 200 ? true : undefined,
  );
  await check(`https://…:${port}/cmd with the right headers → 200`, async () => {
    const r = await cmd(base, "version", {}, { "X-Container-Name": NAME, "X-API-Key": KEY });
    return r.status === 200 && r.result?.success === true ? undefined : `${r.status} ${r.text.slice(0, 200)}`;
  });
  await check("a wrong key → 401", async () => {
    const r = await cmd(base, "version", {}, { "X-Container-Name": NAME, "X-API-Key": "wrong" });
    return r.status === 401 ? undefined : `${r.status}`;
  });
  await check("nothing answers plain HTTP", async () => {
    for (const url of [`http://${HOST}:${port}/status`, `http://${HOST}:8000/status`]) {
      const answered = await send(url, undefined, {}, 3000).then(
        (r) => r.status,
        () => 0,
      );
      if (answered >= 200 && answered < 500) return `${url} answered ${answered}`;
    }
    return undefined;
  });
}

async function vnc() {
  await check("HANGAR_VNC=1: GET :6080/ is the noVNC viewer", async () => {
    const r = await until("6080", 30_000, async () => {
      const reply = await send(`http://${HOST}:6080/`, undefined, {}, 3000);
      return reply.status === 200 ? reply : undefined;
    });
    return /noVNC/.test(r.text) && /<html/i.test(r.text) ? undefined : r.text.slice(0, 200);
  });
  await check("a page of another origin is refused", async () => {
    const r = await send(`http://${HOST}:6080/`, undefined, { origin: "http://evil.example" }, 3000);
    return r.status === 403 ? undefined : `${r.status}`;
  });
}

const [mode, ...rest] = process.argv.slice(2);
const pidNamespace = rest[rest.indexOf("--pid-ns") + 1] ?? "";
const modes: Record<string, () => Promise<void>> = {
  desktop: async () => {
    await desktop(pidNamespace);
    await cloud();
  },
  local,
  cloud: () => cloud(),
  vnc,
  // Loads this checker and its modules (tsx's transform, sharp) and exits: run before the first timed
  // start, so that "within 5 s of the start" measures the container and not the checker's own start.
  warm: async () => undefined,
};
if (!modes[mode]) {
  console.error(`check.ts: mode must be one of ${Object.keys(modes).join(", ")}`);
  process.exit(2);
}
await modes[mode]();
process.exit(failures ? 1 : 0);
