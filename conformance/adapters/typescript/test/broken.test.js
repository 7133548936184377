// Probes record facts only: deliberately broken toy pipelines (fixtures/toy/my-harness.mjs with one
// `bug`), each run through `tep run --adapter`, must be reported under the invariant the spec
// says they break, as the first violation of the scenario. A probe that recorded what it assumed
// happens next (the last guard probe writing "every guard abstained", the pre probe assuming it
// is outermost) would put them under another invariant.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { skipReason, tepRun } from '../fixtures/tep-run.js';

const toyAdapter = fileURLToPath(new URL('../fixtures/toy/adapter.mjs', import.meta.url));

// [bug, scenario, the invariant, and the spec's words behind it]
const cases = [
  ['guards-after-deny', 'guards-first-reason-wins', 'guard-deny-binds', 'monotonic guards: "deny or abstain" (a deny ends the guards)'],
  ['guards-after-deny', 'guard-allow-cannot-undo-a-deny', 'guard-deny-binds', 'monotonic guards: a later guard is never consulted after a deny'],
  ['reversed-pre', 'pre-listeners-run-in-order', 'waterfall-registration-order', 'reference semantics 16: a waterfall runs its listeners in registration order'],
  ['approval-twice', 'ask-allowed-once', 'approval-once', '"ctx.approval one-shot prompt": one ask is put to the prompt once'],
  ['pre-twice', 'allow-runs-body', 'pre-execute-once', 'toolCall --> pre: pre-execute runs once per call'],
  ['guards-before-approval', 'approval-comes-before-guards', 'guards-only-after-allow', '"ctx.approval resolves asks before monotonic guards"'],
];

for (const [bug, scenario, invariant, why] of cases) {
  test(`${bug}: ${scenario} is reported under ${invariant} (${why})`, { skip: skipReason, timeout: 60_000 }, () => {
    const { report, status } = tepRun(toyAdapter, ['--scenario', scenario], { env: { TOY_BUG: bug } });
    const [result] = report.scenarios;
    assert.equal(result.status, 'failed', JSON.stringify(result).slice(0, 1000));
    const first = result.violations[0];
    assert.equal(first.invariant, invariant, result.violations.map((v) => `${v.invariant}: ${v.message}`).join('\n'));
    assert.equal(status, 1);
  });
}

test('the toy harness without a bug passes the same scenarios', { skip: skipReason, timeout: 60_000 }, () => {
  const scenarios = [...new Set(cases.map(([, s]) => s))];
  const { report, status } = tepRun(toyAdapter, ['--strict', ...scenarios.flatMap((s) => ['--scenario', s])]);
  assert.equal(report.summary.passed, scenarios.length, JSON.stringify(report.summary));
  assert.equal(status, 0);
});
