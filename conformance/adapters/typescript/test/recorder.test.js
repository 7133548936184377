import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Recorder, failure } from 'tep-adapter';

/** A call object shaped like the original harness's execution. */
const exec = (callId, args = { path: 'a.txt' }, extra = {}) =>
  Object.freeze({ token: Symbol(callId), callId, rootCallId: callId, name: 'read', arguments: args, ...extra });

/** The trace as `node`/`type`/`mark` names, for order assertions. */
const shape = (records) =>
  records.map((r) => (r.kind === 'stage' ? r.node : r.kind === 'event' ? r.event.type : r.mark));

const ok = (text) => ({ isError: false, content: [{ type: 'text', text }], value: text });

test('session events are numbered from 1, increasing, and timed from the start', () => {
  let now = 1000;
  const rec = new Recorder({ clock: () => now });
  const c1 = exec('c1');
  rec.onToolCall(c1, { arguments: '{"path":"a.txt"}' });
  now = 1012.6;
  rec.onToolResult(c1, ok('hi'));
  const events = rec.records().map((r) => r.event);
  assert.deepEqual(events.map((e) => [e.seq, e.time]), [[1, 0], [2, 13]]);
  assert.deepEqual(events[1].sourceEventSeqs, [1], 'a tool/result answers its tool/call');
});

test("a harness's own events and the kit's share one numbering, without collisions", () => {
  const rec = new Recorder({ clock: () => 0 });
  const c1 = exec('c1');
  // The harness numbers its log 1, 2, 3 …; the kit numbers the events the adapter types.
  rec.onEvent({ seq: 1, time: 5, type: 'tool/call', data: { turn: 1, step: 1, callId: 'c1', name: 'read', arguments: '{}' } });
  assert.deepEqual(rec.records().map((r) => r.event.seq), [1], 'kept as it is while the kit has numbered nothing');
  rec.onApprovalAsked(c1, { toolName: 'read' });
  rec.onEvent({ seq: 2, time: 6, type: 'todo/write', data: { todos: [] } }, { call: 'c1' });
  rec.onEvent({ seq: 3, time: 7, type: 'tool/result', data: { callId: 'c1' }, sourceEventSeqs: [1] });
  rec.onContext(c1, 'note');
  rec.onEvent({ seq: 4, time: 8, type: 'todo/write', data: { todos: [] } }, { call: 'c1' });
  const events = rec.records().map((r) => r.event);
  assert.deepEqual(events.map((e) => [e.type, e.seq]), [
    ['tool/call', 1],
    ['approval/asked', 2],
    ['todo/write', 3],
    ['tool/result', 4],
    ['user/message', 5],
    ['todo/write', 6],
  ]);
  assert.deepEqual(events[3].sourceEventSeqs, [1], "the harness's sourceEventSeqs follow its events");
  assert.deepEqual(events.map((e) => e.time), [5, 0, 6, 7, 0, 8], "a harness's own time is kept");
  // A harness that repeats a seq still shows it: the numbering does not hide its bug.
  rec.onEvent({ seq: 4, time: 9, type: 'todo/write', data: { todos: [] } }, { call: 'c1' });
  assert.equal(rec.records().at(-1).event.seq, 6);
});

test('identity: tokens get stable names, and a sub-call carries its parent', () => {
  const rec = new Recorder();
  const outer = exec('c1');
  const again = { ...outer };
  const sub = exec('c1:code:1', {}, { rootCallId: 'c1', parent: outer.token });
  rec.onDispatch(outer);
  rec.onDispatch(again);
  rec.onBodyStart(sub);
  rec.onFsGate(sub, { intent: 'edit', target: 'a.txt' }, 'allow');
  rec.onDispatch({ token: 'mine-7', callId: 'c2', name: 'read', arguments: {} });
  const [a, b, s, gate, resumed, own] = rec.records();
  assert.equal(a.identity.token, 'tok-1');
  assert.equal(b.identity.token, 'tok-1', 'the same token is the same execution');
  assert.deepEqual(s.identity, { token: 'tok-2', callId: 'c1:code:1', name: 'read', arguments: {}, parentToken: 'tok-1' });
  assert.equal(s.parent, 'c1');
  assert.equal(a.parent, undefined, 'a top-level call has no parent');
  assert.deepEqual([gate.node, gate.parent, gate.identity], ['fsGate', 'c1', undefined]);
  assert.deepEqual(gate.intent, { intent: 'edit', target: 'a.txt' }, 'no version for a missing file');
  assert.deepEqual([resumed.node, resumed.parent], ['toolBody', 'c1'], 'the body resumes after the gate');
  assert.equal(own.identity.token, 'mine-7', 'a string token is used as it is');
});

