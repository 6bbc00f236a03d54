/**
 * How a lease group steers one of its coordinators: the group owns the connections and the balance,
 * the coordinator keeps the election itself (acquire, fences, renew, deadline) exactly as alone.
 */
export interface GroupSeat {
  /**
   * Hears the lease's releases on the group's one listener connection (its release hub). The group
   * also calls `onRelease` itself to have the coordinator try at once.
   * @returns an unsubscribe.
   */
  listen(onRelease: () => void): Promise<() => void>;
  /** Whether this node should compete for the lease now (it is the lease's assigned owner). */
  wants(): boolean;
  /**
   * How long a standby that does not want the lease waits between tries: it still takes a lease that
   * stays free that long (its owner is gone, or the members disagree for a moment).
   */
  readonly idleRetryMs: number;
}
