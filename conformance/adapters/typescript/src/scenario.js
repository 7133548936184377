// Scenarios as objects: the JSON `tep` sends, with the schema's defaults filled in and the
// look-ups every interpreter needs (a listener's action for a call, a call's body, sub-call ids).

/** The reserved Code Mode transport tool. */
export const RUN_CODE = 'run_code';

/**
 * The action a `decide` map gives a call: its own entry, else `"*"`, else `fallback`.
 * @param {Record<string, unknown> | undefined} decide
 */
export function actionFor(decide, callId, fallback) {
  if (decide && Object.hasOwn(decide, callId)) return decide[callId];
  if (decide && Object.hasOwn(decide, '*')) return decide['*'];
  return fallback;
}

/** The id of a program's `n`-th binding call (from 1), as the scripts name it. */
export const subCallId = (parentCallId, n) => `${parentCallId}:code:${n}`;

/** The binding calls a program issues, with their ids, in submission order. */
export function subCallsOf(parentCallId, program) {
  const issued = (program ?? []).flatMap((step) => {
    if (step && typeof step === 'object' && 'call' in step) return [step.call];
    if (step && typeof step === 'object' && 'all' in step) return step.all;
    return [];
  });
  return issued.map((call, i) => ({
    callId: subCallId(parentCallId, i + 1),
    parent: parentCallId,
    tool: call.tool,
    arguments: call.arguments ?? {},
    body: call.body ?? [],
    onReject: call.onReject ?? 'continue',
  }));
}

/** One scenario of the corpus (docs/schemas/scenario.schema.json), defaults filled in. */
export class Scenario {
  /** @param {object} json the `scenario` of a `run` request */
  constructor(json) {
    if (!json || typeof json !== 'object') throw new TypeError('a scenario must be an object');
    if (!Array.isArray(json.calls) || !Array.isArray(json.tools)) {
      throw new TypeError(`scenario ${json.id ?? '?'} has no calls or no tools`);
    }
    this.id = json.id;
    this.description = json.description ?? '';
    this.requires = json.requires ?? [];
    this.revisions = json.revisions ?? ['rev1', 'rev2'];
    this.tools = json.tools.map((t) => ({
      name: t.name,
      concurrencySafe: t.concurrencySafe === true,
      timeoutMs: t.timeoutMs ?? undefined,
      finalize: t.finalize ?? undefined,
    }));
    this.calls = json.calls.map((c) => ({
      callId: c.callId,
      tool: c.tool,
      arguments: c.arguments ?? {},
      body: c.body ?? [],
      program: c.program ?? undefined,
    }));
    this.pre = (json.pre ?? []).map((l) => ({ id: l.id, decide: l.decide ?? {} }));
    this.approval = json.approval ? { answers: json.approval.answers ?? {} } : undefined;
    this.guards = (json.guards ?? []).map((l) => ({ id: l.id, decide: l.decide ?? {} }));
    this.wrappers = json.wrappers ?? [];
    this.post = (json.post ?? []).map((l) => ({ id: l.id, decide: l.decide ?? {} }));
    this.observers = (json.observers ?? []).map((o) => ({
      id: o.id,
      asyncMs: o.asyncMs ?? 0,
      mutate: o.mutate ?? undefined,
    }));
    this.files = json.files ?? {};
    this.maxParallel = json.maxParallel ?? undefined;
    this.expect = json.expect;
    this.subCalls = this.calls.flatMap((c) => (c.program ? subCallsOf(c.callId, c.program) : []));
    Object.freeze(this);
  }

  /** The tool definition named `name`, if the scenario has one. */
  tool(name) {
    return this.tools.find((t) => t.name === name);
  }

  /** The model's call or Code Mode sub-call with this id. */
  call(callId) {
    return this.calls.find((c) => c.callId === callId) ?? this.subCalls.find((c) => c.callId === callId);
  }

  /** What the body of this call (or sub-call) does: its steps, `[]` when it has none. */
  body(callId) {
    return this.call(callId)?.body ?? [];
  }

  /** The program of a `run_code` call. */
  program(callId) {
    return this.calls.find((c) => c.callId === callId)?.program;
  }

  /** The argument string the model wrote for a call: its arguments as compact JSON. */
  rawArguments(callId) {
    return JSON.stringify(this.call(callId)?.arguments ?? {});
  }

  /** The batch as a model sends it: `{callId, name, arguments}` with the raw argument string. */
  modelCalls() {
    return this.calls.map((c) => ({ callId: c.callId, name: c.tool, arguments: JSON.stringify(c.arguments) }));
  }
}
