import { defineConfig } from "vitest/config";

/** The slow end-to-end tests (a guest VM booted under QEMU): `npm run test:e2e`, or `.ci/run` with HANGAR_E2E=1. */
export default defineConfig({
  test: {
    include: ["test/e2e/**/*.test.ts"],
    pool: "forks",
    testTimeout: 15 * 60_000,
    hookTimeout: 20 * 60_000,
    fileParallelism: false,
  },
});
