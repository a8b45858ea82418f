/**
 * X selections (CLIPBOARD, PRIMARY) through `xclip`, for every backend on X11. xclip stays alive as
 * the selection owner after a write and keeps any stdout pipe open, so writes give it no stdout
 * pipe and wait only for the parent process to exit (a promisified `execFile` would wait forever).
 */
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";
import { CommandError } from "../../common/errors.js";

export type Selection = "clipboard" | "primary";

const TIMEOUT_MS = 5000;
/** How long a write waits for its text to be what the selection holds. */
const SETTLE_MS = 1000;

/** The text in a selection, or null when nobody owns it or it holds no text. */
export async function readSelection(display: string, selection: Selection): Promise<string | null> {
  const child = spawn("xclip", ["-selection", selection, "-out", "-target", "UTF8_STRING"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DISPLAY: display },
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout?.on("data", (chunk: Buffer) => out.push(chunk));
  child.stderr?.on("data", (chunk: Buffer) => err.push(chunk));
  const code = await exitOf(child);
  if (code === 0) return Buffer.concat(out).toString("utf8");
  const message = Buffer.concat(err).toString("utf8").trim();
  // Nobody owns the selection, or the owner has no text.
  if (/not available|no owner/i.test(message) || message === "") return null;
  throw new CommandError("failed", `Could not read the ${selection}: ${message}`);
}

/**
 * Makes `text` the selection's content. xclip's parent exits once its daemon has asked for the
 * selection, which can be before the X server has made it the owner: the write returns when the
 * selection reads back as `text` (or after a short bound, if another client took it meanwhile).
 */
export async function writeSelection(display: string, selection: Selection, text: string): Promise<void> {
  const child = spawn("xclip", ["-selection", selection, "-in"], {
    stdio: ["pipe", "ignore", "ignore"],
    env: { ...process.env, DISPLAY: display },
  });
  const done = exitOf(child);
  child.stdin?.on("error", () => undefined);
  child.stdin?.end(text, "utf8");
  const code = await done;
  if (code !== 0) {
    throw new CommandError("failed", `Could not set the ${selection}: xclip exited with code ${code}`);
  }
  const deadline = Date.now() + SETTLE_MS;
  while ((await readSelection(display, selection)) !== text && Date.now() < deadline) await sleep(10);
}

export async function readClipboard(display: string): Promise<string> {
  return (await readSelection(display, "clipboard")) ?? "";
}

export function writeClipboard(display: string, text: string): Promise<void> {
  return writeSelection(display, "clipboard", text);
}

function exitOf(child: ReturnType<typeof spawn>): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new CommandError("timeout", `xclip did not answer within ${TIMEOUT_MS / 1000} s`));
    }, TIMEOUT_MS);
    child.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(xclipMissing(err));
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve(code ?? 1);
    });
  });
}

export function xclipMissing(err: NodeJS.ErrnoException): CommandError {
  return err.code === "ENOENT"
    ? new CommandError("unavailable", "xclip is not installed (it is needed for the clipboard)")
    : new CommandError("failed", `xclip could not be run: ${err.message}`);
}
