// The example pipeline, run in process on the corpus: every rev2 scenario answers with a trace,
// and the traces show the pipeline's own guarantees. (The checker's verdict is e2e.test.js.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runScenario } from 'tep-adapter';
import { adapter } from '../example/adapter.mjs';
import { ToolPipeline } from '../example/pipeline/index.mjs';

const corpus = fileURLToPath(new URL('../../../scenarios/', import.meta.url));
const load = (id) => JSON.parse(readFileSync(`${corpus}${id}.json`, 'utf8'));
const events = (trace, type) => trace.filter((r) => r.kind === 'event' && r.event.type === type);

test('every rev2 scenario of the corpus answers with a trace', { timeout: 60_000 }, async () => {
  const ids = readdirSync(corpus).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5));
  assert.ok(ids.length >= 57, `the corpus is at ${corpus}`);
  const answers = await Promise.all(
    ids.map(load).filter((s) => (s.revisions ?? ['rev2']).includes('rev2')).map(async (s) => [s.id, await runScenario(adapter, s)]),
  );
  const notTraces = answers.filter(([, a]) => !a.trace).map(([id, a]) => `${id}: ${JSON.stringify(a).slice(0, 200)}`);
  assert.deepEqual(notTraces, []);
});

test('results commit in model order however the bodies finish', async () => {
  const { trace } = await runScenario(adapter, load('parallel-results-commit-in-model-order'));
  const settled = trace.filter((r) => r.mark === 'body-settled').map((r) => r.call);
  const results = events(trace, 'tool/result').map((r) => r.call);
  assert.notDeepEqual(settled, results, 'the bodies finished out of model order');
  assert.deepEqual(results, [...results].sort());
});

test('contexts are injected after every result, first in first out', async () => {
  const { trace } = await runScenario(adapter, load('contexts-fifo-when-a-later-call-finishes-first'));
  const lastResult = trace.findLastIndex((r) => r.event?.type === 'tool/result');
  const contexts = trace.flatMap((r, i) => (r.event?.type === 'user/message' ? [[i, r.call, r.event.data.content[0].text]] : []));
  assert.ok(contexts.length > 0);
  assert.ok(contexts.every(([i]) => i > lastResult));
  const expected = load('contexts-fifo-when-a-later-call-finishes-first').expect.contexts.map((c) => [c.call, c.text]);
  assert.deepEqual(contexts.map(([, call, text]) => [call, text]), expected);
});

test('a Code Mode program re-enters the pipeline one sub-call at a time', async () => {
  const { trace } = await runScenario(adapter, load('code-mode-group-runs-one-at-a-time'));
  const lane = trace.filter((r) => r.event?.type?.startsWith('tool/code-dispatch')).map((r) => [r.event.type, r.call]);
  for (let i = 0; i < lane.length; i += 2) {
    assert.deepEqual([lane[i][0], lane[i + 1][0]], ['tool/code-dispatch-start', 'tool/code-dispatch']);
    assert.equal(lane[i][1], lane[i + 1][1]);
  }
});

test('the default Code Mode runs program source, bindings re-entering the pipeline', async () => {
  const pipeline = new ToolPipeline().enableCodeMode();
  pipeline.register({ name: 'double', execute: async ({ n }) => ({ n: n * 2 }) });
  pipeline.preExecute.use(async (exec, next) => (exec.name === 'double' && exec.arguments.n > 5 ? { type: 'deny', reason: 'too big' } : next()));
  const code = `
    const { n } = await tools.double({ n: 2 });
    console.log('got', n);
    try { await tools.double({ n: 9 }); } catch (e) { console.log(e.toolName + ': ' + e.message); }
    try { await tools.run_code({}); } catch (e) { console.log(e.message); }
    return { n };`;
  const [outcome] = await pipeline.runBatch([{ callId: 'c1', name: 'run_code', arguments: JSON.stringify({ code }) }]);
  assert.equal(outcome.result.isError, false);
  assert.equal(
    outcome.result.content[0].text,
    'got 4\ndouble: too big\nrun_code is not available to programs\n{\n  "n": 4\n}',
  );
  const dispatched = pipeline.session.events.filter((e) => e.type === 'tool/code-dispatch').map((e) => e.data.subCallId);
  assert.deepEqual(dispatched, ['c1:code:1', 'c1:code:2']);
});

test('run_code is reserved', () => {
  assert.throws(() => new ToolPipeline().register({ name: 'run_code', execute: async () => 'x' }), /reserved/);
});
