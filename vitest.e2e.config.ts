import { defineConfig } from "vitest/config";

/**
 * The slow end-to-end tests (a guest VM booted under QEMU): `npm run test:e2e`. The guest image is
 * built from this checkout first (test/e2e/guest-image.ts); nothing of the run is left at its end.
 */
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.test.ts"],
    pool: "forks",
    testTimeout: 15 * 60_000,
    hookTimeout: 20 * 60_000,
    fileParallelism: false,
    globalSetup: ["test/support/leftovers.ts", "test/e2e/guest-image.ts"],
  },
});
