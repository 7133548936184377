// Running one scenario locally: `node my-adapter.mjs --scenario FILE|ID [--spec rev2] [--tep PATH]`
// prints the trace (JSON Lines) and then the checker's verdict (`tep check`), when a `tep`
// binary is found: `--tep PATH`, else $TEP_BIN, else `tep` on PATH.

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { claimStdout, runScenario } from './protocol.js';

/** The `tep` binary to use: `explicit`, else $TEP_BIN, else `tep` on PATH; undefined if none. */
export function findTep(explicit, env = process.env) {
  if (explicit) return explicit;
  if (env.TEP_BIN) return env.TEP_BIN;
  for (const dir of (env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'tep'))) return join(dir, 'tep');
  }
  return undefined;
}

function option(argv, name) {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}

/** A scenario from a JSON file, or by id from the corpus (`tep scenarios show ID`). */
export function loadScenario(fileOrId, tep) {
  if (existsSync(fileOrId)) return JSON.parse(readFileSync(fileOrId, 'utf8'));
  if (!tep) throw new Error(`no file ${fileOrId}, and no tep binary to look the scenario up by id`);
  const shown = spawnSync(tep, ['scenarios', 'show', fileOrId], { encoding: 'utf8' });
  if (shown.status !== 0) throw new Error(`tep scenarios show ${fileOrId}: ${shown.stderr.trim()}`);
  return JSON.parse(shown.stdout);
}

/**
 * Runs the scenario named on the command line and prints its trace, then `tep check`'s verdict.
 * Resolves with the exit code: `tep check`'s, 0 for a trace that was not checked, 1 for an
 * answer that is not a trace.
 */
export async function runLocal(adapter, argv, { out, err = process.stderr } = {}) {
  // The trace goes to stdout; what the harness prints goes to stderr.
  const write = out ? out.write.bind(out) : claimStdout();
  const tep = findTep(option(argv, '--tep'));
  const spec = option(argv, '--spec') ?? 'rev2';
  const scenario = loadScenario(option(argv, '--scenario'), tep);
  const answer = await runScenario(adapter, scenario, { spec });
  const trace = answer.trace ?? answer.escaped?.trace;
  if (!trace) {
    write(`${JSON.stringify(answer)}\n`);
    return 1;
  }
  const lines = trace.map((r) => JSON.stringify(r)).join('\n') + '\n';
  write(lines);
  if (answer.escaped) err.write(`escaped: ${answer.escaped.message}\n`);
  if (!tep) {
    err.write('no tep binary found (pass --tep PATH, set TEP_BIN or put tep on PATH): the trace was not checked\n');
    return 0;
  }
  const checked = spawnSync(tep, ['check', '-', ...(argv.includes('--strict') ? ['--strict'] : [])], {
    input: lines,
    encoding: 'utf8',
  });
  write(checked.stdout);
  err.write(checked.stderr);
  return checked.status ?? 1;
}