test('values are copied when recorded: a later mutation cannot change the evidence', () => {
  const rec = new Recorder();
  const args = { path: 'a.txt' };
  const call = { token: 't', callId: 'c1', name: 'read', arguments: args };
  const result = { isError: false, content: [{ type: 'text', text: 'announced' }], value: { secret: 1 } };
  rec.onToolsResult(call, result);
  args.path = 'b.txt';
  result.content[0].text = 'edited after';
  const [final] = rec.records();
  assert.equal(final.identity.arguments.path, 'a.txt');
  assert.deepEqual(final.result, { isError: false, content: [{ type: 'text', text: 'announced' }] }, 'no value in a trace');
});

test('the three around moments come from the probes, in order, with body-settled in between', async () => {
  const rec = new Recorder();
  const call = exec('c1');
  const { executeEnd, dispatch } = rec.probes;
  const body = (signal) => rec.runBody(call, async () => 'ok');
  const result = await executeEnd(call, (s) => dispatch(call, (s2) => body(s2).then(ok), s), new AbortController().signal);
  assert.equal(result.content[0].text, 'ok');
  const records = rec.records();
  assert.deepEqual(shape(records), ['around', 'toolBody', 'body-settled', 'around', 'around']);
  assert.deepEqual(records[3].result, { isError: false, content: [{ type: 'text', text: 'ok' }] });
  assert.equal(records[4].outcome, undefined);
});

test('a throwing body still records body-settled; a wrapper that throws ends execute with `throw`', async () => {
  const rec = new Recorder();
  const call = exec('c1');
  const { executeEnd, dispatch } = rec.probes;
  const failing = () => rec.runBody(call, async () => {
    throw new Error('disk on fire');
  });
  // The harness normalizes the body's throw into a result before any wrapper sees it.
  const normalized = (s) => failing(s).catch((e) => failure(e.message));
  const wrapperThatThrowsAfter = async (s) => {
    await dispatch(call, normalized, s);
    throw new Error('metrics sink failed');
  };
  await assert.rejects(executeEnd(call, wrapperThatThrowsAfter), /metrics sink failed/);
  const records = rec.records();
  assert.deepEqual(shape(records), ['around', 'toolBody', 'body-settled', 'around', 'around']);
  assert.equal(records[3].result.content[0].text, 'Error: disk on fire');
  assert.deepEqual([records[4].outcome, records[4].reason], ['throw', 'metrics sink failed']);
});

test('an innermost next() that throws returns to around with `throw`', async () => {
  const rec = new Recorder();
  const call = exec('c1');
  await assert.rejects(
    rec.probes.dispatch(call, async () => {
      throw new Error('dispatch broke');
    }),
  );
  assert.deepEqual(
    rec.records().map((r) => [r.node, r.outcome, r.reason]),
    [
      ['around', undefined, undefined],
      ['around', 'throw', 'dispatch broke'],
    ],
  );
});

test('owned events logged while a body runs are attributed to it, even with bodies overlapping', async () => {
  const rec = new Recorder();
  let seq = 0;
  const log = (type, data) => rec.onEvent({ seq: ++seq, time: 0, type, data });
  const body = (id, ms) =>
    rec.runBody(exec(id), async () => {
      await sleep(ms);
      log('todo/write', { todos: [{ content: id, status: 'pending' }] });
    });
  await Promise.all([body('c1', 20), body('c2', 1)]);
  log('todo/write', { todos: [] });
  const owned = rec.records().filter((r) => r.kind === 'event');
  assert.deepEqual(
    owned.map((r) => [r.call, r.event.data.todos[0]?.content]),
    [
      ['c2', 'c2'],
      ['c1', 'c1'],
      [undefined, undefined],
    ],
  );
});

