/**
 * X selections (CLIPBOARD, PRIMARY) through `xclip`, for the nut-js backend on X11. xclip is spawned
 * with its output ignored or read to the end: `execFile` with a pipe hangs, because the forked
 * selection owner keeps the pipe open.
 */
import { spawn } from "node:child_process";
import { CommandError } from "../../common/errors.js";

export type Selection = "clipboard" | "primary";

const TIMEOUT_MS = 3000;

/** The text in a selection, or null when nobody owns it or it holds no text. */
export function readSelection(selection: Selection, env: NodeJS.ProcessEnv): Promise<string | null> {
  return new Promise((resolve, reject) => {
    const child = spawn("xclip", ["-selection", selection, "-o"], { env, stdio: ["ignore", "pipe", "pipe"] });
    const out: Buffer[] = [];
    let err = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS);
    child.stdout.on("data", (chunk: Buffer) => out.push(chunk));
    child.stderr.on("data", (chunk: Buffer) => {
      err += String(chunk);
    });
    child.once("error", (e) => reject(xclipMissing(e)));
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve(Buffer.concat(out).toString("utf8"));
      else if (/not available|no owner/i.test(err) || code === 1) resolve(null);
      else
        reject(
          new CommandError("failed", `Reading the ${selection} failed (${signal ?? code}): ${err.trim()}`),
        );
    });
  });
}

/** Makes `text` the selection's content; xclip forks a daemon that owns it until replaced. */
export function writeSelection(selection: Selection, text: string, env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn("xclip", ["-selection", selection, "-i"], { env, stdio: ["pipe", "ignore", "pipe"] });
    let err = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), TIMEOUT_MS);
    child.stderr.on("data", (chunk: Buffer) => {
      err += String(chunk);
    });
    child.once("error", (e) => reject(xclipMissing(e)));
    // "exit", not "close": the daemon xclip forks inherits stderr and keeps it open.
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      child.stderr.destroy();
      if (code === 0) resolve();
      else
        reject(
          new CommandError("failed", `Setting the ${selection} failed (${signal ?? code}): ${err.trim()}`),
        );
    });
    child.stdin.on("error", () => undefined); // EPIPE when xclip exits at once; its exit says why
    child.stdin.end(text);
  });
}

/** A selection held by a foreground xclip that says when a client has read it. */
export interface SelectionOffer {
  /** Resolves when a client has received the text (a TARGETS query does not count). */
  readonly taken: Promise<void>;
  /** Stops offering; the selection is left without owner unless something else took it. */
  withdraw(): void;
}

/** Offers `text` on a selection; resolves once xclip owns it. */
export function offerSelection(
  selection: Selection,
  text: string,
  env: NodeJS.ProcessEnv,
): Promise<SelectionOffer> {
  return new Promise((resolve, reject) => {
    const child = spawn("xclip", ["-selection", selection, "-i", "-verbose"], {
      env,
      stdio: ["pipe", "ignore", "pipe"],
    });
    let log = "";
    let resolveTaken: () => void = () => {};
    const taken = new Promise<void>((r) => {
      resolveTaken = r;
    });
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new CommandError("failed", `xclip did not take the ${selection} within ${TIMEOUT_MS} ms`));
    }, TIMEOUT_MS);
    const offer: SelectionOffer = {
      taken,
      withdraw: () => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      },
    };
    // xclip -verbose writes "Waiting for selection request number N" before request N: number 1
    // once it owns the selection, number 2 once the first request for the text was served.
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk: string) => {
      log += chunk;
      if (/request number 1\b/.test(log)) {
        clearTimeout(timer);
        resolve(offer);
      }
      if (/request number 2\b/.test(log)) resolveTaken();
      if (log.length > 4096) log = log.slice(-512);
    });
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(xclipMissing(e));
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      reject(
        new CommandError("failed", `xclip exited (${code}) before owning the ${selection}: ${log.trim()}`),
      );
    });
    child.stdin.on("error", () => undefined); // EPIPE when xclip exits at once; its exit says why
    child.stdin.end(text);
  });
}

function xclipMissing(err: Error): CommandError {
  return new CommandError(
    "unavailable",
    `xclip could not be run (${err.message}); install the xclip package`,
  );
}
