/**
 * The memory settings `hangar serve` starts with, given by whatever starts it (the container's entry
 * point, the systemd unit, the benchmarks): the dynamic loader, the allocator and V8 read them once,
 * at process start. They are the C allocator and the size of V8's young generation.
 *
 * jemalloc when it is installed (Debian's `libjemalloc2`; sharp's own documentation recommends it
 * for long-running processes). The server's memory goes through many blocks of 64 KiB to 2 MiB
 * (request bodies, base64 text, read chunks, JPEG strips) freed in another order than taken; glibc
 * keeps the holes they leave, jemalloc gives freed pages back half a second later. One arena and no
 * thread caches, so that the thread pool's idle threads hold nothing. After `bench/core.ts`'s
 * transfers, 60 s later: 68-69 MB with jemalloc against 106 MB with glibc's settings below (10 s
 * later: 76-84 against 109); transfers as fast.
 *
 * Without jemalloc, glibc's settings: two arenas in all (by default each thread that allocates gets
 * its own, and libvips' worker threads fill theirs), and blocks of 2 MiB or more mapped on their
 * own, so that freeing one gives it back (glibc otherwise raises that threshold to the largest
 * block freed, up to 32 MiB). A lower threshold, mapping 1 MiB blocks too, cost a third of
 * `read_bytes`' speed.
 *
 * V8's young generation: semi-spaces of at most 8 MiB (`NODE_OPTIONS=--max-semi-space-size=8`), where
 * Node's default lets them grow to 16 MiB. Megabyte replies and bodies grow them to the limit, and V8
 * keeps what they took until its memory reducer runs, about half a minute into a quiet spell (a full
 * collection leaves them as they are). At 8 MiB, `bench/compare.ts`' mix left 126 MB right after the
 * run against 157 MB, with transfers, screenshots and `version` as fast (interleaved runs).
 *
 * The server takes these out of its own environment at start (`forgetMemorySettings`): the commands
 * and applications it starts run with the system's allocator and Node's defaults, as they would
 * anywhere else.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";

export const JEMALLOC = "libjemalloc.so.2";
/** jemalloc's settings (MALLOC_CONF): one arena, no thread caches, freed pages returned after 0.5 s. */
export const JEMALLOC_CONF = "narenas:1,tcache:false,dirty_decay_ms:500,muzzy_decay_ms:0";
/** Set beside LD_PRELOAD to the library preloaded, so that the server knows what to take out. */
export const PRELOADED_ENV = "HANGAR_PRELOADED_ALLOCATOR";

const GLIBC_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: "2",
  MALLOC_MMAP_THRESHOLD_: String(2 * 1024 * 1024),
};

/** V8's settings, as `NODE_OPTIONS` (which allows this flag). */
export const SERVER_NODE_OPTIONS = "--max-semi-space-size=8";

/** Where Debian and other distributions put the library (multiarch first). */
const LIBRARY_DIRS = [
  "/usr/lib/x86_64-linux-gnu",
  "/usr/lib/aarch64-linux-gnu",
  "/usr/lib64",
  "/usr/lib",
  "/usr/local/lib",
];

/** The installed jemalloc, or undefined (not Linux, or not installed). */
export function findJemalloc(): string | undefined {
  if (process.platform !== "linux") return undefined;
  return LIBRARY_DIRS.map((dir) => join(dir, JEMALLOC)).find((path) => existsSync(path));
}

/**
 * The variables to start `hangar serve` with, on top of `env` (which they leave alone where it already
 * chose: an LD_PRELOAD or MALLOC_CONF of its own stays as it is, and then jemalloc is not added; a
 * NODE_OPTIONS of its own too).
 */
export function memoryEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const node: Record<string, string> = env.NODE_OPTIONS ? {} : { NODE_OPTIONS: SERVER_NODE_OPTIONS };
  const library = findJemalloc();
  if (!library || env.LD_PRELOAD || env.MALLOC_CONF) return { ...GLIBC_ENV, ...node };
  return { ...GLIBC_ENV, ...node, LD_PRELOAD: library, MALLOC_CONF: JEMALLOC_CONF, [PRELOADED_ENV]: library };
}

/**
 * Called by the server at start: takes out of `env` what `memoryEnv` (or the systemd unit) set for
 * the server's own process, so that its children do not inherit it: the preloaded allocator and
 * V8's settings.
 */
export function forgetMemorySettings(env: NodeJS.ProcessEnv = process.env) {
  if (env.NODE_OPTIONS === SERVER_NODE_OPTIONS) delete env.NODE_OPTIONS;
  const library = env[PRELOADED_ENV];
  if (library === undefined) return;
  delete env[PRELOADED_ENV];
  const rest = (env.LD_PRELOAD ?? "").split(/[\s:]+/).filter((entry) => entry && entry !== library);
  if (rest.length > 0) env.LD_PRELOAD = rest.join(" ");
  else delete env.LD_PRELOAD;
  if (env.MALLOC_CONF === JEMALLOC_CONF) delete env.MALLOC_CONF;
}
