// Type declarations for tep-adapter (hand-written; test/types.test.js checks they declare every
// runtime export). The protocol is docs/adapter-protocol.md; field tables are docs/events.md.

// ---------------------------------------------------------------------------------------------
// JSON and results

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export type Revision = 'rev1' | 'rev2';
export type Capability = 'approval' | 'fs-gate' | 'parallel' | 'owned-events' | 'ui' | 'code-mode';
export type ObservationLevel = 'events' | 'hooks' | 'full';

export interface ContentBlock {
  type: 'text';
  text: string;
}

export interface ErrorInfo {
  name: string;
  code: string;
}

export interface AdditionalContext {
  origin: 'tool' | 'wrapper' | 'post';
  text: string;
}

/** A result in the trace's shape (`value` is never recorded). */
export interface ToolResult {
  isError: boolean;
  content: ContentBlock[];
  error?: { message: string; info?: ErrorInfo };
  meta?: Json;
  additionalContexts?: AdditionalContext[];
}

// ---------------------------------------------------------------------------------------------
// Scenarios (docs/schemas/scenario.schema.json)

export type PreAction =
  | 'pass'
  | 'allow'
  | { deny: string }
  | { ask: string | null }
  | { rewrite: Json }
  | { throw: string };
export type ApprovalAnswer = 'allowed-once' | 'rejected' | 'cancelled' | 'unavailable' | { throw: string };
export type GuardAction = 'abstain' | 'allow' | { deny: string } | { throw: string };
export type PostAction =
  | 'pass'
  | { addContext: string }
  | { accept: { content?: string | null; value?: Json; context?: string | null } }
  | { block: { feedback: string; context?: string | null } }
  | { throw: string };
export type FinalizeAction = 'keep' | { prefix: string } | { replace: string } | { throw: string };

export type WrapperSpec =
  | { kind: 'timeout' }
  | { kind: 'retry'; attempts: number; delayMs?: number }
  | { kind: 'metrics' }
  | { kind: 'context'; text: string; calls?: string[] }
  | { kind: 'throw'; message: string; phase?: 'before' | 'after'; calls?: string[] };

export interface Todo {
  content: string;
  status: 'pending' | 'in_progress' | 'completed';
}

export interface HookSpec {
  point: string;
  handlerId: string;
  decision: string;
}

export type BodyStep =
  | { sleep: number }
  | 'hang'
  | { slowStop: number }
  | { read: string }
  | { write: { path: string; content: string } }
  | { edit: { path: string; old: string; new: string } }
  | { externalWrite: { path: string; content: string } }
  | { todo: Todo[] }
  | { hook: HookSpec }
  | { deferContext: string }
  | { failUntilAttempt: number }
  | { return: Json }
  | { throw: string };

export interface BindingCall {
  tool: string;
  arguments?: Json;
  body?: BodyStep[];
  onReject?: 'continue' | 'fail';
}

export type ProgramStep =
  | { call: BindingCall }
  | { all: BindingCall[] }
  | 'callRunCode'
  | { log: string }
  | { return: Json }
  | { throw: string };

export interface ToolSpec {
  name: string;
  concurrencySafe: boolean;
  timeoutMs?: number;
  finalize?: FinalizeAction;
}

export interface CallSpec {
  callId: string;
  tool: string;
  arguments: Json;
  body: BodyStep[];
  program?: ProgramStep[];
}

/** A Code Mode sub-call as the scripts name it (`<callId>:code:<n>`). */
export interface SubCallSpec {
  callId: string;
  parent: string;
  tool: string;
  arguments: Json;
  body: BodyStep[];
  onReject: 'continue' | 'fail';
}

export interface Listener<A> {
  id: string;
  /** Call id (or `"*"`) to action. */
  decide: Record<string, A>;
}

export interface ObserverSpec {
  id: string;
  asyncMs: number;
  mutate?: string;
}

/** A call as the model sends it: the raw argument string. */
export interface ModelCall {
  callId: string;
  name: string;
  arguments: string;
}

