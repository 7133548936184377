// Mistakes a kit user can make are answered `errored`, with a message naming the kit method or
// option to use, detected by the kit itself; and nothing an adapter records can kill it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { EncodeError, Recorder, Skip, encode, runScenario } from 'tep-adapter';

const fixture = fileURLToPath(new URL('../fixtures/adapter.mjs', import.meta.url));

const scenario = (parts = {}) => ({
  id: 's',
  tools: [{ name: 'read' }],
  calls: [{ callId: 'c1', tool: 'read', arguments: { path: 'a.txt' }, body: [{ return: 'x' }] }],
  expect: { calls: {} },
  ...parts,
});
const call = (callId = 'c1') => ({ token: Symbol(callId), callId, name: 'read', arguments: { path: 'a.txt' } });
/** The answer of an adapter whose `run` is `body(session)`. */
const answer = (body, parts, options = {}) =>
  runScenario({ implementation: { name: 't' }, ...options, run: (s, session) => body(session, s) }, scenario(parts));

test('a record before the model observation names recorder.onModel', async () => {
  const { errored } = await answer(async ({ recorder }) => recorder.onToolCall(call()));
  assert.match(errored.message, /^a record before the first model observation \(event tool\/call of call c1\): call recorder\.onModel\(calls\)/);
  const fine = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    recorder.onToolCall(call());
  });
  assert.ok(fine.trace);
});

test('a value JSON cannot hold is an errored answer naming the record and the field', async () => {
  const cases = [
    [{ isError: false, content: [{ type: 'text', text: 'x' }], meta: { size: 3n } }, /the final record of call c1: result\.meta\.size is a BigInt \(3n\)/],
    [{ isError: false, content: [{ type: 'text', text: 'x' }], meta: { render() {} } }, /result\.meta\.render is a function \(render\)/],
    [{ isError: false, content: [], meta: { n: Number.NaN } }, /result\.meta\.n is NaN/],
  ];
  for (const [result, message] of cases) {
    const { errored } = await answer(async ({ recorder, scenario: s }) => {
      recorder.onModel(s.modelCalls());
      recorder.onToolsResult(call(), result);
    });
    assert.match(errored.message, message);
  }
  const cyclic = { todos: [] };
  cyclic.self = cyclic;
  const { errored } = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    recorder.onEvent({ seq: 1, time: 0, type: 'todo/write', data: cyclic }, { call: 'c1' });
  });
  assert.match(errored.message, /the todo\/write event: event\.data\.self is a cycle/);
});

test('encode copies what JSON.stringify would, and names what it would lose', () => {
  const date = new Date(0);
  const shared = { a: 1 };
  assert.deepEqual(encode({ date, list: [undefined, 1], skip: undefined, x: shared, y: shared, z: -0 }), {
    date: '1970-01-01T00:00:00.000Z',
    list: [null, 1],
    x: { a: 1 },
    y: { a: 1 },
    z: 0,
  });
  assert.throws(() => encode({ m: new Map() }), (e) => e instanceof EncodeError && e.path === 'm');
  assert.throws(() => encode({ 'odd key': [Symbol('s')] }), (e) => e.path === '["odd key"][0]');
});

test('a call object the kit cannot read names recorder.identify; a missing token too', async () => {
  const noId = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    await recorder.probes.pre({ id: 'c1', tool: 'read' }, async () => ({ type: 'allow' }));
  });
  assert.match(noId.errored.message, /recorder\.identify read no callId from an object \{id, tool\}: pass serve\(\{recorder: \{identify/);
  const noToken = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    recorder.onDispatch({ callId: 'c1', name: 'read', arguments: {} });
  });
  assert.match(noToken.errored.message, /read no token from call c1/);
  const notACall = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    recorder.onDispatch(undefined);
  });
  assert.match(notACall.errored.message, /was handed undefined where a call object belongs/);
});

test('a decision or a result the readers cannot read names the reader to pass', async () => {
  const pre = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    await recorder.probes.pre(call(), async () => ({ behavior: 'allow' }));
  });
  assert.match(pre.errored.message, /readPreDecision read no outcome from the pre-execute decision an object \{behavior\}/);
  const post = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    await recorder.probes.post(call(), 'a string result', async () => ({ type: 'accept' }));
  });
  assert.match(post.errored.message, /recorder\.toResult cannot read the string "a string result" \(handed to post-execute, call c1\)/);
});

