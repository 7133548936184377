// Probes that record facts, and the shapes of real harnesses: synchronous hooks, the harness's
// own decisions, contexts, content, results and signals, the content-only finalizer, a Code Mode
// runner of the harness's own.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as tick } from 'node:timers/promises';
import { Recorder, Scripts, contentText, defaultToResult, failure } from 'tep-adapter';

const exec = (callId, name = 'read') => Object.freeze({ token: Symbol(callId), callId, name, arguments: {} });
const ok = (text) => ({ isError: false, content: [{ type: 'text', text }] });
const shape = (records) => records.map((r) => (r.kind === 'stage' ? r.node : r.kind === 'event' ? r.event.type : r.mark));
const isPromise = (v) => typeof v?.then === 'function';

function setup(parts = {}, options = {}) {
  const scenario = {
    id: 't',
    tools: [{ name: 'read' }, { name: 'build', timeoutMs: 20 }],
    calls: [{ callId: 'c1', tool: 'read' }],
    expect: { calls: {} },
    ...parts,
  };
  const recorder = new Recorder({ sync: options.sync, ...(options.recorder ?? {}) });
  return { recorder, scripts: new Scripts(scenario, recorder, { sync: options.sync, ...(options.scripts ?? {}) }) };
}

/** A waterfall as most harnesses write it: `(…args, next)`, outermost first. */
const waterfall = (listeners, args, last) => {
  const step = (i) => (i < listeners.length ? listeners[i](...args, () => step(i + 1)) : last());
  return step(0);
};

describe('guards: one record per consultation, with every verdict given', () => {
  const guards = [
    { id: 'g1', decide: { '*': { deny: 'first' } } },
    { id: 'g2', decide: { '*': 'abstain' } },
  ];

  test('a guard consulted after a deny is in the record; the probe reached after it changes nothing', async () => {
    const { recorder, scripts } = setup({ guards });
    const c1 = exec('c1');
    for (const guard of [...scripts.guards, recorder.probes.guards]) await guard(c1); // a pipeline that goes on after the deny
    recorder.onDenied(c1, 'first');
    const [guardsRecord, denied] = recorder.records();
    assert.deepEqual([guardsRecord.node, guardsRecord.outcome, guardsRecord.reason], ['guards', 'deny', 'first']);
    assert.deepEqual(guardsRecord.verdicts.map((v) => [v.guard, v.verdict]), [['g1', 'deny'], ['g2', 'abstain']]);
    assert.equal(denied.node, 'denied');
  });

  test('the probe reached first (the pipeline reordered the guards) is not taken for "every guard abstained"', async () => {
    const { recorder, scripts } = setup({ guards });
    const c1 = exec('c1');
    for (const guard of [recorder.probes.guards, ...scripts.guards]) await guard(c1);
    recorder.onDenied(c1, 'first');
    const guardRecords = recorder.records().filter((r) => r.node === 'guards');
    assert.deepEqual(guardRecords.map((r) => [r.outcome, r.listeners]), [['deny', ['g1', 'g2']]]);
  });

  test("the record ends before the call's next record and another call's ordered stage, not before another body's", async () => {
    const { recorder, scripts } = setup({ guards: [{ id: 'g', decide: {} }] });
    const [c1, c2] = [exec('c1'), exec('c2')];
    await scripts.guards[0](c1);
    recorder.onBodySettled(c2); // another call's body, running meanwhile
    await recorder.probes.guards(c1);
    recorder.onToolCall(c2); // another call's ordered stage
    await scripts.guards[0](c1);
    recorder.onDispatch(c1); // the call's own next record
    assert.deepEqual(shape(recorder.records()), ['body-settled', 'guards', 'tool/call', 'guards', 'around']);
  });
});

