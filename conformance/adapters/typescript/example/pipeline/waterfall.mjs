// An ordered waterfall: listeners run outermost first, each handed a `next` that runs the rest
// (and, at the end, the default). A listener that does not call `next` vetoes everything after it.

export class Waterfall {
  #listeners = [];

  /** Adds listeners after those already registered. */
  use(...listeners) {
    this.#listeners.push(...listeners);
    return this;
  }

  /** Adds a listener before every other one. */
  prepend(listener) {
    this.#listeners.unshift(listener);
    return this;
  }

  /** Runs `(…args, next)` listeners; `last()` is the default at the end. */
  run(args, last) {
    const step = async (i) => (i < this.#listeners.length ? this.#listeners[i](...args, () => step(i + 1)) : last());
    return step(0);
  }

  /**
   * Runs `tools/execute` wrappers, `(exec, next, signal)`: `next(signal?)` runs the rest with
   * that signal (the one it was handed when omitted), and `dispatch(signal)` ends the chain.
   */
  around(exec, signal, dispatch) {
    const step = async (i, current) =>
      i < this.#listeners.length
        ? this.#listeners[i](exec, (next = current) => step(i + 1, next), current)
        : dispatch(current);
    return step(0, signal);
  }
}
