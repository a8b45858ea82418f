/**
 * A container's output as `docker logs` shows it: the engine sends stdout and stderr multiplexed
 * in frames (an 8-byte header: stream, 3 zero bytes, length), which are taken apart here into one
 * byte stream, both outputs in the order they came.
 */
import { PassThrough, Readable } from "node:stream";

/** Demultiplexes the engine's framed log stream (or a whole framed buffer) into plain bytes. */
export function demuxLogs(source: NodeJS.ReadableStream | Buffer, signal: AbortSignal): Readable {
  const input = Buffer.isBuffer(source) ? Readable.from([source]) : (source as Readable);
  const out = new PassThrough();
  let pending: Buffer = Buffer.alloc(0);
  const end = () => {
    if (pending.length > 0 && !looksFramed(pending)) out.write(pending);
    pending = Buffer.alloc(0);
    out.end();
  };
  input.on("data", (chunk: Buffer) => {
    pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
    for (;;) {
      if (pending.length < 8) break;
      if (!looksFramed(pending)) {
        // A container with a terminal sends its output unframed.
        out.write(pending);
        pending = Buffer.alloc(0);
        break;
      }
      const size = pending.readUInt32BE(4);
      if (pending.length < 8 + size) break;
      out.write(pending.subarray(8, 8 + size));
      pending = pending.subarray(8 + size);
    }
  });
  input.once("end", end);
  input.once("close", end);
  input.once("error", (err) => out.destroy(err));
  const abort = () => {
    input.destroy();
    out.end();
  };
  if (signal.aborted) abort();
  else signal.addEventListener("abort", abort, { once: true });
  out.once("close", () => {
    signal.removeEventListener("abort", abort);
    input.destroy();
  });
  return out;
}

function looksFramed(buffer: Buffer): boolean {
  return buffer.length >= 8 && buffer[0] <= 2 && buffer[1] === 0 && buffer[2] === 0 && buffer[3] === 0;
}
