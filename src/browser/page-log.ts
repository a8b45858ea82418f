/**
 * What a tab's page said and fetched since it was last asked: its console messages (and uncaught
 * errors) and its requests, one line each, the newest `MAX_LINES` of each kept.
 */
import type { Page, Request } from "playwright-core";

const MAX_LINES = 500;
/** A line longer than this (a logged object, a data: URL) is cut. */
const MAX_LINE = 2000;

export class PageLog {
  private console: string[] = [];
  private network: string[] = [];

  constructor(page: Page) {
    page.on("console", (message) => {
      const where = message.location();
      const at = where.url ? ` (${where.url}:${where.lineNumber + 1})` : "";
      push(this.console, `[${message.type()}] ${message.text()}${at}`);
    });
    page.on("pageerror", (error) => push(this.console, `[uncaught] ${error.name}: ${error.message}`));
    page.on("requestfinished", (request) => {
      request
        .response()
        .then((response) => push(this.network, requestLine(request, String(response?.status() ?? "-"))))
        .catch(() => undefined);
    });
    page.on("requestfailed", (request) =>
      push(this.network, requestLine(request, `failed: ${request.failure()?.errorText ?? "unknown"}`)),
    );
  }

  /** The console lines since the last call, oldest first. */
  drainConsole(): string[] {
    const lines = this.console;
    this.console = [];
    return lines;
  }

  /** The request lines since the last call, oldest first. */
  drainNetwork(): string[] {
    const lines = this.network;
    this.network = [];
    return lines;
  }
}

function requestLine(request: Request, outcome: string): string {
  return `${request.method()} ${outcome} ${request.url()} (${request.resourceType()})`;
}

function push(lines: string[], line: string): void {
  lines.push(line.length > MAX_LINE ? `${line.slice(0, MAX_LINE)}…` : line);
  if (lines.length > MAX_LINES) lines.splice(0, lines.length - MAX_LINES);
}
