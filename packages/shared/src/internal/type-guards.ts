/** The shape checks the options schemas share (zod's `z.custom` takes a predicate). */
export const isObject = (v: unknown): v is object => typeof v === 'object' && v !== null;
export const isFunction = (v: unknown): v is (...args: never[]) => unknown => typeof v === 'function';
