import { configDefaults, defineConfig } from "vitest/config";

/**
 * Tests that need no display, no QEMU, no engine, no server: they sit beside their modules (as
 * `index.test.ts` beside `index.ts`), and `npm run test:unit` runs them in seconds. `test/` keeps the
 * suites that start Xvfb, QEMU, containers or servers.
 */
const UNIT = ["src/**/*.test.ts", "commands/**/*.test.ts", "test/architecture.test.ts"];
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
/** Tests on a real single-node Kubernetes, started once for them (test/kubernetes/global-setup.ts). */
const KUBERNETES = ["test/kubernetes/**/*.test.ts"];
// The guest VM end-to-end test takes minutes: `npm run test:e2e` runs it (vitest.e2e.config.ts).
const EXCLUDE = [...configDefaults.exclude, "test/e2e/**"];
/** Every project's first global set-up: at the end, no process or temporary file of the run is left. */
const LEFTOVERS = "test/support/leftovers.ts";
/** The project's container image (built when missing) for the tests that run desktops from it. */
const IMAGE = "test/support/project-image.ts";

export default defineConfig({
  test: {
    pool: "forks",
    // Every command's result is checked against its result schema while the tests run (registry.ts).
    env: { HANGAR_CHECK_RESULTS: "1" },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // What a test waits for can take seconds on a loaded 2-core machine (CI runs files two at a
    // time beside their desktops, VMs and cluster): expect.poll gives up after 10 s, not 1 s.
    expect: { poll: { timeout: 10_000 } },
    // Desktop tests each start their own X display; the host tests their own QEMU and registry.
    fileParallelism: true,
    maxWorkers: 2,
    projects: [
      { extends: true, test: { name: "unit", include: UNIT, exclude: EXCLUDE, globalSetup: [LEFTOVERS] } },
      {
        extends: true,
        test: { name: "desktop", include: DESKTOP, exclude: [...EXCLUDE, ...UNIT], globalSetup: [LEFTOVERS] },
      },
      {
        extends: true,
        test: {
          name: "host",
          include: HOST,
          exclude: [...EXCLUDE, ...UNIT],
          // The tiny guest of the snapshot tests, made once before the files that boot it run side by side.
          globalSetup: [LEFTOVERS, IMAGE, "test/host/e2b-desktop-image.ts", "test/host/tiny-guest.ts"],
        },
      },
      {
        extends: true,
        test: {
          name: "kubernetes",
          include: KUBERNETES,
          exclude: EXCLUDE,
          globalSetup: [LEFTOVERS, IMAGE, "test/kubernetes/global-setup.ts"],
          hookTimeout: 180_000,
          // One cluster for all the files, and one of them restarts its API server: one file at a time.
          fileParallelism: false,
        },
      },
      {
        extends: true,
        test: {
          name: "servers",
          include: ["test/**/*.test.ts"],
          exclude: [...EXCLUDE, ...UNIT, ...DESKTOP, ...HOST, ...KUBERNETES],
          globalSetup: [LEFTOVERS],
        },
      },
    ],
  },
});
