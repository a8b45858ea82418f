/**
 * The desktop's sound: a PulseAudio server of its own with one null sink (`hangar`), which programs
 * on the desktop play into (`PULSE_SERVER`), and whose monitor source (`hangar.monitor`) the
 * recorder and the live stream read (`HANGAR_AUDIO_SOURCE`, `AudioCapture`). The virtual display starts one
 * (virtual-display.ts); a desktop started elsewhere can name its own source with those variables.
 *
 * The server listens on a socket in a private directory (mode 0700), so only this user reaches it;
 * with a command user (`--command-user`) the directory is 0711, so that user's programs reach the
 * socket by its name without listing or changing the directory. It runs without a session bus,
 * cookie or D-Bus, and exits with the desktop.
 *
 * @example
 * const audio = await startDesktopAudio();
 * spawn("paplay", ["tone.wav"], { env: { ...process.env, ...audio.env } });
 * const capture = AudioCapture.start(audio.source, now, (ms, pcm) => encoder.writeAudio(ms, pcm));
 * … await capture.stop(); await audio.stop();
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, rm } from "node:fs/promises";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { promisify } from "node:util";
import type { CommandUser } from "../os/command-user.js";
import { makeOwnedTempDir } from "../os/owned-temp-dir.js";
import { withParentDeathSignal } from "../os/parent-death.js";

const execFileAsync = promisify(execFile);

/** A PulseAudio source to record: the server's address and the source's name. */
export interface AudioSource {
  /** `unix:/path/to/socket`, as `PULSE_SERVER` says it. */
  server: string;
  source: string;
}

export interface DesktopAudio {
  /** `PULSE_SERVER` (programs play there) and `HANGAR_AUDIO_SOURCE` (what is recorded). */
  readonly env: Record<string, string>;
  readonly source: AudioSource;
  readonly process: ChildProcess;
  stop(): Promise<void>;
}

export const AUDIO_SOURCE_ENV = "HANGAR_AUDIO_SOURCE";
const SINK = "hangar";
const READY_TIMEOUT_MS = 10_000;
const KEEPER_LATENCY_MS = 250;

/** Starts PulseAudio with the desktop's null sink; rejects saying why when it cannot. */
export async function startDesktopAudio(user?: CommandUser): Promise<DesktopAudio> {
  const dir = await makeOwnedTempDir("hangar-audio-");
  if (user) await chmod(dir, 0o711);
  const socket = join(dir, "native");
  const server = `unix:${socket}`;
  const child = spawn(
    ...withParentDeathSignal(
      "pulseaudio",
      [
        // No default script, no daemon of its own, no exit when idle, nothing of the user's session.
        "-n",
        "--daemonize=no",
        "--exit-idle-time=-1",
        "--use-pid-file=no",
        "--log-target=stderr",
        "--log-level=error",
        // Its clients (every program on the desktop, the agent's too, as another user) may not load
        // modules, which would act with the server's rights (a pipe sink writes a file where told).
        "--disallow-module-loading=yes",
        "-L",
        `module-null-sink sink_name=${SINK} rate=${PCM.sampleRate} channels=${PCM.channels} sink_properties=device.description=Hangar`,
        "-L",
        `module-native-protocol-unix socket=${socket} auth-anonymous=1`,
      ],
      "TERM",
    ),
    {
      stdio: ["ignore", "ignore", "pipe"],
      env: {
        ...process.env,
        HOME: dir,
        PULSE_RUNTIME_PATH: join(dir, "run"),
        PULSE_STATE_PATH: join(dir, "state"),
        PULSE_CONFIG_PATH: join(dir, "config"),
      },
    },
  );
  let said = "";
  child.stderr?.on("data", (chunk) => {
    said = (said + String(chunk)).slice(-2000);
  });
  let keeper: ChildProcess | undefined;
  const stop = async () => {
    keeper?.kill("SIGKILL");
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once("exit", resolve));
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 2000);
      await exited;
      clearTimeout(timer);
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitUntilReady(child, socket, () => said);
  } catch (err) {
    await stop();
    throw err;
  }
  // An idle null sink renders its sound two seconds at a time, so a reader that comes waits up to
  // two seconds for its first block (and a recording would miss them). A reader asking for 250 ms
  // keeps it rendering in 250 ms steps: a reader that comes waits that long at most. It reads the
  // sink's own format: at parec's default of 44.1 kHz the server resampled every block, six times
  // the CPU (0.3 % of a core here; 18 % of a guest's emulated CPU under TCG), for sound nobody reads.
  keeper = spawn(
    ...withParentDeathSignal(
      "parec",
      [`--server=${server}`, `--device=${SINK}.monitor`, `--latency-msec=${KEEPER_LATENCY_MS}`, ...PCM_ARGS],
      "KILL",
    ),
    {
      stdio: "ignore",
    },
  );
  keeper.on("error", () => undefined);
  const source = { server, source: `${SINK}.monitor` };
  return {
    env: { PULSE_SERVER: server, [AUDIO_SOURCE_ENV]: source.source },
    source,
    process: child,
    stop,
  };
}

