import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Desktop tests each start their own X display; the host tests their own QEMU and registry.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
