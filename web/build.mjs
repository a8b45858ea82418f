// Bundles the web pages into dist/web/ (run by `npm run build`): one minified script per page, with
// its HTML and CSS beside it. Nothing is loaded from the network at run time.
import { copyFileSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { build } from "esbuild";

const root = import.meta.dirname;
const pages = [
  { name: "console", entry: "main.ts", script: "console.js" },
  // The host page bundles noVNC (@novnc/novnc) for the VMs' screens.
  { name: "host", entry: "main.ts", script: "host.js" },
];
for (const page of pages) {
  const out = join(root, "..", "dist", "web", page.name);
  mkdirSync(out, { recursive: true });
  await build({
    entryPoints: [join(root, page.name, page.entry)],
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    outfile: join(out, page.script),
    logLevel: "warning",
  });
  copyFileSync(join(root, page.name, "index.html"), join(out, "index.html"));
  // The shared style first, so that a page's own rules win.
  const style = [join(root, "common", "base.css"), join(root, page.name, `${page.name}.css`)];
  writeFileSync(join(out, `${page.name}.css`), style.map((file) => readFileSync(file, "utf8")).join("\n"));
}
