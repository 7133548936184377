// The trace recorder: one method per moment of a harness's run, each appending the record the
// protocol asks for at that moment (docs/adapter-protocol.md, "Recording the trace").
//
// The recorder never sorts or rewrites what it was told: order is the evidence. What it does is
// build each record's shape, number session events, name tokens, copy every value at the moment
// it is recorded (so a later mutation cannot change the evidence), and apply the few rules that
// are about *where* a record goes rather than *when* it is told:
//  - a stage record of a Code Mode sub-call carries `parent`, learnt from the call's identity;
//  - `fsGate` is followed by `toolBody` (the body resumes);
//  - the `approval` stage ends the approval stage, so a prompt's answer recorded before the
//    harness logs `approval/decided` waits for that event (or the call's next record);
//  - `pre`/`post` name the scripted listeners entered and `guards` the verdicts given, as the
//    scripted parts reported them;
//  - a body's end (`body-settled`) is recorded in a `finally`, by `runBody`.

import { AsyncLocalStorage } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';
import { messageOf } from './results.js';

const clone = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

/**
 * The identity of a call object shaped like the original harness's execution:
 * `{token, callId, name, arguments, rootCallId?, parent?}` (`parent` is the outer execution's
 * token), or with explicit `parentToken` / `parentCallId`.
 */
export function defaultIdentify(call) {
  const parentToken = call.parentToken ?? call.parent;
  const parent =
    call.parentCallId ??
    (call.rootCallId !== undefined && call.rootCallId !== call.callId ? call.rootCallId : undefined);
  return { token: call.token, callId: call.callId, name: call.name, arguments: call.arguments, parentToken, parent };
}

/** A harness result as a trace `ToolResult`: only the fields the trace has (no `value`). */
export function defaultToResult(result) {
  if (!result || typeof result !== 'object') return { isError: true, content: [] };
  const out = {
    isError: result.isError === true,
    content: (result.content ?? []).map((b) => ({ type: b.type ?? 'text', text: b.text })),
  };
  if (result.error) {
    out.error = { message: result.error.message };
    if (result.error.info) out.error.info = { name: result.error.info.name, code: result.error.info.code };
  }
  if (result.meta !== undefined) out.meta = result.meta;
  const contexts = result.additionalContexts ?? [];
  if (contexts.length > 0) out.additionalContexts = contexts.map((c) => ({ origin: c.origin, text: c.text }));
  return clone(out);
}

/** A pre-execute decision `{type: 'allow'|'deny'|'ask', reason?}` as a record's outcome. */
export function defaultReadPreDecision(decision) {
  const outcome = decision?.type;
  const reason = outcome === 'deny' || outcome === 'ask' ? decision.reason ?? undefined : undefined;
  return { outcome, reason };
}

/** A post-execute decision `{type: 'accept'|'block', ...}` as a record's outcome. */
export function defaultReadPostDecision(decision) {
  return { outcome: decision?.type === 'block' ? 'block' : 'accept' };
}

/** Where a session event names its call (the checker reads the same fields). */
function ownCall(event) {
  const data = event.data ?? {};
  switch (event.type) {
    case 'tool/call':
    case 'approval/asked':
      return data.callId;
    case 'tool/result':
      return data.callId ?? data.message?.source?.callId;
    case 'tool/code-dispatch-start':
    case 'tool/code-dispatch':
      return data.subCallId;
    case 'user/message':
    case 'context/message':
      return data.source?.kind === 'tool' ? data.source.callId : undefined;
    default:
      return undefined;
  }
}

export class Recorder {
  #records = [];
  #seq = 0;
  #clock;
  #start;
  #tokens = new Map();
  #parents = new Map();
  #callSeqs = new Map();
  #contextCounts = new Map();
  #entered = new Map();
  #verdicts = new Map();
  #approvalCalls = new Map();
  #awaitingDecision = new Set();
  #heldApproval = new Map();
  #sideWork = new Set();
  #bodies = new AsyncLocalStorage();

