/**
 * The benchmarks' `/cmd` client: Node's own HTTP client with one kept-alive connection, a body
 * encoded once for calls repeated, replies parsed after the clock has stopped.
 */
import http from "node:http";

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

/** Closes the kept-alive connections, so that the process can exit. */
export function closeClient() {
  agent.destroy();
}

/**
 * POSTs `/cmd` with Node's own HTTP client (keep-alive) and returns the reply's bytes. The time a
 * benchmark measures ends when the whole reply has arrived; decoding and parsing it are the
 * client's cost and are left out (`timedPost` checks replies after the clock has stopped).
 */
function send(url: string, body: Buffer): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${url}/cmd`,
      { method: "POST", agent, headers: { "content-type": "application/json" } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (chunk: Buffer) => chunks.push(chunk));
        res.on("end", () => resolve(Buffer.concat(chunks)));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const bodyOf = (command: string, params: unknown) => Buffer.from(JSON.stringify({ command, params }));

/** One `/cmd` call; the reply's text. */
export async function request(url: string, command: string, params: unknown = {}): Promise<string> {
  return (await send(url, bodyOf(command, params))).toString("utf8");
}

/** The `/cmd` event of a reply; throws when it reports a failure. */
export function parse(command: string, text: string) {
  const event = JSON.parse(text.slice(text.indexOf("data: ") + 6));
  if (!event.success) throw new Error(`${command}: ${event.error}`);
  return event;
}

export async function post(url: string, command: string, params: unknown = {}) {
  return parse(command, await request(url, command, params));
}

/**
 * A timed call whose reply is checked after the clock has stopped. Its body is encoded once, as a
 * client sending the same request again would: turning a 1 MiB `write_bytes` chunk into JSON costs
 * this client about 2 ms a call, whichever server it goes to.
 */
export function timedPost(url: string, command: string, params: unknown = {}) {
  const body = bodyOf(command, params);
  const replies: Buffer[] = [];
  return {
    run: async () => {
      replies.push(await send(url, body));
    },
    check: () => {
      for (const reply of replies.splice(0)) parse(command, reply.toString("utf8"));
    },
  };
}
