/** The names the service's replicas and its simulation app share. */
export const LEASE = 'settlements';
export const JOB = 'settle';
export const QUEUE = 'settle';
export const RESOURCE = 'settlements';
