/**
 * The CLI's client of the host service API: JSON over HTTP to `--url` (default
 * `http://127.0.0.1:7777`, or `HANGAR_HOST_URL`). Errors come back as the service's own message;
 * a service that is not running is said so plainly.
 */
import { readFileSync } from "node:fs";
import type { Command } from "commander";
import { describeOsError, fetchFailure } from "../common/errors.js";
import { DEFAULT_HOST_PORT } from "../host/port.js";

/** A JSON answer of the service, printed as text. */
// biome-ignore lint/suspicious/noExplicitAny: the shape is the service's, only printed
export type Json = Record<string, any>;

export const DEFAULT_HOST_URL = `http://127.0.0.1:${DEFAULT_HOST_PORT}`;
/** The variable that holds the host service's token, for the service and for `hangar vm …` alike. */
export const HOST_TOKEN_ENV = "HANGAR_HOST_TOKEN";

export class HostClient {
  constructor(
    readonly url: string,
    private readonly token?: string,
  ) {}

  async request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.send(method, path, body);
    const text = await res.text();
    let parsed: unknown = null;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    if (!res.ok) {
      const message = (parsed as { message?: string } | null)?.message ?? `HTTP ${res.status}`;
      throw new Error(message);
    }
    return parsed as T;
  }

  /** The answer of a route that streams (`/logs?follow=1`): its body, once the status says success. */
  async stream(path: string, signal?: AbortSignal): Promise<ReadableStream<Uint8Array>> {
    const res = await this.send("GET", path, undefined, signal);
    if (!res.ok) {
      const text = await res.text();
      let message = `HTTP ${res.status}`;
      try {
        message = (JSON.parse(text) as { message?: string }).message ?? message;
      } catch {
        // not JSON: the status says it
      }
      throw new Error(message);
    }
    return res.body ?? new ReadableStream({ start: (c) => c.close() });
  }

  private async send(method: string, path: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(new URL(path, this.url), {
        method,
        headers: {
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...(this.token ? { authorization: `Bearer ${this.token}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal,
      });
    } catch (err) {
      const code = fetchFailure(err);
      if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EHOSTUNREACH") {
        throw new Error(`The host service is not running at ${this.url} (start it with: hangar host serve)`);
      }
      throw new Error(`Cannot reach the host service at ${this.url}: ${code}`);
    }
    if (res.status === 401) {
      await res.body?.cancel();
      throw new Error(
        this.token
          ? `The host service at ${this.url} refused the token`
          : `The host service at ${this.url} needs its token: set ${HOST_TOKEN_ENV} or pass --token-file`,
      );
    }
    return res;
  }
}

/** Adds `--url`, the token options and `--json` to a client command. */
export function clientOptions(command: Command): Command {
  return command
    .option("--url <url>", "address of the host service", process.env.HANGAR_HOST_URL ?? DEFAULT_HOST_URL)
    .option("--token <token>", `the host service's token (better: $${HOST_TOKEN_ENV} or --token-file)`)
    .option("--token-file <path>", "read the host service's token from this file")
    .option("--json", "print the service's JSON answer instead of a table");
}

export function clientOf(opts: { url: string; token?: string; tokenFile?: string }) {
  const token = opts.token ?? (opts.tokenFile ? readTokenFile(opts.tokenFile) : process.env[HOST_TOKEN_ENV]);
  return new HostClient(opts.url, token || undefined);
}

/** The first line of a token file; its errors name the file. */
export function readTokenFile(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`cannot read the token file: ${describeOsError(err, path).message}`);
  }
  const token = text.split(/\r?\n/)[0].trim();
  if (!token) throw new Error(`the token file ${path} is empty`);
  return token;
}

/** Prints JSON for scripts, or what `human` makes of it for people. */
export function output<T>(opts: { json?: boolean }, value: T, human: (value: T) => string) {
  process.stdout.write(opts.json ? `${JSON.stringify(value, null, 2)}\n` : `${human(value)}\n`);
}

/** Aligned columns with a header row; `null` and `undefined` print as `-`. */
export function table(rows: Record<string, unknown>[], columns: [key: string, title: string][]): string {
  const cells = rows.map((row) =>
    columns.map(([key]) => (row[key] === null || row[key] === undefined ? "-" : String(row[key]))),
  );
  const widths = columns.map(([, title], i) => Math.max(title.length, ...cells.map((r) => r[i].length)));
  const line = (values: string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]))
      .join("  ")
      .trimEnd();
  return [line(columns.map(([, title]) => title)), ...cells.map(line)].join("\n");
}
