// Hooks that are synchronous or asynchronous, as the harness is. A kit hook that calls the
// harness's `next` (or nothing) returns a plain value when what it calls did, and a promise when
// it was handed one; `inMode(false, fn)` makes it always return a promise (the default, and how
// the kit behaved before `sync` existed).

/** Whether `value` is a promise (or any thenable). */
export const isThenable = (value) =>
  value !== null && (typeof value === 'object' || typeof value === 'function') && typeof value.then === 'function';

/**
 * Runs `step()`, then `onValue(value)`, or `onError(error)` if it threw or rejected:
 * synchronously when `step` returned a plain value, through its promise when it returned one.
 * @template T, U
 * @param {() => T | Promise<T>} step
 * @param {(value: T) => U} onValue
 * @param {(error: unknown) => U} [onError] default: rethrow
 */
export function after(step, onValue, onError = rethrow) {
  let value;
  try {
    value = step();
  } catch (error) {
    return onError(error);
  }
  return isThenable(value) ? Promise.resolve(value).then(onValue, onError) : onValue(value);
}

function rethrow(error) {
  throw error;
}

/** `fn` as it is when `sync`, else a function that always returns a promise of what `fn` gives. */
export function inMode(sync, fn) {
  if (sync) return fn;
  return async function (...args) {
    return fn.apply(this, args);
  };
}
