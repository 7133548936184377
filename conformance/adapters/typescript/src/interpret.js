// Interpreters: each script of a scenario as a callable in the kit's hook idiom, recording what
// only the scripted part can see (listeners entered, guard verdicts, the body's start and end,
// the approval answer, finalizeContent's candidate, observer and binding marks).
//
// The idiom (decisions shaped like the original harness's; every shape can be changed with the
// build hooks of `ScriptsOptions`, and `sync: true` returns plain values where the harness does):
//   pre-execute listener   (call, next) => {type: 'allow'} | {type: 'deny', reason} | {type: 'ask', reason?}
//   approval answerer      ({callId, toolName, reason}) => 'allowed-once' | 'rejected' | 'cancelled' | 'unavailable'
//   guard                  (call) => undefined | {type: 'deny', reason} | {type: 'allow'}
//   wrapper                async (call, next, signal) => result      (next(signal) dispatches)
//   body                   async (call, signal, effects) => value    (a JSON value, not content)
//   post-execute listener  (call, result, next) => {type: 'accept', content?, value?, additionalContexts?} | {type: 'block', feedback, additionalContexts?}
//   observer               (call, result) => Promise<void>           (not awaited by a rev2 pipeline)
//   finalizeContent        (call, candidate) => content | undefined  (synchronous), or (content) => content | undefined
//   program                async (call, bindings) => {logs, value?}  (bindings.call(tool, args)), or as source
//   `next` is always called with no arguments (a wrapper's with the signal): wrap your pipeline's
//   `next` if it takes the call.

import { setTimeout as sleep } from 'node:timers/promises';
import { after, inMode } from './hooks.js';
import { actionFor, Scenario, subCallId } from './scenario.js';
import { CancelledError, ScriptError, textBlock, timeoutResult, contentText } from './results.js';

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The one key of a `{"kind": payload}` action, or the string action itself. */
function kindOf(action) {
  if (typeof action === 'string') return [action, undefined];
  if (isObject(action)) {
    const [key] = Object.keys(action);
    return [key, action[key]];
  }
  return [undefined, undefined];
}