test('events are attributed to the call they name, and approval/decided to its approval/asked', () => {
  const rec = new Recorder();
  rec.onEvent({ seq: 1, time: 0, type: 'tool/call', data: { turn: 1, step: 1, callId: 'c1', name: 'rm', arguments: '{}' } });
  rec.onEvent({ seq: 2, time: 0, type: 'approval/asked', data: { id: 'ask-9', toolName: 'rm', callId: 'c1' } });
  rec.onEvent({ seq: 3, time: 0, type: 'approval/decided', data: { id: 'ask-9', outcome: 'rejected' } });
  const context = { id: 'm', role: 'user', content: [], source: { kind: 'tool', callId: 'c2' } };
  rec.onEvent({ seq: 4, time: 0, type: 'user/message', data: context });
  rec.onEvent({ seq: 5, time: 0, type: 'tool/code-dispatch-start', data: { subCallId: 'c1:code:1' } });
  assert.deepEqual(rec.records().map((r) => r.call), ['c1', 'c1', 'c1', 'c2', 'c1:code:1']);
});

test('the approval stage ends after the harness logs approval/decided', () => {
  const rec = new Recorder();
  const call = exec('c1');
  rec.onApprovalAsked(call, { toolName: 'rm', reason: 'sure?' });
  rec.onApproval(call, { outcome: 'rejected', reason: 'approval rejected for tool "rm"' });
  rec.onApprovalDecided(call, { outcome: 'rejected' });
  rec.onDenied(call, 'approval rejected for tool "rm"');
  assert.deepEqual(shape(rec.records()), ['approval/asked', 'approval/decided', 'approval', 'denied']);
  assert.equal(rec.records()[2].outcome, 'rejected');
});

test("a held approval is written before the call's next record, or at the end", () => {
  const rec = new Recorder();
  const c1 = exec('c1');
  rec.onApprovalAsked(c1, { toolName: 'rm' });
  rec.onApproval(c1, { outcome: 'allowed-once' });
  rec.onDispatch(exec('c2'));
  rec.onGuards(c1);
  assert.deepEqual(shape(rec.records()), ['approval/asked', 'around', 'approval', 'guards']);
  const rec2 = new Recorder();
  rec2.onApprovalAsked(c1, { toolName: 'rm' });
  rec2.onApproval(c1, { outcome: 'cancelled' });
  assert.deepEqual(shape(rec2.records()), ['approval/asked', 'approval']);
});

test('a prompt that throws ends the approval stage at once, and an unasked one is not held', () => {
  const rec = new Recorder();
  const call = exec('c1');
  rec.onApprovalAsked(call, { toolName: 'rm' });
  rec.onApproval(call, { error: new Error('prompt crashed') });
  rec.onApproval(exec('c2'), { outcome: 'unavailable', reason: 'tool "rm" requires approval (not yet supported)' });
  const [, threw, unavailable] = rec.records();
  assert.deepEqual([threw.outcome, threw.reason], ['throw', 'prompt crashed']);
  assert.deepEqual([unavailable.call, unavailable.outcome], ['c2', 'unavailable']);
});

test('guards: a deny or a throw ends the stage with the verdicts so far; the last probe records an allow', async () => {
  const rec = new Recorder();
  const c1 = exec('c1');
  rec.onGuardVerdict(c1, 'g1', { verdict: 'abstain' });
  rec.onGuardVerdict(c1, 'g2', { verdict: 'deny', reason: 'owner says no' });
  const c2 = exec('c2');
  rec.onGuardVerdict(c2, 'g1', { verdict: 'allow' });
  await rec.probes.guards(c2);
  const c3 = exec('c3');
  rec.onGuardVerdict(c3, 'g1', { error: new Error('guard crashed') });
  const [denied, allowed, threw] = rec.records();
  assert.deepEqual(
    [denied.outcome, denied.reason, denied.listeners, denied.verdicts],
    [
      'deny',
      'owner says no',
      ['g1', 'g2'],
      [
        { guard: 'g1', verdict: 'abstain' },
        { guard: 'g2', verdict: 'deny', reason: 'owner says no' },
      ],
    ],
  );
  assert.deepEqual([allowed.outcome, allowed.verdicts], ['allow', [{ guard: 'g1', verdict: 'allow' }]]);
  assert.equal(allowed.identity.callId, 'c2');
  assert.deepEqual([threw.outcome, threw.reason, threw.verdicts[0].verdict], ['throw', 'guard crashed', 'throw']);
});

