// A small tool-execution pipeline, Promise-based.
//
// A batch runs in model order: consecutive concurrency-safe calls share a rolling pool (capped),
// any other call runs alone. One driver loop runs every ordered stage (the call's log entry,
// pre-execute, approval, guards, then post-execute, finalizeContent, tools/result and the
// recorded result) one at a time; only `tools/execute` and the bodies overlap. A head-of-line
// cursor commits results in model order however the bodies finish; the batch's contexts are
// injected after its last result, first in, first out.
//
// Lifecycle events for instrumentation: 'batch' (the calls, classified), 'unanswered' (an ask
// with no prompt mounted), 'denied', 'normalized', 'settled' (every call has its result) and
// 'binding' (a Code Mode sub-call settles its binding: the sub-call, and the rejection if any).

import { EventEmitter } from 'node:events';
import { AgentFs, MemoryDisk } from './fs.mjs';
import { RUN_CODE, ToolCallError, bindingsFor, programText, sourceProgram } from './code-mode.mjs';
import { HarnessError, contentText, deepFreeze, failure, fromThrown, renderValue, snapshot, success, text } from './results.mjs';
import { SessionLog } from './session.mjs';
import { Waterfall } from './waterfall.mjs';

const APPROVAL_OUTCOMES = ['allowed-once', 'rejected', 'cancelled', 'unavailable'];
const UNKNOWN_TOOL = { name: 'UnknownToolError', code: 'UNKNOWN_TOOL' };
const ABORTED_BEFORE_DISPATCH = { name: 'AbortError', code: 'ABORTED_BEFORE_DISPATCH' };

