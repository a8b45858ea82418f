/**
 * The CLIPBOARD selection through `xclip`. xclip stays alive as the selection owner after a write
 * and keeps any stdout pipe open, so writes give it no stdout or stderr pipe and wait only for the
 * parent process to exit (a promisified `execFile` would wait forever).
 */
import { spawn } from "node:child_process";
import { CommandError } from "../../common/errors.js";

const TIMEOUT_MS = 5000;

export async function writeClipboard(display: string, text: string): Promise<void> {
  const child = spawn("xclip", ["-selection", "clipboard", "-in"], {
    stdio: ["pipe", "ignore", "ignore"],
    env: { ...process.env, DISPLAY: display },
  });
  const done = exitOf(child, "xclip");
  child.stdin?.on("error", () => undefined);
  child.stdin?.end(text, "utf8");
  const code = await done;
  if (code !== 0)
    throw new CommandError("failed", `Could not set the clipboard: xclip exited with code ${code}`);
}

export async function readClipboard(display: string): Promise<string> {
  const child = spawn("xclip", ["-selection", "clipboard", "-out", "-target", "UTF8_STRING"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, DISPLAY: display },
  });
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  child.stdout?.on("data", (chunk: Buffer) => out.push(chunk));
  child.stderr?.on("data", (chunk: Buffer) => err.push(chunk));
  const code = await exitOf(child, "xclip");
  if (code === 0) return Buffer.concat(out).toString("utf8");
  const message = Buffer.concat(err).toString("utf8").trim();
  // Nobody owns the clipboard, or the owner has no text: an empty clipboard.
  if (/not available|no owner/i.test(message) || message === "") return "";
  throw new CommandError("failed", `Could not read the clipboard: ${message}`);
}

function exitOf(child: ReturnType<typeof spawn>, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new CommandError("timeout", `${name} did not answer within ${TIMEOUT_MS / 1000} s`));
    }, TIMEOUT_MS);
    child.once("error", (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(
        new CommandError(
          err.code === "ENOENT" ? "not_supported" : "failed",
          err.code === "ENOENT" ? `${name} is not installed (it is needed for the clipboard)` : err.message,
        ),
      );
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve(code ?? 1);
    });
  });
}
