/**
 * Where the entrypoint writes the server's origin for the HEALTHCHECK (health.ts). A module of its
 * own: the entry point is bundled (dist/cli/container.js), and health.ts runs itself when it is the
 * program, which in one bundle it would seem to be.
 */
import { tmpdir } from "node:os";
import { join } from "node:path";

/** Where the entrypoint writes the server's origin (`http(s)://127.0.0.1:<port>`) for the check. */
export function healthOriginFile(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.TMPDIR || tmpdir(), "hangar", "health-origin");
}