/** A scenario of the corpus with the schema's defaults filled in. */
export class Scenario {
  constructor(json: object);
  readonly id: string;
  readonly description: string;
  readonly requires: Capability[];
  readonly revisions: Revision[];
  readonly tools: ToolSpec[];
  readonly calls: CallSpec[];
  readonly pre: Listener<PreAction>[];
  /** Absent: no approval prompt is mounted. */
  readonly approval?: { answers: Record<string, ApprovalAnswer> };
  readonly guards: Listener<GuardAction>[];
  readonly wrappers: WrapperSpec[];
  readonly post: Listener<PostAction>[];
  readonly observers: ObserverSpec[];
  readonly files: Record<string, string>;
  readonly maxParallel?: number;
  readonly expect: unknown;
  /** Every sub-call of every program, in submission order. */
  readonly subCalls: SubCallSpec[];
  tool(name: string): ToolSpec | undefined;
  call(callId: string): CallSpec | SubCallSpec | undefined;
  body(callId: string): BodyStep[];
  program(callId: string): ProgramStep[] | undefined;
  rawArguments(callId: string): string;
  modelCalls(): ModelCall[];
}

export const RUN_CODE: 'run_code';
export function actionFor<A>(decide: Record<string, A> | undefined, callId: string, fallback: A): A;
export function subCallId(parentCallId: string, n: number): string;
export function subCallsOf(parentCallId: string, program: ProgramStep[] | undefined): SubCallSpec[];

// ---------------------------------------------------------------------------------------------
// The hook idiom (decisions shaped like the original harness's)

/** The call object a hook is handed. The default `identify` reads these fields. */
export interface Call {
  /** Any value unique to the execution (a Symbol, an object, a string). */
  token: unknown;
  callId: string;
  name: string;
  arguments: unknown;
  /** The outer execution's token, for a Code Mode sub-call (or use `parentToken`). */
  parent?: unknown;
  parentToken?: unknown;
  /** The `run_code` call a sub-call was issued from (or use `parentCallId`). */
  rootCallId?: string;
  parentCallId?: string;
}

export type PreDecision =
  | { type: 'allow'; [extra: string]: unknown }
  | { type: 'deny'; reason: string }
  | { type: 'ask'; reason?: string };
export type GuardVerdict = undefined | { type: 'deny'; reason: string } | { type: 'allow' };
export type ApprovalOutcome = 'allowed-once' | 'rejected' | 'cancelled' | 'unavailable';
export type PostDecision =
  | { type: 'accept'; content?: ContentBlock[]; value?: Json; additionalContexts?: string[] }
  | { type: 'block'; feedback: ContentBlock[]; additionalContexts?: string[] };

export interface ApprovalRequest {
  callId: string;
  toolName?: string;
  reason?: string;
  signal?: AbortSignal;
}

/** A result as a pipeline hands it around (a trace `ToolResult`, perhaps with a `value`). */
export type HarnessResult = ToolResult & { value?: unknown; [extra: string]: unknown };

type Id = { readonly id: string };
export type PreListener<C = any> = ((call: C, next: () => Promise<PreDecision>) => Promise<PreDecision>) & Id;
export type ApprovalAnswerer = (request: ApprovalRequest) => Promise<ApprovalOutcome>;
export type Guard<C = any> = ((call: C) => Promise<GuardVerdict>) & Id;
export type Wrapper<C = any> = ((
  call: C,
  next: (signal?: AbortSignal) => Promise<HarnessResult>,
  signal?: AbortSignal,
) => Promise<HarnessResult>) & Id;
export type PostListener<C = any> = ((
  call: C,
  result: HarnessResult,
  next: () => Promise<PostDecision>,
) => Promise<PostDecision>) & Id;
export type Observer<C = any> = ((call: C, result: HarnessResult) => Promise<unknown>) & Id;
export type FinalizeContent<C = any> = (call: C, candidate: HarnessResult) => ContentBlock[] | undefined;

/** What a body does that touches the harness. Each may return a promise. */
export interface BodyEffects {
  read?(path: string): unknown;
  write?(path: string, content: string): unknown;
  edit?(path: string, old: string, replacement: string): unknown;
  externalWrite?(path: string, content: string): unknown;
  todo?(todos: Todo[]): unknown;
  hook?(hook: HookSpec): unknown;
  deferContext?(text: string): unknown;
}

/** What a program calls tools through. */
export interface Bindings {
  /** Resolves with the sub-call's value; rejects with `{toolName, message}`. */
  call(tool: string, args?: Json): Promise<unknown>;
}

export interface ProgramOutput {
  logs: string[];
  value?: Json;
}

export interface ScriptTool<C = any> {
  name: string;
  concurrencySafe: boolean;
  timeoutMs?: number;
  finalizeContent?: FinalizeContent<C>;
}

