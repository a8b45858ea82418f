/**
 * The container's HEALTHCHECK: asks the computer server's `GET /status` at the address the
 * entrypoint wrote down, over HTTPS when TLS is on (any certificate: it is the server's own, on
 * loopback). Exit 0 when it answers `{"status":"ok"}`, 1 otherwise.
 *
 *   node dist/src/container/health.js /status
 */
import { readFileSync } from "node:fs";
import { get as httpGet } from "node:http";
import { get as httpsGet } from "node:https";
import { fileURLToPath } from "node:url";
import { healthOriginFile } from "./health-origin.js";

export function checkHealth(url: string, timeoutMs = 3000): Promise<void> {
  return new Promise((resolve, reject) => {
    const get = url.startsWith("https:") ? httpsGet : httpGet;
    const req = get(url, { timeout: timeoutMs, rejectUnauthorized: false }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => {
        body += chunk;
      });
      res.on("end", () => {
        try {
          if (res.statusCode === 200 && JSON.parse(body).status === "ok") return resolve();
        } catch {
          // not JSON: reported below
        }
        reject(new Error(`${url} answered ${res.statusCode}: ${body.slice(0, 200)}`));
      });
    });
    req.on("timeout", () => req.destroy(new Error(`${url} did not answer within ${timeoutMs} ms`)));
    req.on("error", reject);
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  try {
    const origin = readFileSync(healthOriginFile(), "utf8").trim();
    checkHealth(`${origin}${process.argv[2] ?? "/status"}`).then(
      () => process.exit(0),
      (err: Error) => {
        process.stderr.write(`unhealthy: ${err.message}\n`);
        process.exit(1);
      },
    );
  } catch (err) {
    process.stderr.write(`unhealthy: the server has not started (${(err as Error).message})\n`);
    process.exit(1);
  }
}
