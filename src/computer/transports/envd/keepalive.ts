/**
 * What envd's streams share: the keep-alive interval a client asks for (`Keepalive-Ping-Interval`,
 * seconds; 90 without it, as envd), and a wait that ends on news, on that interval, or when the
 * client leaves.
 */
import type { HandlerContext } from "@connectrpc/connect";

const DEFAULT_KEEPALIVE_SECONDS = 90;

/** The keep-alive interval of a stream, in milliseconds. */
export function keepAliveMs(ctx: HandlerContext): number {
  const seconds = Number(ctx.requestHeader.get("keepalive-ping-interval"));
  return (
    (Number.isInteger(seconds) && seconds > 0 && seconds <= 3600 ? seconds : DEFAULT_KEEPALIVE_SECONDS) * 1000
  );
}

/**
 * Resolves true when the function given to `setWake` is called, false after `ms`; rejects with the
 * signal's reason once it aborts.
 */
export async function waitFor(
  ms: number,
  signal: AbortSignal,
  setWake: (wake: (() => void) | undefined) => void,
) {
  signal.throwIfAborted();
  const woke = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => done(false), ms);
    const onAbort = () => done(true);
    const done = (value: boolean) => {
      clearTimeout(timer);
      signal.removeEventListener("abort", onAbort);
      setWake(undefined);
      resolve(value);
    };
    setWake(() => done(true));
    signal.addEventListener("abort", onAbort, { once: true });
  });
  signal.throwIfAborted();
  return woke;
}