describe('pre and post: the outermost kit listener records the stage', () => {
  const pre = [
    { id: 'first', decide: { '*': 'pass' } },
    { id: 'second', decide: { '*': { deny: 'no' } } },
  ];

  test('with the probe outermost, one pre record with the listeners entered', async () => {
    const { recorder, scripts } = setup({ pre });
    await waterfall([recorder.probes.pre, ...scripts.preListeners], [exec('c1')], async () => ({ type: 'allow' }));
    assert.deepEqual(recorder.records().map((r) => [r.node, r.outcome, r.listeners]), [['pre', 'deny', ['first', 'second']]]);
  });

  test('a pipeline that moved the probe inward is recorded for what it decided, not as a missing pre', async () => {
    const { recorder, scripts } = setup({ pre });
    const reversed = [recorder.probes.pre, ...scripts.preListeners].reverse();
    const decision = await waterfall(reversed, [exec('c1')], async () => ({ type: 'allow' }));
    assert.deepEqual(decision, { type: 'deny', reason: 'no' });
    assert.deepEqual(recorder.records().map((r) => [r.node, r.outcome, r.listeners]), [['pre', 'deny', ['second']]]);
  });

  test('without the probe mounted, the scripted listeners record nothing (the adapter records pre itself)', async () => {
    const { recorder, scripts } = setup({ pre });
    await waterfall(scripts.preListeners, [exec('c1')], async () => ({ type: 'allow' }));
    assert.deepEqual(recorder.records(), []);
  });

  test('post: reordered listeners, the outermost kit one records, with the result it was handed', async () => {
    const { recorder, scripts } = setup({ post: [{ id: 'a', decide: { '*': { addContext: 'seen' } } }] });
    const listeners = [...scripts.postListeners, recorder.probes.post];
    const handed = ok('x');
    await waterfall(listeners, [exec('c1'), handed], async () => ({ type: 'accept' }));
    const [post] = recorder.records();
    assert.deepEqual([post.node, post.outcome, post.listeners, post.result], ['post', 'accept', ['a'], handed]);
  });
});

describe('execute: a re-dispatch past the innermost probe', () => {
  /** A waterfall that keeps one index per run: a second next() reaches the dispatch directly. */
  const statefulAround = (listeners, call, dispatch) => {
    let index = 0;
    const next = async (s) => (index < listeners.length ? listeners[index++](call, next, s) : dispatch(s));
    return next(undefined);
  };

  test("a retry's second dispatch gets the around of its dispatch, before its toolBody", async () => {
    const { recorder, scripts } = setup({ wrappers: [{ kind: 'retry', attempts: 2 }], calls: [{ callId: 'c1', tool: 'read', body: [{ failUntilAttempt: 2 }] }] });
    const c1 = exec('c1');
    const body = () => scripts.body(c1).then(ok, (e) => failure(e.message));
    await statefulAround([recorder.probes.executeEnd, ...scripts.wrappers, recorder.probes.dispatch], c1, body);
    assert.deepEqual(shape(recorder.records()), ['around', 'toolBody', 'body-settled', 'around', 'around', 'toolBody', 'body-settled', 'around', 'around']);
  });

  test("the reconstructed dispatch's return is recorded at the body's settle, claiming no outcome", async () => {
    // A wrapper outside the retry throws after it: its throw is the waterfall's, not the body's.
    const wrappers = [
      { kind: 'throw', message: 'the wrapper crashed', phase: 'after' },
      { kind: 'retry', attempts: 2 },
    ];
    const { recorder, scripts } = setup({ wrappers, calls: [{ callId: 'c1', tool: 'read', body: [{ throw: 'the body failed' }] }] });
    const c1 = exec('c1');
    const body = () => scripts.body(c1).then(ok, (e) => failure(e.message));
    await assert.rejects(statefulAround([recorder.probes.executeEnd, ...scripts.wrappers, recorder.probes.dispatch], c1, body), /the wrapper crashed/);
    const records = recorder.records();
    assert.deepEqual(shape(records), ['around', 'toolBody', 'body-settled', 'around', 'around', 'toolBody', 'body-settled', 'around', 'around']);
    const [probed, reconstructed, end] = [records[3], records[7], records[8]];
    assert.equal(probed.result.isError, true, 'the probe saw the normalized result');
    assert.deepEqual([reconstructed.outcome, reconstructed.result], [undefined, undefined], 'no probe saw the second return');
    assert.deepEqual([end.outcome, end.reason], ['throw', 'the wrapper crashed']);
  });

  test('a body started twice inside one dispatch gets no invented around', async () => {
    const { recorder, scripts } = setup();
    const c1 = exec('c1');
    const twice = async () => (await scripts.body(c1), await scripts.body(c1), ok('x'));
    await recorder.probes.executeEnd(c1, (s) => recorder.probes.dispatch(c1, twice, s));
    assert.deepEqual(shape(recorder.records()), ['around', 'toolBody', 'body-settled', 'toolBody', 'body-settled', 'around', 'around']);
  });

  test('a body run outside tools/execute gets none either', async () => {
    const { recorder, scripts } = setup();
    await scripts.body(exec('c1'));
    assert.deepEqual(shape(recorder.records()), ['toolBody', 'body-settled']);
  });
});

