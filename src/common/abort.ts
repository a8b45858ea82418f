/** Deadlines and cancellation as the registry runs commands under them. */
import { CommandError } from "./errors.js";

/** The reason a signal was aborted with, as an Error. */
export function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error("aborted");
}

/**
 * The signal a command runs under: aborted with a `CommandError` when its deadline passes or when
 * `client` aborts (the client went away). `release()` drops the timer and the listener once the
 * command is over. (One controller and one timer: `AbortSignal.timeout` and `AbortSignal.any` cost
 * a tenth of a small command's time.)
 */
export function stopSignal(deadlineMs: number, client: AbortSignal | undefined) {
  const controller = new AbortController();
  const timer = setTimeout(
    () =>
      controller.abort(new CommandError("timeout", `Command did not finish within ${deadlineMs / 1000} s`)),
    deadlineMs,
  );
  const onClientGone = () => {
    const reason = client?.reason;
    controller.abort(
      reason instanceof CommandError
        ? reason
        : new CommandError("cancelled", "Command cancelled: the client went away"),
    );
  };
  if (client?.aborted) onClientGone();
  else client?.addEventListener("abort", onClientGone, { once: true });
  return {
    signal: controller.signal,
    release: () => {
      clearTimeout(timer);
      client?.removeEventListener("abort", onClientGone);
    },
  };
}

/** Settles as `work` does, or rejects with the signal's reason as soon as it aborts. */
export function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (err) => {
        signal.removeEventListener("abort", onAbort);
        reject(err);
      },
    );
  });
}
