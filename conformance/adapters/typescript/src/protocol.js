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

export const PROTOCOL_VERSION = 2;

/**
 * Takes stdout for the kit: returns a writer to the real stream, and from then on sends anything
 * else written there (console.log included) to stderr.
 */
export function claimStdout() {
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = (...args) => process.stderr.write(...args);
  return write;
}

/** Thrown (or passed to `session.skip`) when the pipeline cannot express a scenario. */
export class Skip extends Error {
  constructor(reason) {
    super(reason);
    this.name = 'Skip';
  }
}

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

/**
 * Runs one scenario through `adapter.run` and returns the answer's body: `{trace}`,
 * `{skipped}`, `{errored}` or `{escaped}` (without `seq`).
 * @param {object} adapter the options given to `serve`
 * @param {object} json the scenario
 * @param {{spec?: 'rev1'|'rev2'}} [options]
 */
export async function runScenario(adapter, json, { spec = 'rev2' } = {}) {
  let recorder;
  try {
    const scenario = new Scenario(json);
    recorder = new Recorder({ ...(adapter.recorder ?? {}), spec });
    const scripts = new Scripts(scenario, recorder, adapter.scripts ?? {});
    const session = {
      spec,
      scenario,
      recorder,
      scripts,
      skip(reason) {
        throw new Skip(reason);
      },
      async batch(fn) {
        try {
          return await fn();
        } catch (error) {
          throw new Escape(error);
        }
      },
    };
    await adapter.run(scenario, session);
    await recorder.idle();
    return { trace: [header(adapter, spec), ...recorder.records()] };
  } catch (error) {
    if (error instanceof Skip) return { skipped: { reason: error.message } };
    if (error instanceof Escape) {
      return { escaped: { message: error.message, trace: [header(adapter, spec), ...(recorder?.records() ?? [])] } };
    }
    const errored = { message: messageOf(error) };
    if (error instanceof Error && error.stack) errored.context = error.stack;
    return { errored };
  }
}

/**
 * Serves an adapter over the protocol on stdin/stdout, or, with `--scenario FILE|ID` on the
 * command line, runs that one scenario locally (see `runLocal`).
 * @param {object} adapter `{implementation, capabilities?, specs?, observation?, recorder?, scripts?, run}`
 */
export function serve(adapter, { argv = process.argv.slice(2) } = {}) {
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
  const send = (message) => new Promise((resolve) => write(`${JSON.stringify(message)}\n`, () => resolve()));
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
            const answer = await runScenario(adapter, request.scenario, { spec: request.spec ?? 'rev2' });
            await send({ seq: request.seq, ...answer });
            break;
          }
          case 'stop':
            stop();
            break;
          default:
            log(`tep-adapter: ignoring unknown command ${JSON.stringify(request.cmd)}`);
        }
      });
    });
    lines.on('close', () => queue.then(stop));
  });
}
