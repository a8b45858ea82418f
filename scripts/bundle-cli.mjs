// Bundles the `hangar` command line (run by `npm run build`, after tsc): dist/cli/main.js, which
// bin/hangar.js loads. Node 20 reads, compiles and links each module of a program on its own, and
// `hangar serve` loaded about 200 of them (100 of zod alone) before it could answer: most of its
// start. Here they are a handful of files.
//
// - Code splitting: what the program imports on first use (`await import(…)`: the MCP SDK's
//   transport, the host service, the OSWorld controller, …) stays in chunks of its own, loaded
//   then, as before. A bundle without splitting had them all at start (idle memory 92–98 MB).
// - The packages read at every start are bundled (zod, hono and its Node adapter, commander,
//   pino), and the MCP SDK with what it imports (ajv, zod-to-json-schema), which imports zod too:
//   from node_modules they brought a second zod and 120 files more (`hangar mcp` idle 74.8 → 68.5
//   MB). The others stay in node_modules and are loaded from there on first use, as before
//   (native addons, workers of their own, the large ones loaded lazily).
// - Files the code finds next to itself are put beside the bundle: the nut-js worker (an entry of
//   its own), the run_command shells' launcher.
import { copyFileSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

const root = join(import.meta.dirname, "..");
const out = join(root, "dist", "cli");
/** Bundled: the packages every start reads, and the MCP SDK's (the others are loaded from node_modules). */
const BUNDLED =
  /^(zod|@modelcontextprotocol\/sdk|zod-to-json-schema|ajv|ajv-formats|fast-uri|json-schema-traverse|fast-deep-equal|hono|@hono\/node-server|commander|pino|pino-std-serializers|@pinojs\/redact|sonic-boom|thread-stream|on-exit-leak-free|atomic-sleep|quick-format-unescaped|safe-stable-stringify|process-warning|real-require)(\/|$)/;

// `--prune-bundled` (the desktop image's build stage, after `npm prune`): removes the bundled
// packages from node_modules, where nothing in the image reads them (its programs are dist/cli's;
// every package that needs one of them is bundled too). It builds nothing.
if (process.argv.includes("--prune-bundled")) {
  const modules = join(root, "node_modules");
  const names = readdirSync(modules).flatMap((name) =>
    name.startsWith("@") ? readdirSync(join(modules, name)).map((inner) => `${name}/${inner}`) : [name],
  );
  const pruned = names.filter((name) => BUNDLED.test(name));
  for (const name of pruned) rmSync(join(modules, name), { recursive: true, force: true });
  console.log(
    `bundle-cli: removed ${pruned.length} bundled packages from node_modules: ${pruned.join(", ")}`,
  );
  process.exit(0);
}

// A development dependency, gone once the image's build stage has pruned them.
const { build } = await import("esbuild");
// Chunks are named by their content: those of an earlier build would stay beside the new ones.
rmSync(out, { recursive: true, force: true });
await build({
  entryPoints: {
    main: join(root, "dist", "src", "cli", "main.js"),
    // The desktop container's entry point, which runs the server in its own process: with the
    // command line's chunks, so that both share one copy of each module (one shutdown registry).
    container: join(root, "dist", "src", "container", "main.js"),
    worker: join(root, "dist", "src", "desktop", "nut", "worker.js"),
    // The command user's file worker (src/os/agent-files.ts finds it beside the chunk that starts it).
    "agent-files-worker": join(root, "dist", "src", "os", "agent-files-worker.js"),
  },
  outdir: out,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  // Bundled CommonJS (pino) calls require() for Node's own modules.
  banner: {
    js: 'import { createRequire as __hangarRequire } from "node:module"; const require = __hangarRequire(import.meta.url);',
  },
  plugins: [
    {
      // zod exports every locale (60 modules, 340 kB of the bundle) as `z.locales`, for
      // `z.config(z.locales.fr())`; nothing here calls it, and English, the default, is imported
      // on its own. Their index is reduced to English (0.9 MB less memory at start).
      name: "zod-english-only",
      setup(b) {
        b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
          /[\\/]zod[\\/]v4[\\/](classic|core)[\\/]/.test(args.importer)
            ? { path: "zod-locales", namespace: "zod-locales", pluginData: args.resolveDir }
            : undefined,
        );
        b.onLoad({ filter: /.*/, namespace: "zod-locales" }, (args) => ({
          contents: 'export { default as en } from "../locales/en.js";\n',
          resolveDir: args.pluginData,
          loader: "js",
        }));
      },
    },
    {
      name: "packages-outside",
      setup(b) {
        b.onResolve({ filter: /^[^./]/ }, (args) =>
          args.path.startsWith("node:") || BUNDLED.test(args.path)
            ? undefined
            : { path: args.path, external: true },
        );
      },
    },
  ],
  logLevel: "warning",
});
// V8 keeps each module's source for the functions it compiles on first call, in one byte a character
// unless one character is beyond Latin-1: then in two. esbuild writes code in ASCII (it escapes
// strings) but keeps comments as they are, and one "→" in a comment doubled a chunk's 0.5–0.75 MB.
for (const file of readdirSync(out).filter((name) => name.endsWith(".js"))) {
  const text = readFileSync(join(out, file), "utf8");
  // Only comments can hold them here; in a comment any spelling is as good.
  const ascii = text.replace(
    /[\u0080-\uffff]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  if (ascii !== text) writeFileSync(join(out, file), ascii);
}
// Files a module finds beside itself (`new URL("./name", import.meta.url)`: the run_command shells'
// launcher) are beside the chunk that holds it now: copied there, all of them,
// so that one added later is not forgotten. Two with one name would be one file here.
const besides = new Map();
for (const file of readdirSync(join(root, "src"), { recursive: true })) {
  if (!file.endsWith(".ts") || file.endsWith(".test.ts")) continue;
  const text = readFileSync(join(root, "src", file), "utf8");
  for (const [, name] of text.matchAll(/new URL\("\.\/([^"/]+)", import\.meta\.url\)/g)) {
    const from = join(root, "src", dirname(file), name);
    if (besides.has(name) && besides.get(name) !== from)
      throw new Error(`two files named ${name} beside modules`);
    besides.set(name, from);
  }
}
for (const [name, from] of besides) copyFileSync(from, join(out, name));
