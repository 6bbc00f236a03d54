import type { Token } from '@fenced/shared';
import { BoundedMap } from '../internal/bounded-map.js';

/**
 * The last fence this process saw per resource, for a SQL store's check: only a hint for the check's
 * shape (share the fence row, or take it to raise: PostgreSQL orders its statements by it, MySQL
 * picks its shared path), so a stale or missing entry costs one more statement or a lock upgrade at
 * worst, never correctness.
 */
export class FenceHints {
  readonly #seen = new BoundedMap<string, Token>(10_000);

  /** Whether a write of `token` may raise the fence of `resource` (one never seen: it may). */
  raises(token: Token, resource: string): boolean {
    const seen = this.#seen.get(resource);
    return seen === undefined || token > seen;
  }

  /** The fence of `resource` is `token` as far as this process knows (committed, refused against, advanced or lowered to). */
  saw(resource: string, token: Token): void {
    this.#seen.set(resource, token);
  }
}
