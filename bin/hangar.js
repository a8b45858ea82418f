#!/usr/bin/env node
// `serve` and `mcp` may run in a child started with settings only a new process can have (the memory
// allocator, and no API keys in its environment): dist/src/cli/launcher.js, loaded before the rest.
import { relaunch } from "../dist/src/cli/launcher.js";

if (!relaunch()) {
  const { main } = await import("../dist/src/cli/main.js");
  await main();
}
