// Code Mode: the reserved `run_code` tool runs a program whose binding calls re-enter the
// pipeline as sub-calls, one at a time, in the order the program issued them.
import vm from 'node:vm';

export const RUN_CODE = 'run_code';

/** What a program sees when a binding call is denied or fails: the tool and a message, nothing else. */
export class ToolCallError extends Error {
  constructor(toolName, message) {
    super(message);
    this.toolName = toolName;
  }
}
// On the prototype, so the rejection's own fields stay exactly `toolName` and `message`.
ToolCallError.prototype.name = 'ToolCallError';

/**
 * The bindings of one `run_code` execution. `runSubCall(n, tool, args)` runs the n-th sub-call
 * through the pipeline; calls issued together still run one at a time, in submission order.
 */
export function bindingsFor(runSubCall) {
  let issued = 0;
  let lane = Promise.resolve();
  const call = (tool, args = {}) => {
    if (tool === RUN_CODE) {
      return Promise.reject(new ToolCallError(RUN_CODE, 'run_code is not available to programs'));
    }
    const n = ++issued;
    const turn = lane.then(() => runSubCall(n, tool, args));
    lane = turn.then(
      () => undefined,
      () => undefined,
    );
    return turn;
  };
  // `tools.<name>(args)` for programs written as source.
  const tools = new Proxy({}, { get: (_, name) => (args) => call(String(name), args) });
  return { call, tools };
}

/** The model-facing text of a program's run: its log lines, then its value. */
export function programText({ logs = [], value } = {}) {
  const parts = [...logs];
  if (value !== undefined) parts.push(typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return parts.length > 0 ? parts.join('\n') : '(run_code completed with no output)';
}

/**
 * The default program loader: `run_code` arguments `{code}` are the body of an async function
 * with `tools` and `console` in scope. (node:vm is not a security boundary: this runs the
 * model's code as trusted code, which is what a conformance example can afford.)
 */
export function sourceProgram(exec) {
  const code = typeof exec.arguments?.code === 'string' ? exec.arguments.code : '';
  return async (bindings) => {
    const logs = [];
    const show = (x) => (typeof x === 'string' ? x : JSON.stringify(x));
    const console = { log: (...parts) => logs.push(parts.map(show).join(' ')) };
    const value = await vm.runInNewContext(`(async () => {\n${code}\n})()`, { tools: bindings.tools, console });
    return { logs, value };
  };
}
