/**
 * The same load for every memory figure (bench/memory.ts, bench/guest-snapshots.ts): screenshots of
 * a changing screen, 1 MiB writes and reads, and `version`, through whichever way `call` sends a
 * command (`/cmd`, MCP tool calls).
 */

export type Call = (command: string, params?: Record<string, unknown>) => Promise<unknown>;

const MIB = 1024 * 1024;

/** 30 screenshots (JPEG and PNG in turn, each encoded afresh), 20 MiB written to `file` and read back in 1 MiB pieces, 500 `version`. */
export async function burst(call: Call, file: string) {
  const chunk = Buffer.alloc(MIB, 7).toString("base64");
  for (let i = 0; i < 30; i++) {
    await call("run_command", {
      command: `xsetroot -solid '#${(i * 0x050709).toString(16).padStart(6, "0").slice(-6)}'`,
    });
    // A new quality each time: encoded afresh even where xsetroot is missing (the guest image).
    await call("screenshot", { format: i % 2 ? "png" : "jpeg", quality: 50 + i });
  }
  for (let i = 0; i < 20; i++) await call("write_bytes", { path: file, content_b64: chunk, append: i > 0 });
  for (let i = 0; i < 20; i++) await call("read_bytes", { path: file, offset: i * MIB, length: MIB });
  for (let i = 0; i < 500; i++) await call("version");
}
