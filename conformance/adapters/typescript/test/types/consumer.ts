// Compiled by `npm run typecheck` only (never run): a TypeScript consumer of index.d.ts. If the
// declarations and this idiomatic use disagree, tsc says so.
import {
  EncodeError,
  Recorder,
  Scripts,
  Scenario,
  encode,
  programSource,
  render,
  serve,
  runScenario,
  type Adapter,
  type Call,
  type ContentBlock,
  type GuardVerdict,
  type HarnessResult,
  type PreDecision,
  type TraceRecord,
} from 'tep-adapter';

interface Exec extends Call {
  readonly token: symbol;
}

const adapter: Adapter<Exec> = {
  implementation: { name: 'typed', language: 'TypeScript' },
  capabilities: ['approval', 'ui'],
  observation: 'hooks',
  async run(scenario: Scenario, { recorder, scripts, batch, skip }) {
    if (scenario.requires.includes('code-mode')) skip('no Code Mode here');
    const pre = [recorder.probes.pre, ...scripts.preListeners];
    const runPre = (exec: Exec, i = 0): Promise<PreDecision> =>
      i < pre.length ? pre[i](exec, () => runPre(exec, i + 1)) : Promise.resolve({ type: 'allow' });
    recorder.onModel(scenario.modelCalls());
    await batch(async () => {
      for (const call of scenario.modelCalls()) {
        const exec: Exec = { token: Symbol(call.callId), callId: call.callId, name: call.name, arguments: JSON.parse(call.arguments) };
        recorder.onToolCall(exec, { arguments: call.arguments });
        const decision = await runPre(exec);
        if (decision.type === 'deny') recorder.onDenied(exec, decision.reason);
        const result: HarnessResult = { isError: false, content: [{ type: 'text', text: render(await scripts.body(exec)) }] };
        recorder.onToolsResult(exec, result);
        recorder.onToolResult(exec, result);
      }
    });
  },
};

// A synchronous harness: guards and listeners return plain values.
type SyncGuard = (exec: Exec) => GuardVerdict;
const syncAdapter: Adapter<Exec, true> = {
  implementation: { name: 'typed-sync' },
  sync: true,
  recorder: {
    readPreDecision: (decision: { allowed: boolean }, call: Exec) => ({ outcome: decision.allowed ? 'allow' : 'deny', reason: call.name }),
    readPostDecision: (decision: unknown, result: HarnessResult) => ({ outcome: result.isError ? 'block' : 'accept' }),
  },
  scripts: {
    finalizer: 'content',
    context: (text, origin) => ({ role: 'user', text, origin }),
    signal: (abortSignal) => ({ cancelled: () => abortSignal.aborted }),
    readSignal: (token: { cancelled(): boolean } | undefined) => (token?.cancelled() ? AbortSignal.abort() : undefined),
  },
  async run(scenario, { recorder, scripts }) {
    const guards: SyncGuard[] = [...scripts.guards, recorder.probes.guards].map((g) => (exec: Exec) => {
      const verdict = g(exec);
      if (verdict instanceof Promise) throw new TypeError('a synchronous guard returned a promise');
      return verdict;
    });
    const finalize: ((content: ContentBlock[]) => ContentBlock[] | undefined) | undefined = scripts.tools[0]?.finalizeContent;
    recorder.onModel([]);
    const source: string = scripts.programSource('c1', { tools: 'api', log: 'print' });
    await recorder.runProgram({ token: Symbol('c1'), callId: 'c1', name: 'run_code', arguments: {} }, async () => source.length);
    console.log(guards.length, finalize, programSource([{ log: 'x' }]));
  },
};

const answer = await runScenario(adapter, { id: 'x', tools: [], calls: [] });
if ('trace' in answer) {
  const nodes: string[] = answer.trace.flatMap((r: TraceRecord) => (r.kind === 'stage' ? [r.node] : []));
  console.log(nodes);
}
if ('errored' in answer) console.log(answer.errored.message);
const standalone = new Recorder<Exec>({ spec: "rev1", identify: (e) => ({ token: e.token, callId: e.callId, name: e.name, arguments: e.arguments }) });
const scripts = new Scripts<Exec>({ id: 'x', tools: [], calls: [] }, standalone);
scripts.wrappers.forEach((w) => console.log(w.id));
standalone.problem('a problem of my own glue');
console.log(standalone.problems().length);
try {
  encode({ n: 1n });
} catch (error) {
  if (error instanceof EncodeError) console.log(error.path);
}
await runScenario(syncAdapter, { id: 'x', tools: [], calls: [] });
await serve(adapter);
