import { configDefaults, defineConfig } from "vitest/config";

/** Tests that need no display, no QEMU, no server: `npm run test:unit` runs them in seconds. */
const UNIT = [
  "test/architecture.test.ts",
  "test/common/**/*.test.ts",
  "test/computer/auth/units.test.ts",
  "test/computer/envelope.test.ts",
  "test/computer/registry.test.ts",
  "test/container/settings.test.ts",
  "test/desktop/jpeg-strips.test.ts",
  "test/desktop/keys.test.ts",
  "test/desktop/nut-key-strokes.test.ts",
  "test/host/oci-auth.test.ts",
  "test/host/oci-gzip-piece.test.ts",
  "test/host/session.test.ts",
  "test/host/follow-file.test.ts",
];
/** Tests that start their own Xvfb + openbox (and AT-SPI, Chromium). */
const DESKTOP = [
  "test/desktop/**/*.test.ts",
  "test/commands/**/*.test.ts",
  "test/faults/desktop.test.ts",
  "test/recording/**/*.test.ts",
  "test/osworld/**/*.test.ts",
];
/** Tests that start QEMU or the OCI registry. */
const HOST = ["test/host/**/*.test.ts"];
// The guest VM end-to-end test takes minutes: `npm run test:e2e` runs it (vitest.e2e.config.ts).
const EXCLUDE = [...configDefaults.exclude, "test/e2e/**"];

export default defineConfig({
  test: {
    pool: "forks",
    // Every command's result is checked against its result schema while the tests run (registry.ts).
    env: { HANGAR_CHECK_RESULTS: "1" },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Desktop tests each start their own X display; the host tests their own QEMU and registry.
    fileParallelism: true,
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: "unit", include: UNIT, exclude: EXCLUDE } },
      { extends: true, test: { name: "desktop", include: DESKTOP, exclude: [...EXCLUDE, ...UNIT] } },
      { extends: true, test: { name: "host", include: HOST, exclude: [...EXCLUDE, ...UNIT] } },
      {
        extends: true,
        test: {
          name: "servers",
          include: ["test/**/*.test.ts"],
          exclude: [...EXCLUDE, ...UNIT, ...DESKTOP, ...HOST],
        },
      },
    ],
  },
});
