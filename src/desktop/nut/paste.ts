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
import { readSelection, type Selection, writeSelection } from "../x11/clipboard.js";
import { strokesForCombo } from "./key-strokes.js";
import type { NutWorker } from "./worker-client.js";
import { offerSelection } from "./x11-selection.js";

/** How long a window gets to read pasted text before the paste counts as failed (X11). */
const PASTE_TIMEOUT_MS = 5000;
/** How long xclip keeps running after the window has read the text (see below). */
const WITHDRAW_GRACE_MS = 250;
/** How long the pasted text stays on the clipboard where there is no read receipt. */
const RESTORE_DELAY_MS = 150;

/** Window classes of X terminals, which paste PRIMARY on Shift+Insert. */
const TERMINAL_CLASS = /term|rxvt|^st(-\w+)?$|konsole|alacritty|kitty|tilix|terminator/i;

/**
 * Pastes `text` into the focused window.
 * @param focusedApp the focused window's class (X11 `WM_CLASS`), to tell terminals apart
 */
export interface X11PasteContext {
  /** The focused window's class (`WM_CLASS`), to tell terminals apart. */
  focusedApp?: string | null;
  /** The window that owns a selection (0 for none). */
  selectionOwner(selection: Selection): Promise<number>;
  /** Resolves once a selection is owned by another window than `before` (an xclip claim landed). */
  waitForNewOwner(selection: Selection, before: number): Promise<void>;
}

/** Pastes `text` into the focused window; on X11 `x11` is required. */
export async function pasteText(worker: NutWorker, text: string, x11?: X11PasteContext): Promise<void> {
  if (process.platform === "darwin") return pasteThroughClipboard(worker, text, [Key.LeftCmd, Key.V]);
  if (process.platform === "win32") return pasteThroughClipboard(worker, text, [Key.LeftControl, Key.V]);
  if (!x11) throw new CommandError("internal", "Pasting on X11 needs the X connection");
  const terminal = TERMINAL_CLASS.test(x11.focusedApp ?? "");
  return pasteThroughSelections(worker, text, terminal ? ["clipboard", "primary"] : ["clipboard"], x11);
}

async function pasteThroughSelections(
  worker: NutWorker,
  text: string,
  selections: Selection[],
  x11: X11PasteContext,
) {
  const env = worker.env;
  const display = env.DISPLAY ?? "";
  const owners = () => Promise.all(selections.map((s) => x11.selectionOwner(s)));
  const [saved, before] = await Promise.all([
    Promise.all(selections.map((s) => readSelection(display, s))),
    owners(),
  ]);
  const offers = await Promise.all(selections.map((s) => offerSelection(s, text, env)));
  let offered = before;
  try {
    // xclip says it is waiting before its claim has reached the server; wait for the new owners.
    await Promise.all(selections.map((s, i) => x11.waitForNewOwner(s, before[i])));
    offered = await owners();
    await worker.call("keys", { strokes: strokesForCombo([Key.LeftShift, Key.Insert]) });
    const stopTimer = new AbortController();
    const timeout = sleep(PASTE_TIMEOUT_MS, "timeout" as const, { signal: stopTimer.signal }).catch(
      () => "stopped",
    );
    const outcome = await Promise.race([...offers.map((o) => o.taken.then(() => "taken" as const)), timeout]);
    stopTimer.abort();
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
        if (old !== null) {
          await writeSelection(display, selection, old)
            .then(() => x11.waitForNewOwner(selection, offered[i]))
            .catch(() => undefined);
        }
        // xclip reports a request served before it has flushed the answer to the X server: a
        // moment's grace, or the window would wait for text that never comes.
        setTimeout(() => offers[i].withdraw(), WITHDRAW_GRACE_MS).unref();
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
