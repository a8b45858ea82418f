/**
 * Loaded into a benchmarked server (`node --import ./bench/loop-probe.mjs bin/hangar.js …`, with an
 * IPC channel; plain JavaScript, so that no TypeScript loader grows the server): holds
 * BENCH_BALLAST_MB of touched memory, as a server that has grown holds it, and answers each `loop`
 * message with the event-loop delays seen since the previous one (`LoopDelays` in bench/shell.ts).
 */
import { monitorEventLoopDelay } from "node:perf_hooks";

const ballast = [];
for (let i = 0; i < Number(process.env.BENCH_BALLAST_MB ?? 0); i++) ballast.push(Buffer.alloc(1 << 20, 1));

const delays = monitorEventLoopDelay({ resolution: 1 });
delays.enable();
process.on("message", (message) => {
  if (message !== "loop") return;
  process.send?.({
    maxMs: delays.max / 1e6,
    p99Ms: delays.percentile(99) / 1e6,
    samples: delays.count,
    // Read here, the memory stays referenced (a module variable no function reads is collected).
    ballastMb: ballast.length,
  });
  delays.reset();
});