export interface ScriptsOptions {
  /** The decision a `{"rewrite": args}` pre action returns (default `{type: 'allow', updatedInput: args}`). */
  rewrite?: (args: Json) => PreDecision;
}

/** Every script of a scenario as a callable in the hook idiom. One per run. */
export class Scripts<C = any> {
  constructor(scenario: Scenario | object, recorder: Recorder<C>, options?: ScriptsOptions);
  readonly scenario: Scenario;
  readonly recorder: Recorder<C>;
  readonly tools: ScriptTool<C>[];
  /** Runs the call's scripted steps; records `toolBody` and, in a `finally`, `body-settled`. */
  readonly body: (call: C, signal?: AbortSignal, effects?: BodyEffects) => Promise<Json>;
  readonly preListeners: PreListener<C>[];
  /** Undefined when the scenario mounts no prompt. */
  readonly approval: ApprovalAnswerer | undefined;
  readonly guards: Guard<C>[];
  /** Outermost first. */
  readonly wrappers: Wrapper<C>[];
  readonly postListeners: PostListener<C>[];
  readonly observers: Observer<C>[];
  /** Runs the program of a `run_code` call; records `toolBody`, binding marks, `body-settled` (by `program`). */
  readonly program: (call: C, bindings: Bindings) => Promise<ProgramOutput>;
  finalizer(action: FinalizeAction): FinalizeContent<C>;
  wrapper(spec: WrapperSpec): Wrapper<C>;
  /** How many times a call's body was dispatched. */
  attempts(callId: string): number;
}

/** The model-facing text of a program's output: logs, then the value (pretty JSON unless a string). */
export function programContent(output?: Partial<ProgramOutput>): string;

// ---------------------------------------------------------------------------------------------
// Trace records (docs/schemas/trace-record.schema.json)

export interface Identity {
  token: string;
  callId: string;
  name: string;
  arguments: Json;
  parentToken?: string;
}

export interface SessionEvent {
  seq: number;
  time: number;
  type: string;
  data: Json;
  surfaceOp?: 'append';
  sourceEventSeqs?: number[];
}

export type TraceRecord =
  | { kind: 'header'; spec: Revision; implementation?: string; capabilities?: Capability[]; observation?: ObservationLevel }
  | {
      kind: 'stage';
      node: string;
      call?: string;
      parent?: string;
      outcome?: string;
      reason?: string;
      identity?: Identity;
      listeners?: string[];
      verdicts?: { guard: string; verdict: 'abstain' | 'deny' | 'allow' | 'throw'; reason?: string }[];
      result?: ToolResult;
      intent?: { intent: 'write' | 'edit'; target: string; version?: number };
      calls?: { callId: string; name: string; concurrencySafe?: boolean }[];
    }
  | { kind: 'event'; call?: string; event: SessionEvent }
  | {
      kind: 'mark';
      call: string;
      mark: 'observer-settled' | 'binding-resolved' | 'binding-rejected' | 'body-settled';
      by: string;
      afterMs?: number;
      rejection?: { toolName?: string; message: string; [extra: string]: Json | undefined };
    };

export type StageRecord = Extract<TraceRecord, { kind: 'stage' }>;
export type MarkRecord = Extract<TraceRecord, { kind: 'mark' }>;

// ---------------------------------------------------------------------------------------------
// The recorder

/** What `identify` returns for a call object. */
export interface SeenIdentity {
  token: unknown;
  callId: string;
  name: string;
  arguments: unknown;
  parentToken?: unknown;
  parent?: string;
}

export interface RecorderOptions<C = any> {
  spec?: Revision;
  identify?: (call: C) => SeenIdentity;
  toResult?: (result: unknown) => ToolResult;
  readPreDecision?: (decision: unknown) => { outcome: string; reason?: string };
  readPostDecision?: (decision: unknown) => { outcome: string };
  /** Milliseconds, for event `time` (default `performance.now`). */
  clock?: () => number;
}

/** A call object, or just its id for records that carry no identity. */
type CallRef<C> = C | string;