test('pre and post probes record the decision, the listeners entered, and throws', async () => {
  const rec = new Recorder();
  const c1 = exec('c1');
  const c2 = exec('c2');
  rec.onListenerEntered(c1, 'pre', 'policy');
  rec.onListenerEntered(c2, 'pre', 'other');
  await rec.probes.pre(c1, async () => ({ type: 'ask', reason: 'sure?' }));
  await assert.rejects(
    rec.probes.pre(c2, async () => {
      throw new Error('hook crashed');
    }),
  );
  const handed = failure('blocked by policy');
  rec.onListenerEntered(c1, 'post', 'audit');
  await rec.probes.post(c1, handed, async () => ({ type: 'block', feedback: [] }));
  await rec.probes.post(c2, ok('fine'), async () => ({ type: 'accept' }));
  const [ask, threw, block, accept] = rec.records();
  assert.deepEqual([ask.outcome, ask.reason, ask.listeners], ['ask', 'sure?', ['policy']]);
  assert.deepEqual([threw.outcome, threw.reason, threw.listeners], ['throw', 'hook crashed', ['other']]);
  assert.deepEqual([block.outcome, block.listeners, block.result.error], ['block', ['audit'], { message: 'blocked by policy' }]);
  assert.deepEqual([accept.outcome, accept.listeners], ['accept', []], 'entered lists are per call and per waterfall');
});

test('tool/result has the rev2 message shape; error info only when the failure is coded', () => {
  const rec = new Recorder();
  const call = exec('c1');
  rec.onToolCall(call);
  rec.onToolResult(call, failure('late', { name: 'ToolTimeoutError', code: 'TOOL_TIMEOUT' }));
  rec.onToolResult(call, failure('denied'));
  const [toolCall, timedOut, denied] = rec.records().map((r) => r.event);
  assert.equal(toolCall.data.arguments, '{"path":"a.txt"}', 'the raw string defaults to the compact arguments');
  assert.deepEqual(timedOut.data.message, {
    id: 'result-c1',
    role: 'user',
    source: { kind: 'tool', callId: 'c1' },
    content: [{ type: 'tool-result', toolCallId: 'c1', content: [{ type: 'text', text: 'Error: late' }], isError: true }],
  });
  assert.deepEqual(timedOut.data.error, { name: 'ToolTimeoutError', code: 'TOOL_TIMEOUT' });
  assert.equal(timedOut.surfaceOp, 'append');
  assert.equal(denied.data.error, undefined);
});

test('rev1 shapes: a flat tool/result, context/message, and a summary in tool/code-dispatch', () => {
  const rec = new Recorder({ spec: 'rev1' });
  const call = exec('c1');
  rec.onToolResult(call, ok('hi'));
  rec.onContext(call, 'note');
  rec.onCodeDispatch('c1:code:1', {
    rootCallId: 'c1',
    parentCallId: 'c1',
    subCallId: 'c1:code:1',
    name: 'read',
    arguments: {},
    result: ok('x'.repeat(300)),
  });
  const [result, context, dispatched] = rec.records().map((r) => r.event);
  assert.deepEqual(result.data, { callId: 'c1', content: [{ type: 'text', text: 'hi' }], isError: false });
  assert.deepEqual([context.type, context.surfaceOp], ['context/message', undefined]);
  assert.equal(dispatched.data.resultSummary.length, 200);
  assert.equal(dispatched.data.rootCallId, undefined);
});

