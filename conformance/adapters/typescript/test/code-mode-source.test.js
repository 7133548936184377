// The Code Mode path for a harness whose runner interprets programs itself: the scenario's
// program as JavaScript source (`programSource`) must say what the kit's own interpreter
// (`scripts.program`) says, and the example pipeline's own node:vm runner, numbering its
// sub-calls itself and reporting each binding (fixtures/code-mode-source.mjs), passes the Code
// Mode scenarios under tep run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { Recorder, Scripts, programContent, programSource } from 'tep-adapter';
import { bindingsFor, sourceProgram } from '../example/pipeline/index.mjs';
import { notPassed, skipReason, tepRun } from '../fixtures/tep-run.js';

const corpus = fileURLToPath(new URL('../../../scenarios/', import.meta.url));
const scenarios = readdirSync(corpus)
  .filter((f) => f.endsWith('.json'))
  .map((f) => JSON.parse(readFileSync(`${corpus}${f}`, 'utf8')));
const withPrograms = scenarios.flatMap((s) => s.calls.filter((c) => c.program).map((c) => [s, c]));

/** Bindings whose n-th sub-call resolves with a value or rejects with a tool-call error, by tool name. */
function outcomeOf(tool, n) {
  if (tool === 'run_code') return Object.assign(new Error('run_code is not available to programs'), { toolName: 'run_code' });
  if (n % 3 === 2) return Object.assign(new Error(`denied #${n}`), { toolName: tool });
  return n % 2 === 0 ? `text ${n}` : { n, tool };
}
const kitBindings = () => {
  let n = 0;
  return {
    call: async (tool) => {
      const outcome = outcomeOf(tool, tool === 'run_code' ? 0 : ++n);
      await sleep(1);
      if (outcome instanceof Error) throw outcome;
      return outcome;
    },
  };
};

test('the corpus has programs to compare', () => assert.ok(withPrograms.length >= 7));

for (const [scenario, call] of withPrograms) {
  test(`programSource says what scripts.program says: ${scenario.id} ${call.callId}`, async () => {
    const exec = { token: Symbol(call.callId), callId: call.callId, name: 'run_code', arguments: {} };
    const scripts = new Scripts(scenario, new Recorder());
    const byKit = await scripts.program(exec, kitBindings()).then((out) => ({ content: programContent(out) }), (e) => ({ error: e.message }));
    // The example pipeline's own runner, on the same outcomes, numbering nothing for the kit.
    const runner = sourceProgram({ arguments: { code: scripts.programSource(exec) } });
    const bindings = kitBindings();
    const byRunner = await runner(bindingsFor((_n, tool, args) => bindings.call(tool, args))).then(
      (out) => ({ content: programContent(out) }),
      (e) => ({ error: e.message }),
    );
    assert.deepEqual(byRunner, byKit);
  });
}

test('programSource names the scope it is run in', () => {
  const source = programSource([{ call: { tool: 'read-file', arguments: { path: 'a' } } }, { log: 'done' }], { tools: 'api', log: 'print' });
  assert.match(source, /api\["read-file"\]\(\{"path":"a"\}\)/);
  assert.match(source, /print\("done"\)/);
  assert.throws(() => programSource([{ sing: 'la' }]), /unknown program step/);
});

test('the example pipeline runs the programs as source, its own way, under tep run --strict', { skip: skipReason, timeout: 120_000 }, () => {
  const adapter = fileURLToPath(new URL('../fixtures/code-mode-source.mjs', import.meta.url));
  const { report, status } = tepRun(adapter, ['--strict', '--capability', 'code-mode']);
  assert.equal(notPassed(report), '');
  assert.ok(report.summary.passed >= 7, JSON.stringify(report.summary));
  assert.equal(status, 0);
});
