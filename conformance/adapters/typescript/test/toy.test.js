// The README's quick start, run verbatim: its code block is copied next to the toy harness it
// is written against (fixtures/toy/my-harness.mjs) in a scratch project, and `tep run --strict` must
// pass every scenario its capabilities allow. Then the same glue on the harness's variants: a
// synchronous pipeline (the kit in `sync` mode), and a tools/execute waterfall whose next() goes
// straight to the dispatch when a retry calls it again.
import { test } from 'node:test';
import { execFileSync } from 'node:child_process';
import assert from 'node:assert/strict';
import { copyFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { kitDir, notPassed, scratchProject, skipReason, tepRun } from '../fixtures/tep-run.js';

const readme = readFileSync(join(kitDir, 'README.md'), 'utf8');
const toyAdapter = fileURLToPath(new URL('../fixtures/toy/adapter.mjs', import.meta.url));
const harness = fileURLToPath(new URL('../fixtures/toy/my-harness.mjs', import.meta.url));

/** The README's code blocks marked `<!-- quick-start: FILE -->`, as `[file, code]`. */
function quickStart() {
  const blocks = [...readme.matchAll(/<!-- quick-start: (\S+) -->\n```js\n([\s\S]*?)\n```\n/g)].map((m) => [m[1], m[2]]);
  assert.ok(blocks.length > 0, 'README.md marks its quick start with <!-- quick-start: my-adapter.mjs --> before the ```js fence');
  return blocks;
}

/** The scenarios that did not pass and were not N/A for the adapter's capabilities or revision. */
const unexplainedSkips = (report) =>
  report.scenarios.filter((s) => s.status === 'skipped' && !/^N\/A: /.test(s.reason ?? '')).map((s) => `${s.id}: ${s.reason}`);

test('the README quick start is one marked block that records the batch first', () => {
  const blocks = quickStart();
  assert.deepEqual(blocks.map(([file]) => file), ['my-adapter.mjs']);
  const [[, code]] = blocks;
  assert.match(code, /from '\.\/my-harness\.mjs'/, 'it imports the toy harness the test puts beside it');
  const model = code.indexOf('rec.onModel(');
  assert.ok(model >= 0 && model < code.indexOf('batch('), 'rec.onModel is called before the batch runs');
});

test('the README quick start, verbatim, passes tep run --strict on the toy harness in a fresh npm init -y project', { skip: skipReason, timeout: 120_000 }, () => {
  const dir = scratchProject('tep-kit-quick-start-');
  try {
    // What a newcomer starts from: npm 11 writes "type": "commonjs".
    execFileSync('npm', ['init', '-y'], { cwd: dir, stdio: 'ignore' });
    assert.notEqual(JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).type, 'module');
    for (const [file, code] of quickStart()) writeFileSync(join(dir, file), `${code}\n`);
    copyFileSync(harness, join(dir, 'my-harness.mjs'));
    const { report, status, stderr } = tepRun(join(dir, 'my-adapter.mjs'), ['--strict'], { cwd: dir });
    assert.equal(notPassed(report), '', stderr.slice(-2000));
    assert.deepEqual(unexplainedSkips(report), []);
    const { summary } = report;
    assert.equal(summary.passed + summary.skipped, summary.scenarios);
    // What the README says this run prints (counts kept by `cargo xtask docs`).
    const count = (name) => Number(readme.match(new RegExp(`<!-- count:quickstart-${name} -->(\\d+)<!-- /count -->`))?.[1]);
    assert.deepEqual([summary.passed, summary.skipped], [count('passed'), count('skipped')]);
    assert.equal(status, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

for (const [name, env] of [
  ['a synchronous pipeline, with the kit in sync mode', { TOY_SYNC: '1' }],
  ['a tools/execute waterfall whose next() reaches the dispatch directly on a retry', { TOY_STATEFUL: '1' }],
]) {
  test(`the same glue passes on ${name}`, { skip: skipReason, timeout: 120_000 }, () => {
    const { report, status } = tepRun(toyAdapter, ['--strict'], { env });
    assert.equal(notPassed(report), '');
    assert.deepEqual(unexplainedSkips(report), []);
    assert.ok(report.summary.passed >= 39);
    assert.equal(status, 0);
  });
}

test('a synchronous pipeline fails with the kit left asynchronous: sync mode is what makes it pass', { skip: skipReason, timeout: 120_000 }, () => {
  const { report } = tepRun(toyAdapter, ['--scenario', 'allow-runs-body'], { env: { TOY_SYNC: 'pipeline' } });
  const [scenario] = report.scenarios;
  assert.equal(scenario.status, 'failed');
  assert.match(JSON.stringify(scenario.violations), /a synchronous pre-execute listener returned a promise/);
});
