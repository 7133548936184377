// The example adapter judged by the real checker: `tep run` over a few scenarios, and the kit's
// local runner (`--scenario`) with `tep check`. Needs a tep binary: $TEP_BIN, else `tep` on PATH,
// else the workspace's target/debug/tep; skipped with a message when there is none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { findTep } from 'tep-adapter';

const example = fileURLToPath(new URL('../example/adapter.mjs', import.meta.url));
const workspaceTep = fileURLToPath(new URL('../../../../target/debug/tep', import.meta.url));
const tep = findTep(undefined) ?? (existsSync(workspaceTep) ? workspaceTep : undefined);
const skip = tep ? false : 'no tep binary: set TEP_BIN (cargo build -p tep-conformance builds target/debug/tep)';

const scenarios = [
  'mixed-batch',
  'approval-refusals-deny',
  'timeout-waits-for-a-slow-body',
  'fs-edit-after-an-outside-change-is-refused',
  'post-block-drops-earlier-contexts',
  'finalize-throws',
  'code-mode-every-path',
];

test('tep run passes the example on a sample of the corpus, strictly', { skip, timeout: 60_000 }, () => {
  const args = ['run', '--adapter', `"${process.execPath}" "${example}"`, '--strict', '--format', 'json'];
  const run = spawnSync(tep, [...args, ...scenarios.flatMap((id) => ['--scenario', id])], { encoding: 'utf8' });
  const report = JSON.parse(run.stdout);
  const { summary } = report;
  assert.deepEqual(
    { passed: summary.passed, failed: summary.failed, errored: summary.errored, warned: summary.warned, conformant: report.conformant },
    { passed: scenarios.length, failed: 0, errored: 0, warned: 0, conformant: true },
    run.stderr,
  );
  assert.equal(run.status, 0);
});

test('the local runner prints the trace and the checker verdict', { skip, timeout: 60_000 }, () => {
  const out = execFileSync(process.execPath, [example, '--scenario', 'pre-deny-skips-body', '--tep', tep], { encoding: 'utf8' });
  const lines = out.split('\n');
  const header = JSON.parse(lines[0]);
  assert.deepEqual([header.kind, header.observation], ['header', 'full']);
  assert.ok(lines.some((l) => l.includes('"node":"denied"')));
  assert.match(out, /^0 violation\(s\)/m, out.slice(-500));
});