test('the read hooks are handed the call and the result', async () => {
  const seen = [];
  const recorder = new Recorder({
    readPreDecision: (d, c) => (seen.push(['pre', d.ok, c.callId]), { outcome: d.ok ? 'allow' : 'deny', reason: 'no' }),
    readPostDecision: (d, r, c) => (seen.push(['post', r.isError, c.callId]), { outcome: r.isError ? 'block' : 'accept' }),
  });
  await recorder.probes.pre(call(), async () => ({ ok: true }));
  await recorder.probes.post(call(), { isError: true, content: [] }, async () => ({ anything: 1 }));
  assert.deepEqual(seen, [['pre', true, 'c1'], ['post', true, 'c1']]);
  assert.deepEqual(recorder.records().map((r) => r.outcome), ['allow', 'block']);
});

test('a listener or probe handed no next, and a body without its effect, say what to pass', async () => {
  const listener = await answer(
    async ({ recorder, scripts, scenario: s }) => {
      recorder.onModel(s.modelCalls());
      await scripts.preListeners[0](call()).catch(() => {});
    },
    { pre: [{ id: 'p', decide: {} }] },
  );
  assert.match(listener.errored.message, /the pre-execute listener p was handed no next where its next belongs: .*call next\(\) with no arguments/);
  const probe = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    await recorder.probes.executeEnd(call(), { not: 'a function' }).catch(() => {});
  });
  assert.match(probe.errored.message, /rec\.probes\.executeEnd was handed an object \{not\} where its next belongs/);
  const effect = await answer(
    async ({ recorder, scripts, scenario: s }) => {
      recorder.onModel(s.modelCalls());
      await scripts.body(call(), undefined, {}).catch(() => {});
    },
    { calls: [{ callId: 'c1', tool: 'read', body: [{ deferContext: 'later' }] }] },
  );
  assert.match(effect.errored.message, /the body needs effects\.deferContext\(text\) for this step: pass it in scripts\.body\(call, signal, \{deferContext: …\}\)/);
});

