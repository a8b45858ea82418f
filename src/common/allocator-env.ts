/**
 * The C allocator's settings for `hangar serve`, set by whatever starts it (the container's entry
 * point, the systemd unit, the benchmarks): glibc reads them once, at process start.
 *
 * By default glibc gives each thread that allocates its own arena, and libvips' worker threads
 * (screenshots) fill theirs with buffers whose freed space is seldom returned to the system. Two
 * arenas in all: after 90 changed 1080p screenshots the server sat at about 100 MB 30 s later
 * instead of 123 MB (`bench/compare.ts` prints the server's memory once idle).
 */
export const ALLOCATOR_ENV: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: "2" };
