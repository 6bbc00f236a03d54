/**
 * Jittered exponential backoff between attempts of a transaction the database aborted (a deadlock, a
 * serialization failure, a lock wait timeout): every fence store retries the same way.
 */
export function retryBackoff(attempt: number): Promise<void> {
  const ceiling = Math.min(100, 2 ** attempt);
  return new Promise((resolve) => setTimeout(resolve, Math.random() * ceiling));
}