test('skip works inside the batch; a batch not awaited is errored', async () => {
  const skipped = await answer(async ({ recorder, skip, batch, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    await batch(async () => skip('no waterfall here'));
  });
  assert.deepEqual(skipped, { skipped: { reason: 'no waterfall here' } });
  const early = await answer(async ({ recorder, batch, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    batch(() => new Promise((resolve) => setTimeout(resolve, 20)));
  });
  assert.match(early.errored.message, /run returned while session\.batch\(\.\.\.\) was still running: await session\.batch/);
});

test('an escape with a problem noted is errored: the problem is what the user must fix first', async () => {
  const { errored } = await answer(async ({ recorder, batch }) => {
    await batch(async () => {
      recorder.onToolCall(call());
      throw new Error('boom');
    });
  });
  assert.match(errored.message, /recorder\.onModel/);
});

/** Runs the fixture adapter on `lines`; resolves with its answers and stderr. */
async function converse(lines) {
  const child = spawn(process.execPath, [fixture], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  for (const line of lines) child.stdin.write(`${line}\n`);
  child.stdin.end();
  const [code] = await once(child, 'exit');
  return { answers: stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)), stderr, code };
}

test('over the protocol: what JSON cannot hold, a throwing timer and a stray rejection leave the adapter serving', async () => {
  const run = (seq, id) => JSON.stringify({ cmd: 'run', seq, spec: 'rev2', scenario: { ...scenario(), id } });
  const { answers, stderr, code } = await converse([
    JSON.stringify({ cmd: 'start', protocol: 3 }),
    run(1, 'bigint'),
    run(2, 'stray'),
    run(3, 'plain'),
    JSON.stringify({ cmd: 'stop' }),
  ]);
  assert.equal(code, 0, stderr);
  const [, bigint, stray, plain] = answers;
  assert.equal(bigint.seq, 1);
  assert.match(bigint.errored.message, /event\.data\.size is a BigInt \(3n\)/);
  assert.equal(stray.seq, 2);
  assert.match(stray.errored.message, /an exception reached the event loop while the scenario ran/);
  assert.match(stray.errored.context, /a timer of the harness threw/);
  assert.match(stray.errored.context, /nobody awaited this/);
  assert.equal(plain.seq, 3);
  assert.ok(plain.trace, 'the next scenario is answered as usual');
});

test('a skip requested inside the body is answered skipped, though the pipeline catches everything', async () => {
  // A conformant pipeline's catch-all turns a body's throw into an error result: the skip the
  // adapter asked for must survive it, thrown or through session.skip.
  for (const how of ['throw', 'session.skip']) {
    const skipped = await answer(async ({ recorder, skip, batch, scenario: s }) => {
      recorder.onModel(s.modelCalls());
      await batch(async () => {
        try {
          await Promise.resolve();
          if (how === 'throw') throw new Skip('this harness cannot defer a context');
          skip('this harness cannot defer a context');
        } catch {
          recorder.onToolCall(call()); // the pipeline carries on with an error result
        }
      });
    });
    assert.deepEqual(skipped, { skipped: { reason: 'this harness cannot defer a context' } }, how);
  }
  const outside = new Skip('made between scenarios');
  assert.ok(outside instanceof Error);
  const after = await answer(async ({ recorder, scenario: s }) => recorder.onModel(s.modelCalls()));
  assert.ok(after.trace, 'a Skip made outside any scenario requests nothing');
});

test('a guard a synchronous pipeline calls without awaiting is named, with sync mode as the fix', async () => {
  const unawaited = await answer(
    async ({ recorder, scripts, batch, scenario: s }) => {
      recorder.onModel(s.modelCalls());
      await batch(async () => {
        for (const guard of scripts.guards) {
          const verdict = guard(call()); // a synchronous pipeline: the verdict is a promise, never awaited
          if (verdict?.type === 'deny') break;
        }
      });
    },
    { guards: [{ id: 'g1', decide: {} }] },
  );
  assert.match(unawaited.errored.message, /^your pipeline called the guard g1 \(scripts\.guards\) without awaiting the promise it returned: .*serve\(\{sync: true, …\}\)/);
  const awaited = await answer(
    async ({ recorder, scripts, batch, scenario: s }) => {
      recorder.onModel(s.modelCalls());
      await batch(async () => {
        for (const guard of scripts.guards) await guard(call());
        await Promise.all(scripts.guards.map((guard) => guard(call())));
        await scripts.guards[0](call()).then(() => {});
      });
    },
    { guards: [{ id: 'g1', decide: {} }] },
  );
  assert.ok(awaited.trace, JSON.stringify(awaited.errored));
});

test('one problem is sent once: no context that repeats the message', async () => {
  const one = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    recorder.problem('my glue knows it is wrong');
  });
  assert.deepEqual(one, { errored: { message: 'my glue knows it is wrong' } });
  const two = await answer(async ({ recorder, scenario: s }) => {
    recorder.onModel(s.modelCalls());
    recorder.problem('first');
    recorder.problem('second');
  });
  assert.deepEqual(two.errored, { message: 'first (and 1 more problem(s), listed in the context)', context: 'first\nsecond' });
});

test('additionalContexts of the wrong shape are named, with the {origin, text} item', async () => {
  const recorder = new Recorder();
  recorder.onModel([{ callId: 'c1', name: 'read' }]);
  recorder.onToolResult(call(), { isError: false, content: [], additionalContexts: ['inner'] });
  const [problem] = recorder.problems();
  assert.match(problem, /a result's additionalContexts\[0\] is the string "inner" \(recorded as tool\/result, call c1\): each item is \{origin: 'tool' \| 'wrapper' \| 'post', text\}/);
  const fine = new Recorder();
  fine.onModel([{ callId: 'c1', name: 'read' }]);
  fine.onToolResult(call(), { isError: false, content: [], additionalContexts: [{ origin: 'post', text: 'x' }] });
  assert.deepEqual(fine.problems(), []);
});
