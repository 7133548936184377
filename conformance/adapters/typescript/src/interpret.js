// Interpreters: each script of a scenario as a callable in the kit's hook idiom, recording what
// only the scripted part can see (listeners entered, guard verdicts, the body's start and end,
// the approval answer, finalizeContent's candidate, observer and binding marks).
//
// The idiom (decisions shaped like the original harness's):
//   pre-execute listener   async (call, next) => {type: 'allow'} | {type: 'deny', reason} | {type: 'ask', reason?}
//   approval answerer      async ({callId, toolName, reason}) => 'allowed-once' | 'rejected' | 'cancelled' | 'unavailable'
//   guard                  async (call) => undefined | {type: 'deny', reason} | {type: 'allow'}
//   wrapper                async (call, next, signal) => result      (next(signal) dispatches)
//   body                   async (call, signal, effects) => value
//   post-execute listener  async (call, result, next) => {type: 'accept', content?, value?, additionalContexts?} | {type: 'block', feedback, additionalContexts?}
//   observer               (call, result) => Promise<void>           (not awaited by a rev2 pipeline)
//   finalizeContent        (call, candidate) => content | undefined  (synchronous)
//   program                async (call, bindings) => {logs, value?}  (bindings.call(tool, args))

import { setTimeout as sleep } from 'node:timers/promises';
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
 * Every script of a scenario as a callable. Build one per run, with that run's recorder.
 */
export class Scripts {
  #attempts = new Map();

  /**
   * @param {Scenario|object} scenario
   * @param {import('./recorder.js').Recorder} recorder
   * @param {object} [options]
   * @param {(args: unknown) => object} [options.rewrite] the decision a `{"rewrite": args}` pre action returns
   */
  constructor(scenario, recorder, options = {}) {
    this.scenario = scenario instanceof Scenario ? scenario : new Scenario(scenario);
    this.recorder = recorder;
    this.rewrite = options.rewrite ?? ((args) => ({ type: 'allow', updatedInput: args }));
  }

