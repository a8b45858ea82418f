/**
 * Loaded into a benchmarked server (`node --import ./bench/loop-probe.mjs bin/hangar.js …`, with an
 * IPC channel; plain JavaScript, so that no TypeScript loader grows the server): holds
 * BENCH_BALLAST_MB of touched memory, as a server that has grown holds it, and answers each `stall`
 * message with the longest time its event loop went without running a 1 ms timer since the
 * previous message, in ms (1 when it never stalled).
 */
const ballast = [];
for (let i = 0; i < Number(process.env.BENCH_BALLAST_MB ?? 0); i++) ballast.push(Buffer.alloc(1 << 20, 1));

let last = performance.now();
let longest = 0;
setInterval(() => {
  const now = performance.now();
  longest = Math.max(longest, now - last);
  last = now;
}, 1).unref();

process.on("message", (message) => {
  if (message !== "stall") return;
  const now = performance.now();
  // Read here, the memory stays referenced (a module variable no function reads is collected).
  process.send?.({ longestMs: Math.max(longest, now - last), ballastMb: ballast.length });
  longest = 0;
});
