import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick, setTimeout as sleep } from 'node:timers/promises';
import { CancelledError, Recorder, ScriptError, Scripts, failure, programContent } from 'tep-adapter';

const exec = (callId, name = 'read') => Object.freeze({ token: Symbol(callId), callId, name, arguments: {} });
const ok = (text) => ({ isError: false, content: [{ type: 'text', text }] });

/** Scripts for a scenario made of `parts`, with a fresh recorder. */
function scriptsFor(parts = {}) {
  const scenario = {
    id: 't',
    tools: [{ name: 'read' }, { name: 'build', timeoutMs: 20 }],
    calls: [{ callId: 'c1', tool: 'read' }],
    expect: { calls: {} },
    ...parts,
  };
  const recorder = new Recorder();
  return { scripts: new Scripts(scenario, recorder), recorder };
}

const marks = (recorder) => recorder.records().map((r) => (r.kind === 'stage' ? r.node : r.kind === 'event' ? r.event.type : r.mark));

describe('pre-execute listeners', () => {
  const decide = {
    c1: 'allow',
    c2: { deny: 'blocked' },
    c3: { ask: 'sure?' },
    c4: { ask: null },
    c5: { rewrite: { path: '/etc/passwd' } },
    c6: { throw: 'hook crashed' },
    c7: 'pass',
  };
  const { scripts, recorder } = scriptsFor({ pre: [{ id: 'policy', decide }] });
  const [listener] = scripts.preListeners;
  const next = async () => ({ type: 'deny', reason: 'from next' });

  test('each action decides, or passes to next', async () => {
    assert.equal(listener.id, 'policy');
    assert.deepEqual(await listener(exec('c1'), next), { type: 'allow' });
    assert.deepEqual(await listener(exec('c2'), next), { type: 'deny', reason: 'blocked' });
    assert.deepEqual(await listener(exec('c3'), next), { type: 'ask', reason: 'sure?' });
    assert.deepEqual(await listener(exec('c4'), next), { type: 'ask' });
    assert.deepEqual(await listener(exec('c5'), next), { type: 'allow', updatedInput: { path: '/etc/passwd' } });
    await assert.rejects(listener(exec('c6'), next), (e) => e instanceof ScriptError && e.message === 'hook crashed');
    assert.deepEqual(await listener(exec('c7'), next), { type: 'deny', reason: 'from next' });
    assert.deepEqual(await listener(exec('unlisted'), next), { type: 'deny', reason: 'from next' });
  });

  test('every entry is reported, for the pre record', async () => {
    await recorder.probes.pre(exec('c8'), () => listener(exec('c8'), next));
    const pre = recorder.records().at(-1);
    assert.deepEqual([pre.outcome, pre.listeners], ['deny', ['policy']]);
  });

  test('a harness with another way to rewrite says how', async () => {
    const recorder2 = new Recorder();
    const scenario = { id: 't', tools: [], calls: [], expect: {}, pre: [{ id: 'p', decide: { '*': { rewrite: { a: 1 } } } }] };
    const custom = new Scripts(scenario, recorder2, { rewrite: (args) => ({ type: 'allow', input: args }) });
    assert.deepEqual(await custom.preListeners[0](exec('c1'), next), { type: 'allow', input: { a: 1 } });
  });
});

describe('the approval answerer', () => {
  test('answers per call, "rejected" by default, and records the approval stage', async () => {
    const answers = { c1: 'allowed-once', c2: 'cancelled', c3: 'unavailable', c4: { throw: 'prompt crashed' } };
    const { scripts, recorder } = scriptsFor({ approval: { answers } });
    const ask = scripts.approval;
    assert.equal(await ask({ callId: 'c1', toolName: 'rm' }), 'allowed-once');
    assert.equal(await ask({ callId: 'c2', toolName: 'rm' }), 'cancelled');
    assert.equal(await ask({ callId: 'c3', toolName: 'rm' }), 'unavailable');
    assert.equal(await ask({ callId: 'c9', toolName: 'rm' }), 'rejected');
    await assert.rejects(ask({ callId: 'c4', toolName: 'rm' }), /prompt crashed/);
    assert.deepEqual(
      recorder.records().map((r) => [r.node, r.call, r.outcome]),
      [
        ['approval', 'c1', 'allowed-once'],
        ['approval', 'c2', 'cancelled'],
        ['approval', 'c3', 'unavailable'],
        ['approval', 'c9', 'rejected'],
        ['approval', 'c4', 'throw'],
      ],
    );
  });

  test('no approval in the scenario: no prompt to mount', () => {
    assert.equal(scriptsFor().scripts.approval, undefined);
  });
});