  #id(call) {
    return this.recorder.callIdOf(call);
  }

  #name(call) {
    return typeof call === 'object' ? this.recorder.identify(call).name : undefined;
  }

  // ------------------------------------------------------------------------------------------
  // Tools

  /** The tool definitions: `{name, concurrencySafe, timeoutMs?, finalizeContent?}`. */
  get tools() {
    return this.scenario.tools.map((t) => ({
      name: t.name,
      concurrencySafe: t.concurrencySafe,
      timeoutMs: t.timeoutMs,
      finalizeContent: t.finalize === undefined ? undefined : this.finalizer(t.finalize),
    }));
  }

  /** A tool's `finalizeContent`: records `finalize` with its candidate, or its throw. */
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
      if (kind === 'prefix') return (candidate.content ?? []).map((b) => textBlock(`${payload}${b.text}`));
      if (kind === 'replace') return [textBlock(payload)];
      return undefined;
    };
  }

  /**
   * The body of every call: runs the steps the scenario gives the call (or sub-call), with
   * `effects` doing what touches the harness (fs, todos, hooks, deferred contexts). Records
   * `toolBody` at its start and `body-settled` when its steps end, however they end.
   */
  get body() {
    return (call, signal, effects = {}) => {
      const id = this.#id(call);
      const attempt = (this.#attempts.get(id) ?? 0) + 1;
      this.#attempts.set(id, attempt);
      const steps = this.scenario.body(id);
      return this.recorder.runBody(call, () => runSteps(steps, signal, effects, attempt));
    };
  }

  /** How many times each call's body was dispatched. */
  attempts(callId) {
    return this.#attempts.get(callId) ?? 0;
  }

  // ------------------------------------------------------------------------------------------
  // Prepare

  /** The `tools/pre-execute` listeners, in registration order (each has its `id`). */
  get preListeners() {
    return this.scenario.pre.map((listener) =>
      named(async (call, next) => {
        this.recorder.onListenerEntered(call, 'pre', listener.id);
        const [kind, payload] = kindOf(actionFor(listener.decide, this.#id(call), 'pass'));
        switch (kind) {
          case 'allow':
            return { type: 'allow' };
          case 'deny':
            return { type: 'deny', reason: payload };
          case 'ask':
            return payload === null || payload === undefined ? { type: 'ask' } : { type: 'ask', reason: payload };
          case 'rewrite':
            return this.rewrite(payload);
          case 'throw':
            throw new ScriptError(payload);
          default:
            return next();
        }
      }, listener.id),
    );
  }

  /**
   * The approval answerer (`undefined` when the scenario mounts none): answers per call and
   * records the `approval` stage (see `Recorder.onApproval`).
   */
  get approval() {
    const approval = this.scenario.approval;
    if (!approval) return undefined;
    return async (request) => {
      const callId = request.callId ?? this.#id(request);
      const [kind, payload] = kindOf(actionFor(approval.answers, callId, 'rejected'));
      if (kind === 'throw') {
        const error = new ScriptError(payload);
        this.recorder.onApproval(callId, { error });
        throw error;
      }
      this.recorder.onApproval(callId, { outcome: kind });
      return kind;
    };
  }

  /** The monotonic guards, in registration order (each has its `id`); each reports its verdict. */
  get guards() {
    return this.scenario.guards.map((guard) =>
      named(async (call) => {
        const [kind, payload] = kindOf(actionFor(guard.decide, this.#id(call), 'abstain'));
        switch (kind) {
          case 'deny':
            this.recorder.onGuardVerdict(call, guard.id, { verdict: 'deny', reason: payload });
            return { type: 'deny', reason: payload };
          case 'allow':
            this.recorder.onGuardVerdict(call, guard.id, { verdict: 'allow' });
            return { type: 'allow' };
          case 'throw': {
            const error = new ScriptError(payload);
            this.recorder.onGuardVerdict(call, guard.id, { error });
            throw error;
          }
          default:
            this.recorder.onGuardVerdict(call, guard.id, { verdict: 'abstain' });
            return undefined;
        }
      }, guard.id),
    );
  }

  // ------------------------------------------------------------------------------------------
  // Execute

  /** The `tools/execute` wrappers, outermost first. */
  get wrappers() {
    return this.scenario.wrappers.map((spec) => this.wrapper(spec));
  }

  /** One wrapper: `timeout`, `retry`, `metrics`, `context` or `throw`. */
  wrapper(spec) {
    const applies = (call) => !spec.calls || spec.calls.length === 0 || spec.calls.includes(this.#id(call));
    switch (spec.kind) {
      case 'timeout':
        return named(async (call, next, signal) => {
          const limit = this.scenario.tool(this.#name(call))?.timeoutMs;
          if (limit === undefined) return next(signal);
          const deadline = new AbortController();
          const forward = () => deadline.abort(signal.reason);
          if (signal?.aborted) deadline.abort(signal.reason);
          else signal?.addEventListener('abort', forward, { once: true });
          let fired = false;
          const timer = setTimeout(() => {
            fired = true;
            deadline.abort(new CancelledError(`tool call timed out after ${limit}ms`));
          }, limit);
          try {
            // Cooperative cancellation: wait for the body to stop, never abandon it.
            const result = await next(deadline.signal);
            return fired && !signal?.aborted ? timeoutResult(limit) : result;
          } finally {
            clearTimeout(timer);
            signal?.removeEventListener('abort', forward);
          }
        }, 'timeout');
      case 'retry':
        return named(async (call, next, signal) => {
          const attempts = Math.max(1, spec.attempts ?? 1);
          let result = await next(signal);
          for (let n = 1; n < attempts && result?.isError && !signal?.aborted; n++) {
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
          const contexts = [...(result.additionalContexts ?? []), { origin: 'wrapper', text: spec.text }];
          return { ...result, additionalContexts: contexts };
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
    return this.scenario.post.map((listener) =>
      named(async (call, result, next) => {
        this.recorder.onListenerEntered(call, 'post', listener.id);
        const [kind, payload] = kindOf(actionFor(listener.decide, this.#id(call), 'pass'));
        switch (kind) {
          case 'addContext': {
            const decision = await next();
            return { ...decision, additionalContexts: [...(decision?.additionalContexts ?? []), payload] };
          }
          case 'accept': {
            const decision = { type: 'accept', additionalContexts: [] };
            if (payload.content !== undefined && payload.content !== null) decision.content = [textBlock(payload.content)];
            if (payload.value !== undefined && payload.value !== null) decision.value = payload.value;
            if (payload.context !== undefined && payload.context !== null) decision.additionalContexts.push(payload.context);
            return decision;
          }
          case 'block': {
            const decision = { type: 'block', feedback: [textBlock(payload.feedback)], additionalContexts: [] };
            if (payload.context !== undefined && payload.context !== null) decision.additionalContexts.push(payload.context);
            return decision;
          }
          case 'throw':
            throw new ScriptError(payload);
          default:
            return next();
        }
      }, listener.id),
    );
  }

  /**
   * The `tools/result` observers (each has its `id`). Each first tries to replace the content of
   * the outcome it was handed (with `mutate`; a frozen outcome refuses, and that is ignored),
   * then starts work taking `asyncMs` that records `observer-settled`. The work is tracked by
   * the recorder (the trace waits for it) and returned, for a pipeline that awaits observers.
   */
  get observers() {
    return this.scenario.observers.map((observer) =>
      named((call, result) => {
        if (observer.mutate !== undefined) {
          try {
            result.content = [textBlock(observer.mutate)];
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
   * `toolBody` when it starts, a binding mark as each binding settles, and `body-settled`
   * (`by: "program"`) when it ends. Resolves with `{logs, value?}`; a failure rejects.
   */
  get program() {
    return (call, bindings) => {
      const parent = this.#id(call);
      const steps = this.scenario.program(parent) ?? [];
      return this.recorder.runBody(call, () => runProgram(steps, parent, bindings, this.recorder), { by: 'program' });
    };
  }
}

/** Runs a body's steps; resolves with its value (`"ok"` without `return`). */
async function runSteps(steps, signal, effects, attempt) {
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
        await need(effects, 'read')(payload);
        break;
      case 'write':
        await need(effects, 'write')(payload.path, payload.content);
        break;
      case 'edit':
        await need(effects, 'edit')(payload.path, payload.old, payload.new);
        break;
      case 'externalWrite':
        await need(effects, 'externalWrite')(payload.path, payload.content);
        break;
      case 'todo':
        await need(effects, 'todo')(payload);
        break;
      case 'hook':
        await need(effects, 'hook')(payload);
        break;
      case 'deferContext':
        await need(effects, 'deferContext')(payload);
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

function need(effects, name) {
  const effect = effects[name];
  if (typeof effect !== 'function') throw new TypeError(`the body needs an effects.${name}() for this step`);
  return effect;
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
  for (const step of steps) {
    const [kind, payload] = kindOf(step);
    switch (kind) {
      case 'call': {
        const id = subCallId(parent, ++issued);
        const [outcome] = await Promise.allSettled([bindings.call(payload.tool, payload.arguments ?? {})]);
        const failure = settle(id, payload, outcome);
        if (failure) throw failure;
        break;
      }
      case 'all': {
        const ids = payload.map(() => subCallId(parent, ++issued));
        const outcomes = await Promise.allSettled(payload.map((c) => bindings.call(c.tool, c.arguments ?? {})));
        // Every binding of the group settles before the program reacts to a rejection.
        const failures = outcomes.map((outcome, k) => settle(ids[k], payload[k], outcome));
        const failure = failures.find(Boolean);
        if (failure) throw failure;
        break;
      }
      case 'callRunCode':
        try {
          await bindings.call('run_code', {});
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

/** The model-facing text of a program's output: the logs, then the value, joined by newlines. */
export function programContent({ logs = [], value } = {}) {
  const parts = [...logs];
  if (value !== undefined) parts.push(typeof value === 'string' ? value : JSON.stringify(value, null, 2));
  return parts.length === 0 ? '(run_code completed with no output)' : parts.join('\n');
}

export { contentText };
