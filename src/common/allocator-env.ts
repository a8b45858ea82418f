/**
 * The C allocator for `hangar serve`, chosen by whatever starts it (the container's entry point, the
 * systemd unit, the benchmarks): the dynamic loader and the allocator read their settings once, at
 * process start.
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
 * The server takes jemalloc out of its own environment at start (`forgetPreloadedAllocator`): the
 * commands and applications it starts run with the system's allocator, as they would anywhere else.
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
 * chose: an LD_PRELOAD or MALLOC_CONF of its own stays as it is, and then jemalloc is not added).
 */
export function allocatorEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const library = findJemalloc();
  if (!library || env.LD_PRELOAD || env.MALLOC_CONF) return { ...GLIBC_ENV };
  return { ...GLIBC_ENV, LD_PRELOAD: library, MALLOC_CONF: JEMALLOC_CONF, [PRELOADED_ENV]: library };
}

/**
 * Called by the server at start: takes out of `env` the allocator that `allocatorEnv` (or the
 * systemd unit) preloaded into it, so that its children do not inherit it.
 */
export function forgetPreloadedAllocator(env: NodeJS.ProcessEnv = process.env) {
  const library = env[PRELOADED_ENV];
  if (library === undefined) return;
  delete env[PRELOADED_ENV];
  const rest = (env.LD_PRELOAD ?? "").split(/[\s:]+/).filter((entry) => entry && entry !== library);
  if (rest.length > 0) env.LD_PRELOAD = rest.join(" ");
  else delete env.LD_PRELOAD;
  if (env.MALLOC_CONF === JEMALLOC_CONF) delete env.MALLOC_CONF;
}
