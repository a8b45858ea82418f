/**
 * The servers' pages (`web/`, bundled by `npm run build` into `dist/web/<page>/`): `GET /` and
 * `GET /<page>/assets/<file>`, read once into memory. They hold no data, so they are served before
 * authentication: a page without credentials shows its login form.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Hono } from "hono";
import { PACKAGE_ROOT } from "./version.js";

const TYPES: Record<string, string> = {
  html: "text/html; charset=utf-8",
  js: "text/javascript; charset=utf-8",
  css: "text/css; charset=utf-8",
};
const loaded = new Map<string, Map<string, Buffer>>();

/** The built files of a page; empty when the package was not built. */
function bundle(page: string): Map<string, Buffer> {
  let files = loaded.get(page);
  if (!files) {
    files = new Map();
    for (const name of ["index.html", `${page}.js`, `${page}.css`]) {
      try {
        files.set(name, readFileSync(join(PACKAGE_ROOT, "dist", "web", page, name)));
      } catch {
        // Not built: `/` answers 503 with the reason.
      }
    }
    loaded.set(page, files);
  }
  return files;
}

function asset(page: string, name: string): Response | undefined {
  const body = bundle(page).get(name);
  if (!body) return undefined;
  const type = TYPES[name.slice(name.lastIndexOf(".") + 1)];
  return new Response(new Uint8Array(body), {
    headers: { "content-type": type, "cache-control": "no-cache" },
  });
}

/** A page's HTML, or a 503 saying it is not built (for pages served at other addresses too). */
export function pageHtml(page: string): Response {
  return (
    asset(page, "index.html") ??
    new Response(JSON.stringify({ detail: "The page is not built: run npm run build" }), {
      status: 503,
      headers: { "content-type": "application/json" },
    })
  );
}

export function pageRoutes(page: string) {
  const app = new Hono();
  app.get(
    "/",
    (c) => asset(page, "index.html") ?? c.json({ detail: "The page is not built: run npm run build" }, 503),
  );
  app.get(
    `/${page}/assets/:name`,
    (c) => asset(page, c.req.param("name")) ?? c.json({ detail: "Not Found" }, 404),
  );
  return app;
}
