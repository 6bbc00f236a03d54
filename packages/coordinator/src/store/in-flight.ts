/** Called while a request is in flight, between its send and its reply (failpoints run there). */
export type InFlight = () => Promise<void>;

/** The reply, awaited only after `inFlight` (a failpoint) has run while the request is on its way. */
export async function replyOf<T>(sent: Promise<T>, inFlight: InFlight | undefined): Promise<T> {
  if (inFlight === undefined) return sent;
  sent.catch(() => undefined); // awaited below; a rejection meanwhile is not unhandled
  await inFlight();
  return sent;
}
