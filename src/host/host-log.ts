/**
 * The host service's own logs: `info.log` (every event) and `error.log` (errors only) under
 * `<home directory>/.logs/`, one line per event: `[<ISO time>] LEVEL: message key=value …`.
 * `GET /svc/logs` reads them back with `tail()`.
 */
import { appendFile, open } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "../common/logger.js";
import { settled } from "../common/settled.js";
import { makeDirectory } from "../os/make-directory.js";

export type LogType = "info" | "error";
type Fields = Record<string, string | number | boolean | null | undefined>;

export class HostLog {
  private queue: Promise<unknown> = Promise.resolve();

  /** @param directory returns the directory of the log files (it follows the home directory) */
  constructor(
    private readonly directory: () => Promise<string>,
    private readonly mirror?: Logger,
  ) {}

  info(message: string, fields: Fields = {}) {
    this.mirror?.info(fields, message);
    return this.append(["info"], this.line("INFO", message, fields));
  }

  error(message: string, fields: Fields = {}) {
    this.mirror?.error(fields, message);
    return this.append(["info", "error"], this.line("ERROR", message, fields));
  }

  /** Waits until every line written so far is on disk. */
  flush() {
    return this.queue;
  }

  /** The last `lines` lines of one log, or all of it; a missing file gives a sentence saying so. */
  async tail(type: LogType, lines?: number): Promise<string> {
    await this.flush();
    const path = join(await this.directory(), `${type}.log`);
    const handle = await open(path, "r").catch(() => undefined);
    if (!handle) return `${type === "info" ? "Info" : "Error"} log file not found`;
    try {
      const { size } = await handle.stat();
      if (lines === undefined) return (await handle.readFile()).toString("utf8");
      if (lines <= 0) return "";
      // Read backwards in blocks until enough newlines are in hand.
      const block = 64 * 1024;
      let position = size;
      let text = "";
      while (position > 0) {
        const length = Math.min(block, position);
        position -= length;
        const buffer = Buffer.alloc(length);
        await handle.read(buffer, 0, length, position);
        text = buffer.toString("utf8") + text;
        if (text.split("\n").length - 1 > lines) break;
      }
      const all = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
      return all.slice(-lines).join("\n");
    } finally {
      await handle.close();
    }
  }

  private line(level: string, message: string, fields: Fields) {
    const extras = Object.entries(fields)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${k}=${/[\s"=]/.test(String(v)) ? JSON.stringify(String(v)) : v}`);
    const oneLine = message.replace(/\s*\n\s*/g, " ");
    return `[${new Date().toISOString()}] ${level}: ${[oneLine, ...extras].join(" ")}\n`;
  }

  private append(types: LogType[], line: string) {
    const write = this.queue.then(async () => {
      const dir = await this.directory();
      await makeDirectory(dir);
      for (const type of types) await appendFile(join(dir, `${type}.log`), line);
    });
    this.queue = settled(write);
    return this.queue;
  }
}
