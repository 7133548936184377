// The protocol loop (docs/adapter-protocol.md): newline-delimited JSON on stdin/stdout, one
// request at a time. Nothing but protocol goes to stdout: once `serve` starts, anything else
// written there (console.log included) is sent to stderr.

import { realpathSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Recorder } from './recorder.js';
import { Scripts } from './interpret.js';
import { Scenario } from './scenario.js';
import { messageOf } from './results.js';
import { EncodeError, stringify } from './json.js';

export const PROTOCOL_VERSION = 3;

/**
 * Takes stdout for the kit: returns a writer to the real stream, and from then on sends anything
 * else written there (console.log included) to stderr.
 */
export function claimStdout() {
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (...args) => process.stderr.write(...args);
  return write;
}

/**
 * Thrown (or `session.skip(reason)`) when the pipeline cannot express a scenario. The request
 * holds whatever the pipeline does with the exception: thrown inside a body or a hook, where a
 * pipeline's catch-all turns it into an error result (as the spec asks), the scenario is still
 * answered skipped. The kit notes the request when the `Skip` is made during a scenario.
 */
export class Skip extends Error {
  constructor(reason) {
    super(reason);
    this.name = 'Skip';
    if (scenarioRunning && scenarioRunning.skip === undefined) scenarioRunning.skip = reason || 'the adapter skipped it';
  }
}

/** The scenario `runScenario` is running (one at a time): where a `Skip` notes its request. */
let scenarioRunning;

/** Wraps what escaped the pipeline (see `session.batch`). */
class Escape extends Error {
  constructor(cause) {
    super(messageOf(cause), { cause });
    this.name = 'Escape';
  }
}

/**
 * Whether the module of `meta` (`import.meta`) is the program node was started with, so one
 * file can both export an adapter (for tests) and serve it: `if (isMain(import.meta)) await serve(adapter)`.
 */
export function isMain(meta) {
  if (!process.argv[1]) return false;
  try {
    return realpathSync(fileURLToPath(meta.url)) === realpathSync(process.argv[1]);
  } catch {
    return false;
  }
}

/** The `ready` answer for an adapter's options. */
export function readyMessage(adapter) {
  const ready = {
    ready: true,
    protocol: PROTOCOL_VERSION,
    implementation: adapter.implementation,
    capabilities: adapter.capabilities ?? [],
    specs: adapter.specs ?? ['rev2'],
    observation: adapter.observation ?? 'hooks',
  };
  return ready;
}

/** The trace's header record. */
function header(adapter, spec) {
  return {
    kind: 'header',
    spec,
    implementation: adapter.implementation?.name,
    capabilities: adapter.capabilities ?? [],
    observation: adapter.observation ?? 'hooks',
  };
}

/** The recorder of the scenario running now, for problems that surface outside any await. */
let running;

/** Notes an exception that reached the event loop as a problem of the scenario running, if any (see `serve`). */
export function noteUncaught(error, origin = 'uncaught exception') {
  const message =
    `an exception reached the event loop while the scenario ran (${origin}, outside any await the kit ` +
    `could catch: a timer, an event handler, a promise nobody awaited): ${messageOf(error)}`;
  if (running) running.problem(message);
  return message;
}

/**
 * Runs one scenario through `adapter.run` and returns the answer's body: `{trace}`,
 * `{skipped}`, `{errored}` or `{escaped}` (without `seq`). What the kit found wrong in how it
 * was used (`Recorder.problem`: no `model` record first, a call it cannot read, a value JSON
 * cannot hold, `batch` not awaited) is answered `errored`, with the first problem as message.
 * @param {object} adapter the options given to `serve`
 * @param {object} json the scenario
 * @param {{spec?: 'rev1'|'rev2'}} [options]
 */
