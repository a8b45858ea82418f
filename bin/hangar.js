#!/usr/bin/env node
import { holdYoungGeneration } from "../dist/src/common/young-generation.js";

// Before the program loads: its modules would grow V8's young generation for good (young-generation.ts).
holdYoungGeneration();
const { main } = await import("../dist/cli/main.js");
await main();