test('fsGate is followed by toolBody only while a body of the call runs', async () => {
  const { recorder } = setup();
  const c1 = exec('c1');
  recorder.onFsGate(c1, { intent: 'write', target: 'a.txt' }, 'allow'); // gated outside any body: a pipeline bug
  await recorder.runBody(c1, async () => recorder.onFsGate(undefined, { intent: 'edit', target: 'a.txt', version: 1 }, 'deny'));
  assert.deepEqual(shape(recorder.records()), ['fsGate', 'toolBody', 'fsGate', 'toolBody', 'body-settled']);
});

describe('synchronous hooks', () => {
  const parts = {
    pre: [{ id: 'p', decide: { c1: 'pass', c2: { deny: 'no' } } }],
    guards: [{ id: 'g', decide: { c2: { deny: 'owner' } } }],
    approval: { answers: { c1: 'allowed-once' } },
    post: [{ id: 'q', decide: { c1: { addContext: 'note' } } }],
  };

  test('with sync, every hook returns a plain value when what it calls did', () => {
    const { recorder, scripts } = setup(parts, { sync: true });
    const [c1, c2] = [exec('c1'), exec('c2')];
    const probes = recorder.probes;
    const decided = waterfall([probes.pre, ...scripts.preListeners], [c1], () => ({ type: 'allow' }));
    assert.deepEqual(decided, { type: 'allow' });
    assert.deepEqual(waterfall([probes.pre, ...scripts.preListeners], [c2], () => ({ type: 'allow' })), { type: 'deny', reason: 'no' });
    assert.equal(scripts.approval({ callId: 'c1' }), 'allowed-once');
    assert.equal(scripts.guards[0](c1), undefined);
    assert.deepEqual(scripts.guards[0](c2), { type: 'deny', reason: 'owner' });
    assert.equal(probes.guards(c1), undefined);
    const post = waterfall([probes.post, ...scripts.postListeners], [c1, ok('x')], () => ({ type: 'accept' }));
    assert.deepEqual(post, { type: 'accept', additionalContexts: ['note'] });
    assert.equal(probes.dispatch(c1, () => ok('y')).content[0].text, 'y');
    assert.ok(isPromise(waterfall([probes.pre], [c1], async () => ({ type: 'allow' }))), 'handed a promise, it returns one');
    assert.deepEqual(shape(recorder.records()), ['pre', 'pre', 'approval', 'guards', 'guards', 'post', 'around', 'around']);
  });

  test('a sync hook that throws throws synchronously, and is recorded', () => {
    const { recorder, scripts } = setup({ pre: [{ id: 'p', decide: { '*': { throw: 'hook crashed' } } }] }, { sync: true });
    assert.throws(() => waterfall([recorder.probes.pre, ...scripts.preListeners], [exec('c1')], () => ({ type: 'allow' })), /hook crashed/);
    assert.deepEqual(recorder.records().map((r) => [r.node, r.outcome]), [['pre', 'throw']]);
  });

  test('by default every hook returns a promise, as before', () => {
    const { recorder, scripts } = setup(parts);
    assert.ok(isPromise(scripts.guards[0](exec('c1'))));
    assert.ok(isPromise(scripts.approval({ callId: 'c1' })));
    assert.ok(isPromise(recorder.probes.guards(exec('c1'))));
    assert.ok(isPromise(scripts.preListeners[0](exec('c2'), () => ({ type: 'allow' }))));
  });
});

