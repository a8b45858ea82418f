/**
 * Whether an input action had an effect, from what the desktop already tells: where the screen
 * changed (X DAMAGE, `DesktopBackend.watchChanges`), which window and element have the focus, and
 * the focused element's text (AT-SPI).
 *
 * Without `verify` the check costs one request without a reply before the action and nothing
 * after it: the answer is what is known at once (usually `unverifiable`; `confirmed` when a change
 * where the action was aimed has already been reported). With `verify` it reads the focus before
 * the action and waits, up to `waitMs`, for a change where the action was aimed; after a change
 * that has not moved the focus (nor shown the typed text in the focused element), until the screen
 * is quiet (100 ms) before reading it again.
 *
 * @example
 * const check = await beginEffectCheck(desktop, { verify: true });
 * await desktop.click("left", 1, { x: 10, y: 20 });
 * const { effect, evidence } = await check.finish({ kind: "pointer", points: [{ x: 10, y: 20 }] });
 */
import type { AccessibilityBackend, AccessibleNode } from "./accessibility.js";
import type { ChangeWatch, DesktopBackend, Point, Rect, WindowInfo } from "./backend.js";

export type Effect = "confirmed" | "unverifiable" | "suspected_noop";

export interface EffectEvidence {
  /** Why the effect is what it is, in a few words a model can read. */
  reason: string;
  /** The box around where the screen changed (screen pixels), when it did. */
  changed?: Rect;
  /** The focus (window, and the focused element where accessibility tells) before and after, when read. */
  focus?: { before: string | null; after: string | null };
  /** The focused element's text, where the typed text was found in it. */
  text?: string;
  /** How long the check waited for a change after the action, in milliseconds. */
  waited_ms: number;
}

export interface EffectReport {
  effect: Effect;
  evidence: EffectEvidence;
}

/** What an action aimed at: points of the screen, or the keyboard focus (and the text it typed). */
export type Aim = { kind: "pointer"; points?: readonly Point[] } | { kind: "keyboard"; typed?: string };

export interface EffectOptions {
  /** Read the focus before the action and wait for a change after it. */
  verify?: boolean;
  /** The longest wait for a change, with `verify` (default 500 ms). */
  waitMs?: number;
  /** The accessibility tree, for the focused element and its text (with `verify`). */
  accessibility?: () => Promise<AccessibilityBackend>;
  signal?: AbortSignal;
}

export const DEFAULT_WAIT_MS = 500;
/** A change this close to a point the pointer aimed at is where the action was aimed. */
export const NEAR_PX = 100;
/** After a click's change, the screen is quiet once it has not changed for this long. */
const QUIET_MS = 100;
/** The longest the focus is looked for (the accessibility bus of a busy desktop can be slow). */
const FOCUS_TIMEOUT_MS = 1000;

export interface EffectCheck {
  /** Ends the check after the action: what its effect looks like. */
  finish(aim: Aim): Promise<EffectReport>;
  /** Ends the check without a report (the action failed). */
  cancel(): void;
}

interface Focus {
  window: WindowInfo | null;
  element: AccessibleNode | null;
}

/** Starts a check; call it before the action. Without `verify` it does not wait for anything. */
export async function beginEffectCheck(
  desktop: DesktopBackend,
  options: EffectOptions = {},
): Promise<EffectCheck> {
  // The focus is read first: what its round trips let arrive is from before the action.
  const before = options.verify ? await focusOf(desktop, options.accessibility) : undefined;
  const watch = desktop.watchChanges?.();
  return {
    finish: async (aim) => {
      try {
        return before
          ? await verified(desktop, watch, before, aim, options)
          : await atOnce(desktop, watch, aim);
      } finally {
        watch?.stop();
      }
    },
    cancel: () => watch?.stop(),
  };
}

/** What is known as soon as the action is done, without waiting. */
async function atOnce(
  desktop: DesktopBackend,
  watch: ChangeWatch | undefined,
  aim: Aim,
): Promise<EffectReport> {
  if (!watch) return { effect: "unverifiable", evidence: { reason: NO_DAMAGE, waited_ms: 0 } };
  const changes = watch.changes;
  if (changes.length === 0) {
    return {
      effect: "unverifiable",
      evidence: { reason: "not checked (verify was not asked)", waited_ms: 0 },
    };
  }
  const changed = boundingBox(changes);
  if (aim.kind === "pointer") {
    const points = aim.points ?? [await desktop.cursorPosition()];
    if (changes.some((box) => nearAny(box, points))) {
      return { effect: "confirmed", evidence: { reason: CHANGED_NEAR, changed, waited_ms: 0 } };
    }
  }
  return {
    effect: "unverifiable",
    evidence: { reason: "the screen changed, but verify was not asked to tell where", changed, waited_ms: 0 },
  };
}