  /**
   * @param {object} [options]
   * @param {'rev1'|'rev2'} [options.spec] the revision whose event shapes typed methods build
   * @param {(call: any) => object} [options.identify] a harness call object as an identity
   * @param {(result: any) => object} [options.toResult] a harness result as a trace result
   * @param {(decision: any) => {outcome: string, reason?: string}} [options.readPreDecision]
   * @param {(decision: any) => {outcome: string}} [options.readPostDecision]
   * @param {() => number} [options.clock] milliseconds, for event `time`
   */
  constructor(options = {}) {
    this.spec = options.spec ?? 'rev2';
    this.identify = options.identify ?? defaultIdentify;
    this.toResult = options.toResult ?? defaultToResult;
    this.readPreDecision = options.readPreDecision ?? defaultReadPreDecision;
    this.readPostDecision = options.readPostDecision ?? defaultReadPostDecision;
    this.#clock = options.clock ?? (() => performance.now());
    this.#start = this.#clock();
  }

  // ------------------------------------------------------------------------------------------
  // Identity

  /** A stable string for a token: strings as they are, any other value (a Symbol, an object) `tok-N`. */
  tokenName(token) {
    if (typeof token === 'string') return token;
    if (token === undefined || token === null) return undefined;
    let name = this.#tokens.get(token);
    if (name === undefined) {
      name = `tok-${this.#tokens.size + 1}`;
      this.#tokens.set(token, name);
    }
    return name;
  }

  /** The identity a stage was handed: `{token, callId, name, arguments, parentToken?}`. */
  identity(call) {
    const seen = this.identify(call);
    if (seen.parent !== undefined) this.#parents.set(seen.callId, seen.parent);
    const identity = {
      token: this.tokenName(seen.token),
      callId: seen.callId,
      name: seen.name,
      arguments: clone(seen.arguments ?? null),
    };
    const parentToken = this.tokenName(seen.parentToken);
    if (parentToken !== undefined) identity.parentToken = parentToken;
    return identity;
  }

  /** The call id of a call object, or the id itself. */
  callIdOf(call) {
    if (typeof call === 'string') return call;
    const seen = this.identify(call);
    if (seen.parent !== undefined) this.#parents.set(seen.callId, seen.parent);
    return seen.callId;
  }

  // ------------------------------------------------------------------------------------------
  // Appending

