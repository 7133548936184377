import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Scenario, actionFor, subCallsOf } from 'tep-adapter';

const minimal = {
  id: 's',
  tools: [{ name: 'read' }, { name: 'fetch', concurrencySafe: true, timeoutMs: 50, finalize: 'keep' }],
  calls: [
    { callId: 'c1', tool: 'read', arguments: { path: 'a.txt', n: 1 }, body: [{ return: 'x' }] },
    {
      callId: 'c2',
      tool: 'run_code',
      arguments: { language: 'data' },
      program: [
        { call: { tool: 'read', body: [{ return: 'one' }] } },
        'callRunCode',
        { all: [{ tool: 'fetch' }, { tool: 'read', onReject: 'fail', arguments: { p: 1 } }] },
        { log: 'done' },
      ],
    },
  ],
  expect: { calls: {} },
};

test('the schema defaults are filled in', () => {
  const s = new Scenario(minimal);
  assert.deepEqual(s.tools[0], { name: 'read', concurrencySafe: false, timeoutMs: undefined, finalize: undefined });
  assert.equal(s.tools[1].concurrencySafe, true);
  assert.deepEqual([s.pre, s.guards, s.post, s.wrappers, s.observers], [[], [], [], [], []]);
  assert.deepEqual(s.files, {});
  assert.equal(s.approval, undefined);
  assert.equal(s.maxParallel, undefined);
  assert.deepEqual(s.revisions, ['rev1', 'rev2']);
  assert.ok(Object.isFrozen(s));
});

test('an approval with no answers still mounts a prompt', () => {
  const s = new Scenario({ ...minimal, approval: { answers: {} } });
  assert.deepEqual(s.approval, { answers: {} });
});

test('a listed call gets its own action, then "*", then the default', () => {
  const decide = { c1: { deny: 'no' }, '*': 'allow' };
  assert.deepEqual(actionFor(decide, 'c1', 'pass'), { deny: 'no' });
  assert.equal(actionFor(decide, 'c9', 'pass'), 'allow');
  assert.equal(actionFor({ c1: 'allow' }, 'c2', 'pass'), 'pass');
  assert.equal(actionFor(undefined, 'c1', 'abstain'), 'abstain');
  // Only own keys count: a call named like an Object.prototype member is not "listed".
  assert.equal(actionFor({}, 'toString', 'pass'), 'pass');
});

test('sub-calls are numbered in submission order; callRunCode issues none', () => {
  const ids = subCallsOf('c2', minimal.calls[1].program).map((c) => [c.callId, c.tool, c.onReject]);
  assert.deepEqual(ids, [
    ['c2:code:1', 'read', 'continue'],
    ['c2:code:2', 'fetch', 'continue'],
    ['c2:code:3', 'read', 'fail'],
  ]);
  const s = new Scenario(minimal);
  assert.deepEqual(s.body('c2:code:1'), [{ return: 'one' }]);
  assert.deepEqual(s.call('c2:code:3').arguments, { p: 1 });
  assert.deepEqual(s.body('c2:code:2'), []);
  assert.deepEqual(s.body('nobody'), []);
});

test('the batch goes out as the model wrote it: raw argument strings', () => {
  const s = new Scenario(minimal);
  assert.deepEqual(s.modelCalls()[0], { callId: 'c1', name: 'read', arguments: '{"path":"a.txt","n":1}' });
  assert.equal(s.rawArguments('c2'), '{"language":"data"}');
  assert.equal(s.tool('fetch').timeoutMs, 50);
});

test('a scenario without calls is refused', () => {
  assert.throws(() => new Scenario({ id: 'x', tools: [] }), /no calls/);
});
