// The trace recorder: one method per moment of a harness's run, each appending the record the
// protocol asks for at that moment (docs/adapter-protocol.md, "Recording the trace").
//
// The recorder never sorts or rewrites what it was told: order is the evidence, and a probe
// records what happened, never what it expects to happen next. What it does is build each
// record's shape, number session events, name tokens, copy every value at the moment it is
// recorded (so a later mutation cannot change the evidence), and apply the few rules that are
// about *where* a record goes rather than *when* it is told:
//  - a stage record of a Code Mode sub-call carries `parent`, learnt from the call's identity;
//  - `pre`/`post` are recorded by the outermost kit listener of the waterfall when it returns
//    (the probe, when the pipeline keeps it outermost), with the scripted listeners entered;
//  - `guards` is one record per consultation of the guards, written when the consultation is
//    over (before the call's next record, or any other call's ordered stage), with every
//    verdict given, in order: a guard consulted after a deny is in it;
//  - `fsGate` is followed by `toolBody` when the gated body is running (it resumes);
//  - a body that starts inside `tools/execute` with no dispatch probe around it (a wrapper
//    re-dispatched past the innermost probe) is preceded by the `around` of its dispatch, and
//    its settle is followed by that dispatch's return (an `around` with no outcome and no
//    result: the body ended and control left it; what the harness made of its end no probe saw,
//    so nothing is claimed about it, and a wrapper's later throw is not read as the body's);
//  - the `approval` stage ends the approval stage, so a prompt's answer recorded before the
//    harness logs `approval/decided` waits for that event (or the call's next record);
//  - a body's end (`body-settled`) is recorded in a `finally`, by `runBody`.
// What a kit user gets wrong (no `model` first, a call object it cannot read, a value JSON
// cannot hold) is a *problem*: the answer is `errored` with a message naming the method to call.

import { AsyncLocalStorage } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';
import { after, inMode } from './hooks.js';
import { encode, EncodeError } from './json.js';
import { messageOf } from './results.js';

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

/**
 * A content block as the trace has it: a string or `{type: 'text', text}` as a text block; a
 * block of another type (an image, a plugin's own) kept whole, as tep keeps it.
 */
function toBlock(b) {
  if (typeof b === 'string') return { type: 'text', text: b };
  if (typeof b?.type === 'string' && b.type !== 'text') return { ...b };
  return { type: 'text', text: b?.text };
}

/**
 * A harness result as a trace `ToolResult`: only the fields the trace has (no `value`). Reads
 * `{isError, content, error?, meta?, additionalContexts?}`; `content` may be a string (one text
 * block). Throws a `TypeError` for anything else.
 */
export function defaultToResult(result) {
  if (!result || typeof result !== 'object') throw new TypeError('not a result object');
  const content = typeof result.content === 'string' ? [{ type: 'text', text: result.content }] : result.content ?? [];
  if (!Array.isArray(content)) throw new TypeError('its content is neither an array of blocks nor a string');
  const out = {
    isError: result.isError === true,
    content: content.map(toBlock),
  };
  if (result.error) {
    out.error = { message: result.error.message };
    if (result.error.info) out.error.info = { name: result.error.info.name, code: result.error.info.code };
  }
  if (result.meta !== undefined) out.meta = result.meta;
  const contexts = result.additionalContexts ?? [];
  if (contexts.length > 0) out.additionalContexts = contexts.map((c) => ({ origin: c.origin, text: c.text }));
  return out;
}

/** Whether `item` is a trace's additional context, `{origin, text}`. */
const isAdditionalContext = (item) =>
  item !== null && typeof item === 'object' && ['tool', 'wrapper', 'post'].includes(item.origin) && typeof item.text === 'string';

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

const OWNED_EVENTS = new Set(['todo/write', 'fs/observed', 'hook/invoked', 'hook/result']);
const PRE_OUTCOMES = new Set(['allow', 'deny', 'ask']);
const POST_OUTCOMES = new Set(['accept', 'block']);

/** A record made while some body runs: another call's such record does not end a call's guards. */
const bodyTime = (record) =>
  record.kind === 'mark' ||
  (record.kind === 'stage' && ['around', 'toolBody', 'fsGate'].includes(record.node)) ||
  (record.kind === 'event' && OWNED_EVENTS.has(record.event?.type));

