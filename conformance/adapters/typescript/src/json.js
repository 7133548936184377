// Values as JSON, defensively. The trace is JSON: what the recorder keeps is a detached copy made
// when it was told (so a later mutation cannot change the evidence), and a value JSON cannot hold
// (a BigInt, a function, a Symbol, a cycle, NaN, a Map) is named by its path instead of throwing
// from inside a probe or killing the adapter when the answer is sent.

/** What `encode` throws: `path` names the field (`result.meta.size`), `what` says what it holds. */
export class EncodeError extends Error {
  constructor(path, what) {
    super(`${path || 'the value'} is ${what}, which JSON cannot hold`);
    this.name = 'EncodeError';
    this.path = path;
    this.what = what;
  }
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const member = (path, key) => (IDENTIFIER.test(key) ? (path ? `${path}.${key}` : key) : `${path}[${JSON.stringify(key)}]`);

/**
 * A detached JSON copy of `value`, as `JSON.parse(JSON.stringify(value))` would make it
 * (`toJSON` honoured, `undefined` properties left out, `undefined` in arrays as `null`), except
 * that what JSON would lose or refuse throws an `EncodeError` naming its path.
 * @param {unknown} value
 * @param {string} [path] the name of `value` itself, prefixed to every path
 */
export function encode(value, path = '') {
  const open = new Set();
  const walk = (v, p) => {
    switch (typeof v) {
      case 'string':
      case 'boolean':
        return v;
      case 'number':
        if (!Number.isFinite(v)) throw new EncodeError(p, String(v));
        return v === 0 ? 0 : v;
      case 'undefined':
        return undefined;
      case 'bigint':
        throw new EncodeError(p, `a BigInt (${v}n)`);
      case 'function':
        throw new EncodeError(p, v.name ? `a function (${v.name})` : 'a function');
      case 'symbol':
        throw new EncodeError(p, `a Symbol (${String(v)})`);
      default:
        break;
    }
    if (v === null) return null;
    if (typeof v.toJSON === 'function') {
      const json = v.toJSON();
      if (json !== v) return walk(json, p);
    }
    if (open.has(v)) throw new EncodeError(p, 'a cycle (an object that contains itself)');
    if (v instanceof Map || v instanceof Set || v instanceof WeakMap || v instanceof WeakSet) {
      throw new EncodeError(p, `a ${v.constructor.name}`);
    }
    open.add(v);
    try {
      if (Array.isArray(v)) {
        return Array.from(v, (item, i) => {
          const copy = walk(item, `${p}[${i}]`);
          return copy === undefined ? null : copy;
        });
      }
      const out = {};
      for (const [key, item] of Object.entries(v)) {
        const copy = walk(item, member(p, key));
        if (copy !== undefined) out[key] = copy;
      }
      return out;
    } finally {
      open.delete(v);
    }
  };
  return walk(value, path);
}

/** `JSON.stringify(message)`, or the `EncodeError` naming what it cannot hold. */
export function stringify(message) {
  return JSON.stringify(encode(message));
}