/** Waits for a change where the action was aimed, then compares the focus with the one before. */
async function verified(
  desktop: DesktopBackend,
  watch: ChangeWatch | undefined,
  before: Focus,
  aim: Aim,
  options: EffectOptions,
): Promise<EffectReport> {
  const waitMs = options.waitMs ?? DEFAULT_WAIT_MS;
  const started = performance.now();
  let aimed: (box: Rect) => boolean;
  if (aim.kind === "pointer") {
    const points = aim.points ?? [await desktop.cursorPosition()];
    aimed = (box) => nearAny(box, points);
  } else {
    // Keys go to the focused window; with none known, anywhere on the screen.
    const window = before.window?.bounds;
    aimed = (box) => !window || overlaps(box, window);
  }
  const hit = watch ? await watch.until((changes) => changes.some(aimed), waitMs, options.signal) : false;
  let after = await focusOf(desktop, options.accessibility);
  const typedSeen = () => aim.kind === "keyboard" && aim.typed && after.element?.text?.includes(aim.typed);
  // Typed text is looked for again only where the tree gave a focused element (it is not slow to
  // have none: accessibility is off or the element has no text).
  const typedLate = aim.kind === "keyboard" && aim.typed && after.element && !typedSeen();
  if (hit && watch && !focusMoved(before, after) && (aim.kind === "pointer" || typedLate)) {
    // A click redraws where it lands at once; a focus it moves comes a little later (the window
    // manager activates the window, which redraws too). Typed text is drawn before the accessibility
    // tree has it. Once the screen is quiet, look again.
    const deadline = started + waitMs;
    let changing = true;
    while (changing) {
      changing = await nextChange(watch, Math.min(QUIET_MS, deadline - performance.now()), options.signal);
    }
    after = await focusOf(desktop, options.accessibility);
  }
  const waited_ms = Math.round(performance.now() - started);
  const changes = watch?.changes ?? [];
  const focus = { before: describeFocus(before), after: describeFocus(after) };
  const evidence = (reason: string, extra: Partial<EffectEvidence> = {}): EffectEvidence => ({
    reason,
    ...(changes.length > 0 ? { changed: boundingBox(changes) } : {}),
    focus,
    ...extra,
    waited_ms,
  });
  if (typedSeen()) {
    const text = after.element?.text;
    return { effect: "confirmed", evidence: evidence("the typed text is in the focused element", { text }) };
  }
  if (focusMoved(before, after)) return { effect: "confirmed", evidence: evidence("the focus moved") };
  if (hit) {
    const reason = aim.kind === "pointer" ? CHANGED_NEAR : "the focused window changed";
    return { effect: "confirmed", evidence: evidence(reason) };
  }
  if (!watch) return { effect: "unverifiable", evidence: evidence(NO_DAMAGE) };
  if (changes.length === 0) {
    return {
      effect: "suspected_noop",
      evidence: evidence(`nothing on the screen changed within ${waited_ms} ms`),
    };
  }
  const elsewhere = aim.kind === "pointer" ? "away from the pointer" : "outside the focused window";
  return { effect: "unverifiable", evidence: evidence(`the screen changed only ${elsewhere}`) };
}

/** True when the screen changes again within `ms` (false at once when no time is left). */
function nextChange(watch: ChangeWatch, ms: number, signal?: AbortSignal): Promise<boolean> {
  if (ms <= 0) return Promise.resolve(false);
  let asked = 0;
  // `until` asks at once, then at each change: the second question is a change.
  return watch.until(() => ++asked > 1, ms, signal);
}

const NO_DAMAGE = "this desktop does not report where its screen changes";
const CHANGED_NEAR = "the screen changed where the pointer acted";

/** The focused window and element; what cannot be read within the time allowed is null. */
async function focusOf(
  desktop: DesktopBackend,
  accessibility?: () => Promise<AccessibilityBackend>,
): Promise<Focus> {
  const [window, element] = await Promise.all([
    within(desktop.activeWindow()),
    accessibility
      ? within(accessibility().then((a11y) => (a11y.focused ? a11y.focused() : null)))
      : Promise.resolve(null),
  ]);
  return { window, element };
}

/** `work`'s value, or null when it fails or takes longer than FOCUS_TIMEOUT_MS. */
function within<T>(work: Promise<T | null>): Promise<T | null> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(null), FOCUS_TIMEOUT_MS);
    work.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      () => {
        clearTimeout(timer);
        resolve(null);
      },
    );
  });
}

/** Another window or element has the focus (compared only where both were read). */
function focusMoved(before: Focus, after: Focus): boolean {
  const differ = (a: { id: string } | null, b: { id: string } | null) =>
    a !== null && b !== null && a.id !== b.id;
  return differ(before.window, after.window) || differ(before.element, after.element);
}

/** `push button "Press me" in "Hangar A11y Test"`, or the window alone, or null. */
function describeFocus({ window, element }: Focus): string | null {
  const where = window ? `"${window.title}"` : null;
  if (!element) return where ? `window ${where}` : null;
  const what = `${element.role}${element.name ? ` "${element.name}"` : ""}`;
  return where ? `${what} in ${where}` : what;
}

function nearAny(box: Rect, points: readonly Point[]): boolean {
  return points.some(
    (p) =>
      p.x >= box.x - NEAR_PX &&
      p.x < box.x + box.width + NEAR_PX &&
      p.y >= box.y - NEAR_PX &&
      p.y < box.y + box.height + NEAR_PX,
  );
}

function overlaps(a: Rect, b: Rect): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

function boundingBox(boxes: readonly Rect[]): Rect {
  const x = Math.min(...boxes.map((b) => b.x));
  const y = Math.min(...boxes.map((b) => b.y));
  return {
    x,
    y,
    width: Math.max(...boxes.map((b) => b.x + b.width)) - x,
    height: Math.max(...boxes.map((b) => b.y + b.height)) - y,
  };
}
