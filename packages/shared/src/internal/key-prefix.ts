import { z } from 'zod';

/**
 * The prefix of every Redis key fenced writes (the coordinator's, the scheduler's, the guard's), one
 * rule for all: a prefix the coordinator accepts and the guard refused would leave one deployment
 * with two spellings of its keys.
 */
export const keyPrefixSchema = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 characters from A-Z a-z 0-9 _ . -').default('fenced');