/** Resolves when `signal` aborts. */
function aborted(signal) {
  if (!signal) return new Promise(() => {});
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/** Waits `ms`, or fails as cancelled if `signal` aborts first. */
async function cancellableSleep(ms, signal) {
  if (signal?.aborted) throw new CancelledError();
  const timer = new AbortController();
  const onAbort = () => timer.abort();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await sleep(ms, undefined, { signal: timer.signal });
  } catch (error) {
    if (signal?.aborted) throw new CancelledError();
    throw error;
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}

/** A call's id as the scripts name it. */
const named = (fn, id) => Object.defineProperty(fn, 'id', { value: id, enumerable: true });

/**
 * The promise an asynchronous kit hook returns, noting whether anyone took its value: `await`,
 * `.then`, `.catch`, `.finally`, `Promise.resolve` and `Promise.all` all call `then` (a subclass
 * is not adopted as is). One nobody took is a synchronous pipeline calling an asynchronous hook.
 */
class Watched extends Promise {
  static get [Symbol.species]() {
    return Promise;
  }

  taken = false;

  then(onFulfilled, onRejected) {
    this.taken = true;
    return super.then(onFulfilled, onRejected);
  }
}

/** The kit's own defaults for every build hook: the shapes of the example pipeline. */
const DEFAULTS = {
  rewrite: (args) => ({ type: 'allow', updatedInput: args }),
  preDecision: (decision) => decision,
  guardVerdict: (verdict) => verdict,
  approvalOutcome: (outcome) => outcome,
  postDecision: (decision) => decision,
  addContext: (decision, context) => ({ ...decision, additionalContexts: [...(decision?.additionalContexts ?? []), context] }),
  context: (text, origin) => (origin === 'post' ? text : { origin, text }),
  content: (text) => [textBlock(text)],
  result: (result) => result,
  withContext: (result, context) => ({ ...result, additionalContexts: [...(result?.additionalContexts ?? []), context] }),
  isError: (result) => result?.isError === true,
  signal: (signal) => signal,
  readSignal: (signal) => signal,
};

/**
 * Every script of a scenario as a callable. Build one per run, with that run's recorder.
 */
export class Scripts {
  #attempts = new Map();
  #sync;
  #hooks;
  /** What the asynchronous hooks returned: `{promise, what}`, checked by `unawaited()`. */
  #returned = [];

  /**
   * @param {Scenario|object} scenario
   * @param {import('./recorder.js').Recorder} recorder
   * @param {object} [options] see `ScriptsOptions` in index.d.ts: `sync`, `finalizer`, and the
   *   build hooks (`rewrite`, `preDecision`, `guardVerdict`, `approvalOutcome`, `postDecision`,
   *   `addContext`, `context`, `content`, `result`, `withContext`, `isError`, `signal`, `readSignal`)
   */
  constructor(scenario, recorder, options = {}) {
    this.scenario = scenario instanceof Scenario ? scenario : new Scenario(scenario);
    this.recorder = recorder;
    this.#sync = options.sync === true;
    this.#hooks = { ...DEFAULTS };
    for (const key of Object.keys(DEFAULTS)) if (typeof options[key] === 'function') this.#hooks[key] = options[key];
    this.rewrite = this.#hooks.rewrite;
    this.finalizerForm = options.finalizer === 'content' ? 'content' : 'call';
  }

  #id(call) {
    return this.recorder.callIdOf(call);
  }

  /**
   * `fn` in the kit's mode: as it is when `sync`, else returning a promise whose taking is
   * watched (see `unawaited`). `what` names the hook in the message.
   */
  #hook(what, fn) {
    if (this.#sync) return fn;
    const returned = this.#returned;
    const asynchronous = inMode(false, fn);
    return function (...args) {
      const promise = new Watched((resolve, reject) => asynchronous.apply(this, args).then(resolve, reject));
      returned.push({ promise, what });
      return promise;
    };
  }

  /**
   * What your pipeline called without awaiting: one message per hook whose promise nobody took
   * (a synchronous pipeline reads the promise itself as the verdict). `runScenario` answers
   * `errored` with them.
   */
  unawaited() {
    const hooks = [...new Set(this.#returned.filter(({ promise }) => !promise.taken).map(({ what }) => what))];
    return hooks.map(
      (what) =>
        `your pipeline called ${what} without awaiting the promise it returned: that hook of yours is synchronous, ` +
        'so serve({sync: true, …}) to have the kit\'s hooks return plain values (or await what they return)',
    );
  }

  #name(call) {
    return call !== null && typeof call === 'object' ? this.recorder.identify(call).name : undefined;
  }

  // ------------------------------------------------------------------------------------------
  // Tools

  /**
   * The tool definitions: `{name, concurrencySafe, timeoutMs?, finalizeContent?}`, with
   * `finalizeContent` in the form `ScriptsOptions.finalizer` asks for.
   */
  get tools() {
    return this.scenario.tools.map((t) => ({
      name: t.name,
      concurrencySafe: t.concurrencySafe,
      timeoutMs: t.timeoutMs,
      finalizeContent:
        t.finalize === undefined
          ? undefined
          : this.finalizerForm === 'content'
            ? this.contentFinalizer(t.finalize, t.name)
            : this.finalizer(t.finalize),
    }));
  }

  /** The content of a finalized candidate: the scripted action applied to `blocks`. */
  #finalized(kind, payload, blocks) {
    const build = this.#hooks.content;
    if (kind === 'prefix') return blocks.flatMap((b) => build(`${payload}${b.text ?? ''}`));
    if (kind === 'replace') return build(payload);
    return undefined;
  }

  /** A tool's `finalizeContent(call, candidate)`: records `finalize` with its candidate, or its throw. */
  finalizer(action) {
    const rec = this.recorder;
    return (call, candidate) => {
      const [kind, payload] = kindOf(action);
      if (kind === 'throw') {
        const error = new ScriptError(payload);
        rec.onFinalize(call, { candidate, error });
        throw error;
      }
      rec.onFinalize(call, { candidate });
      return this.#finalized(kind, payload, this.#blocks(candidate?.content));
    };
  }

  /**
   * A tool's content-only `finalizeContent(content)` (the doc's form): records `finalize` for the
   * call of `toolName` whose commit is under way (see `Recorder.committingCall`), with no candidate
   * result, since it is handed none.
   */
  contentFinalizer(action, toolName) {
    const rec = this.recorder;
    return (content) => {
      const call = rec.committingCall(toolName);
      const [kind, payload] = kindOf(action);
      if (kind === 'throw') {
        const error = new ScriptError(payload);
        if (call !== undefined) rec.onFinalize(call, { error, contentOnly: true });
        throw error;
      }
      if (call !== undefined) rec.onFinalize(call, { contentOnly: true });
      return this.#finalized(kind, payload, this.#blocks(content));
    };
  }

  /** Content as the kit reads it (text blocks), through the recorder's `toResult`. */
  #blocks(content) {
    if (typeof content === 'string') return [textBlock(content)];
    try {
      return this.recorder.toResult({ isError: false, content }).content;
    } catch {
      return Array.isArray(content) ? content : [];
    }
  }

  /**
   * The body of every call: runs the steps the scenario gives the call (or sub-call), with
   * `effects` doing what touches the harness (fs, todos, hooks, deferred contexts). Records
   * `toolBody` at its start and `body-settled` when its steps end, however they end. Resolves
   * with the call's JSON value (a `return` step's, else `"ok"`), not content: the tool
   * definition renders it (`render`).
   */
  get body() {
    return (call, signal, effects = {}) => {
      const id = this.#id(call);
      const attempt = (this.#attempts.get(id) ?? 0) + 1;
      this.#attempts.set(id, attempt);
      const steps = this.scenario.body(id);
      const abort = this.#hooks.readSignal(signal);
      return this.recorder.runBody(call, () => runSteps(steps, abort, effects, attempt, this.recorder));
    };
  }

  /** How many times each call's body was dispatched. */
  attempts(callId) {
    return this.#attempts.get(callId) ?? 0;
  }

  // ------------------------------------------------------------------------------------------
  // Prepare

  #needNext(kind, id, next) {
    if (typeof next === 'function') return;
    this.recorder.problem(
      `the ${kind} listener ${id} was handed ${next === undefined ? 'no next' : typeof next} where its next belongs: ` +
        `the kit's ${kind} listeners are ${kind === 'post-execute' ? '(call, result, next)' : '(call, next)'} and call ` +
        'next() with no arguments; wrap them to your listener shape',
    );
    throw new TypeError(`${kind} listener ${id}: next is not a function`);
  }

  /** The `tools/pre-execute` listeners, in registration order (each has its `id`). */
  get preListeners() {
    const h = this.#hooks;
    return this.scenario.pre.map((listener) =>
      named(
        this.#hook(`the pre-execute listener ${listener.id} (scripts.preListeners)`, (call, next) =>
          this.recorder.frame(
            'pre',
            call,
            () => {
              this.recorder.onListenerEntered(call, 'pre', listener.id);
              const [kind, payload] = kindOf(actionFor(listener.decide, this.#id(call), 'pass'));
              switch (kind) {
                case 'allow':
                  return h.preDecision({ type: 'allow' }, call);
                case 'deny':
                  return h.preDecision({ type: 'deny', reason: payload }, call);
                case 'ask':
                  return h.preDecision(payload === null || payload === undefined ? { type: 'ask' } : { type: 'ask', reason: payload }, call);
                case 'rewrite':
                  return h.rewrite(payload, call);
                case 'throw':
                  throw new ScriptError(payload);
                default:
                  this.#needNext('pre-execute', listener.id, next);
                  return next();
              }
            },
            (s) => this.recorder.onPreExecute(call, Object.hasOwn(s, 'error') ? { error: s.error } : { decision: s.value }),
          ),
        ),
        listener.id,
      ),
    );
  }

  /**
   * The approval answerer (`undefined` when the scenario mounts none): answers per call and
   * records the `approval` stage (see `Recorder.onApproval`). It is handed
   * `{callId, toolName?, reason?}` or the call object.
   */
  get approval() {
    const approval = this.scenario.approval;
    if (!approval) return undefined;
    return this.#hook('the approval answerer (scripts.approval)', (request) => {
      const callId = typeof request?.callId === 'string' ? request.callId : this.#id(request);
      const [kind, payload] = kindOf(actionFor(approval.answers, callId, 'rejected'));
      if (kind === 'throw') {
        const error = new ScriptError(payload);
        this.recorder.onApproval(callId, { error });
        throw error;
      }
      this.recorder.onApproval(callId, { outcome: kind });
      return this.#hooks.approvalOutcome(kind, request);
    });
  }

  /** The monotonic guards, in registration order (each has its `id`); each reports its verdict. */
  get guards() {
    const h = this.#hooks;
    return this.scenario.guards.map((guard) =>
      named(
        this.#hook(`the guard ${guard.id} (scripts.guards)`, (call) => {
          const [kind, payload] = kindOf(actionFor(guard.decide, this.#id(call), 'abstain'));
          switch (kind) {
            case 'deny':
              this.recorder.onGuardVerdict(call, guard.id, { verdict: 'deny', reason: payload });
              return h.guardVerdict({ type: 'deny', reason: payload }, call);
            case 'allow':
              this.recorder.onGuardVerdict(call, guard.id, { verdict: 'allow' });
              return h.guardVerdict({ type: 'allow' }, call);
            case 'throw': {
              const error = new ScriptError(payload);
              this.recorder.onGuardVerdict(call, guard.id, { error });
              throw error;
            }
            default:
              this.recorder.onGuardVerdict(call, guard.id, { verdict: 'abstain' });
              return h.guardVerdict(undefined, call);
          }
        }),
        guard.id,
      ),
    );
  }

  // ------------------------------------------------------------------------------------------
  // Execute

  /** The `tools/execute` wrappers, outermost first. */
  get wrappers() {
    return this.scenario.wrappers.map((spec) => this.wrapper(spec));
  }

  /**
   * One wrapper: `timeout`, `retry`, `metrics`, `context` or `throw`. Each passes `next` the
   * signal it was handed, except `timeout`, which passes a signal of the harness's type
   * (`ScriptsOptions.signal`) that aborts at the deadline.
   */
  wrapper(spec) {
    const h = this.#hooks;
    const applies = (call) => !spec.calls || spec.calls.length === 0 || spec.calls.includes(this.#id(call));
    switch (spec.kind) {
      case 'timeout':
        return named(async (call, next, signal) => {
          const limit = this.scenario.tool(this.#name(call))?.timeoutMs;
          if (limit === undefined) return next(signal);
          const outer = h.readSignal(signal);
          const deadline = new AbortController();
          const forward = () => deadline.abort(outer.reason);
          if (outer?.aborted) deadline.abort(outer.reason);
          else outer?.addEventListener('abort', forward, { once: true });
          let fired = false;
          const timer = setTimeout(() => {
            fired = true;
            deadline.abort(new CancelledError(`tool call timed out after ${limit}ms`));
          }, limit);
          try {
            // Cooperative cancellation: wait for the body to stop, never abandon it.
            const result = await next(h.signal(deadline.signal, signal));
            return fired && !outer?.aborted ? h.result(timeoutResult(limit), call) : result;
          } finally {
            clearTimeout(timer);
            outer?.removeEventListener('abort', forward);
          }
        }, 'timeout');
      case 'retry':
        return named(async (call, next, signal) => {
          const attempts = Math.max(1, spec.attempts ?? 1);
          let result = await next(signal);
          for (let n = 1; n < attempts && h.isError(result) && !h.readSignal(signal)?.aborted; n++) {
            await sleep(spec.delayMs ?? 0);
            result = await next(signal);
          }
          return result;
        }, 'retry');
      case 'metrics': {
        const counts = new Map();
        return named(async (call, next, signal) => {
          const result = await next(signal);
          const name = this.#name(call);
          counts.set(name, (counts.get(name) ?? 0) + 1);
          return result;
        }, 'metrics');
      }
      case 'context':
        return named(async (call, next, signal) => {
          const result = await next(signal);
          if (!applies(call)) return result;
          return h.withContext(result, h.context(spec.text, 'wrapper'), call);
        }, 'context');
      case 'throw':
        return named(async (call, next, signal) => {
          if (!applies(call)) return next(signal);
          if ((spec.phase ?? 'after') === 'after') await next(signal);
          throw new ScriptError(spec.message);
        }, 'throw');
      default:
        throw new TypeError(`unknown wrapper kind ${JSON.stringify(spec.kind)}`);
    }
  }

  // ------------------------------------------------------------------------------------------
  // Commit

  /** The `tools/post-execute` listeners, in registration order (each has its `id`). */
  get postListeners() {
    const h = this.#hooks;
    return this.scenario.post.map((listener) =>
      named(
        this.#hook(`the post-execute listener ${listener.id} (scripts.postListeners)`, (call, result, next) =>
          this.recorder.frame(
            'post',
            call,
            () => {
              this.recorder.onListenerEntered(call, 'post', listener.id);
              const [kind, payload] = kindOf(actionFor(listener.decide, this.#id(call), 'pass'));
              switch (kind) {
                case 'addContext':
                  this.#needNext('post-execute', listener.id, next);
                  return after(
                    () => next(),
                    (decision) => h.addContext(decision, h.context(payload, 'post'), call, result),
                  );
                case 'accept': {
                  const decision = { type: 'accept', additionalContexts: [] };
                  if (payload.content !== undefined && payload.content !== null) decision.content = h.content(payload.content);
                  if (payload.value !== undefined && payload.value !== null) decision.value = payload.value;
                  if (payload.context !== undefined && payload.context !== null) decision.additionalContexts.push(h.context(payload.context, 'post'));
                  return h.postDecision(decision, call, result);
                }
                case 'block': {
                  const decision = { type: 'block', feedback: h.content(payload.feedback), additionalContexts: [] };
                  if (payload.context !== undefined && payload.context !== null) decision.additionalContexts.push(h.context(payload.context, 'post'));
                  return h.postDecision(decision, call, result);
                }
                case 'throw':
                  throw new ScriptError(payload);
                default:
                  this.#needNext('post-execute', listener.id, next);
                  return next();
              }
            },
            (s) =>
              this.recorder.onPostExecute(call, Object.hasOwn(s, 'error') ? { result, error: s.error } : { result, decision: s.value }),
          ),
        ),
        listener.id,
      ),
    );
  }

  /**
   * The `tools/result` observers (each has its `id`), called synchronously. Each first tries to
   * replace the content of the outcome it was handed (with `mutate`; a frozen outcome refuses,
   * and that is ignored), then starts work taking `asyncMs` that records `observer-settled`. The
   * work is tracked by the recorder (the trace waits for it) and returned, for a pipeline that
   * awaits observers (rev1); a pipeline that does not can ignore it.
   */
  get observers() {
    return this.scenario.observers.map((observer) =>
      named((call, result) => {
        if (observer.mutate !== undefined) {
          try {
            result.content = this.#hooks.content(observer.mutate);
          } catch {
            // The outcome is frozen: the attempt fails, as it should.
          }
        }
        const work = sleep(observer.asyncMs).then(() =>
          this.recorder.onObserverSettled(call, observer.id, observer.asyncMs),
        );
        return this.recorder.track(work);
      }, observer.id),
    );
  }

  // ------------------------------------------------------------------------------------------
  // Code Mode

  /**
   * The program of a `run_code` call, run against `bindings` (`bindings.call(tool, args)`
   * resolves with the sub-call's value or rejects with `{toolName, message}`). Records
   * `toolBody` when it starts, a binding mark as each binding settles (numbering the sub-calls
   * `<callId>:code:<n>` in issue order), and `body-settled` (`by: "program"`) when it ends.
   * Resolves with `{logs, value?}`; a failure rejects.
   */
  get program() {
    return (call, bindings) => {
      const parent = this.#id(call);
      const steps = this.scenario.program(parent) ?? [];
      if (typeof bindings?.call !== 'function') {
        this.recorder.problem(
          `scripts.program was handed ${bindings === undefined ? 'no bindings' : 'bindings without call(tool, args)'} for ` +
            `call ${parent}: pass {call: (tool, args) => promise}, or run the program in your own runner with ` +
            'scripts.programSource(call) and recorder.runProgram',
        );
      }
      return this.recorder.runBody(call, () => runProgram(steps, parent, bindings, this.recorder), { by: 'program' });
    };
  }

  /**
   * The program of a `run_code` call as JavaScript source, for a harness whose Code Mode runner
   * interprets programs itself (and numbers its sub-calls itself): the body of an async function
   * that calls each tool as `<tools>.<name>(args)` (`<tools>["name"]`), logs with `<log>(line)`
   * and returns the program's value. Its log lines and value are what the protocol asks for
   * (`programContent`). The kit records nothing here: run it inside `recorder.runProgram(call,
   * …)` and report each binding's settlement, under your sub-call id, with
   * `recorder.onBindingSettled(subCall, {rejection?})`.
   * @param {object} call the `run_code` call (or its id)
   * @param {{tools?: string, log?: string}} [options] the names in the program's scope
   */
  programSource(call, { tools = 'tools', log = 'console.log' } = {}) {
    const parent = this.#id(call);
    return programSource(this.scenario.program(parent) ?? [], { tools, log });
  }
}

/** Runs a body's steps; resolves with its value (`"ok"` without `return`). */
async function runSteps(steps, signal, effects, attempt, recorder) {
  for (const step of steps) {
    const [kind, payload] = kindOf(step);
    switch (kind) {
      case 'sleep':
        await cancellableSleep(payload, signal);
        break;
      case 'hang':
        await aborted(signal);
        throw new CancelledError();
      case 'slowStop':
        await aborted(signal);
        await sleep(payload);
        throw new CancelledError();
      case 'read':
        await need(effects, 'read', recorder)(payload);
        break;
      case 'write':
        await need(effects, 'write', recorder)(payload.path, payload.content);
        break;
      case 'edit':
        await need(effects, 'edit', recorder)(payload.path, payload.old, payload.new);
        break;
      case 'externalWrite':
        await need(effects, 'externalWrite', recorder)(payload.path, payload.content);
        break;
      case 'todo':
        await need(effects, 'todo', recorder)(payload);
        break;
      case 'hook':
        await need(effects, 'hook', recorder)(payload);
        break;
      case 'deferContext':
        await need(effects, 'deferContext', recorder)(payload);
        break;
      case 'failUntilAttempt':
        if (attempt < payload) throw new ScriptError(`attempt ${attempt} fails`);
        break;
      case 'return':
        return payload;
      case 'throw':
        throw new ScriptError(payload);
      default:
        throw new TypeError(`unknown body step ${JSON.stringify(step)}`);
    }
  }
  return 'ok';
}

const EFFECT_ARGS = {
  read: '(path)',
  write: '(path, content)',
  edit: '(path, old, replacement)',
  externalWrite: '(path, content)',
  todo: '(todos)',
  hook: '({point, handlerId, decision})',
  deferContext: '(text)',
};

function need(effects, name, recorder) {
  const effect = effects?.[name];
  if (typeof effect === 'function') return effect;
  const message =
    `the body needs effects.${name}${EFFECT_ARGS[name]} for this step: pass it in ` +
    `scripts.body(call, signal, {${name}: …}), doing what your harness does for it`;
  recorder?.problem(message);
  throw new TypeError(message);
}

/** How a binding's value is logged: a string as is, other JSON compact. */
const shown = (value) => (typeof value === 'string' ? value : JSON.stringify(value));

/** `<toolName>: <message>`, how a rejection reads. */
const rejectionText = (rejection) => `${rejection?.toolName}: ${rejection?.message ?? String(rejection)}`;

/** Runs a program's steps against the bindings. */
async function runProgram(steps, parent, bindings, recorder) {
  const logs = [];
  let issued = 0;
  // Records how a binding settled and logs it; returns the failure to raise, if any.
  const settle = (id, call, outcome) => {
    if (outcome.status === 'fulfilled') {
      recorder.onBindingSettled(id);
      logs.push(`${call.tool} -> ${shown(outcome.value)}`);
      return undefined;
    }
    recorder.onBindingSettled(id, { rejection: outcome.reason });
    logs.push(`${call.tool} rejected: ${rejectionText(outcome.reason)}`);
    return (call.onReject ?? 'continue') === 'fail' ? new ScriptError(rejectionText(outcome.reason)) : undefined;
  };
  // A binding that throws instead of rejecting still settles the program's call.
  const issue = (tool, args) => {
    try {
      return bindings.call(tool, args);
    } catch (error) {
      return Promise.reject(error);
    }
  };
  for (const step of steps) {
    const [kind, payload] = kindOf(step);
    switch (kind) {
      case 'call': {
        const id = subCallId(parent, ++issued);
        const [outcome] = await Promise.allSettled([issue(payload.tool, payload.arguments ?? {})]);
        const failure = settle(id, payload, outcome);
        if (failure) throw failure;
        break;
      }
      case 'all': {
        const ids = payload.map(() => subCallId(parent, ++issued));
        const outcomes = await Promise.allSettled(payload.map((c) => issue(c.tool, c.arguments ?? {})));
        // Every binding of the group settles before the program reacts to a rejection.
        const failures = outcomes.map((outcome, k) => settle(ids[k], payload[k], outcome));
        const failure = failures.find(Boolean);
        if (failure) throw failure;
        break;
      }
      case 'callRunCode':
        try {
          await issue('run_code', {});
        } catch (rejection) {
          logs.push(`run_code rejected: ${rejectionText(rejection)}`);
        }
        break;
      case 'log':
        logs.push(payload);
        break;
      case 'return':
        return { logs, value: payload };
      case 'throw':
        throw new ScriptError(payload);
      default:
        throw new TypeError(`unknown program step ${JSON.stringify(step)}`);
    }
  }
  return { logs };
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/**
 * A program's steps as JavaScript source (see `Scripts.programSource`): the body of an async
 * function with `tools` and `log` (by those names, or the ones given) in scope.
 */
export function programSource(steps, { tools = 'tools', log = 'console.log' } = {}) {
  const lit = (v) => JSON.stringify(v);
  const callOf = (c) => `${tools}${IDENTIFIER.test(c.tool) ? `.${c.tool}` : `[${lit(c.tool)}]`}(${lit(c.arguments ?? {})})`;
  const lines = [
    `const shown = (v) => (typeof v === 'string' ? v : JSON.stringify(v));`,
    `const rejected = (e) => String(e?.toolName) + ': ' + (e?.message ?? String(e));`,
    `const settle = (tool, outcome, fail) => {`,
    `  if (outcome.status === 'fulfilled') { ${log}(tool + ' -> ' + shown(outcome.value)); return undefined; }`,
    `  ${log}(tool + ' rejected: ' + rejected(outcome.reason));`,
    `  return fail ? new Error(rejected(outcome.reason)) : undefined;`,
    `};`,
  ];
  for (const step of steps) {
    const [kind, payload] = kindOf(step);
    switch (kind) {
      case 'call':
        lines.push(
          `{ const [o] = await Promise.allSettled([${callOf(payload)}]);`,
          `  const f = settle(${lit(payload.tool)}, o, ${payload.onReject === 'fail'}); if (f) throw f; }`,
        );
        break;
      case 'all':
        lines.push(
          `{ const os = await Promise.allSettled([${payload.map(callOf).join(', ')}]);`,
          `  const fs = [${payload.map((c, k) => `settle(${lit(c.tool)}, os[${k}], ${c.onReject === 'fail'})`).join(', ')}];`,
          `  const f = fs.find(Boolean); if (f) throw f; }`,
        );
        break;
      case 'callRunCode':
        lines.push(`try { await ${callOf({ tool: 'run_code', arguments: {} })}; } catch (e) { ${log}('run_code rejected: ' + rejected(e)); }`);
        break;
      case 'log':
        lines.push(`${log}(${lit(payload)});`);
        break;
      case 'return':
        lines.push(`return ${lit(payload)};`);
        break;
      case 'throw':
        lines.push(`throw new Error(${lit(payload)});`);
        break;
      default:
        throw new TypeError(`unknown program step ${JSON.stringify(step)}`);
    }
  }
  return lines.join('\n');
}

/** The model-facing text of a program's output: the logs, then the value, joined by newlines. */
export function programContent({ logs = [], value } = {}) {
  const parts = [...logs];
  if (value !== undefined) parts.push(typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return parts.length === 0 ? '(run_code completed with no output)' : parts.join('\n');
}

export { contentText };
