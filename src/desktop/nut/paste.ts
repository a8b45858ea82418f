/**
 * Enters text that has no keys on the keyboard (accents, CJK, emoji) by pasting it, with the
 * clipboard saved before and put back after, so that nothing is dropped and the user's clipboard
 * survives.
 *
 * - X11: the text is offered on CLIPBOARD and pasted with Shift+Insert, which toolkits (GTK, Qt,
 *   browsers) honour; terminals paste PRIMARY on Shift+Insert, so for them it is offered there too.
 *   (Not for other windows: a GTK entry that loses PRIMARY drops its selection, and typing over a
 *   selection must replace it.) The old contents are put back as soon as the window has read the
 *   text, which xclip reports.
 * - macOS (Cmd+V) and Windows (Ctrl+V): through nut-js's clipboard; there is no read receipt, so
 *   the old text is put back after a pause.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { Key } from "@nut-tree-fork/shared/dist/lib/enums/key.enum.js";
import { CommandError } from "../../common/errors.js";
import { strokesForCombo } from "./key-strokes.js";
import type { NutWorker } from "./worker-client.js";
import { offerSelection, readSelection, type Selection, writeSelection } from "./x11-selection.js";

/** How long a window gets to read pasted text before the paste counts as failed (X11). */
const PASTE_TIMEOUT_MS = 2000;
/** How long the pasted text stays on the clipboard where there is no read receipt. */
const RESTORE_DELAY_MS = 150;

/** Window classes of X terminals, which paste PRIMARY on Shift+Insert. */
const TERMINAL_CLASS = /term|rxvt|^st(-\w+)?$|konsole|alacritty|kitty|tilix|terminator/i;

/**
 * Pastes `text` into the focused window.
 * @param focusedApp the focused window's class (X11 `WM_CLASS`), to tell terminals apart
 */
export async function pasteText(worker: NutWorker, text: string, focusedApp?: string | null): Promise<void> {
  if (process.platform === "darwin") return pasteThroughClipboard(worker, text, [Key.LeftCmd, Key.V]);
  if (process.platform === "win32") return pasteThroughClipboard(worker, text, [Key.LeftControl, Key.V]);
  const terminal = TERMINAL_CLASS.test(focusedApp ?? "");
  return pasteThroughSelections(worker, text, terminal ? ["clipboard", "primary"] : ["clipboard"]);
}

async function pasteThroughSelections(worker: NutWorker, text: string, selections: Selection[]) {
  const env = worker.env;
  const saved = await Promise.all(selections.map((s) => readSelection(s, env)));
  const offers = await Promise.all(selections.map((s) => offerSelection(s, text, env)));
  try {
    await worker.call("keys", { strokes: strokesForCombo([Key.LeftShift, Key.Insert]) });
    const timeout = sleep(PASTE_TIMEOUT_MS, "timeout" as const);
    const outcome = await Promise.race([...offers.map((o) => o.taken.then(() => "taken" as const)), timeout]);
    if (outcome === "timeout") {
      throw new CommandError(
        "failed",
        `The focused window did not paste the text (Shift+Insert) within ${PASTE_TIMEOUT_MS} ms; nothing was typed`,
      );
    }
  } finally {
    await Promise.all(
      selections.map(async (selection, i) => {
        const old = saved[i];
        if (old !== null) await writeSelection(selection, old, env).catch(() => undefined);
        offers[i].withdraw();
      }),
    );
  }
}

async function pasteThroughClipboard(worker: NutWorker, text: string, shortcut: Key[]) {
  const saved = await worker.call("readClipboard", {}).catch(() => null);
  await worker.call("writeClipboard", { text });
  try {
    await worker.call("keys", { strokes: strokesForCombo(shortcut) });
    await sleep(RESTORE_DELAY_MS);
  } finally {
    if (saved !== null) await worker.call("writeClipboard", { text: saved }).catch(() => undefined);
  }
}