describe("the harness's own shapes", () => {
  test('decisions, verdicts, answers, contexts and content are built by the hooks', async () => {
    const seen = [];
    const { scripts } = setup(
      {
        pre: [{ id: 'p', decide: { c1: { deny: 'no' }, c2: 'allow' } }],
        guards: [{ id: 'g', decide: { c1: { deny: 'owner' } } }],
        approval: { answers: { c1: 'rejected' } },
        post: [{ id: 'q', decide: { c1: { accept: { content: 'new', context: 'why' } }, c2: { addContext: 'seen' }, c3: { block: { feedback: 'stop' } } } }],
      },
      {
        scripts: {
          preDecision: (d, call) => ({ behavior: d.type, message: d.reason, for: call.callId }),
          guardVerdict: (v) => v?.reason ?? null,
          approvalOutcome: (outcome, request) => ({ approved: outcome === 'allowed-once', asked: request.callId }),
          postDecision: (d, call, result) => (seen.push(result), { kind: d.type, content: d.content ?? d.feedback, contexts: d.additionalContexts }),
          addContext: (d, context) => ({ ...d, contexts: [...(d.contexts ?? []), context] }),
          context: (text, origin) => ({ role: 'user', text, origin }),
          content: (text) => text.toUpperCase(),
        },
      },
    );
    const [c1, c2, c3] = [exec('c1'), exec('c2'), exec('c3')];
    assert.deepEqual(await scripts.preListeners[0](c1, () => null), { behavior: 'deny', message: 'no', for: 'c1' });
    assert.deepEqual(await scripts.preListeners[0](c2, () => null), { behavior: 'allow', message: undefined, for: 'c2' });
    assert.equal(await scripts.guards[0](c1), 'owner');
    assert.equal(await scripts.guards[0](c2), null);
    assert.deepEqual(await scripts.approval({ callId: 'c1' }), { approved: false, asked: 'c1' });
    const handed = ok('x');
    assert.deepEqual(await scripts.postListeners[0](c1, handed, () => null), {
      kind: 'accept',
      content: 'NEW',
      contexts: [{ role: 'user', text: 'why', origin: 'post' }],
    });
    assert.equal(seen[0], handed, 'postDecision is handed the result the listener was handed');
    assert.deepEqual(await scripts.postListeners[0](c2, handed, () => ({ kind: 'accept' })), {
      kind: 'accept',
      contexts: [{ role: 'user', text: 'seen', origin: 'post' }],
    });
    assert.equal((await scripts.postListeners[0](c3, handed, () => null)).content, 'STOP');
  });

  test('results: the context wrapper, the retry wrapper and the timeout result go through the hooks', async () => {
    const { scripts } = setup(
      { wrappers: [{ kind: 'context', text: 'w' }, { kind: 'retry', attempts: 3 }, { kind: 'timeout' }] },
      {
        scripts: {
          withContext: (r, context) => ({ ...r, notes: [...(r.notes ?? []), context] }),
          isError: (r) => r.failed === true,
          result: (r) => ({ failed: r.isError, text: r.content[0].text }),
        },
      },
    );
    const [context, retry, timeout] = scripts.wrappers;
    assert.deepEqual(await context(exec('c1'), async () => ({ failed: false })), { failed: false, notes: [{ origin: 'wrapper', text: 'w' }] });
    let n = 0;
    assert.deepEqual(await retry(exec('c1'), async () => ({ failed: ++n < 3, n })), { failed: false, n: 3 });
    const hang = (signal) => new Promise((resolve) => signal.addEventListener('abort', () => resolve({ failed: true })));
    assert.deepEqual(await timeout(exec('c1', 'build'), hang, new AbortController().signal), { failed: true, text: 'Error: tool call timed out after 20ms' });
  });

  test("the timeout wrapper hands next the harness's own signal type, and bodies read it", async () => {
    class Token {
      constructor(abortSignal) {
        this.abortSignal = abortSignal;
      }
    }
    const { scripts } = setup(
      { wrappers: [{ kind: 'timeout' }], calls: [{ callId: 'c1', tool: 'build', body: ['hang'] }] },
      { scripts: { signal: (abortSignal) => new Token(abortSignal), readSignal: (token) => token?.abortSignal } },
    );
    const outer = new Token(new AbortController().signal);
    let handed;
    const result = await scripts.wrappers[0](exec('c1', 'build'), async (token) => {
      handed = token;
      if (!(token instanceof Token)) return failure('next was handed something else'); // a body would never see the abort
      return scripts.body(exec('c1', 'build'), token).catch((e) => failure(e.message));
    }, outer);
    assert.ok(handed instanceof Token, 'next was handed the harness signal type, not an AbortSignal');
    assert.equal(result.error.info.code, 'TOOL_TIMEOUT', 'the body saw the abort through readSignal and stopped');
  });
});

