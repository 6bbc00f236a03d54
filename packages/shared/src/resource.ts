import { InvalidResourceError } from './errors.js';

/** The longest resource name, in UTF-8 bytes (well inside a PostgreSQL btree key). */
export const MAX_RESOURCE_BYTES = 1024;

/**
 * Validates a resource name. Resource names are data: any text is allowed (quotes, semicolons,
 * unicode) except the NUL character, which PostgreSQL `text` cannot hold.
 *
 * @throws {InvalidResourceError} when the name is not a string, empty, longer than
 * {@link MAX_RESOURCE_BYTES} UTF-8 bytes, or contains NUL.
 */
export function parseResource(input: unknown): string {
  if (typeof input !== 'string') throw new InvalidResourceError(`expected a string, got ${typeof input}`);
  if (input.length === 0) throw new InvalidResourceError('empty');
  if (input.includes('\u0000')) throw new InvalidResourceError('contains a NUL character');
  const bytes = Buffer.byteLength(input, 'utf8');
  if (bytes > MAX_RESOURCE_BYTES) {
    throw new InvalidResourceError(`${bytes} UTF-8 bytes, at most ${MAX_RESOURCE_BYTES} allowed`);
  }
  // Lone surrogates would be replaced on the way to the database, so two names could collide.
  if (!input.isWellFormed()) throw new InvalidResourceError('not well-formed unicode (lone surrogate)');
  return input;
}
