/**
 * A selection offered by a foreground `xclip` that says when a client has read it: how the nut-js
 * backend pastes on X11. Plain reads and writes are in `../x11/clipboard.ts`.
 */
import { spawn } from "node:child_process";
import { CommandError } from "../../common/errors.js";
import { type Selection, xclipMissing } from "../x11/clipboard.js";

const TIMEOUT_MS = 3000;

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