describe('guards', () => {
  test('abstain by default; deny, allow and throw as scripted; verdicts reported', async () => {
    const decide = { c2: { deny: 'owner says no' }, c3: 'allow', c4: { throw: 'guard crashed' } };
    const { scripts, recorder } = scriptsFor({ guards: [{ id: 'owner', decide }] });
    const [guard] = scripts.guards;
    assert.equal(guard.id, 'owner');
    assert.equal(await guard(exec('c1')), undefined);
    assert.deepEqual(await guard(exec('c2')), { type: 'deny', reason: 'owner says no' });
    assert.deepEqual(await guard(exec('c3')), { type: 'allow' });
    await assert.rejects(guard(exec('c4')), /guard crashed/);
    await recorder.probes.guards(exec('c1'));
    await recorder.probes.guards(exec('c3'));
    // Each consultation is one record, written when it is over (here: when the trace is read).
    const stages = recorder.records().map((r) => [r.call, r.outcome, r.verdicts.map((v) => v.verdict)]);
    assert.deepEqual(stages, [
      ['c1', 'allow', ['abstain']],
      ['c2', 'deny', ['deny']],
      ['c3', 'allow', ['allow']],
      ['c4', 'throw', ['throw']],
    ]);
  });
});

describe('wrappers', () => {
  const wrappers = (list) => scriptsFor({ wrappers: list }).scripts.wrappers;

  test('timeout: at the deadline it cancels the signal, waits for the body to stop, and times out', async () => {
    const [timeout] = wrappers([{ kind: 'timeout' }]);
    let stopped = false;
    const body = async (signal) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
      await tick();
      stopped = true;
      return failure('tool call was cancelled');
    };
    const result = await timeout(exec('c1', 'build'), body, new AbortController().signal);
    assert.ok(stopped, 'the wrapper returned only after the body stopped');
    assert.deepEqual(result, failure('tool call timed out after 20ms', { name: 'ToolTimeoutError', code: 'TOOL_TIMEOUT' }));
  });

  test('timeout: a fast body, or a tool with no declared timeout, is left alone', async () => {
    const [timeout] = wrappers([{ kind: 'timeout' }]);
    const signal = new AbortController().signal;
    assert.deepEqual(await timeout(exec('c1', 'build'), async () => ok('fast'), signal), ok('fast'));
    let handed;
    await timeout(exec('c1', 'read'), async (s) => ((handed = s), ok('x')), signal);
    assert.equal(handed, signal, 'no deadline: the signal is passed on as it is');
  });

  test("timeout: when the caller's signal aborted first, the body's result stands", async () => {
    const [timeout] = wrappers([{ kind: 'timeout' }]);
    const caller = new AbortController();
    caller.abort();
    const result = await timeout(exec('c1', 'build'), async (s) => (s.aborted ? failure('cancelled') : ok('ran')), caller.signal);
    assert.deepEqual(result, failure('cancelled'));
  });

  test('retry: dispatches again while the result is an error, up to the attempts', async () => {
    const [retry] = wrappers([{ kind: 'retry', attempts: 3 }]);
    let dispatches = 0;
    const flaky = async () => (++dispatches < 2 ? failure('flaky') : ok('fine'));
    assert.deepEqual(await retry(exec('c1'), flaky, new AbortController().signal), ok('fine'));
    assert.equal(dispatches, 2);
    dispatches = 0;
    const broken = async () => (++dispatches, failure('broken'));
    assert.deepEqual(await retry(exec('c1'), broken, new AbortController().signal), failure('broken'));
    assert.equal(dispatches, 3);
  });

  test('metrics changes nothing', async () => {
    const [metrics] = wrappers([{ kind: 'metrics' }]);
    assert.deepEqual(await metrics(exec('c1'), async () => failure('x')), failure('x'));
  });

  test('context: adds a wrapper context after next, for the listed calls only', async () => {
    const [all, some] = wrappers([
      { kind: 'context', text: 'seen' },
      { kind: 'context', text: 'only c2', calls: ['c2'] },
    ]);
    const withTool = async () => ({ ...ok('x'), additionalContexts: [{ origin: 'tool', text: 'deferred' }] });
    assert.deepEqual((await all(exec('c1'), withTool)).additionalContexts, [
      { origin: 'tool', text: 'deferred' },
      { origin: 'wrapper', text: 'seen' },
    ]);
    assert.equal((await some(exec('c1'), async () => ok('x'))).additionalContexts, undefined);
    assert.deepEqual((await some(exec('c2'), async () => ok('x'))).additionalContexts, [{ origin: 'wrapper', text: 'only c2' }]);
  });

  test('throw: before dispatch (the body never runs) or after it, for the listed calls', async () => {
    const [before, after, other] = wrappers([
      { kind: 'throw', message: 'refused', phase: 'before' },
      { kind: 'throw', message: 'sink failed' },
      { kind: 'throw', message: 'not you', calls: ['c9'] },
    ]);
    let dispatched = 0;
    const body = async () => (dispatched++, ok('x'));
    await assert.rejects(before(exec('c1'), body), /refused/);
    assert.equal(dispatched, 0);
    await assert.rejects(after(exec('c1'), body), /sink failed/);
    assert.equal(dispatched, 1);
    assert.deepEqual(await other(exec('c1'), body), ok('x'));
  });
});

