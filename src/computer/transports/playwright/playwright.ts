/**
 * `POST /playwright_exec`, cua's browser endpoint: `{"command", "params"}` runs the registry's
 * `browser_<command>` and answers in cua's reply shape. The transport knows the naming rule, not the
 * commands.
 */
import { Hono } from "hono";
import { cuaReply } from "../../core/outcome.js";
import type { CommandRegistry } from "../../core/registry.js";
import { readCommandFrame } from "../../http/body.js";
import type { ComputerEnv } from "../../http/env.js";

/** `/playwright_exec` command `x` is the registry's `browser_x`. */
const BROWSER_PREFIX = "browser_";

export function playwrightRoutes({
  registry,
  bodyLimitBytes,
}: {
  registry: CommandRegistry;
  bodyLimitBytes: number;
}) {
  const routes = new Hono<ComputerEnv>();
  routes.post("/", async (c) => {
    const frame = await readCommandFrame(c, bodyLimitBytes);
    if (frame instanceof Response) return frame;
    const name = `${BROWSER_PREFIX}${frame.command}`;
    if (!registry.resolve(name)) {
      const known = registry.commands
        .map((d) => d.name)
        .filter((n) => n.startsWith(BROWSER_PREFIX))
        .map((n) => n.slice(BROWSER_PREFIX.length));
      return c.json(
        { detail: `Unknown browser command: ${frame.command.slice(0, 80)} (known: ${known.join(", ")})` },
        400,
      );
    }
    const gone = new AbortController();
    c.env.outgoing.once("close", () => gone.abort());
    const outcome = await registry.run(name, frame.params, { signal: gone.signal, transport: "playwright" });
    return c.json(cuaReply(outcome));
  });
  return routes;
}