  #append(record) {
    const call = record.call;
    if (call !== undefined && this.#heldApproval.has(call)) {
      const decided = record.kind === 'event' && record.event.type === 'approval/decided';
      if (decided) {
        this.#records.push(record);
        this.#releaseApproval(call);
        return;
      }
      this.#releaseApproval(call);
    }
    this.#records.push(record);
  }

  #releaseApproval(call) {
    this.#records.push(this.#heldApproval.get(call));
    this.#heldApproval.delete(call);
    this.#awaitingDecision.delete(call);
  }

  #stage(node, call, fields = {}, { identity = false } = {}) {
    const record = { kind: 'stage', node };
    if (call !== undefined) {
      if (identity && typeof call === 'object') {
        record.identity = this.identity(call);
        record.call = record.identity.callId;
      } else {
        record.call = this.callIdOf(call);
      }
    }
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined) record[key] = clone(value);
    }
    const parent = record.call !== undefined ? this.#parents.get(record.call) : undefined;
    if (parent !== undefined) record.parent = parent;
    this.#append(record);
    return record;
  }

  #now() {
    return Math.max(0, Math.round(this.#clock() - this.#start));
  }

  #event(type, data, { call, surfaceOp, sourceEventSeqs } = {}) {
    const event = { seq: ++this.#seq, time: this.#now(), type, data: clone(data) };
    if (surfaceOp !== undefined) event.surfaceOp = surfaceOp;
    if (sourceEventSeqs !== undefined) event.sourceEventSeqs = sourceEventSeqs;
    return this.#appendEvent(event, call);
  }

  #appendEvent(event, call) {
    const record = { kind: 'event' };
    const id = call !== undefined ? this.callIdOf(call) : this.#attribute(event);
    if (id !== undefined) record.call = id;
    record.event = event;
    if (event.type === 'tool/call' && id !== undefined) this.#callSeqs.set(id, event.seq);
    if (event.type === 'approval/asked' && id !== undefined) {
      this.#approvalCalls.set(event.data?.id, id);
      this.#awaitingDecision.add(id);
    }
    if (event.type === 'approval/decided' && id !== undefined) this.#awaitingDecision.delete(id);
    this.#append(record);
    return event;
  }

  #attribute(event) {
    const own = ownCall(event);
    if (own !== undefined) return own;
    if (event.type === 'approval/decided') return this.#approvalCalls.get(event.data?.id);
    const body = this.#bodies.getStore();
    return body === undefined ? undefined : this.callIdOf(body);
  }

  /**
   * A session event the harness logged itself, `{seq, time, type, data, surfaceOp?, sourceEventSeqs?}`,
   * recorded as it is. Its call is `options.call`, else the call the event names, else the
   * approval it answers, else the body running (see `runBody`).
   */
  onEvent(event, { call } = {}) {
    const copy = clone(event);
    if (typeof copy.seq === 'number') this.#seq = Math.max(this.#seq, copy.seq);
    return this.#appendEvent(copy, call);
  }

  // ------------------------------------------------------------------------------------------
  // The batch

  /** The assistant message's tool-call block: `[{callId, name, concurrencySafe?}]`, in model order. */
  onModel(calls) {
    const declared = calls.map((c) => {
      const d = { callId: c.callId, name: c.name };
      if (typeof c.concurrencySafe === 'boolean') d.concurrencySafe = c.concurrencySafe;
      return d;
    });
    return this.#stage('model', undefined, { calls: declared });
  }

  /** Event `tool/call`, before any other stage of the call. */
  onToolCall(call, { arguments: raw, turn = 1, step = 1 } = {}) {
    const identity = this.identify(call);
    const data = {
      turn,
      step,
      callId: identity.callId,
      name: identity.name,
      arguments: raw ?? JSON.stringify(identity.arguments ?? {}),
    };
    return this.#event('tool/call', data, { call: identity.callId });
  }

  /** Stage `presentCall`: the pending card is shown. */
  onPresentCall(call) {
    return this.#stage('presentCall', call);
  }

  /** Stage `presentResult`: the completed card is shown. */
  onPresentResult(call) {
    return this.#stage('presentResult', call);
  }

  // ------------------------------------------------------------------------------------------
  // Prepare

  /** A scripted waterfall listener (`'pre'` or `'post'`) was entered for this call. */
  onListenerEntered(call, waterfall, id) {
    const key = `${waterfall}\u0000${this.callIdOf(call)}`;
    const list = this.#entered.get(key) ?? [];
    list.push(id);
    this.#entered.set(key, list);
  }

  #takeEntered(call, waterfall) {
    const key = `${waterfall}\u0000${this.callIdOf(call)}`;
    const list = this.#entered.get(key) ?? [];
    this.#entered.delete(key);
    return list;
  }

  /** Stage `pre`: the waterfall decided (`{decision}`) or threw (`{error}`). */
  onPreExecute(call, { decision, error, listeners } = {}) {
    const entered = listeners ?? this.#takeEntered(call, 'pre');
    if (error !== undefined) {
      return this.#stage('pre', call, { outcome: 'throw', reason: messageOf(error), listeners: entered }, { identity: true });
    }
    const { outcome, reason } = this.readPreDecision(decision);
    return this.#stage('pre', call, { outcome, reason: reason ?? undefined, listeners: entered }, { identity: true });
  }

  /** Event `approval/asked` (when the harness does not log it itself). */
  onApprovalAsked(call, { id, toolName, reason } = {}) {
    const callId = this.callIdOf(call);
    const data = { id: id ?? `approval-${callId}`, toolName, callId };
    if (reason !== undefined && reason !== null) data.reason = reason;
    return this.#event('approval/asked', data, { call: callId });
  }

  /** Event `approval/decided` (when the harness does not log it itself). */
  onApprovalDecided(call, { id, outcome }) {
    const callId = this.callIdOf(call);
    return this.#event('approval/decided', { id: id ?? `approval-${callId}`, outcome }, { call: callId });
  }

  /**
   * Stage `approval`: the prompt answered (`{outcome}`) or threw (`{error}`). It ends the
   * approval stage: when the ask was logged (`approval/asked`) and its `approval/decided` is not
   * yet, the record waits for that event, or for the call's next record.
   */
  onApproval(call, { outcome, error, reason } = {}) {
    const callId = this.callIdOf(call);
    const fields =
      error !== undefined ? { outcome: 'throw', reason: messageOf(error) } : { outcome, reason: reason ?? undefined };
    if (this.#awaitingDecision.has(callId) && error === undefined) {
      const record = { kind: 'stage', node: 'approval', call: callId };
      for (const [k, v] of Object.entries(fields)) if (v !== undefined) record[k] = v;
      const parent = this.#parents.get(callId);
      if (parent !== undefined) record.parent = parent;
      this.#heldApproval.set(callId, record);
      return record;
    }
    this.#awaitingDecision.delete(callId);
    return this.#stage('approval', callId, fields);
  }

  /**
   * One guard's verdict (`{verdict: 'abstain'|'deny'|'allow', reason?}`, or `{error}` for a
   * throw). A deny or a throw ends the guards stage: its record is written now.
   */
  onGuardVerdict(call, guard, { verdict, reason, error } = {}) {
    const callId = this.callIdOf(call);
    const list = this.#verdicts.get(callId) ?? [];
    const entry = error !== undefined ? { guard, verdict: 'throw', reason: messageOf(error) } : { guard, verdict };
    if (error === undefined && verdict === 'deny' && reason !== undefined) entry.reason = reason;
    list.push(entry);
    this.#verdicts.set(callId, list);
    if (entry.verdict === 'deny' || entry.verdict === 'throw') {
      return this.onGuards(call, { outcome: entry.verdict, reason: entry.reason });
    }
    return undefined;
  }

  /** Stage `guards` with the verdicts given so far (default outcome `allow`: every guard abstained). */
  onGuards(call, { outcome = 'allow', reason } = {}) {
    const callId = this.callIdOf(call);
    const verdicts = this.#verdicts.get(callId) ?? [];
    this.#verdicts.delete(callId);
    return this.#stage(
      'guards',
      call,
      { outcome, reason, listeners: verdicts.map((v) => v.guard), verdicts },
      { identity: typeof call === 'object' },
    );
  }

  /** Stage `denied` (level `full`): the call was refused and its body skipped. */
  onDenied(call, reason) {
    return this.#stage('denied', call, { reason });
  }

  // ------------------------------------------------------------------------------------------
  // Execute

  /** Stage `around`: control enters the innermost `next()` of `tools/execute` (the body's dispatch). */
  onDispatch(call) {
    return this.#stage('around', call, {}, { identity: true });
  }

  /** Stage `toolBody`: the body starts. */
  onBodyStart(call) {
    return this.#stage('toolBody', call, {}, { identity: true });
  }

  /** Mark `body-settled`: the body's steps ended (`by`: `body`, or `program` for `run_code`). */
  onBodySettled(call, by = 'body') {
    const record = { kind: 'mark', call: this.callIdOf(call), mark: 'body-settled', by };
    this.#append(record);
    return record;
  }

  /**
   * Runs a body: records `toolBody`, runs `fn` with the call as the running body (owned events
   * it records are attributed to it), and records `body-settled` in a `finally`, however it ends.
   */
  async runBody(call, fn, { by = 'body', start = true } = {}) {
    if (start) this.onBodyStart(call);
    try {
      return await this.#bodies.run(call, fn);
    } finally {
      this.onBodySettled(call, by);
    }
  }

  /** The call whose body is running in this async context, if any. */
  currentBody() {
    return this.#bodies.getStore();
  }

  /** Stage `around`: the dispatch returned to the innermost wrapper (`{result}`) or threw (`{error}`). */
  onBodyReturn(call, { result, error } = {}) {
    if (error !== undefined) {
      return this.#stage('around', call, { outcome: 'throw', reason: messageOf(error) }, { identity: true });
    }
    return this.#stage('around', call, { result: this.toResult(result) }, { identity: true });
  }

  /** Stage `around`: the `tools/execute` waterfall ended (`{error}` when a wrapper threw). */
  onExecuteEnd(call, { error } = {}) {
    const fields = error !== undefined ? { outcome: 'throw', reason: messageOf(error) } : {};
    return this.#stage('around', call, fields, { identity: true });
  }

  /**
   * Stage `fsGate` (then `toolBody`: the body resumes). `call` may be undefined inside a body
   * run by `runBody`. `intent` is `{intent: 'write'|'edit', target, version?}`.
   */
  onFsGate(call, intent, outcome, reason) {
    const body = call ?? this.currentBody();
    const gated = { intent: intent.intent, target: intent.target };
    if (typeof intent.version === 'number') gated.version = intent.version;
    const record = this.#stage('fsGate', body, { outcome, reason, intent: gated });
    this.#stage('toolBody', body, {}, { identity: typeof body === 'object' });
    return record;
  }

  /** Event `fs/observed` (when the harness does not log it itself). */
  onFsObserved({ target, state, actor = 'agent' }, { call } = {}) {
    return this.#event('fs/observed', { target, state, actor }, { call: call ?? this.#runningId() });
  }

  /** Event `todo/write`. */
  onTodoWrite(todos, { call } = {}) {
    return this.#event('todo/write', { todos }, { call: call ?? this.#runningId() });
  }

  /** Events `hook/invoked` and `hook/result` of a hook handler run inside a body. */
  onHook({ point, handlerId, decision }, { call, dialect = 'claude-code', durationMs = 0, turn = 1 } = {}) {
    const id = call ?? this.#runningId();
    this.#event('hook/invoked', { turn, point, dialect, handlerId }, { call: id });
    return this.#event('hook/result', { turn, point, handlerId, decision, durationMs }, { call: id });
  }

  #runningId() {
    const body = this.currentBody();
    return body === undefined ? undefined : this.callIdOf(body);
  }

  // ------------------------------------------------------------------------------------------
  // Commit

  /** Stage `post`: the waterfall was handed `result` and decided (`{decision}`) or threw (`{error}`). */
  onPostExecute(call, { result, decision, error, listeners } = {}) {
    const entered = listeners ?? this.#takeEntered(call, 'post');
    const handed = this.toResult(result);
    if (error !== undefined) {
      return this.#stage('post', call, { outcome: 'throw', reason: messageOf(error), listeners: entered, result: handed }, { identity: true });
    }
    const { outcome } = this.readPostDecision(decision);
    return this.#stage('post', call, { outcome, listeners: entered, result: handed }, { identity: true });
  }

  /** Stage `normalized` (level `full`): a throw became an `isError` result. */
  onNormalized(call, errorOrReason) {
    const reason = typeof errorOrReason === 'string' ? errorOrReason : messageOf(errorOrReason);
    return this.#stage('normalized', call, { reason });
  }

  /** Stage `finalize`: `finalizeContent` was called with `candidate` (and threw `error`, if given). */
  onFinalize(call, { candidate, error } = {}) {
    const fields = { result: this.toResult(candidate) };
    if (error !== undefined) Object.assign(fields, { outcome: 'throw', reason: messageOf(error) });
    return this.#stage('finalize', call, fields, { identity: true });
  }

  /** Stage `final`: `tools/result` announced the frozen outcome. */
  onToolsResult(call, result) {
    return this.#stage('final', call, { result: this.toResult(result) }, { identity: typeof call === 'object' });
  }

  /** Event `tool/result` (rev2 message shape, rev1 flat), answering the call's `tool/call`. */
  onToolResult(call, result, { turn = 1, step = 1, messageId } = {}) {
    const callId = this.callIdOf(call);
    const r = this.toResult(result);
    const info = r.error?.info;
    let data;
    if (this.spec === 'rev1') {
      data = { callId, content: r.content, isError: r.isError };
    } else {
      data = {
        turn,
        step,
        message: {
          id: messageId ?? `result-${callId}`,
          role: 'user',
          source: { kind: 'tool', callId },
          content: [{ type: 'tool-result', toolCallId: callId, content: r.content, isError: r.isError }],
        },
      };
    }
    if (info) data.error = info;
    if (r.meta !== undefined) data.meta = r.meta;
    const seq = this.#callSeqs.get(callId);
    return this.#event('tool/result', data, {
      call: callId,
      surfaceOp: 'append',
      sourceEventSeqs: seq === undefined ? undefined : [seq],
    });
  }

  /** Stage `allResults` (level `full`): every call of the batch has its `tool/result`. */
  onBatchSettled() {
    return this.#stage('allResults', undefined);
  }

  /** An injected context: rev2 `user/message`, rev1 `context/message`, attributed to its call. */
  onContext(call, text, { id } = {}) {
    const callId = this.callIdOf(call);
    const n = (this.#contextCounts.get(callId) ?? 0) + 1;
    this.#contextCounts.set(callId, n);
    const content = [{ type: 'text', text }];
    const source = { kind: 'tool', callId };
    if (this.spec === 'rev1') return this.#event('context/message', { content, source }, { call: callId });
    return this.#event(
      'user/message',
      { id: id ?? `context-${callId}-${n}`, role: 'user', content, source },
      { call: callId, surfaceOp: 'append' },
    );
  }

  /** Mark `observer-settled`: an observer's asynchronous work ended. */
  onObserverSettled(call, observer, afterMs = 0) {
    const record = { kind: 'mark', call: this.callIdOf(call), mark: 'observer-settled', by: observer, afterMs };
    this.#append(record);
    return record;
  }

  // ------------------------------------------------------------------------------------------
  // Code Mode

  /** Event `tool/code-dispatch-start` (rev2): a sub-call actually starts. */
  onCodeDispatchStart(subCall, { rootCallId, parentCallId, subCallId, name, arguments: args }) {
    const data = { rootCallId, parentCallId, subCallId, name, arguments: args };
    return this.#event('tool/code-dispatch-start', data, { call: subCall ?? subCallId });
  }

  /** Event `tool/code-dispatch`: a sub-call was committed, with the outcome announced. */
  onCodeDispatch(subCall, { rootCallId, parentCallId, subCallId, name, arguments: args, result }) {
    const r = this.toResult(result);
    const data = { parentCallId, subCallId, name, arguments: args, isError: r.isError };
    if (this.spec === 'rev1') {
      data.resultSummary = r.content.map((b) => b.text).join('\n').slice(0, 200);
    } else {
      data.rootCallId = rootCallId;
      data.content = r.content;
    }
    return this.#event('tool/code-dispatch', data, { call: subCall ?? subCallId });
  }

  /**
   * Mark `binding-resolved`, or `binding-rejected` with every own field of the rejection the
   * program was handed (`message` included).
   */
  onBindingSettled(subCall, { rejection } = {}) {
    const record = { kind: 'mark', call: this.callIdOf(subCall), by: 'program' };
    if (rejection === undefined) {
      record.mark = 'binding-resolved';
    } else {
      record.mark = 'binding-rejected';
      record.rejection = rejectionFields(rejection);
    }
    this.#append(record);
    return record;
  }

  // ------------------------------------------------------------------------------------------
  // Side work, and the trace

  /** Keeps `promise` (side work such as an observer's) so `idle()` waits for it. */
  track(promise) {
    const tracked = Promise.resolve(promise).then(
      () => this.#sideWork.delete(tracked),
      () => this.#sideWork.delete(tracked),
    );
    this.#sideWork.add(tracked);
    return promise;
  }

  /** Resolves when every tracked piece of side work has ended. */
  async idle() {
    while (this.#sideWork.size > 0) await Promise.all([...this.#sideWork]);
  }

  /** The records so far (a held approval record is written first). */
  records() {
    for (const call of [...this.#heldApproval.keys()]) this.#releaseApproval(call);
    return this.#records.slice();
  }

  /**
   * Mountable probes in the kit's hook idiom (see the README): register `pre` and `post`
   * outermost, `guards` last, `executeEnd` outermost and `dispatch` innermost in
   * `tools/execute`, `toolsResult` as the first `tools/result` observer.
   */
  get probes() {
    const rec = this;
    return {
      async pre(call, next) {
        let decision;
        try {
          decision = await next();
        } catch (error) {
          rec.onPreExecute(call, { error });
          throw error;
        }
        rec.onPreExecute(call, { decision });
        return decision;
      },
      async guards(call) {
        rec.onGuards(call);
        return undefined;
      },
      async executeEnd(call, next, signal) {
        let result;
        try {
          result = await next(signal);
        } catch (error) {
          rec.onExecuteEnd(call, { error });
          throw error;
        }
        rec.onExecuteEnd(call);
        return result;
      },
      async dispatch(call, next, signal) {
        rec.onDispatch(call);
        let result;
        try {
          result = await next(signal);
        } catch (error) {
          rec.onBodyReturn(call, { error });
          throw error;
        }
        rec.onBodyReturn(call, { result });
        return result;
      },
      async post(call, result, next) {
        let decision;
        try {
          decision = await next();
        } catch (error) {
          rec.onPostExecute(call, { result, error });
          throw error;
        }
        rec.onPostExecute(call, { result, decision });
        return decision;
      },
      toolsResult(call, result) {
        rec.onToolsResult(call, result);
      },
    };
  }
}

/** The fields of a rejection: `toolName`, `message` and any other own enumerable field. */
export function rejectionFields(rejection) {
  if (rejection === null || typeof rejection !== 'object') return { message: messageOf(rejection) };
  const fields = {};
  if ('toolName' in rejection) fields.toolName = rejection.toolName;
  fields.message = messageOf(rejection);
  for (const [key, value] of Object.entries(rejection)) {
    if (key !== 'toolName' && key !== 'message') fields[key] = clone(value);
  }
  return fields;
}