/** A short description of a value, for messages. */
function describe(value) {
  if (value === undefined || value === null) return String(value);
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  if (typeof value !== 'object') return `${typeof value} ${String(value)}`;
  if (Array.isArray(value)) return `an array of ${value.length}`;
  const keys = Object.keys(value);
  const shown = keys.slice(0, 6).join(', ') + (keys.length > 6 ? ', …' : '');
  const kind = value.constructor && value.constructor !== Object ? `a ${value.constructor.name}` : 'an object';
  return `${kind} {${shown}}`;
}

const describeRecord = (r) =>
  `${r.kind === 'stage' ? `stage ${r.node}` : r.kind === 'event' ? `event ${r.event?.type}` : `mark ${r.mark}`}${
    r.call !== undefined ? ` of call ${r.call}` : ''
  }`;

export class Recorder {
  #records = [];
  #problems = [];
  #modelSeen = false;
  #lastSeq = 0;
  #kitEvents = 0;
  #harnessSeqs = new Map();
  #clock;
  #start;
  #sync;
  #tokens = new Map();
  #parents = new Map();
  #callSeqs = new Map();
  #contextCounts = new Map();
  #entered = new Map();
  #frames = new Map();
  #mounted = new Set();
  #guards = new Map();
  #approvalCalls = new Map();
  #awaitingDecision = new Set();
  #heldApproval = new Map();
  #running = new Map();
  #executing = new Map();
  #dispatching = new Map();
  #reconstructed = new Map();
  #awaitingCommit = new Map();
  #sideWork = new Set();
  #bodies = new AsyncLocalStorage();
  #probes;

  /**
   * @param {object} [options]
   * @param {'rev1'|'rev2'} [options.spec] the revision whose event shapes typed methods build
   * @param {(call: any) => object} [options.identify] a harness call object as an identity
   * @param {(result: any) => object} [options.toResult] a harness result as a trace result
   * @param {(decision: any, call: any) => {outcome: string, reason?: string}} [options.readPreDecision]
   * @param {(decision: any, result: any, call: any) => {outcome: string}} [options.readPostDecision]
   * @param {() => number} [options.clock] milliseconds, for event `time`
   * @param {boolean} [options.sync] probes return plain values when the `next` they call does
   */
  constructor(options = {}) {
    this.spec = options.spec ?? 'rev2';
    this.identify = options.identify ?? defaultIdentify;
    this.toResult = options.toResult ?? defaultToResult;
    this.readPreDecision = options.readPreDecision ?? defaultReadPreDecision;
    this.readPostDecision = options.readPostDecision ?? defaultReadPostDecision;
    this.#clock = options.clock ?? (() => performance.now());
    this.#sync = options.sync === true;
    this.#start = this.#clock();
  }

  // ------------------------------------------------------------------------------------------
  // Problems: what a kit user did wrong, answered `errored` (the message names what to call)

  /** Notes a problem with how the kit is used; `runScenario` answers `errored` with it. */
  problem(message) {
    if (!this.#problems.includes(message)) this.#problems.push(message);
  }

  /** The problems noted so far, first first. */
  problems() {
    return this.#problems.slice();
  }

  /** A detached JSON copy of `value`, or null and a problem naming the field JSON cannot hold. */
  #encode(value, where, path) {
    try {
      return encode(value, path);
    } catch (error) {
      if (!(error instanceof EncodeError)) throw error;
      this.problem(
        `cannot record ${where}: ${error.message}; convert it before it is recorded ` +
          '(recorder.toResult reads results, recorder.identify reads calls; events go to recorder.onEvent as JSON)',
      );
      return null;
    }
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

  /** What `identify` reads from a call object, with a problem for what it cannot read. */
  #seen(call) {
    if (call === null || (typeof call !== 'object' && typeof call !== 'function')) {
      this.problem(
        `a probe or script was handed ${describe(call)} where a call object belongs: mount it where your ` +
          'pipeline hands its hooks the call, or read your call objects with serve({recorder: {identify}})',
      );
      return {};
    }
    let seen;
    try {
      seen = this.identify(call);
    } catch (error) {
      this.problem(`recorder.identify threw on ${describe(call)}: ${messageOf(error)}`);
      return {};
    }
    if (!seen || typeof seen.callId !== 'string' || seen.callId === '') {
      this.problem(
        `recorder.identify read no callId from ${describe(call)}: pass serve({recorder: {identify: ` +
          '(call) => ({token, callId, name, arguments})}}) to read your call objects',
      );
      return seen ?? {};
    }
    if (seen.parent !== undefined) this.#parents.set(seen.callId, seen.parent);
    return seen;
  }