async function waitUntilReady(child: ChildProcess, socket: string, said: () => string) {
  const failed = new Promise<never>((_, reject) => {
    child.once("error", (err) =>
      reject(new Error(`PulseAudio could not be started: ${err.message} (apt-get install pulseaudio)`)),
    );
    child.once("exit", (code) =>
      reject(new Error(`PulseAudio exited with code ${code}: ${said().trim().slice(-300)}`)),
    );
  });
  failed.catch(() => undefined);
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (existsSync(socket)) {
      const ready = await Promise.race([
        execFileAsync("pactl", ["-s", `unix:${socket}`, "info"]).then(
          () => true,
          () => false,
        ),
        failed,
      ]);
      if (ready) return;
    }
    await Promise.race([sleep(25), failed]);
  }
  throw new Error(`PulseAudio did not start within ${READY_TIMEOUT_MS} ms`);
}

/** The desktop's sound as its variables name it (`PULSE_SERVER` and `HANGAR_AUDIO_SOURCE`), if they do. */
export function audioFromEnv(env: Readonly<Record<string, string | undefined>>): AudioSource | undefined {
  const server = env.PULSE_SERVER;
  const source = env[AUDIO_SOURCE_ENV];
  return server && source ? { server, source } : undefined;
}

/** The sound as it is captured and handed to the encoders: 16-bit PCM, 48 kHz, stereo. */
export const PCM = { sampleRate: 48_000, channels: 2 } as const;
/** parec's options for raw `PCM`, the null sink's own format (so that nothing is resampled). */
const PCM_ARGS = ["--format=s16le", `--rate=${PCM.sampleRate}`, `--channels=${PCM.channels}`, "--raw"];
/** Captured sound comes in blocks of this length (ms). */
const BLOCK_MS = 20;
const BLOCK_BYTES = (PCM.sampleRate * PCM.channels * 2 * BLOCK_MS) / 1000;

/**
 * The desktop's sound as it plays: PulseAudio's `parec` reads the source with 20 ms of latency and
 * writes raw PCM (ffmpeg's pulse input takes two seconds to deliver its first), cut here into 20 ms
 * blocks, each given with its time in ms on the caller's clock
 * (`now()`): the first block's arrival, then one block's length after the other, so that the
 * sound's own clock times it. The recorder and the live stream put the blocks into the encoder's
 * input beside the frames (matroska.ts).
 */
export class AudioCapture {
  private pending: Buffer = Buffer.alloc(0);
  private firstAt: number | undefined;
  private blocks = 0;
  private stderrTail = "";
  /** Resolves, once ffmpeg has exited, with why (never rejects). */
  readonly ended: Promise<string>;

  private constructor(
    private readonly child: ChildProcess,
    now: () => number,
    onBlock: (timestampMs: number, pcm: Buffer) => void,
  ) {
    child.stdout?.on("data", (chunk: Buffer) => {
      this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
      while (this.pending.length >= BLOCK_BYTES) {
        const block = Buffer.from(this.pending.subarray(0, BLOCK_BYTES));
        this.pending = this.pending.subarray(BLOCK_BYTES);
        this.firstAt ??= Math.max(0, now() - BLOCK_MS);
        onBlock(this.firstAt + this.blocks * BLOCK_MS, block);
        this.blocks++;
      }
    });
    child.stderr?.on("data", (chunk) => {
      this.stderrTail = (this.stderrTail + String(chunk)).slice(-1000);
    });
    this.ended = new Promise((resolve) => {
      child.once("error", (err) => resolve(`the sound could not be read: ${err.message}`));
      child.once("close", (code, signal) =>
        resolve(
          `the sound's reader ended (${signal ?? `status ${code}`}): ${this.stderrTail.trim().slice(-200)}`,
        ),
      );
    });
  }

  /** Starts reading `source`; blocks go to `onBlock` as they come. */
  static start(
    source: AudioSource,
    now: () => number,
    onBlock: (timestampMs: number, pcm: Buffer) => void,
  ): AudioCapture {
    const child = spawn(
      "parec",
      [`--server=${source.server}`, `--device=${source.source}`, `--latency-msec=${BLOCK_MS}`, ...PCM_ARGS],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    return new AudioCapture(child, now, onBlock);
  }

  stop(): Promise<string> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
    return this.ended;
  }
}
