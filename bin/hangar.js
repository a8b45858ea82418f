#!/usr/bin/env node
// `serve` and `mcp` may run in a child started with settings only a new process can have (the memory
// allocator, and no API keys in its environment): dist/src/cli/launcher.js, loaded before the rest.
import { relaunch } from "../dist/src/cli/launcher.js";
import { holdYoungGeneration } from "../dist/src/common/young-generation.js";

if (!relaunch()) {
  // Before the program loads: its modules would grow V8's young generation for good (young-generation.ts).
  holdYoungGeneration();
  // The command line bundled by scripts/bundle-cli.mjs.
  const { main } = await import("../dist/cli/main.js");
  await main();
}
