import { configDefaults, defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The guest VM end-to-end test takes minutes: `npm run test:e2e` runs it (vitest.e2e.config.ts).
    exclude: [...configDefaults.exclude, "test/e2e/**"],
    pool: "forks",
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Desktop tests each start their own X display; the host tests their own QEMU and registry.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
