#!/usr/bin/env node
// The example pipeline as a tep adapter: mounts the scenario's scripts and the recorder's probes
// on the pipeline's own hooks. Run: node conformance/adapters/typescript/example/adapter.mjs
import { isMain, serve } from 'tep-adapter';
import { ToolPipeline } from './pipeline/index.mjs';

/** @type {import('tep-adapter').Adapter} */
export const adapter = {
  implementation: { name: 'tep-example-ts', version: '0.1.0', language: 'JavaScript' },
  capabilities: ['approval', 'fs-gate', 'parallel', 'owned-events', 'ui', 'code-mode'],
  specs: ['rev2'],
  observation: 'full',

  async run(scenario, { recorder: rec, scripts, batch }) {
    const pipeline = new ToolPipeline({ maxParallel: scenario.maxParallel, files: scenario.files });

    // What the pipeline logs, and what only its own code knows (observation level `full`).
    pipeline.session.on('append', (event) => rec.onEvent(event));
    pipeline.on('batch', (calls) => rec.onModel(calls));
    pipeline.on('unanswered', (exec, reason) => rec.onApproval(exec, { outcome: 'unavailable', reason }));
    pipeline.on('denied', (exec, reason) => rec.onDenied(exec, reason));
    pipeline.on('normalized', (exec, error) => rec.onNormalized(exec, error));
    pipeline.on('settled', () => rec.onBatchSettled());
    pipeline.presenter = {
      presentCall: (exec) => rec.onPresentCall(exec),
      presentResult: (exec) => rec.onPresentResult(exec),
    };

    // The tools: the scenario's definitions, each body running the call's scripted steps.
    for (const tool of scripts.tools) {
      pipeline.register({
        name: tool.name,
        isConcurrencySafe: () => tool.concurrencySafe,
        timeoutMs: tool.timeoutMs,
        finalizeContent: tool.finalizeContent,
        execute: (args, ctx) =>
          scripts.body(ctx.exec, ctx.signal, {
            read: (path) => ctx.fs.read(path),
            write: (path, content) => ctx.fs.write(path, content),
            edit: (path, old, replacement) => ctx.fs.edit(path, old, replacement),
            externalWrite: (path, content) => pipeline.disk.put(path, content),
            todo: (todos) => ctx.todos.write(todos),
            hook: (hook) => ctx.hooks.record(hook),
            deferContext: (text) => ctx.deferContext(text),
          }),
      });
    }

    // The hooks: a recording probe outermost (innermost for the dispatch), the scripts inside.
    pipeline.preExecute.use(rec.probes.pre, ...scripts.preListeners);
    pipeline.approval = scripts.approval;
    pipeline.guard(...scripts.guards, rec.probes.guards);
    pipeline.execute.use(rec.probes.executeEnd, ...scripts.wrappers, rec.probes.dispatch);
    pipeline.postExecute.use(rec.probes.post, ...scripts.postListeners);
    pipeline.observe(rec.probes.toolsResult, ...scripts.observers);
    pipeline.fsIntents.use(async (intent, next) => {
      const verdict = await next();
      const gated = { intent: intent.kind, target: intent.target, version: intent.version };
      rec.onFsGate(intent.exec, gated, verdict.allow ? 'allow' : 'deny', verdict.reason);
      return verdict;
    });
    pipeline.enableCodeMode({ load: (exec) => (bindings) => scripts.program(exec, bindings) });

    await batch(() => pipeline.runBatch(scenario.modelCalls()));
  },
};

// Served when run as a program; the kit's tests import `adapter` and run it in process.
if (isMain(import.meta)) await serve(adapter);
