import { z } from 'zod';
import { ConfigError } from '@fenced/shared';
import { isFunction } from '@fenced/shared/internal';

const leaseNameSchema = z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'must be 1-64 characters from A-Z a-z 0-9 _ . -');

/** The SQL stores' `checkLease` option: a lease name, or a function of the write's resource. */
export const checkLeaseSchema = z.union([leaseNameSchema, z.custom<(resource: string) => string>(isFunction, { message: 'must be a lease name or a function (resource) => lease name' })]).optional();

/** The lease of each write's resource, when writes are lease-checked (`owner` names the store in errors). */
export function leaseResolver(checkLease: z.output<typeof checkLeaseSchema>, owner: string): ((resource: string) => string) | undefined {
  if (checkLease === undefined) return undefined;
  if (typeof checkLease === 'string') return () => checkLease;
  return (resource) => {
    const lease = (checkLease as (resource: string) => unknown)(resource);
    if (typeof lease !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(lease)) {
      throw new ConfigError(owner, [{ path: 'checkLease', message: `returned ${JSON.stringify(lease)} for resource ${JSON.stringify(resource)}: not a lease name` }]);
    }
    return lease;
  };
}