  /** The identity a stage was handed: `{token, callId, name, arguments, parentToken?}`. */
  identity(call) {
    const seen = this.#seen(call);
    if ((seen.token === undefined || seen.token === null) && seen.callId !== undefined) {
      this.problem(
        `recorder.identify read no token from call ${seen.callId}: return as token any value unique to ` +
          'the execution (a Symbol, an id, the execution object itself)',
      );
    }
    const identity = {
      token: this.tokenName(seen.token),
      callId: seen.callId,
      name: seen.name,
      arguments: this.#encode(seen.arguments ?? null, `the arguments of call ${seen.callId}`, 'arguments'),
    };
    const parentToken = this.tokenName(seen.parentToken);
    if (parentToken !== undefined) identity.parentToken = parentToken;
    return identity;
  }

  /** The call id of a call object, or the id itself. */
  callIdOf(call) {
    if (typeof call === 'string') return call;
    return this.#seen(call).callId;
  }

  // ------------------------------------------------------------------------------------------
  // Appending

  #append(record) {
    for (const id of [...this.#guards.keys()]) {
      if (id === record.call || !bodyTime(record)) this.#closeGuards(id);
    }
    this.#write(record);
  }

  #write(record) {
    if (!this.#modelSeen) {
      this.#modelSeen = true;
      if (record.kind !== 'stage' || record.node !== 'model') {
        this.problem(
          `a record before the first model observation (${describeRecord(record)}): call ` +
            'recorder.onModel(calls) when the batch starts, before any record of its calls',
        );
      }
    }
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

