/** What the end-to-end tests share: a call of the host service's API, and timings of the steps. */

/** `method path` on the host service at `base`, with a JSON body; the status and the parsed answer. */
export async function hostApi(base: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as any) : null };
}

/** Runs `work`, noting how long it took under `name` in `timings`. */
export async function timedInto<T>(
  timings: Record<string, number>,
  name: string,
  work: () => Promise<T>,
): Promise<T> {
  const started = Date.now();
  try {
    return await work();
  } finally {
    timings[name] = Date.now() - started;
  }
}
