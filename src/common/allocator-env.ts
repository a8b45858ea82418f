/**
 * The C allocator's settings for `hangar serve`, set by whatever starts it (the container's entry
 * point, the systemd unit, the benchmarks): glibc reads them once, at process start.
 *
 * By default glibc gives each thread that allocates its own arena, and libvips' worker threads
 * (screenshots) fill theirs with buffers whose freed space is seldom returned to the system. Two
 * arenas in all: after 90 changed 1080p screenshots the server sat at about 100 MB 30 s later
 * instead of 123 MB (`bench/compare.ts` prints the server's memory once idle).
 *
 * And blocks of 2 MiB or more are mapped on their own, so that freeing one gives it back: glibc
 * otherwise raises that threshold to the largest block freed (up to 32 MiB), and screen captures,
 * encodings and request bodies then stay in the arenas' holes. After `bench/core.ts` the idle server
 * fell from 109 to 81 MB at 60 s, with transfers as fast. (A lower threshold, mapping the 1 MiB
 * blocks of chunked transfers too, cost a third of `read_bytes`' speed.)
 */
export const ALLOCATOR_ENV: Readonly<Record<string, string>> = {
  MALLOC_ARENA_MAX: "2",
  MALLOC_MMAP_THRESHOLD_: String(2 * 1024 * 1024),
};