export async function runScenario(adapter, json, { spec = 'rev2' } = {}) {
  let recorder;
  let scripts;
  const state = { skip: undefined };
  const answer = (body) => {
    // A skip requested anywhere in the run, whatever the pipeline did with the exception.
    if (state.skip !== undefined) return { skipped: { reason: state.skip } };
    const problems = [...(scripts?.unawaited() ?? []), ...(recorder?.problems() ?? [])];
    if (problems.length === 0 || body.skipped) return body;
    if (problems.length === 1) return { errored: { message: problems[0] } }; // tep prints `message (context)`
    const more = ` (and ${problems.length - 1} more problem(s), listed in the context)`;
    return { errored: { message: `${problems[0]}${more}`, context: problems.join('\n') } };
  };
  const previous = scenarioRunning;
  scenarioRunning = state;
  try {
    const scenario = new Scenario(json);
    const sync = adapter.sync ?? false;
    recorder = new Recorder({ sync, ...(adapter.recorder ?? {}), spec });
    scripts = new Scripts(scenario, recorder, { sync, ...(adapter.scripts ?? {}) });
    let pending = 0;
    const session = {
      spec,
      scenario,
      recorder,
      scripts,
      skip(reason) {
        throw new Skip(reason);
      },
      async batch(fn) {
        pending += 1;
        try {
          return await fn();
        } catch (error) {
          if (error instanceof Skip) throw error;
          throw new Escape(error);
        } finally {
          pending -= 1;
        }
      },
    };
    running = recorder;
    await adapter.run(scenario, session);
    if (pending > 0) {
      recorder.problem('run returned while session.batch(...) was still running: await session.batch(() => pipeline.runBatch(...))');
    }
    await recorder.idle();
    return answer({ trace: [header(adapter, spec), ...recorder.records()] });
  } catch (error) {
    if (error instanceof Skip) return answer({ skipped: { reason: error.message } });
    if (error instanceof Escape) {
      return answer({ escaped: { message: error.message, trace: [header(adapter, spec), ...(recorder?.records() ?? [])] } });
    }
    const errored = { message: messageOf(error) };
    if (error instanceof Error && error.stack) errored.context = error.stack;
    return answer({ errored });
  } finally {
    if (running === recorder) running = undefined;
    if (scenarioRunning === state) scenarioRunning = previous;
  }
}

/**
 * One protocol message as a line: JSON, or, when it holds what JSON cannot (the adapter's own
 * `implementation`, say), an `errored` answer naming the field.
 */
export function encodeMessage(message) {
  try {
    return stringify(message);
  } catch (error) {
    const reason = error instanceof EncodeError ? error.message : messageOf(error);
    const fallback = { errored: { message: `the kit cannot encode its answer: ${reason}` } };
    if (message && typeof message === 'object' && 'seq' in message) return JSON.stringify({ seq: message.seq, ...fallback });
    return JSON.stringify(fallback);
  }
}

/**
 * Serves an adapter over the protocol on stdin/stdout, or, with `--scenario FILE|ID` on the
 * command line, runs that one scenario locally (see `runLocal`).
 * @param {object} adapter `{implementation, capabilities?, specs?, observation?, recorder?, scripts?, run}`
 */
export function serve(adapter, { argv = process.argv.slice(2) } = {}) {
  // A harness's stray rejection or a throw from one of its timers must not end the adapter: it
  // is a problem of the scenario running (answered errored), or logged between scenarios.
  process.on('unhandledRejection', (error) => process.stderr.write(`tep-adapter: ${noteUncaught(error, 'unhandled rejection')}\n`));
  process.on('uncaughtException', (error) => process.stderr.write(`tep-adapter: ${noteUncaught(error)}\n`));
  const done = argv.includes('--scenario')
    ? import('./local.js').then(({ runLocal }) => runLocal(adapter, argv))
    : serveStreams(adapter, { input: process.stdin, output: process.stdout }).then(() => 0);
  // Exit promptly: work a broken pipeline left running must not keep the adapter alive.
  return done.then(
    (code) => process.exit(code),
    (error) => {
      process.stderr.write(`${error?.stack ?? error}\n`);
      process.exit(1);
    },
  );
}

/**
 * The loop itself, on any streams. With `process.stdout` as `output`, later writes to stdout by
 * anything else are redirected to stderr.
 */
export function serveStreams(adapter, { input, output }) {
  const write = output === process.stdout ? claimStdout() : output.write.bind(output);
  const send = (message) => new Promise((resolve) => write(`${encodeMessage(message)}\n`, () => resolve()));
  const log = (text) => process.stderr.write(`${text}\n`);
  const lines = createInterface({ input, crlfDelay: Infinity });
  return new Promise((resolve) => {
    let queue = Promise.resolve();
    let stopped = false;
    const stop = () => {
      if (stopped) return;
      stopped = true;
      lines.close();
      resolve();
    };
    lines.on('line', (line) => {
      if (line.trim() === '') return;
      queue = queue.then(async () => {
        if (stopped) return;
        let request;
        try {
          request = JSON.parse(line);
        } catch (error) {
          log(`tep-adapter: ignoring a line that is not JSON: ${messageOf(error)}`);
          return;
        }
        switch (request.cmd) {
          case 'start':
            await send(readyMessage(adapter));
            break;
          case 'run': {
            let answer;
            try {
              answer = await runScenario(adapter, request.scenario, { spec: request.spec ?? 'rev2' });
            } catch (error) {
              answer = { errored: { message: `the kit failed to run the scenario: ${messageOf(error)}` } };
            }
            await send({ seq: request.seq, ...answer });
            break;
          }
          case 'stop':
            stop();
            break;
          default:
            log(`tep-adapter: ignoring unknown command ${JSON.stringify(request.cmd)}`);
        }
      }).catch((error) => log(`tep-adapter: ${messageOf(error)}`));
    });
    lines.on('close', () => queue.then(stop));
  });
}
