// Tool results, the errors the pipeline raises, and how anything thrown becomes a result.

/** An error the harness raises on purpose: it carries `{name, code}` into the result's `error.info`. */
export class HarnessError extends Error {
  constructor(code, name, message) {
    super(message);
    this.code = code;
    this.errorName = name;
  }
}

export const text = (t) => ({ type: 'text', text: t });
export const contentText = (content) => content.map((b) => b.text).join('\n');

/** Strings as they are, other JSON pretty-printed with two spaces. */
export const renderValue = (value) => [text(typeof value === 'string' ? value : JSON.stringify(value, null, 2))];

export const success = (value, content) => ({ isError: false, value, content });

export function failure(message, info) {
  return { isError: true, content: [text(`Error: ${message}`)], error: info ? { message, info } : { message } };
}

function messageOf(thrown) {
  if (thrown instanceof Error) return thrown.message;
  if (typeof thrown?.message === 'string') return thrown.message;
  try {
    return String(thrown);
  } catch {
    return '<unprintable thrown value>';
  }
}

/** Normalization: whatever was thrown becomes an `isError` result; coded errors keep their code. */
export function fromThrown(thrown) {
  const code = typeof thrown?.code === 'string' ? thrown.code : undefined;
  const name = thrown?.errorName ?? thrown?.name;
  return failure(messageOf(thrown), code ? { name, code } : undefined);
}

/** Freezes a value and everything it holds. */
export function deepFreeze(value) {
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}

/** A detached, frozen copy of a JSON value. */
export const snapshot = (value) => deepFreeze(structuredClone(value));