describe('bodies', () => {
  const bodyOf = (steps, extra = {}) => scriptsFor({ calls: [{ callId: 'c1', tool: 'read', body: steps }], ...extra });

  test('without return or throw the value is "ok"; toolBody first, body-settled last', async () => {
    const { scripts, recorder } = bodyOf([{ sleep: 1 }]);
    assert.equal(await scripts.body(exec('c1'), new AbortController().signal), 'ok');
    assert.deepEqual(marks(recorder), ['toolBody', 'body-settled']);
  });

  test('return and throw', async () => {
    const { scripts } = bodyOf([{ return: { n: 1 } }, { throw: 'never' }]);
    assert.deepEqual(await scripts.body(exec('c1')), { n: 1 });
    const { scripts: throwing, recorder } = bodyOf([{ throw: 'disk on fire' }]);
    await assert.rejects(throwing.body(exec('c1')), (e) => e instanceof ScriptError && e.message === 'disk on fire');
    assert.deepEqual(marks(recorder), ['toolBody', 'body-settled'], 'settled even when it throws');
  });

  test('sleep and hang fail as cancelled when the signal aborts', async () => {
    for (const step of [{ sleep: 60_000 }, 'hang']) {
      const { scripts, recorder } = bodyOf([step]);
      const controller = new AbortController();
      const running = scripts.body(exec('c1'), controller.signal);
      await tick();
      controller.abort();
      await assert.rejects(running, (e) => e instanceof CancelledError && e.code === 'ABORTED');
      assert.deepEqual(marks(recorder), ['toolBody', 'body-settled']);
    }
  });

  test('slowStop keeps running after the abort, then fails as cancelled', async () => {
    const { scripts, recorder } = bodyOf([{ slowStop: 30 }]);
    const controller = new AbortController();
    let settled = false;
    const running = scripts.body(exec('c1'), controller.signal).finally(() => (settled = true));
    controller.abort();
    await tick();
    assert.equal(settled, false, 'it ignores the signal for a while');
    assert.deepEqual(marks(recorder), ['toolBody']);
    await assert.rejects(running, CancelledError);
    assert.deepEqual(marks(recorder), ['toolBody', 'body-settled']);
  });

  test('fs, todo, hook and deferred-context steps go through the effects, in order', async () => {
    const steps = [
      { read: 'a.txt' },
      { write: { path: 'b.txt', content: 'B' } },
      { edit: { path: 'a.txt', old: 'x', new: 'y' } },
      { externalWrite: { path: 'a.txt', content: 'changed' } },
      { todo: [{ content: 'review', status: 'pending' }] },
      { hook: { point: 'PreToolUse', handlerId: 'h1', decision: 'allow' } },
      { deferContext: 'later' },
    ];
    const { scripts } = bodyOf(steps);
    const calls = [];
    const effect = (name) => async (...args) => void calls.push([name, ...args]);
    const effects = Object.fromEntries(
      ['read', 'write', 'edit', 'externalWrite', 'todo', 'hook', 'deferContext'].map((n) => [n, effect(n)]),
    );
    await scripts.body(exec('c1'), undefined, effects);
    assert.deepEqual(calls, [
      ['read', 'a.txt'],
      ['write', 'b.txt', 'B'],
      ['edit', 'a.txt', 'x', 'y'],
      ['externalWrite', 'a.txt', 'changed'],
      ['todo', [{ content: 'review', status: 'pending' }]],
      ['hook', { point: 'PreToolUse', handlerId: 'h1', decision: 'allow' }],
      ['deferContext', 'later'],
    ]);
  });

  test('an effect that fails makes the body throw; a missing effect says which', async () => {
    const { scripts } = bodyOf([{ read: 'missing.txt' }]);
    const read = () => {
      throw new Error('no such file: missing.txt');
    };
    await assert.rejects(scripts.body(exec('c1'), undefined, { read }), /no such file/);
    await assert.rejects(scripts.body(exec('c1'), undefined, {}), /effects\.read\(path\)/);
  });

  test('failUntilAttempt counts the dispatches of each call', async () => {
    const { scripts } = bodyOf([{ failUntilAttempt: 3 }, { return: 'third time lucky' }]);
    await assert.rejects(scripts.body(exec('c1')), /attempt 1 fails/);
    await assert.rejects(scripts.body(exec('c1')), /attempt 2 fails/);
    assert.equal(await scripts.body(exec('c1')), 'third time lucky');
    assert.equal(scripts.attempts('c1'), 3);
  });
});