  #stageRecord(node, call, fields = {}, { identity = false } = {}) {
    const record = { kind: 'stage', node };
    if (call !== undefined) {
      if (identity && call !== null && typeof call === 'object') {
        record.identity = this.identity(call);
        record.call = record.identity.callId;
      } else {
        record.call = this.callIdOf(call);
      }
    }
    const where = `the ${node} record${record.call !== undefined ? ` of call ${record.call}` : ''}`;
    for (const [key, value] of Object.entries(fields)) {
      if (value !== undefined) record[key] = this.#encode(value, where, key);
    }
    const parent = record.call !== undefined ? this.#parents.get(record.call) : undefined;
    if (parent !== undefined) record.parent = parent;
    return record;
  }

  #stage(node, call, fields = {}, options = {}) {
    const record = this.#stageRecord(node, call, fields, options);
    this.#append(record);
    return record;
  }

  #now() {
    return Math.max(0, Math.round(this.#clock() - this.#start));
  }

  /** The next `seq` for an event the kit numbers itself. */
  #kitSeq() {
    this.#kitEvents += 1;
    this.#lastSeq += 1;
    return this.#lastSeq;
  }

  #event(type, data, { call, surfaceOp, sourceEventSeqs } = {}) {
    const event = { seq: this.#kitSeq(), time: this.#now(), type, data: this.#encode(data, `the ${type} event`, 'data') };
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
   * recorded as it is, on one numbering with the events the kit numbers (`onToolCall`, …): a
   * harness `seq` is kept while the kit has numbered none of its own, and moves up by the number
   * of events the kit numbered before it otherwise (its `sourceEventSeqs` follow), so the two
   * never collide and the harness's own order stays visible. Its call is `options.call`, else
   * the call the event names, else the approval it answers, else the body running (see `runBody`).
   */
  onEvent(event, { call } = {}) {
    if (!event || typeof event !== 'object' || typeof event.type !== 'string') {
      this.problem(
        `recorder.onEvent was handed ${describe(event)}: it takes a session event {seq?, time?, type, data} as your log has it`,
      );
      return undefined;
    }
    const copy = this.#encode(event, `the ${event.type} event`, 'event') ?? { type: event.type };
    if (typeof copy.seq === 'number') {
      const seq = copy.seq + this.#kitEvents;
      this.#harnessSeqs.set(copy.seq, seq);
      copy.seq = seq;
      this.#lastSeq = Math.max(this.#lastSeq, seq);
    } else {
      copy.seq = this.#kitSeq();
    }
    if (typeof copy.time !== 'number') copy.time = this.#now();
    if (Array.isArray(copy.sourceEventSeqs)) {
      copy.sourceEventSeqs = copy.sourceEventSeqs.map((s) => this.#harnessSeqs.get(s) ?? s);
    }
    return this.#appendEvent(copy, call);
  }

  // ------------------------------------------------------------------------------------------
  // The batch

  /** The assistant message's tool-call block: `[{callId, name, concurrencySafe?}]`, in model order. */
  onModel(calls) {
    if (!Array.isArray(calls)) {
      this.problem(`recorder.onModel was handed ${describe(calls)}: it takes the batch, [{callId, name, concurrencySafe?}]`);
      calls = [];
    }
    const declared = calls.map((c) => {
      const d = { callId: c?.callId, name: c?.name };
      if (typeof c?.concurrencySafe === 'boolean') d.concurrencySafe = c.concurrencySafe;
      return d;
    });
    return this.#stage('model', undefined, { calls: declared });
  }

  /** Event `tool/call`, before any other stage of the call. */
  onToolCall(call, { arguments: raw, turn = 1, step = 1 } = {}) {
    const identity = this.#seen(call);
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
  // Waterfalls: the outermost kit listener of `pre` and `post` records the stage

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

  /**
   * Runs `step` (a kit listener's work in the `waterfall` of `call`) as one frame of it. When the
   * outermost kit frame of the waterfall returns or throws, it calls `record({value})` or
   * `record({error})`: the probe always (`{probe: true}`), a scripted listener only when the
   * waterfall's probe is mounted (the pipeline moved it inward: the outermost kit listener's
   * decision is then what the waterfall decided, as far as the kit can see). Synchronous when
   * `step` is.
   */
  frame(waterfall, call, step, record, { probe = false } = {}) {
    const key = `${waterfall}\u0000${this.callIdOf(call)}`;
    const depth = this.#frames.get(key) ?? 0;
    this.#frames.set(key, depth + 1);
    const done = (settled) => {
      const left = (this.#frames.get(key) ?? 1) - 1;
      if (left <= 0) this.#frames.delete(key);
      else this.#frames.set(key, left);
      if (depth === 0 && (probe || this.#mounted.has(waterfall))) record(settled);
    };
    return after(
      step,
      (value) => {
        done({ value });
        return value;
      },
      (error) => {
        done({ error });
        throw error;
      },
    );
  }

  // ------------------------------------------------------------------------------------------
  // Prepare

  /** Stage `pre`: the waterfall decided (`{decision}`) or threw (`{error}`). */
  onPreExecute(call, settled = {}) {
    const entered = settled.listeners ?? this.#takeEntered(call, 'pre');
    if (Object.hasOwn(settled, 'error') && settled.error !== undefined) {
      this.#awaitCommit(call);
      return this.#stage('pre', call, { outcome: 'throw', reason: messageOf(settled.error), listeners: entered }, { identity: true });
    }
    let read = {};
    try {
      read = this.readPreDecision(settled.decision, call) ?? {};
    } catch (error) {
      this.problem(`recorder.readPreDecision threw on ${describe(settled.decision)}: ${messageOf(error)}`);
    }
    if (!PRE_OUTCOMES.has(read.outcome)) {
      this.problem(
        `recorder.readPreDecision read no outcome from the pre-execute decision ${describe(settled.decision)} of call ` +
          `${this.callIdOf(call)} (the default reads {type: 'allow'|'deny'|'ask', reason?}): pass serve({recorder: ` +
          "{readPreDecision: (decision, call) => ({outcome, reason})}}) to read your pipeline's decisions",
      );
    }
    return this.#stage('pre', call, { outcome: read.outcome, reason: read.reason ?? undefined, listeners: entered }, { identity: true });
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
    if (error !== undefined) this.#awaitCommit(call);
    if (this.#awaitingDecision.has(callId) && error === undefined) {
      const record = this.#stageRecord('approval', callId, fields);
      for (const id of [...this.#guards.keys()]) this.#closeGuards(id);
      this.#heldApproval.set(callId, record);
      return record;
    }
    this.#awaitingDecision.delete(callId);
    return this.#stage('approval', callId, fields);
  }

  /** The guards stage of a call being consulted now (opened by its first verdict or the probe). */
  #openGuards(call) {
    const callId = this.callIdOf(call);
    let open = this.#guards.get(callId);
    if (!open) {
      open = { call, verdicts: [] };
      this.#guards.set(callId, open);
    } else if (typeof open.call !== 'object' && typeof call === 'object') {
      open.call = call;
    }
    return open;
  }

  #closeGuards(callId, { outcome, reason } = {}) {
    const open = this.#guards.get(callId);
    if (!open) return undefined;
    this.#guards.delete(callId);
    const ending = open.verdicts.find((v) => v.verdict === 'deny' || v.verdict === 'throw');
    const fields = {
      outcome: outcome ?? ending?.verdict ?? 'allow',
      reason: outcome !== undefined ? reason : ending?.reason,
      listeners: open.verdicts.map((v) => v.guard),
      verdicts: open.verdicts,
    };
    if (fields.outcome === 'throw') this.#awaitCommit(open.call);
    const record = this.#stageRecord('guards', open.call, fields, { identity: typeof open.call === 'object' });
    this.#write(record);
    return record;
  }

  /**
   * One guard's verdict (`{verdict: 'abstain'|'deny'|'allow', reason?}`, or `{error}` for a
   * throw), in the guards stage being consulted for the call. The stage is recorded when the
   * consultation is over (see `onGuards`): with every verdict given, a guard consulted after a
   * deny included.
   */
  onGuardVerdict(call, guard, { verdict, reason, error } = {}) {
    const entry = error !== undefined ? { guard, verdict: 'throw', reason: messageOf(error) } : { guard, verdict };
    if (error === undefined && verdict === 'deny' && reason !== undefined) entry.reason = reason;
    this.#openGuards(call).verdicts.push(entry);
    return undefined;
  }

  /**
   * Stage `guards` now, with the verdicts given so far. Its outcome is `outcome` when given, else
   * the first deny or throw among the verdicts, else `allow` (every guard abstained). Without
   * this call the stage is recorded anyway when the consultation is over: before the call's next
   * record, or before another call's ordered stage.
   */
  onGuards(call, { outcome, reason } = {}) {
    this.#openGuards(call);
    return this.#closeGuards(this.callIdOf(call), { outcome, reason });
  }

  /** Stage `denied` (level `full`): the call was refused and its body skipped. */
  onDenied(call, reason) {
    return this.#stage('denied', call, { reason });
  }

  // ------------------------------------------------------------------------------------------
  // Execute

  #count(map, id, by) {
    const n = (map.get(id) ?? 0) + by;
    if (n <= 0) map.delete(id);
    else map.set(id, n);
  }

  /** Stage `around`: control enters the innermost `next()` of `tools/execute` (the body's dispatch). */
  onDispatch(call) {
    this.#count(this.#dispatching, this.callIdOf(call), 1);
    return this.#stage('around', call, {}, { identity: true });
  }

  /**
   * Stage `toolBody`: the body starts. When it starts inside `tools/execute` (the `executeEnd`
   * probe is running) while no dispatch probe is open for the call, a wrapper re-dispatched
   * past the innermost probe (a waterfall whose `next` runs only the body the second time): the
   * `around` of that dispatch is recorded first.
   */
  onBodyStart(call) {
    const id = this.callIdOf(call);
    if (!this.#dispatching.has(id) && this.#executing.has(id)) {
      this.#stage('around', call, {}, { identity: true });
      this.#count(this.#reconstructed, id, 1);
    }
    this.#count(this.#running, id, 1);
    return this.#stage('toolBody', call, {}, { identity: true });
  }

  /**
   * Mark `body-settled`: the body's steps ended (`by`: `body`, or `program` for `run_code`).
   * A body whose dispatch `onBodyStart` reconstructed (no dispatch probe saw it) is followed by
   * that dispatch's return, with no outcome and no result: only the probe knows those.
   */
  onBodySettled(call, by = 'body') {
    const id = this.callIdOf(call);
    this.#count(this.#running, id, -1);
    const record = { kind: 'mark', call: id, mark: 'body-settled', by };
    this.#append(record);
    if (this.#reconstructed.has(id)) {
      this.#count(this.#reconstructed, id, -1);
      this.#stage('around', call, {}, { identity: typeof call === 'object' });
    }
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
    this.#count(this.#dispatching, this.callIdOf(call), -1);
    if (error !== undefined) {
      return this.#stage('around', call, { outcome: 'throw', reason: messageOf(error) }, { identity: true });
    }
    return this.#stage('around', call, { result: this.#result(result, 'the dispatch returned', call) }, { identity: true });
  }

  /** Stage `around`: the `tools/execute` waterfall ended (`{error}` when a wrapper threw). */
  onExecuteEnd(call, { error } = {}) {
    if (error !== undefined) this.#awaitCommit(call);
    const fields = error !== undefined ? { outcome: 'throw', reason: messageOf(error) } : {};
    return this.#stage('around', call, fields, { identity: true });
  }

  /**
   * Stage `fsGate`, then `toolBody` when the gated body is running (it resumes after the gate).
   * `call` may be undefined inside a body run by `runBody`. `intent` is
   * `{intent: 'write'|'edit', target, version?}`.
   */
  onFsGate(call, intent, outcome, reason) {
    const body = call ?? this.currentBody();
    if (body === undefined) {
      this.problem('recorder.onFsGate was called with no call, outside any body run by recorder.runBody: pass the gated call');
      return undefined;
    }
    const gated = { intent: intent?.intent, target: intent?.target };
    if (typeof intent?.version === 'number') gated.version = intent.version;
    const record = this.#stage('fsGate', body, { outcome, reason, intent: gated });
    if (this.#running.has(record.call)) this.#stage('toolBody', body, {}, { identity: typeof body === 'object' });
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

  /** A harness result as a trace result, or null and a problem naming what could not be read. */
  #result(result, where, call) {
    let read;
    try {
      read = this.toResult(result);
    } catch (error) {
      this.problem(
        `recorder.toResult cannot read ${describe(result)} (${where}, call ${this.callIdOf(call)}): ${messageOf(error)}; ` +
          'it reads {isError, content, error?, meta?, additionalContexts?}: pass serve({recorder: {toResult}}) to read ' +
          'your results, and mount the probe where your pipeline hands it the result',
      );
      return null;
    }
    if (!read || typeof read.isError !== 'boolean' || !Array.isArray(read.content)) {
      this.problem(
        `recorder.toResult returned ${describe(read)} for a result (${where}, call ${this.callIdOf(call)}): ` +
          'it must return {isError: boolean, content: [{type, text}], …}',
      );
    }
    const contexts = read?.additionalContexts;
    if (contexts !== undefined && !(Array.isArray(contexts) && contexts.every(isAdditionalContext))) {
      const raw = Array.isArray(result?.additionalContexts) ? result.additionalContexts : contexts;
      const at = Array.isArray(raw) ? raw.findIndex((item) => !isAdditionalContext(item)) : -1;
      const what = at >= 0 ? `additionalContexts[${at}] is ${describe(raw[at])}` : `additionalContexts is ${describe(raw)}`;
      this.problem(
        `a result's ${what} (${where}, call ${this.callIdOf(call)}): ` +
          "each item is {origin: 'tool' | 'wrapper' | 'post', text} (docs/events.md); pass serve({recorder: {toResult}}) " +
          'to read another shape',
      );
      return null;
    }
    return read;
  }

  #awaitCommit(call) {
    if (call === undefined || call === null) return;
    const id = this.callIdOf(call);
    if (id === undefined) return;
    const seen = typeof call === 'object' ? this.#seen(call) : undefined;
    const known = this.#awaitingCommit.get(id);
    this.#awaitingCommit.set(id, { call: typeof call === 'object' ? call : known?.call ?? call, name: seen?.name ?? known?.name });
  }

  /**
   * The call whose commit is under way for a content-only `finalizeContent` of tool `name`:
   * the one call of that tool that has been decided (post-execute, or a throw) and not yet
   * announced. Undefined, with a problem, when there is none or more than one.
   */
  committingCall(name) {
    const waiting = [...this.#awaitingCommit.entries()].filter(([, w]) => w.name === name);
    if (waiting.length === 1) return waiting[0][1].call;
    const which = waiting.length === 0 ? 'no call of it awaits its commit' : `calls ${waiting.map(([id]) => id).join(', ')} all await theirs`;
    this.problem(
      `the content-only finalizeContent of tool ${name} was called when ${which}, so the kit cannot tell which call it ` +
        "finalizes: mount rec.probes.post (or record a throw) first, or use the (call, candidate) form (scripts: {finalizer: 'call'})",
    );
    return undefined;
  }

  /** Stage `post`: the waterfall was handed `result` and decided (`{decision}`) or threw (`{error}`). */
  onPostExecute(call, settled = {}) {
    const { result, decision, error } = settled;
    const entered = settled.listeners ?? this.#takeEntered(call, 'post');
    const handed = this.#result(result, 'handed to post-execute', call);
    this.#awaitCommit(call);
    if (error !== undefined) {
      return this.#stage('post', call, { outcome: 'throw', reason: messageOf(error), listeners: entered, result: handed }, { identity: true });
    }
    let read = {};
    try {
      read = this.readPostDecision(decision, result, call) ?? {};
    } catch (e) {
      this.problem(`recorder.readPostDecision threw on ${describe(decision)}: ${messageOf(e)}`);
    }
    if (!POST_OUTCOMES.has(read.outcome)) {
      this.problem(
        `recorder.readPostDecision read no outcome from the post-execute decision ${describe(decision)} of call ` +
          `${this.callIdOf(call)}: pass serve({recorder: {readPostDecision: (decision, result, call) => ({outcome: ` +
          "'accept'|'block'})}}) to read your pipeline's decisions",
      );
    }
    return this.#stage('post', call, { outcome: read.outcome, listeners: entered, result: handed }, { identity: true });
  }

  /** Stage `normalized` (level `full`): a throw became an `isError` result. */
  onNormalized(call, errorOrReason) {
    const reason = typeof errorOrReason === 'string' ? errorOrReason : messageOf(errorOrReason);
    this.#awaitCommit(call);
    return this.#stage('normalized', call, { reason });
  }

  /**
   * Stage `finalize`: `finalizeContent` was called with `candidate` (and threw `error`, if
   * given). A content-only finalizer has no candidate result: the record then has none.
   */
  onFinalize(call, { candidate, error, contentOnly = false } = {}) {
    const fields = contentOnly ? {} : { result: this.#result(candidate, 'the finalizeContent candidate', call) };
    if (error !== undefined) Object.assign(fields, { outcome: 'throw', reason: messageOf(error) });
    return this.#stage('finalize', call, fields, { identity: true });
  }

  /** Stage `final`: `tools/result` announced the frozen outcome. */
  onToolsResult(call, result) {
    const record = this.#stage(
      'final',
      call,
      { result: this.#result(result, 'announced by tools/result', call) },
      { identity: typeof call === 'object' },
    );
    this.#awaitingCommit.delete(record.call);
    return record;
  }

  /** Event `tool/result` (rev2 message shape, rev1 flat), answering the call's `tool/call`. */
  onToolResult(call, result, { turn = 1, step = 1, messageId } = {}) {
    const callId = this.callIdOf(call);
    const r = this.#result(result, 'recorded as tool/result', call) ?? { isError: true, content: [] };
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

  /** Stage `toolBody` of a `run_code` call: its program starts (for a runner the harness owns). */
  onProgramStart(call) {
    return this.onBodyStart(call);
  }

  /** Mark `body-settled` by `program`: the program of a `run_code` call ended. */
  onProgramEnd(call) {
    return this.onBodySettled(call, 'program');
  }

  /**
   * Runs a program the harness's own Code Mode runner interprets: `toolBody` when it starts,
   * `body-settled` (`by: "program"`) in a `finally`. Report each binding's settlement, with the
   * sub-call id your runner gave it, through `onBindingSettled`.
   */
  runProgram(call, fn) {
    return this.runBody(call, fn, { by: 'program' });
  }

  /** Event `tool/code-dispatch-start` (rev2): a sub-call actually starts. */
  onCodeDispatchStart(subCall, { rootCallId, parentCallId, subCallId, name, arguments: args }) {
    const data = { rootCallId, parentCallId, subCallId, name, arguments: args };
    return this.#event('tool/code-dispatch-start', data, { call: subCall ?? subCallId });
  }

  /** Event `tool/code-dispatch`: a sub-call was committed, with the outcome announced. */
  onCodeDispatch(subCall, { rootCallId, parentCallId, subCallId, name, arguments: args, result }) {
    const r = this.#result(result, 'logged as tool/code-dispatch', subCall ?? subCallId) ?? { isError: true, content: [] };
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
   * program was handed (`message` included). `subCall` is the sub-call (or its id) as the
   * harness numbered it.
   */
  onBindingSettled(subCall, { rejection } = {}) {
    const record = { kind: 'mark', call: this.callIdOf(subCall), by: 'program' };
    if (rejection === undefined) {
      record.mark = 'binding-resolved';
    } else {
      record.mark = 'binding-rejected';
      record.rejection = this.#encode(rejectionFields(rejection), `the rejection of sub-call ${record.call}`, 'rejection');
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

  /** The records so far (a guards stage still open and a held approval record are written first). */
  records() {
    for (const id of [...this.#guards.keys()]) this.#closeGuards(id);
    for (const call of [...this.#heldApproval.keys()]) this.#releaseApproval(call);
    return this.#records.slice();
  }

  /**
   * Mountable probes in the kit's hook idiom (see the README): register `pre` and `post`
   * outermost, `guards` last, `executeEnd` outermost and `dispatch` innermost in
   * `tools/execute`, `toolsResult` as the first `tools/result` observer. Each returns a promise
   * unless the recorder is `sync` (then a plain value when the `next` it calls returns one).
   */
  get probes() {
    if (this.#probes) return this.#probes;
    const rec = this;
    const needNext = (probe, next) => {
      if (typeof next === 'function') return;
      rec.problem(
        `rec.probes.${probe} was handed ${describe(next)} where its next belongs: the kit's ${probe} probe is ` +
          `${probe === 'post' ? '(call, result, next)' : probe === 'pre' ? '(call, next)' : '(call, next, signal)'}; ` +
          'wrap it to your listener shape, e.g. (ctx) => probe(ctx.call, () => ctx.next())',
      );
      throw new TypeError(`rec.probes.${probe}: next is not a function`);
    };
    const impl = {
      pre(call, next) {
        return rec.frame(
          'pre',
          call,
          () => (needNext('pre', next), next()),
          (s) => rec.onPreExecute(call, Object.hasOwn(s, 'error') ? { error: s.error } : { decision: s.value }),
          { probe: true },
        );
      },
      guards(call) {
        rec.#openGuards(call);
        return undefined;
      },
      executeEnd(call, next, signal) {
        const id = rec.callIdOf(call);
        rec.#count(rec.#executing, id, 1);
        return after(
          () => (needNext('executeEnd', next), next(signal)),
          (result) => {
            rec.#count(rec.#executing, id, -1);
            rec.onExecuteEnd(call);
            return result;
          },
          (error) => {
            rec.#count(rec.#executing, id, -1);
            rec.onExecuteEnd(call, { error });
            throw error;
          },
        );
      },
      dispatch(call, next, signal) {
        rec.onDispatch(call);
        return after(
          () => (needNext('dispatch', next), next(signal)),
          (result) => {
            rec.onBodyReturn(call, { result });
            return result;
          },
          (error) => {
            rec.onBodyReturn(call, { error });
            throw error;
          },
        );
      },
      post(call, result, next) {
        return rec.frame(
          'post',
          call,
          () => (needNext('post', next), next()),
          (s) => rec.onPostExecute(call, Object.hasOwn(s, 'error') ? { result, error: s.error } : { result, decision: s.value }),
          { probe: true },
        );
      },
    };
    const probes = {};
    for (const [name, fn] of Object.entries(impl)) {
      const hook = inMode(this.#sync, fn);
      Object.defineProperty(probes, name, {
        enumerable: true,
        get() {
          rec.#mounted.add(name);
          return hook;
        },
      });
    }
    const toolsResult = (call, result) => {
      rec.onToolsResult(call, result);
    };
    Object.defineProperty(probes, 'toolsResult', {
      enumerable: true,
      get() {
        rec.#mounted.add('toolsResult');
        return toolsResult;
      },
    });
    this.#probes = Object.freeze(probes);
    return this.#probes;
  }
}

/** The fields of a rejection: `toolName`, `message` and any other own enumerable field. */
export function rejectionFields(rejection) {
  if (rejection === null || typeof rejection !== 'object') return { message: messageOf(rejection) };
  const fields = {};
  if ('toolName' in rejection) fields.toolName = rejection.toolName;
  fields.message = messageOf(rejection);
  for (const [key, value] of Object.entries(rejection)) {
    if (key !== 'toolName' && key !== 'message') fields[key] = value;
  }
  return fields;
}