test('contexts are user/message events, numbered per call', () => {
  const rec = new Recorder();
  rec.onContext('c1', 'one');
  rec.onContext('c1', 'two');
  rec.onContext('c2', 'three', { id: 'mine' });
  assert.deepEqual(
    rec.records().map((r) => [r.call, r.event.data.id, r.event.data.content[0].text]),
    [
      ['c1', 'context-c1-1', 'one'],
      ['c1', 'context-c1-2', 'two'],
      ['c2', 'mine', 'three'],
    ],
  );
});

test('a binding rejection is recorded with every field the program was handed', () => {
  class ToolCallError extends Error {
    constructor(toolName, message) {
      super(message);
      this.toolName = toolName;
    }
  }
  const leaky = Object.assign(new ToolCallError('rm', 'no'), { content: [{ type: 'text', text: 'Error: no' }] });
  const rec = new Recorder();
  rec.onBindingSettled('c1:code:1');
  rec.onBindingSettled('c1:code:2', { rejection: new ToolCallError('rm', 'no') });
  rec.onBindingSettled('c1:code:3', { rejection: leaky });
  const [resolved, rejected, leaked] = rec.records();
  assert.deepEqual(resolved, { kind: 'mark', call: 'c1:code:1', by: 'program', mark: 'binding-resolved' });
  assert.deepEqual(rejected.rejection, { toolName: 'rm', message: 'no' });
  assert.deepEqual(Object.keys(leaked.rejection), ['toolName', 'message', 'content'], 'a leak stays visible');
});

test('idle() waits for tracked side work, including work tracked meanwhile', async () => {
  const rec = new Recorder();
  rec.track(
    sleep(5).then(() => {
      rec.onObserverSettled('c1', 'first', 5);
      rec.track(sleep(5).then(() => rec.onObserverSettled('c1', 'second', 5)));
    }),
  );
  rec.track(Promise.reject(new Error('an observer failed')));
  await rec.idle();
  assert.deepEqual(rec.records().map((r) => r.by), ['first', 'second']);
});

test('typed owned events, hooks and the batch records', async () => {
  const rec = new Recorder();
  const call = exec('c1');
  rec.onModel([{ callId: 'c1', name: 'read', concurrencySafe: true }, { callId: 'c2', name: 'x' }]);
  await rec.runBody(call, async () => {
    rec.onFsObserved({ target: 'a.txt', state: { kind: 'present', version: 1 } });
    rec.onTodoWrite([{ content: 'review', status: 'pending' }]);
    rec.onHook({ point: 'PreToolUse', handlerId: 'h1', decision: 'allow' });
  });
  rec.onBatchSettled();
  const records = rec.records();
  assert.deepEqual(records[0].calls, [{ callId: 'c1', name: 'read', concurrencySafe: true }, { callId: 'c2', name: 'x' }]);
  assert.deepEqual(shape(records), [
    'model',
    'toolBody',
    'fs/observed',
    'todo/write',
    'hook/invoked',
    'hook/result',
    'body-settled',
    'allResults',
  ]);
  assert.ok(records.slice(2, 6).every((r) => r.call === 'c1'));
  assert.equal(records[2].event.data.actor, 'agent');
  assert.deepEqual(records[4].event.data, { turn: 1, point: 'PreToolUse', dialect: 'claude-code', handlerId: 'h1' });
  assert.equal(records[5].event.data.durationMs, 0);
  assert.equal(records[7].call, undefined, 'allResults belongs to the batch');
});

test('custom shapes: identify and readPreDecision adapt another harness', async () => {
  const rec = new Recorder({
    identify: (c) => ({ token: c.id, callId: c.id, name: c.tool, arguments: c.input }),
    readPreDecision: (d) => (d.allowed ? { outcome: 'allow' } : { outcome: 'deny', reason: d.why }),
  });
  const call = { id: 'call_1', tool: 'bash', input: { cmd: 'ls' } };
  await rec.probes.pre(call, async () => ({ allowed: false, why: 'no shell' }));
  const [pre] = rec.records();
  assert.deepEqual([pre.call, pre.outcome, pre.reason], ['call_1', 'deny', 'no shell']);
  assert.deepEqual(pre.identity, { token: 'call_1', callId: 'call_1', name: 'bash', arguments: { cmd: 'ls' } });
});