/** The recording probes, to mount on the harness's own hooks (see the README). */
export interface Probes<C = any> {
  /** Outermost `tools/pre-execute` listener. */
  pre(call: C, next: () => Promise<PreDecision>): Promise<PreDecision>;
  /** Last guard: records `guards` when every guard abstained. */
  guards(call: C): Promise<undefined>;
  /** Outermost `tools/execute` wrapper. */
  executeEnd(call: C, next: (signal?: AbortSignal) => Promise<HarnessResult>, signal?: AbortSignal): Promise<HarnessResult>;
  /** Innermost `tools/execute` wrapper. */
  dispatch(call: C, next: (signal?: AbortSignal) => Promise<HarnessResult>, signal?: AbortSignal): Promise<HarnessResult>;
  /** Outermost `tools/post-execute` listener. */
  post(call: C, result: HarnessResult, next: () => Promise<PostDecision>): Promise<PostDecision>;
  /** First `tools/result` observer. */
  toolsResult(call: C, result: HarnessResult): void;
}

export class Recorder<C = any> {
  constructor(options?: RecorderOptions<C>);
  readonly spec: Revision;
  identify(call: C): SeenIdentity;
  tokenName(token: unknown): string | undefined;
  identity(call: C): Identity;
  callIdOf(call: CallRef<C>): string;

  /** A session event the harness logged, kept as it is (its call inferred when not given). */
  onEvent(event: SessionEvent, options?: { call?: CallRef<C> }): SessionEvent;

  onModel(calls: { callId: string; name: string; concurrencySafe?: boolean }[]): StageRecord;
  onToolCall(call: C, options?: { arguments?: string; turn?: number; step?: number }): SessionEvent;
  onPresentCall(call: CallRef<C>): StageRecord;
  onPresentResult(call: CallRef<C>): StageRecord;

  onListenerEntered(call: CallRef<C>, waterfall: 'pre' | 'post', id: string): void;
  onPreExecute(call: C, settled: { decision?: unknown; error?: unknown; listeners?: string[] }): StageRecord;
  onApprovalAsked(call: CallRef<C>, data: { id?: string; toolName: string; reason?: string | null }): SessionEvent;
  onApprovalDecided(call: CallRef<C>, data: { id?: string; outcome: ApprovalOutcome }): SessionEvent;
  onApproval(call: CallRef<C>, settled: { outcome?: ApprovalOutcome; error?: unknown; reason?: string }): StageRecord;
  onGuardVerdict(
    call: CallRef<C>,
    guard: string,
    settled: { verdict?: 'abstain' | 'deny' | 'allow'; reason?: string; error?: unknown },
  ): StageRecord | undefined;
  onGuards(call: CallRef<C>, outcome?: { outcome?: 'allow' | 'deny' | 'throw'; reason?: string }): StageRecord;
  onDenied(call: CallRef<C>, reason: string): StageRecord;

  onDispatch(call: C): StageRecord;
  onBodyStart(call: C): StageRecord;
  onBodySettled(call: CallRef<C>, by?: string): MarkRecord;
  runBody<T>(call: C, fn: () => Promise<T>, options?: { by?: string; start?: boolean }): Promise<T>;
  currentBody(): C | undefined;
  onBodyReturn(call: C, settled: { result?: unknown; error?: unknown }): StageRecord;
  onExecuteEnd(call: C, settled?: { error?: unknown }): StageRecord;
  onFsGate(
    call: C | undefined,
    intent: { intent: 'write' | 'edit'; target: string; version?: number },
    outcome: 'allow' | 'deny',
    reason?: string,
  ): StageRecord;
  onFsObserved(
    data: { target: string; state: { kind: 'present'; version: number } | { kind: 'absent' }; actor?: string },
    options?: { call?: CallRef<C> },
  ): SessionEvent;
  onTodoWrite(todos: Todo[], options?: { call?: CallRef<C> }): SessionEvent;
  onHook(
    hook: HookSpec,
    options?: { call?: CallRef<C>; dialect?: string; durationMs?: number; turn?: number },
  ): SessionEvent;

  onPostExecute(call: C, settled: { result: unknown; decision?: unknown; error?: unknown; listeners?: string[] }): StageRecord;
  onNormalized(call: CallRef<C>, errorOrReason: unknown): StageRecord;
  onFinalize(call: C, settled: { candidate: unknown; error?: unknown }): StageRecord;
  onToolsResult(call: CallRef<C>, result: unknown): StageRecord;
  onToolResult(call: CallRef<C>, result: unknown, options?: { turn?: number; step?: number; messageId?: string }): SessionEvent;
  onBatchSettled(): StageRecord;
  onContext(call: CallRef<C>, text: string, options?: { id?: string }): SessionEvent;
  onObserverSettled(call: CallRef<C>, observer: string, afterMs?: number): MarkRecord;