describe('post-execute listeners', () => {
  const decide = {
    c1: { addContext: 'audited' },
    c2: { accept: { content: 'replaced', context: 'why' } },
    c3: { accept: { value: { n: 1 } } },
    c4: { block: { feedback: 'not allowed', context: 'policy' } },
    c5: { throw: 'post crashed' },
  };
  const { scripts, recorder } = scriptsFor({ post: [{ id: 'audit', decide }] });
  const [listener] = scripts.postListeners;
  const next = async () => ({ type: 'accept', additionalContexts: ['inner'] });

  test('each action, with the result it was handed', async () => {
    const r = ok('x');
    assert.equal(listener.id, 'audit');
    assert.deepEqual(await listener(exec('c1'), r, next), { type: 'accept', additionalContexts: ['inner', 'audited'] });
    assert.deepEqual(await listener(exec('c2'), r, next), {
      type: 'accept',
      content: [{ type: 'text', text: 'replaced' }],
      additionalContexts: ['why'],
    });
    assert.deepEqual(await listener(exec('c3'), r, next), { type: 'accept', value: { n: 1 }, additionalContexts: [] });
    assert.deepEqual(await listener(exec('c4'), r, next), {
      type: 'block',
      feedback: [{ type: 'text', text: 'not allowed' }],
      additionalContexts: ['policy'],
    });
    await assert.rejects(listener(exec('c5'), r, next), /post crashed/);
    assert.deepEqual(await listener(exec('c6'), r, next), await next());
  });

  test('entries are reported for the post record', async () => {
    await recorder.probes.post(exec('c8'), ok('x'), () => listener(exec('c8'), ok('x'), async () => ({ type: 'block' })));
    const post = recorder.records().at(-1);
    assert.deepEqual([post.outcome, post.listeners], ['block', ['audit']]);
  });
});

describe('observers', () => {
  test('try to change the outcome, then record observer-settled after their work', async () => {
    const { scripts, recorder } = scriptsFor({ observers: [{ id: 'telemetry', asyncMs: 5, mutate: 'hacked' }] });
    const [observer] = scripts.observers;
    const frozen = Object.freeze({ isError: false, content: Object.freeze([{ type: 'text', text: 'announced' }]) });
    const work = observer(exec('c1'), frozen);
    assert.equal(frozen.content[0].text, 'announced', 'a frozen outcome refuses, silently');
    const mutable = ok('announced');
    observer(exec('c2'), mutable);
    assert.equal(mutable.content[0].text, 'hacked', 'an outcome that is not frozen is changed: the attempt is real');
    assert.deepEqual(recorder.records(), [], 'nothing before the work ends');
    await work;
    await recorder.idle();
    assert.deepEqual(
      recorder.records().map((r) => [r.mark, r.call, r.by, r.afterMs]),
      [
        ['observer-settled', 'c1', 'telemetry', 5],
        ['observer-settled', 'c2', 'telemetry', 5],
      ],
    );
  });
});

describe('finalizeContent', () => {
  const { scripts, recorder } = scriptsFor({
    tools: [
      { name: 'keep', finalize: 'keep' },
      { name: 'prefix', finalize: { prefix: '> ' } },
      { name: 'replace', finalize: { replace: 'final' } },
      { name: 'throw', finalize: { throw: 'finalizer crashed' } },
      { name: 'none' },
    ],
  });
  const byName = Object.fromEntries(scripts.tools.map((t) => [t.name, t.finalizeContent]));
  const candidate = { isError: false, content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] };

  test('each action, recorded with its candidate', () => {
    assert.equal(byName.none, undefined, 'a definition without finalizeContent has none');
    assert.equal(byName.keep(exec('c1'), candidate), undefined);
    assert.deepEqual(byName.prefix(exec('c2'), candidate), [
      { type: 'text', text: '> a' },
      { type: 'text', text: '> b' },
    ]);
    assert.deepEqual(byName.replace(exec('c3'), candidate), [{ type: 'text', text: 'final' }]);
    assert.throws(() => byName.throw(exec('c4'), candidate), /finalizer crashed/);
    const records = recorder.records();
    assert.deepEqual(records.map((r) => [r.node, r.call, r.outcome]), [
      ['finalize', 'c1', undefined],
      ['finalize', 'c2', undefined],
      ['finalize', 'c3', undefined],
      ['finalize', 'c4', 'throw'],
    ]);
    assert.deepEqual(records[0].result, candidate);
  });
});

