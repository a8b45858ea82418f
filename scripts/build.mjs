// Builds dist/ (`npm run build`, and `prepare`, which `npm ci` runs): the TypeScript (tsc), the files
// modules read beside themselves, the bundled command line (bundle-cli.mjs) and the web pages
// (web/build.mjs). Then it writes dist/.built-from, a digest of every file the build reads; a build
// that finds its digest unchanged does nothing (`--force` builds anyway).
//
// That is what lets the first `npx hangar serve` of a fresh clone answer at once: npx installs the
// checkout into its own cache and runs `prepare` there, which rebuilt everything `npm ci` had just
// built (15 s).
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";

const root = join(import.meta.dirname, "..");
const STAMP = join(root, "dist", ".built-from");
/** What the build reads besides node_modules (whose content package-lock.json names). */
const INPUTS = [
  "src",
  "commands",
  "web",
  "scripts/build.mjs",
  "scripts/bundle-cli.mjs",
  "tsconfig.json",
  "tsconfig.build.json",
  "package.json",
  "package-lock.json",
];

function* files(path) {
  if (!statSync(path).isDirectory()) {
    yield path;
    return;
  }
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    if (entry.name === "node_modules") continue;
    const child = join(path, entry.name);
    if (entry.isDirectory()) yield* files(child);
    // Tests are not built; a test changed leaves dist/ as it is.
    else if (entry.isFile() && !entry.name.endsWith(".test.ts")) yield child;
  }
}

/** A digest of the inputs' paths and contents, in a fixed order. */
function inputsDigest() {
  const hash = createHash("sha256");
  const all = INPUTS.flatMap((input) => [...files(join(root, input))]).sort();
  for (const file of all)
    hash
      .update(`${relative(root, file)}\0`)
      .update(readFileSync(file))
      .update("\0");
  return hash.digest("hex");
}

const digest = inputsDigest();
let built;
try {
  built = readFileSync(STAMP, "utf8").trim();
} catch {
  built = undefined;
}
if (built === digest && !process.argv.includes("--force")) {
  console.log("dist/ is already built from these sources (npm run build -- --force builds it again)");
  process.exit(0);
}

// A build that stops half-way leaves no stamp, so the next one starts over.
rmSync(STAMP, { force: true });
const tsc = spawnSync(
  process.execPath,
  [join(root, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.build.json"],
  {
    cwd: root,
    stdio: "inherit",
  },
);
if (tsc.status !== 0) process.exit(tsc.status ?? 1);
copyFileSync(join(root, "src/os/shell-launcher.sh"), join(root, "dist/src/os/shell-launcher.sh"));
await import("./bundle-cli.mjs");
await import("../web/build.mjs");
writeFileSync(STAMP, `${digest}\n`);
