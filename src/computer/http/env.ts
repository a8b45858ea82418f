/** The Hono environment of the computer server's routes: Node's request and response. */
import type { HttpBindings } from "@hono/node-server";

export type ComputerEnv = { Bindings: HttpBindings };
