/** Rejected by {@link withTimeout} when the promise did not settle in time. */
export class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
}

/**
 * Rejects with {@link TimeoutError} when `promise` has not settled within `ms`; the timer never
 * outlives the promise. The promise itself keeps running: use it for calls whose late answer is
 * harmless to ignore (a Redis reply, say), and say so where you call it.
 */
export function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new TimeoutError(`${what} timed out after ${ms} ms`)), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
