/**
 * A VM's device state in a file, through QEMU's migration (QEMU 7.2 has no `file:` URI: `exec:`
 * with `cat`). With `x-ignore-shared`, RAM that is a shared file is left out of the stream (the
 * snapshot copies that file instead); RAM that is not shared goes into the stream. A state is
 * loaded with the setting it was saved with (the stream's layout differs); a state saved without it
 * can be loaded into a shared RAM file (ram-file.ts).
 */
import type { QmpClient } from "./qmp.js";

/** Writes the paused VM's state to `file`; throws QEMU's reason when the migration fails. */
export async function saveState(qmp: QmpClient, file: string, timeoutMs: number, ignoreShared = true) {
  await qmp.execute("migrate-set-capabilities", {
    capabilities: [{ capability: "x-ignore-shared", state: ignoreShared }],
  });
  await qmp.execute("migrate", { uri: `exec:cat > ${shellQuote(file)}` });
  await finished(qmp, timeoutMs, "Saving the VM's state");
}

/** Loads a state written by saveState into a QEMU started with `-incoming defer`. */
export async function loadState(qmp: QmpClient, file: string, timeoutMs: number, ignoreShared = true) {
  await qmp.execute("migrate-set-capabilities", {
    capabilities: [{ capability: "x-ignore-shared", state: ignoreShared }],
  });
  await qmp.execute("migrate-incoming", { uri: `exec:cat ${shellQuote(file)}` });
  await finished(qmp, timeoutMs, "Loading the snapshot's state");
}

async function finished(qmp: QmpClient, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const info = await qmp.execute<{ status?: string; "error-desc"?: string }>("query-migrate");
    if (info.status === "completed") return;
    if (info.status === "failed" || info.status === "cancelled") {
      throw new Error(`${what} failed: ${info["error-desc"] ?? "QEMU gave no reason (is the disk full?)"}`);
    }
    if (Date.now() > deadline) {
      await qmp.execute("migrate_cancel").catch(() => undefined);
      throw new Error(`${what} took longer than ${Math.round(timeoutMs / 1000)} s`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** `'text'` for /bin/sh, whatever the text holds. */
export function shellQuote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}