describe('programs', () => {
  /** Bindings whose sub-calls resolve or reject as `outcomes` says, recording the order of issue. */
  function bindings(outcomes) {
    const issued = [];
    return {
      issued,
      call(tool, args) {
        issued.push([tool, args]);
        if (tool === 'run_code') return Promise.reject(Object.assign(new Error('run_code is not available to programs'), { toolName: 'run_code' }));
        const outcome = outcomes[issued.filter(([t]) => t !== 'run_code').length - 1];
        return outcome instanceof Error ? sleep(1).then(() => Promise.reject(outcome)) : sleep(1).then(() => outcome);
      },
    };
  }
  const rejection = (toolName, message) => Object.assign(new Error(message), { toolName });
  const run = async (program, outcomes) => {
    const { scripts, recorder } = scriptsFor({ calls: [{ callId: 'c1', tool: 'run_code', program }] });
    const b = bindings(outcomes);
    const output = await scripts.program(exec('c1', 'run_code'), b).catch((e) => ({ error: e }));
    return { output, recorder, issued: b.issued };
  };

  test('calls log their outcome and mark how their binding settled', async () => {
    const program = [
      { call: { tool: 'read', arguments: { path: 'a' } } },
      { call: { tool: 'stat' } },
      { call: { tool: 'rm' } },
      { log: 'done' },
      { return: { ok: true } },
    ];
    const { output, recorder, issued } = await run(program, ['text', { size: 3 }, rejection('rm', 'no')]);
    assert.deepEqual(issued, [['read', { path: 'a' }], ['stat', {}], ['rm', {}]]);
    assert.deepEqual(output, { logs: ['read -> text', 'stat -> {"size":3}', 'rm rejected: rm: no', 'done'], value: { ok: true } });
    assert.equal(programContent(output), 'read -> text\nstat -> {"size":3}\nrm rejected: rm: no\ndone\n{\n  "ok": true\n}');
    const records = recorder.records();
    assert.deepEqual(
      records.map((r) => [r.node ?? r.mark, r.call, r.by]),
      [
        ['toolBody', 'c1', undefined],
        ['binding-resolved', 'c1:code:1', 'program'],
        ['binding-resolved', 'c1:code:2', 'program'],
        ['binding-rejected', 'c1:code:3', 'program'],
        ['body-settled', 'c1', 'program'],
      ],
    );
    assert.deepEqual(records[3].rejection, { toolName: 'rm', message: 'no' });
  });

  test('a group is issued at once and settles in order; an uncaught rejection fails the program after all settle', async () => {
    const program = [{ all: [{ tool: 'a' }, { tool: 'b', onReject: 'fail' }, { tool: 'c' }] }, { return: 'unreached' }];
    const { output, recorder, issued } = await run(program, ['1', rejection('b', 'denied'), '3']);
    assert.equal(issued.length, 3);
    assert.ok(output.error instanceof ScriptError);
    assert.equal(output.error.message, 'b: denied');
    assert.deepEqual(
      recorder.records().map((r) => r.mark ?? r.node),
      ['toolBody', 'binding-resolved', 'binding-rejected', 'binding-resolved', 'body-settled'],
    );
  });

  test('callRunCode is rejected and logged, and issues no sub-call id', async () => {
    const { output, recorder } = await run(['callRunCode', { call: { tool: 'read' } }], ['x']);
    assert.deepEqual(output.logs, ['run_code rejected: run_code: run_code is not available to programs', 'read -> x']);
    assert.equal(recorder.records()[1].call, 'c1:code:1');
  });

  test('throw fails the program; no steps left means no value; programContent renders both', async () => {
    const { output, recorder } = await run([{ log: 'before' }, { throw: 'program crashed' }], []);
    assert.equal(output.error.message, 'program crashed');
    assert.equal(recorder.records().at(-1).mark, 'body-settled');
    assert.deepEqual((await run([{ log: 'only' }], [])).output, { logs: ['only'] });
    assert.equal(programContent({ logs: [] }), '(run_code completed with no output)');
    assert.equal(programContent({ logs: ['a'], value: 'b' }), 'a\nb');
  });
});
