// Compiled by `npm run typecheck` only (never run): a TypeScript consumer of index.d.ts. If the
// declarations and this idiomatic use disagree, tsc says so.
import {
  Recorder,
  Scripts,
  Scenario,
  serve,
  runScenario,
  type Adapter,
  type Call,
  type PreDecision,
  type HarnessResult,
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
    await batch(async () => {
      for (const call of scenario.modelCalls()) {
        const exec: Exec = { token: Symbol(call.callId), callId: call.callId, name: call.name, arguments: JSON.parse(call.arguments) };
        recorder.onToolCall(exec, { arguments: call.arguments });
        const decision = await runPre(exec);
        if (decision.type === 'deny') recorder.onDenied(exec, decision.reason);
        const result: HarnessResult = { isError: false, content: [{ type: 'text', text: String(await scripts.body(exec)) }] };
        recorder.onToolsResult(exec, result);
        recorder.onToolResult(exec, result);
      }
    });
  },
};

const answer = await runScenario(adapter, { id: 'x', tools: [], calls: [] });
if ('trace' in answer) {
  const nodes: string[] = answer.trace.flatMap((r: TraceRecord) => (r.kind === 'stage' ? [r.node] : []));
  console.log(nodes);
}
const standalone = new Recorder<Exec>({ spec: "rev1", identify: (e) => ({ token: e.token, callId: e.callId, name: e.name, arguments: e.arguments }) });
const scripts = new Scripts<Exec>({ id: 'x', tools: [], calls: [] }, standalone);
scripts.wrappers.forEach((w) => console.log(w.id));
await serve(adapter);
