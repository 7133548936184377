// Model-facing results in the trace's shape, and the errors scripted parts throw.

/** A text content block. */
export const textBlock = (text) => ({ type: 'text', text });

/** The text of content blocks, joined by newlines. */
/** The texts of a content's text blocks, joined (a block of another type, an image, has none). */
export const contentText = (content) =>
  (content ?? [])
    .filter((b) => b?.type === undefined || b.type === 'text')
    .map((b) => b.text ?? '')
    .join('\n');

/**
 * How a tool definition renders a body's value: a string as is, other JSON pretty-printed with
 * two spaces (the scripted definition's job, so the adapter's).
 */
export const render = (value) => (typeof value === 'string' ? value : JSON.stringify(value, null, 2));

/** A scripted `{"throw": message}`: the part throws with exactly this message. */
export class ScriptError extends Error {
  constructor(message) {
    super(message);
    this.name = 'ScriptError';
  }
}

/**
 * What a body throws when it stops because its signal was aborted. `name` and `code` follow the
 * harness convention for an abort (`AbortError`, `ABORTED`), so a pipeline that normalizes coded
 * errors reports the reference's error info.
 */
export class CancelledError extends Error {
  constructor(message = 'tool call was cancelled') {
    super(message);
    this.name = 'AbortError';
    this.code = 'ABORTED';
  }
}

/** A failed result: `Error: <message>` with `error.message` (and `error.info` when coded). */
export function failure(message, info) {
  return {
    isError: true,
    content: [textBlock(`Error: ${message}`)],
    error: info ? { message, info } : { message },
  };
}

/** The result a timeout wrapper returns when its own deadline fired. */
export const timeoutResult = (ms) =>
  failure(`tool call timed out after ${ms}ms`, { name: 'ToolTimeoutError', code: 'TOOL_TIMEOUT' });

/**
 * The message of anything thrown: `Error.message`, else a string `message` property, else
 * `String(x)`, else `<unprintable thrown value>` (the original harness's rule).
 */
export function messageOf(thrown) {
  if (thrown instanceof Error) return thrown.message;
  if (thrown && typeof thrown.message === 'string') return thrown.message;
  try {
    return String(thrown);
  } catch {
    return '<unprintable thrown value>';
  }
}