/** Arguments as the loop parses them: empty is `{}`, invalid JSON stays the raw string. */
function parseArguments(raw) {
  if (raw.trim() === '') return {};
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

const contextsOf = (texts, origin) => (texts ?? []).map((t) => ({ origin, text: t }));

export class ToolPipeline extends EventEmitter {
  /** `tools/pre-execute`: `(exec, next) => {type: 'allow'} | {type: 'deny', reason} | {type: 'ask', reason?}`. */
  preExecute = new Waterfall();
  /** `tools/execute`: `(exec, next, signal) => result`. */
  execute = new Waterfall();
  /** `tools/post-execute`: `(exec, result, next) => {type: 'accept', …} | {type: 'block', feedback, …}`. */
  postExecute = new Waterfall();
  /** `fs/write-intent` and `fs/edit-intent`: `(intent, next) => {allow, reason?}`. */
  fsIntents = new Waterfall();
  /** `ctx.approval`: `async ({toolName, callId, reason, signal}) => outcome`; none mounted by default. */
  approval = undefined;
  /** UI cards: `{presentCall(exec), presentResult(exec, result)}`. */
  presenter = undefined;

  #tools = new Map();
  #guards = [];
  #observers = [];
  #loadProgram = undefined;
  #steps = 0;

  constructor({ maxParallel = 10, files = {}, turn = 1 } = {}) {
    super();
    this.maxParallel = Math.max(1, maxParallel);
    this.turn = turn;
    this.session = new SessionLog();
    this.disk = new MemoryDisk(files);
    this.fs = new AgentFs({ disk: this.disk, session: this.session, intents: this.fsIntents });
  }

  /**
   * Registers a tool: `{name, execute(args, ctx), isConcurrencySafe?(args), timeoutMs?,
   * finalizeContent?(exec, candidate), render?(args, value)}`.
   */
  register(tool) {
    if (tool.name === RUN_CODE) throw new Error(`${RUN_CODE} is reserved for the Code Mode transport`);
    if (this.#tools.has(tool.name)) throw new Error(`a tool named ${tool.name} is already registered`);
    this.#tools.set(tool.name, tool);
    return this;
  }

  /** Adds a monotonic guard: `async (exec) => undefined | {type: 'deny', reason}`. */
  guard(...guards) {
    this.#guards.push(...guards);
    return this;
  }

  /** Adds a `tools/result` observer, called synchronously with the frozen outcome. */
  observe(...observers) {
    this.#observers.push(...observers);
    return this;
  }

  /** Turns Code Mode on; `load(exec)` gives the program of a `run_code` call (default: its `code`). */
  enableCodeMode({ load = sourceProgram } = {}) {
    this.#loadProgram = load;
    return this;
  }

  // ------------------------------------------------------------------------------------------
  // The batch

  /** Runs one assistant message's calls, `[{callId, name, arguments}]` (raw argument strings). */
  async runBatch(calls) {
    const step = ++this.#steps;
    const plans = calls.map((call) => this.#plan(call));
    this.emit('batch', plans.map((p) => ({ callId: p.callId, name: p.name, concurrencySafe: p.safe })));
    const outcomes = [];
    for (let start = 0; start < plans.length; ) {
      let end = start + 1;
      if (plans[start].safe) while (end < plans.length && plans[end].safe) end++;
      outcomes.push(...(await this.#runGroup(plans.slice(start, end), step)));
      start = end;
    }
    this.emit('settled', outcomes);
    for (const { exec, result } of outcomes) {
      (result.additionalContexts ?? []).forEach((context, i) => {
        const message = { id: `context-${exec.callId}-${i + 1}`, role: 'user', content: [text(context.text)] };
        message.source = { kind: 'tool', callId: exec.callId };
        this.session.append('user/message', message, { surfaceOp: 'append' });
      });
    }
    return outcomes;
  }

  #definition(name) {
    return name === RUN_CODE ? this.#runCodeTool() : this.#tools.get(name);
  }

  #plan({ callId, name, arguments: raw }) {
    const tool = this.#definition(name);
    const args = parseArguments(raw);
    let safe = false;
    try {
      safe = tool?.isConcurrencySafe?.(args) === true;
    } catch {
      // A throwing classifier makes the call exclusive.
    }
    // The definition's finalizeContent is captured now: it is the one called, whatever happens later.
    return { callId, name, raw, args, tool, safe, finalizeContent: tool?.finalizeContent?.bind(tool) };
  }

  #execution(callId, name, args, parent) {
    return Object.freeze({
      token: Symbol(callId),
      callId,
      rootCallId: parent?.rootCallId ?? callId,
      name,
      arguments: snapshot(args),
      parent: parent?.token,
    });
  }

  /** A rolling pool (or a lone exclusive call): bodies overlap, everything else takes turns. */
  async #runGroup(plans, step) {
    const slots = [];
    const running = new Set();
    const outcomes = [];
    while (outcomes.length < plans.length) {
      const head = slots[outcomes.length];
      if (head?.settled) {
        outcomes.push(await this.#commit(head, step));
        continue;
      }
      if (slots.length < plans.length && running.size < this.maxParallel) {
        const slot = await this.#prepare(plans[slots.length], step);
        slots.push(slot);
        if (slot.prepared.allowed) {
          const body = this.#dispatch(slot.exec, slot.plan).then((settled) => {
            slot.settled = settled;
            running.delete(body);
          });
          running.add(body);
        } else {
          slot.settled = slot.prepared;
        }
        continue;
      }
      await Promise.race(running);
    }
    return outcomes;
  }

  // ------------------------------------------------------------------------------------------
  // Prepare: the call's log entry, its card, pre-execute, approval, guards.

  async #prepare(plan, step) {
    const exec = this.#execution(plan.callId, plan.name, plan.args);
    const data = { turn: this.turn, step, callId: plan.callId, name: plan.name, arguments: plan.raw };
    const callSeq = this.session.append('tool/call', data).seq;
    this.#present('presentCall', exec);
    const prepared = await this.#decide(exec);
    if (prepared.denied !== undefined) this.emit('denied', exec, prepared.denied);
    return { plan, exec, callSeq, prepared };
  }

  async #decide(exec) {
    let decision;
    try {
      decision = await this.preExecute.run([exec], async () => ({ type: 'allow' }));
    } catch (error) {
      return { threw: error };
    }
    switch (decision?.type) {
      case 'allow':
        // Identity is protected: a decision cannot change the arguments (an `updatedInput` is ignored).
        return this.#runGuards(exec);
      case 'deny':
        return { denied: decision.reason };
      case 'ask': {
        const refused = await this.#ask(exec, decision.reason);
        return refused ?? this.#runGuards(exec);
      }
      default:
        return { threw: new TypeError(`not a pre-execute decision: ${JSON.stringify(decision)}`) };
    }
  }

  /** Resolves an ask through `ctx.approval`: nothing when allowed once, else the refusal. */
  async #ask(exec, reason) {
    if (!this.approval) {
      const denied = reason ?? `tool "${exec.name}" requires approval (not yet supported)`;
      this.emit('unanswered', exec, denied);
      return { denied };
    }
    const id = `approval-${exec.callId}`;
    const asked = { id, toolName: exec.name, callId: exec.callId };
    if (reason !== undefined && reason !== null) asked.reason = reason;
    this.session.append('approval/asked', asked);
    let outcome;
    try {
      outcome = await this.approval({ toolName: exec.name, callId: exec.callId, reason, signal: new AbortController().signal });
    } catch (error) {
      return { threw: error };
    }
    if (!APPROVAL_OUTCOMES.includes(outcome)) outcome = 'unavailable';
    this.session.append('approval/decided', { id, outcome });
    return outcome === 'allowed-once' ? undefined : { denied: `approval ${outcome} for tool "${exec.name}"` };
  }

  /** Monotonic: the first reason wins, and nothing a guard returns can undo it. */
  async #runGuards(exec) {
    for (const guard of this.#guards) {
      let verdict;
      try {
        verdict = await guard(exec);
      } catch (error) {
        return { threw: error };
      }
      if (verdict?.type === 'deny') return { denied: verdict.reason };
    }
    return { allowed: true };
  }

  // ------------------------------------------------------------------------------------------
  // Execute: the wrappers around one dispatch of the body. Never rejects.

  async #dispatch(exec, plan) {
    const deferred = [];
    const body = async (signal) => {
      if (!plan.tool) return failure(`unknown tool: ${exec.name}`, UNKNOWN_TOOL);
      if (signal.aborted) return failure('tool call was cancelled before dispatch', ABORTED_BEFORE_DISPATCH);
      try {
        const value = await plan.tool.execute(exec.arguments, this.#context(exec, signal, deferred));
        return success(value, plan.tool.render?.(exec.arguments, value) ?? renderValue(value));
      } catch (thrown) {
        // The body's failure is a result before any wrapper sees it.
        return fromThrown(thrown);
      }
    };
    let result;
    try {
      result = await this.execute.around(exec, new AbortController().signal, body);
    } catch (error) {
      return { threw: error };
    }
    // Tool-deferred contexts come first (they survive a failing body), then the wrappers'.
    const contexts = [...contextsOf(deferred, 'tool'), ...(result.additionalContexts ?? [])];
    return { executed: { ...result, additionalContexts: contexts } };
  }

  /** What a body is handed. */
  #context(exec, signal, deferred) {
    const session = this.session;
    return {
      exec,
      signal,
      fs: {
        read: (path) => this.fs.read(path),
        write: (path, content) => this.fs.write(path, content, exec),
        edit: (path, old, replacement) => this.fs.edit(path, old, replacement, exec),
      },
      todos: { write: (todos) => session.append('todo/write', { todos }) },
      hooks: {
        /** A hook handler ran inside the tool (this harness speaks the claude-code dialect). */
        record({ point, handlerId, decision, durationMs = 0 }) {
          session.append('hook/invoked', { turn: 1, point, dialect: 'claude-code', handlerId });
          session.append('hook/result', { turn: 1, point, handlerId, decision, exitCode: 0, durationMs });
        },
      },
      deferContext: (t) => deferred.push(t),
    };
  }

  // ------------------------------------------------------------------------------------------
  // Commit: post-execute, normalization, finalizeContent, tools/result, the recorded result.

  /** The frozen outcome of a call. Shared by a model's calls and Code Mode sub-calls. */
  async #settle(exec, plan, settled) {
    let error = settled.threw;
    let result = settled.denied !== undefined ? failure(settled.denied) : settled.executed;
    if (error === undefined) {
      try {
        const handed = snapshot(result);
        const decision = await this.postExecute.run([exec, handed], async () => ({ type: 'accept' }));
        result = this.#applyPost(decision, result, plan, exec);
      } catch (thrown) {
        error = thrown;
      }
    }
    if (error !== undefined) {
      // Outer normalization: the throw becomes an isError result; its contexts are lost.
      this.emit('normalized', exec, error);
      result = fromThrown(error);
    }
    if (plan.finalizeContent) {
      try {
        const content = plan.finalizeContent(exec, snapshot(result));
        if (content !== undefined) result = { ...result, content };
      } catch (thrown) {
        result = fromThrown(thrown);
      }
    }
    return deepFreeze(structuredClone(result));
  }

  #applyPost(decision, result, plan, exec) {
    switch (decision?.type) {
      case 'accept': {
        if (decision.content !== undefined && decision.value !== undefined) {
          throw new TypeError('a post-execute accept cannot replace both content and value');
        }
        const next = { ...result };
        if (decision.value !== undefined) {
          if (result.isError) throw new TypeError('a post-execute accept cannot replace the value of a failed result');
          next.value = decision.value;
          next.content = plan.tool?.render?.(exec.arguments, decision.value) ?? renderValue(decision.value);
        }
        if (decision.content !== undefined) next.content = decision.content;
        next.additionalContexts = [...(result.additionalContexts ?? []), ...contextsOf(decision.additionalContexts, 'post')];
        return next;
      }
      case 'block': {
        // A block keeps only its own contexts.
        const message = contentText(decision.feedback ?? []) || 'tool result blocked by post-execute policy';
        return {
          isError: true,
          content: decision.feedback ?? [],
          error: { message },
          additionalContexts: contextsOf(decision.additionalContexts, 'post'),
        };
      }
      default:
        throw new TypeError(`not a post-execute decision: ${JSON.stringify(decision)}`);
    }
  }

  /** `tools/result`: observers are called synchronously; their promises are not awaited. */
  #announce(exec, frozen) {
    for (const observer of this.#observers) {
      try {
        const work = observer(exec, frozen);
        if (typeof work?.then === 'function') work.then(undefined, (e) => this.emit('observerError', exec, e));
      } catch (e) {
        this.emit('observerError', exec, e);
      }
    }
  }

  async #commit({ plan, exec, callSeq, settled }, step) {
    const frozen = await this.#settle(exec, plan, settled);
    this.#announce(exec, frozen);
    const data = {
      turn: this.turn,
      step,
      message: {
        id: `result-${exec.callId}`,
        role: 'user',
        source: { kind: 'tool', callId: exec.callId },
        content: [{ type: 'tool-result', toolCallId: exec.callId, content: frozen.content, isError: frozen.isError }],
      },
    };
    if (frozen.error?.info) data.error = frozen.error.info;
    if (frozen.meta !== undefined) data.meta = frozen.meta;
    this.session.append('tool/result', data, { surfaceOp: 'append', sourceEventSeqs: [callSeq] });
    this.#present('presentResult', exec, frozen);
    return { exec, result: frozen };
  }

  #present(card, exec, result) {
    try {
      this.presenter?.[card]?.(exec, result);
    } catch {
      // A failing presenter falls back to the generic card: nothing else changes.
    }
  }

  // ------------------------------------------------------------------------------------------
  // Code Mode

  #runCodeTool() {
    if (!this.#loadProgram) return undefined;
    return {
      name: RUN_CODE,
      execute: async (args, ctx) => {
        const program = this.#loadProgram(ctx.exec);
        const bindings = bindingsFor((n, tool, toolArgs) => this.#runSubCall(ctx.exec, n, tool, toolArgs));
        try {
          return programText(await program(bindings));
        } catch (error) {
          throw new HarnessError('CODE_RUN_FAILED', 'CodeRunFailedError', fromThrown(error).error.message);
        }
      },
    };
  }

  /** A binding call: it re-enters every stage from pre-execute to `tools/result`. */
  async #runSubCall(parent, n, name, args) {
    const callId = `${parent.callId}:code:${n}`;
    const plan = this.#plan({ callId, name, arguments: JSON.stringify(args) });
    const exec = this.#execution(callId, name, plan.args, parent);
    const dispatch = { rootCallId: parent.rootCallId, parentCallId: parent.callId, subCallId: callId, name };
    this.session.append('tool/code-dispatch-start', { ...dispatch, arguments: exec.arguments });
    const prepared = await this.#decide(exec);
    if (prepared.denied !== undefined) this.emit('denied', exec, prepared.denied);
    const settled = prepared.allowed ? await this.#dispatch(exec, plan) : prepared;
    const frozen = await this.#settle(exec, plan, settled);
    this.#announce(exec, frozen);
    // A sub-call's contexts are dropped: nothing can be injected mid-run without breaking call/result adjacency.
    const logged = { ...dispatch, arguments: exec.arguments, isError: frozen.isError, content: frozen.content };
    this.session.append('tool/code-dispatch', logged);
    if (frozen.isError) {
      const rejection = new ToolCallError(name, frozen.error?.message ?? contentText(frozen.content));
      this.emit('binding', exec, rejection);
      throw rejection;
    }
    this.emit('binding', exec);
    return frozen.value ?? contentText(frozen.content);
  }
}
