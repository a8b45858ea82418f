/**
 * A model API stand-in on loopback: answers each request with the next recorded reply (JSON) and
 * keeps the requests, for running an SDK or an example against replies written from the published
 * schemas (no API is reachable from the tests).
 */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface RecordedRequest {
  url: string;
  headers: Record<string, unknown>;
  /** The JSON the SDK sent, read by the test. */
  body: any;
}

export async function startRecordedApi() {
  const requests: RecordedRequest[] = [];
  const replies: unknown[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk) => {
      body += chunk;
    });
    req.on("end", () => {
      requests.push({ url: req.url ?? "", headers: req.headers, body: JSON.parse(body) });
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(replies.shift()));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** What the SDK sent, in order. */
    requests,
    /** The replies still to send, in order. */
    replies,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export type RecordedApi = Awaited<ReturnType<typeof startRecordedApi>>;
