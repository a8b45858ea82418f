/**
 * The host service's own failure: what went wrong, in words a client can act on, and its kind.
 * Everything under src/host throws it; app.ts turns it into an HTTP answer, in one place.
 */
export type HostErrorKind =
  | "invalid_params"
  | "not_found"
  | "failed"
  | "not_supported"
  | "unavailable"
  | "cancelled"
  /** Nothing to hand out now (an empty pool asked not to wait, or a wait that ran out): 503. */
  | "exhausted"
  /** The desktop is not in a state the request applies to (resuming a running one): 409. */
  | "conflict";

/**
 * The HTTP status of each kind. lume answers every failure of a request with 400 and
 * `{"message"}`, and its clients expect that, so every kind is a 400, except a pool with nothing to hand out (a 503: come back later, which
 * no lume route answers) and a request that does not fit the desktop's state (a 409, on Hangar's own
 * routes: hibernating a stopped desktop, resuming a running one).
 */
export const HTTP_STATUS: Record<HostErrorKind, 400 | 409 | 503> = {
  invalid_params: 400,
  not_found: 400,
  failed: 400,
  not_supported: 400,
  unavailable: 400,
  cancelled: 400,
  exhausted: 503,
  conflict: 409,
};

export class HostError extends Error {
  constructor(
    readonly kind: HostErrorKind,
    message: string,
  ) {
    super(message);
    this.name = "HostError";
  }
}
