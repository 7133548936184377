import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { Recorder, runScenario, readyMessage } from 'tep-adapter';

const fixture = fileURLToPath(new URL('../fixtures/adapter.mjs', import.meta.url));

const scenario = (id) => ({
  id,
  description: '',
  spec: '',
  exercises: [],
  tools: [{ name: 'read' }],
  calls: [{ callId: 'c1', tool: 'read', arguments: { path: 'a.txt' } }],
  expect: { calls: {} },
});

/** Runs the fixture adapter on `lines`; resolves with its stdout lines, stderr and exit code. */
async function converse(lines, argv = []) {
  const child = spawn(process.execPath, [fixture, ...argv], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  for (const line of lines) child.stdin.write(`${line}\n`);
  child.stdin.end();
  const [code] = await once(child, 'exit');
  return { out: stdout.split('\n').filter(Boolean), stderr, code };
}

test('handshake, then one answer per run with its seq, then stop', async () => {
  const run = (seq, id) => JSON.stringify({ cmd: 'run', seq, spec: 'rev2', scenario: scenario(id) });
  const { out, stderr, code } = await converse([
    JSON.stringify({ cmd: 'start', protocol: 3 }),
    '',
    run(1, 'plain'),
    run(2, 'skip'),
    run(3, 'boom'),
    run(4, 'escape'),
    'this is not json',
    JSON.stringify({ cmd: 'stop' }),
  ]);
  assert.equal(code, 0);
  const messages = out.map((line) => JSON.parse(line));
  assert.equal(messages.length, 5, 'nothing but protocol on stdout');
  assert.deepEqual(messages[0], {
    ready: true,
    protocol: 3,
    implementation: { name: 'fixture', version: '1.0.0', language: 'JavaScript' },
    capabilities: ['ui'],
    specs: ['rev2'],
    observation: 'hooks',
  });
  const [, traced, skipped, errored, escaped] = messages;
  assert.equal(traced.seq, 1);
  assert.deepEqual(traced.trace[0], {
    kind: 'header',
    spec: 'rev2',
    implementation: 'fixture',
    capabilities: ['ui'],
    observation: 'hooks',
  });
  assert.deepEqual(
    traced.trace.slice(1).map((r) => r.node ?? r.event.type),
    ['model', 'tool/call'],
  );
  assert.deepEqual(skipped, {
    seq: 2,
    skipped: { reason: 'this harness has no tools/execute waterfall: wrappers cannot be installed' },
  });
  assert.equal(errored.seq, 3);
  assert.equal(errored.errored.message, 'the harness failed to boot');
  assert.match(errored.errored.context, /Error: the harness failed to boot/);
  assert.equal(escaped.seq, 4);
  assert.equal(escaped.escaped.message, 'x is undefined');
  assert.deepEqual(
    escaped.escaped.trace.map((r) => r.kind === 'event' ? r.event.type : r.node ?? r.kind),
    ['header', 'model', 'tool/call'],
    'the records up to the escape are sent',
  );
  assert.match(stderr, /console\.log noise/);
  assert.match(stderr, /stdout noise/);
  assert.match(stderr, /not JSON/);
});

test('stop ends the adapter even when work is still pending', async () => {
  const { out, code } = await converse([
    JSON.stringify({ cmd: 'start', protocol: 3 }),
    JSON.stringify({ cmd: 'run', seq: 1, spec: 'rev2', scenario: scenario('linger') }),
    JSON.stringify({ cmd: 'stop' }),
  ]);
  assert.equal(code, 0);
  assert.equal(out.length, 2);
});

test('end of input ends the adapter', async () => {
  const { out, code } = await converse([JSON.stringify({ cmd: 'start', protocol: 3 })]);
  assert.deepEqual([out.length, code], [1, 0]);
});

test('--scenario runs one scenario locally and prints its trace', async () => {
  const { writeFileSync, mkdtempSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const file = join(mkdtempSync(join(tmpdir(), 'tep-kit-')), 'plain.json');
  writeFileSync(file, JSON.stringify(scenario('plain')));
  const child = spawn(process.execPath, [fixture, '--scenario', file], {
    env: { ...process.env, TEP_BIN: '', PATH: '' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  const [code] = await once(child, 'exit');
  assert.equal(code, 0);
  const trace = stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  assert.deepEqual(trace.map((r) => r.kind), ['header', 'stage', 'event']);
  assert.match(stderr, /no tep binary found/);
});

test('runScenario answers in process; defaults fill the ready message', async () => {
  const adapter = {
    implementation: { name: 'inline' },
    async run(s, session) {
      assert.ok(session.recorder instanceof Recorder);
      assert.equal(session.spec, 'rev1');
      session.recorder.onModel(s.modelCalls());
      session.recorder.onBatchSettled();
    },
  };
  const answer = await runScenario(adapter, scenario('x'), { spec: 'rev1' });
  assert.deepEqual(answer.trace.map((r) => r.node ?? r.kind), ['header', 'model', 'allResults']);
  assert.equal(answer.trace[0].spec, 'rev1');
  assert.deepEqual(readyMessage(adapter), {
    ready: true,
    protocol: 3,
    implementation: { name: 'inline' },
    capabilities: [],
    specs: ['rev2'],
    observation: 'hooks',
  });
  const broken = await runScenario(adapter, { id: 'no-calls' });
  assert.match(broken.errored.message, /no calls/);
});
