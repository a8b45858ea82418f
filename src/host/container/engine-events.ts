/**
 * The engine's events about Hangar's containers (started, died, removed), as they happen: a
 * container killed from outside is known within a moment. The stream is opened again when it
 * ends or the engine goes away (1 s, then up to 10 s between tries), until closed.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { Engine } from "./engine.js";
import { LABEL } from "./labels.js";

export class EngineEvents {
  private readonly controller = new AbortController();
  private running?: Promise<void>;

  constructor(
    private readonly engine: Engine,
    private readonly onEvent: (desktop: string, action: string) => void,
    /** Called when the stream comes back after a break (what happened meanwhile is unknown). */
    private readonly onReconnect: () => void = () => undefined,
  ) {}

  start() {
    this.running ??= this.loop();
  }

  async close() {
    this.controller.abort();
    await this.running;
  }

  private async loop() {
    const { signal } = this.controller;
    let wait = 1000;
    let broken = false;
    while (!signal.aborted) {
      try {
        const stream = (await this.engine.docker.getEvents({
          filters: { type: ["container"], label: [LABEL.desktop] },
        })) as NodeJS.ReadableStream & { destroy(): void };
        if (broken) this.onReconnect();
        broken = false;
        wait = 1000;
        await this.read(stream, signal);
      } catch {
        // the engine is away: try again
      }
      broken = true;
      if (signal.aborted) return;
      await delay(wait, undefined, { signal }).catch(() => undefined);
      wait = Math.min(10_000, wait * 2);
    }
  }

  private read(stream: NodeJS.ReadableStream & { destroy(): void }, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      let text = "";
      const done = () => {
        signal.removeEventListener("abort", done);
        stream.destroy();
        resolve();
      };
      signal.addEventListener("abort", done, { once: true });
      stream.on("data", (chunk: Buffer) => {
        text += chunk.toString("utf8");
        for (let newline = text.indexOf("\n"); newline >= 0; newline = text.indexOf("\n")) {
          const line = text.slice(0, newline).trim();
          text = text.slice(newline + 1);
          if (line) this.dispatch(line);
        }
      });
      stream.once("end", done);
      stream.once("close", done);
      stream.once("error", done);
    });
  }

  private dispatch(line: string) {
    try {
      const event = JSON.parse(line) as {
        Action?: string;
        status?: string;
        Actor?: { Attributes?: Record<string, string> };
      };
      const desktop = event.Actor?.Attributes?.[LABEL.desktop];
      if (desktop) this.onEvent(desktop, event.Action ?? event.status ?? "");
    } catch {
      // not an event
    }
  }
}