describe('finalizeContent, content-only', () => {
  const tools = [{ name: 'read', finalize: { prefix: '> ' } }, { name: 'other' }];

  test('records finalize for the one call of the tool whose commit is under way', async () => {
    const { recorder, scripts } = setup({ tools }, { scripts: { finalizer: 'content' } });
    recorder.onModel([]);
    const finalize = scripts.tools[0].finalizeContent;
    assert.equal(finalize.length, 1, 'the content-only form');
    const c1 = exec('c1');
    await recorder.probes.post(c1, ok('a'), async () => ({ type: 'accept' }));
    assert.deepEqual(finalize([{ type: 'text', text: 'a' }]), [{ type: 'text', text: '> a' }]);
    recorder.onToolsResult(c1, ok('> a'));
    const [, , fin] = recorder.records();
    assert.deepEqual([fin.node, fin.call, fin.result], ['finalize', 'c1', undefined]);
    assert.deepEqual(recorder.problems(), []);
  });

  test('with none or two such calls it cannot tell which: a problem that names the other form', async () => {
    const { recorder, scripts } = setup({ tools }, { scripts: { finalizer: 'content' } });
    recorder.onModel([]);
    const finalize = scripts.tools[0].finalizeContent;
    finalize([{ type: 'text', text: 'a' }]);
    recorder.onPreExecute(exec('c1'), { error: new Error('x') });
    recorder.onPreExecute(exec('c2'), { error: new Error('y') });
    finalize([{ type: 'text', text: 'a' }]);
    const problems = recorder.problems();
    assert.match(problems[0], /content-only finalizeContent of tool read was called when no call of it awaits its commit.*finalizer: 'call'/);
    assert.match(problems[1], /calls c1, c2 all await theirs/);
    assert.deepEqual(recorder.records().filter((r) => r.node === 'finalize'), []);
  });
});

test("Code Mode with the harness's own runner: the kit records what the harness reports, under its ids", async () => {
  const { recorder, scripts } = setup({ calls: [{ callId: 'c1', tool: 'run_code', program: [{ call: { tool: 'read' } }, { return: 1 }] }] });
  const c1 = exec('c1', 'run_code');
  assert.match(scripts.programSource(c1), /tools\.read\(\{\}\)/);
  await recorder.runProgram(c1, async () => {
    await tick();
    recorder.onBindingSettled('c1/sub-a'); // the harness's own numbering
    recorder.onBindingSettled('c1/sub-b', { rejection: { toolName: 'read', message: 'no' } });
  });
  assert.deepEqual(
    recorder.records().map((r) => [r.node ?? r.mark, r.call, r.by]),
    [
      ['toolBody', 'c1', undefined],
      ['binding-resolved', 'c1/sub-a', 'program'],
      ['binding-rejected', 'c1/sub-b', 'program'],
      ['body-settled', 'c1', 'program'],
    ],
  );
});

test('a block of another type than text is kept whole, and no text is read from it', () => {
  const image = { type: 'image', attachment: { id: 'att-1', mediaType: 'image/png' } };
  const result = defaultToResult({ isError: false, content: ['a', { type: 'text', text: 'b' }, image] });
  assert.deepEqual(result.content, [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }, image]);
  assert.notEqual(result.content[2], image, 'a copy, not the harness object');
  assert.equal(contentText(result.content), 'a\nb');
});
