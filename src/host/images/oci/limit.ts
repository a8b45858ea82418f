/** Runs at most `concurrency` of the given tasks at once; a finished task hands its slot on. */
export function limiter(concurrency: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async function run<T>(task: () => Promise<T>): Promise<T> {
    if (active < concurrency) active++;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else active--;
    }
  };
}

/**
 * Waits for every task; the first failure aborts `stop` (so the others wind down early) and is
 * thrown once all have settled, so nothing is still running when the caller cleans up.
 */
export async function allOrFirstError<T>(tasks: Promise<T>[], stop: AbortController): Promise<T[]> {
  let failure: { error: unknown } | undefined;
  const results = await Promise.all(
    tasks.map((task) =>
      task.catch((error: unknown) => {
        failure ??= { error };
        stop.abort();
        return undefined as T;
      }),
    ),
  );
  if (failure) throw failure.error;
  return results;
}