  onCodeDispatchStart(
    subCall: CallRef<C> | undefined,
    data: { rootCallId: string; parentCallId: string; subCallId: string; name: string; arguments: Json },
  ): SessionEvent;
  onCodeDispatch(
    subCall: CallRef<C> | undefined,
    data: { rootCallId: string; parentCallId: string; subCallId: string; name: string; arguments: Json; result: unknown },
  ): SessionEvent;
  onBindingSettled(subCall: CallRef<C>, settled?: { rejection?: unknown }): MarkRecord;

  track<T>(promise: Promise<T>): Promise<T>;
  idle(): Promise<void>;
  records(): TraceRecord[];
  readonly probes: Probes<C>;
}

export function defaultIdentify(call: Call): SeenIdentity;
export function defaultToResult(result: unknown): ToolResult;
export function defaultReadPreDecision(decision: unknown): { outcome: string; reason?: string };
export function defaultReadPostDecision(decision: unknown): { outcome: string };
export function rejectionFields(rejection: unknown): { toolName?: string; message: string; [extra: string]: Json | undefined };

// ---------------------------------------------------------------------------------------------
// The protocol loop

export const PROTOCOL_VERSION: 2;

export interface Session<C = any> {
  spec: Revision;
  scenario: Scenario;
  recorder: Recorder<C>;
  scripts: Scripts<C>;
  /** Answers `skipped` with this reason (throws). */
  skip(reason: string): never;
  /** Runs the batch: what escapes it is answered `escaped`, with the records so far. */
  batch<T>(fn: () => Promise<T>): Promise<T>;
}

export interface Adapter<C = any> {
  implementation: { name: string; version?: string; language?: string; homepage?: string };
  capabilities?: Capability[];
  specs?: Revision[];
  observation?: ObservationLevel;
  recorder?: Omit<RecorderOptions<C>, 'spec'>;
  scripts?: ScriptsOptions;
  /** Builds a fresh pipeline, mounts the scripts, runs the batch. A throw is answered `errored`. */
  run(scenario: Scenario, session: Session<C>): Promise<void>;
}

export type Answer =
  | { trace: TraceRecord[] }
  | { skipped: { reason: string } }
  | { errored: { message: string; context?: string } }
  | { escaped: { message: string; trace: TraceRecord[] } };

export class Skip extends Error {
  constructor(reason: string);
}

/** Serves the protocol on stdin/stdout (or runs `--scenario FILE|ID` locally), then exits. */
export function serve(adapter: Adapter, options?: { argv?: string[] }): Promise<never>;
export function serveStreams(
  adapter: Adapter,
  streams: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream },
): Promise<void>;
export function runScenario(adapter: Adapter, scenario: object, options?: { spec?: Revision }): Promise<Answer>;
export function readyMessage(adapter: Adapter): {
  ready: true;
  protocol: 2;
  implementation: Adapter['implementation'];
  capabilities: Capability[];
  specs: Revision[];
  observation: ObservationLevel;
};
/** Whether the module of `meta` (`import.meta`) is the program node was started with. */
export function isMain(meta: { url: string }): boolean;
export function claimStdout(): (chunk: string, callback?: () => void) => boolean;

/** Runs `--scenario FILE|ID` and prints the trace, then `tep check`'s verdict; resolves with an exit code. */
export function runLocal(
  adapter: Adapter,
  argv: string[],
  options?: { out?: NodeJS.WritableStream; err?: NodeJS.WritableStream },
): Promise<number>;
/** `explicit`, else $TEP_BIN, else `tep` on PATH. */
export function findTep(explicit?: string, env?: Record<string, string | undefined>): string | undefined;
export function loadScenario(fileOrId: string, tep?: string): object;

// ---------------------------------------------------------------------------------------------
// Results and errors

export function textBlock(text: string): ContentBlock;
export function contentText(content: ContentBlock[] | undefined): string;
export function render(value: Json): string;
export function failure(message: string, info?: ErrorInfo): ToolResult;
export function timeoutResult(ms: number): ToolResult;
export function messageOf(thrown: unknown): string;
/** A scripted `{"throw": message}`. */
export class ScriptError extends Error {}
/** What a body throws when its signal aborted: `name` `AbortError`, `code` `ABORTED`. */
export class CancelledError extends Error {
  constructor(message?: string);
  readonly code: 'ABORTED';
}
