// Type declarations for tep-adapter (hand-written; test/types.test.js checks they declare every
// runtime export). The protocol is docs/adapter-protocol.md; field tables are docs/events.md.

// ---------------------------------------------------------------------------------------------
// JSON and results

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export type Revision = 'rev1' | 'rev2';
export type Capability = 'approval' | 'fs-gate' | 'parallel' | 'owned-events' | 'ui' | 'code-mode';
export type ObservationLevel = 'events' | 'hooks' | 'full';

/**
 * A text block. A block of another type a harness writes (an image, a plugin's own) is kept
 * whole by `defaultToResult` and by tep; `contentText` reads no text from it.
 */
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

/**
 * What a kit hook returns: a promise by default; with `sync: true` (`S`), a plain value whenever
 * what it called returned one, and a promise only when it was handed one.
 */
export type Returned<T, S extends boolean = false> = S extends true ? T | Promise<T> : Promise<T>;
/** A value, or a promise of it. */
export type MaybePromise<T> = T | Promise<T>;

export type PreListener<C = any, S extends boolean = false> = ((
  call: C,
  next: () => MaybePromise<PreDecision>,
) => Returned<PreDecision, S>) &
  Id;
export type ApprovalAnswerer<S extends boolean = false> = (request: ApprovalRequest | object) => Returned<ApprovalOutcome, S>;
export type Guard<C = any, S extends boolean = false> = ((call: C) => Returned<GuardVerdict, S>) & Id;
/** `signal` is whatever your pipeline hands its wrappers (an `AbortSignal` unless `ScriptsOptions.signal` says otherwise). */
export type Wrapper<C = any> = ((call: C, next: (signal?: any) => Promise<HarnessResult>, signal?: any) => Promise<HarnessResult>) & Id;
export type PostListener<C = any, S extends boolean = false> = ((
  call: C,
  result: HarnessResult,
  next: () => MaybePromise<PostDecision>,
) => Returned<PostDecision, S>) &
  Id;
export type Observer<C = any> = ((call: C, result: HarnessResult) => Promise<unknown>) & Id;
/**
 * A definition's `finalizeContent`, in the form `ScriptsOptions.finalizer` chose: `(call,
 * candidate)` (the default) or content-only, `(content)`. Both signatures are declared so the
 * function can be mounted where your definitions take either; it implements the one chosen.
 */
export interface FinalizeContent<C = any> {
  (call: C, candidate: HarnessResult): ContentBlock[] | undefined;
  (content: ContentBlock[]): ContentBlock[] | undefined;
}
/** The content-only form alone. */
export type ContentFinalizer = (content: any) => ContentBlock[] | undefined;

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

/**
 * How the scripts behave and build your harness's values. Every build hook is handed the kit's
 * value (the kit idiom's shapes) and returns yours; the scripts' types below stay the kit
 * idiom's, so with custom shapes cast what you mount.
 */
export interface ScriptsOptions<C = any> {
  /** Listeners, guards and the answerer return plain values where they can (see `Returned`). */
  sync?: boolean;
  /** The form of `tool.finalizeContent`: `(call, candidate)` (default) or content-only. */
  finalizer?: 'call' | 'content';
  /** The decision a `{"rewrite": args}` pre action returns (default `{type: 'allow', updatedInput: args}`). */
  rewrite?: (args: Json, call: C) => unknown;
  /** What a pre-execute listener returns for an allow, a deny or an ask (default: as it is). */
  preDecision?: (decision: PreDecision, call: C) => unknown;
  /** What a guard returns: `verdict` is `undefined` for abstain (default: as it is). */
  guardVerdict?: (verdict: GuardVerdict, call: C) => unknown;
  /** What the approval answerer returns (default: the outcome string). */
  approvalOutcome?: (outcome: ApprovalOutcome, request: unknown) => unknown;
  /** What a post-execute listener returns, handed the result it was handed (default: as it is). */
  postDecision?: (decision: PostDecision, call: C, result: unknown) => unknown;
  /** `next()`'s decision with one more context, for `{"addContext"}` (default: appended to `additionalContexts`). */
  addContext?: (decision: any, context: unknown, call: C, result: unknown) => unknown;
  /** A context object (default: a string for `post`, `{origin, text}` for `wrapper`). */
  context?: (text: string, origin: 'post' | 'wrapper') => unknown;
  /** Content from a text (default `[{type: 'text', text}]`). */
  content?: (text: string) => unknown;
  /** A result the kit makes, the timeout's `TOOL_TIMEOUT` (default: as it is). */
  result?: (result: ToolResult, call: C) => unknown;
  /** A result with one more context, for the `context` wrapper (default: appended to `additionalContexts`). */
  withContext?: (result: any, context: unknown, call: C) => unknown;
  /** Whether a result failed, for the `retry` wrapper (default `result.isError === true`). */
  isError?: (result: any) => boolean;
  /** The signal the `timeout` wrapper passes to `next`, from the `AbortSignal` it aborts at the deadline (default: as it is). */
  signal?: (signal: AbortSignal, handed: unknown) => unknown;
  /** An `AbortSignal` (or undefined) from your signal, for bodies and wrappers (default: as it is). */
  readSignal?: (signal: any) => AbortSignal | undefined;
}

/** Every script of a scenario as a callable in the hook idiom. One per run. */
export class Scripts<C = any, S extends boolean = false> {
  constructor(scenario: Scenario | object, recorder: Recorder<C, any>, options?: ScriptsOptions<C> & { sync?: S });
  readonly scenario: Scenario;
  readonly recorder: Recorder<C, any>;
  readonly rewrite: (args: Json, call: C) => unknown;
  readonly finalizerForm: 'call' | 'content';
  readonly tools: ScriptTool<C>[];
  /**
   * Runs the call's scripted steps; records `toolBody` and, in a `finally`, `body-settled`.
   * Resolves with the call's JSON value (not content: render it, see `render`).
   */
  readonly body: (call: C, signal?: any, effects?: BodyEffects) => Promise<Json>;
  readonly preListeners: PreListener<C, S>[];
  /** Undefined when the scenario mounts no prompt. */
  readonly approval: ApprovalAnswerer<S> | undefined;
  readonly guards: Guard<C, S>[];
  /** Outermost first. */
  readonly wrappers: Wrapper<C>[];
  readonly postListeners: PostListener<C, S>[];
  readonly observers: Observer<C>[];
  /** Runs the program of a `run_code` call; records `toolBody`, binding marks, `body-settled` (by `program`). */
  readonly program: (call: C, bindings: Bindings) => Promise<ProgramOutput>;
  /**
   * The program of a `run_code` call as JavaScript source (an async function's body calling
   * `<tools>.<name>(args)` and `<log>(line)`), for a runner of your own; it records nothing
   * (see `Recorder.runProgram` and `Recorder.onBindingSettled`).
   */
  programSource(call: C | string, options?: { tools?: string; log?: string }): string;
  finalizer(action: FinalizeAction): FinalizeContent<C>;
  contentFinalizer(action: FinalizeAction, toolName: string): ContentFinalizer;
  wrapper(spec: WrapperSpec): Wrapper<C>;
  /** How many times a call's body was dispatched. */
  attempts(callId: string): number;
  /**
   * What the pipeline called without awaiting: one message per asynchronous hook (a listener,
   * guard or the approval answerer) whose promise nobody took. `runScenario` answers `errored`
   * with them.
   */
  unawaited(): string[];
}

/** A program's steps as JavaScript source (see `Scripts.programSource`). */
export function programSource(steps: ProgramStep[], options?: { tools?: string; log?: string }): string;

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
  toResult?: (result: any) => ToolResult;
  /** Handed the decision and the call it was made for. */
  readPreDecision?: (decision: any, call: C) => { outcome: string; reason?: string };
  /** Handed the decision, the result post-execute was handed, and the call. */
  readPostDecision?: (decision: any, result: any, call: C) => { outcome: string };
  /** Milliseconds, for event `time` (default `performance.now`). */
  clock?: () => number;
  /** Probes return plain values when the `next` they call does (see `Returned`). */
  sync?: boolean;
}

/** A call object, or just its id for records that carry no identity. */
type CallRef<C> = C | string;

/** The recording probes, to mount on the harness's own hooks (see the README). */
export interface Probes<C = any, S extends boolean = false> {
  /** Outermost `tools/pre-execute` listener: records `pre` when it returns (or the outermost scripted listener does, if the pipeline moved it inward). */
  pre(call: C, next: () => MaybePromise<PreDecision>): Returned<PreDecision, S>;
  /** Last guard: abstains; the guards stage is recorded when the consultation is over, with every verdict given. */
  guards(call: C): Returned<undefined, S>;
  /** Outermost `tools/execute` wrapper. */
  executeEnd(call: C, next: (signal?: any) => MaybePromise<HarnessResult>, signal?: any): Returned<HarnessResult, S>;
  /** Innermost `tools/execute` wrapper. */
  dispatch(call: C, next: (signal?: any) => MaybePromise<HarnessResult>, signal?: any): Returned<HarnessResult, S>;
  /** Outermost `tools/post-execute` listener. */
  post(call: C, result: HarnessResult, next: () => MaybePromise<PostDecision>): Returned<PostDecision, S>;
  /** First `tools/result` observer. */
  toolsResult(call: C, result: HarnessResult): void;
}

export class Recorder<C = any, S extends boolean = false> {
  constructor(options?: RecorderOptions<C> & { sync?: S });
  /** Notes a problem with how the kit is used: the scenario is answered `errored` with it. */
  problem(message: string): void;
  /** The problems noted so far. */
  problems(): string[];
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
  /** Ends the guards stage now (else it ends before the call's next record): the outcome given, else the first deny or throw, else allow. */
  onGuards(call: CallRef<C>, outcome?: { outcome?: 'allow' | 'deny' | 'throw'; reason?: string }): StageRecord | undefined;
  /**
   * Runs `step` as one frame of a waterfall (`pre` or `post`) for `call`: when the outermost kit
   * frame returns or throws, `record` is called with `{value}` or `{error}` (for a scripted frame,
   * only when the waterfall's probe is mounted). Used by the probes and the scripted listeners.
   */
  frame<T>(waterfall: 'pre' | 'post', call: CallRef<C>, step: () => T, record: (settled: { value?: unknown; error?: unknown }) => void, options?: { probe?: boolean }): T;
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
  onFinalize(call: C, settled: { candidate?: unknown; error?: unknown; contentOnly?: boolean }): StageRecord;
  /** The one call of tool `name` decided and not yet announced (for a content-only finalizer); undefined, with a problem, otherwise. */
  committingCall(name: string): C | string | undefined;
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
  /** `toolBody` of a `run_code` call whose program your runner starts. */
  onProgramStart(call: C): StageRecord;
  /** `body-settled` by `program`: the program ended. */
  onProgramEnd(call: CallRef<C>): MarkRecord;
  /** Runs a program your runner interprets: `toolBody`, then `body-settled` by `program` in a `finally`. */
  runProgram<T>(call: C, fn: () => Promise<T>): Promise<T>;

  track<T>(promise: Promise<T>): Promise<T>;
  idle(): Promise<void>;
  records(): TraceRecord[];
  readonly probes: Probes<C, S>;
}

export function defaultIdentify(call: Call): SeenIdentity;
export function defaultToResult(result: unknown): ToolResult;
export function defaultReadPreDecision(decision: unknown): { outcome: string; reason?: string };
export function defaultReadPostDecision(decision: unknown): { outcome: string };
export function rejectionFields(rejection: unknown): { toolName?: string; message: string; [extra: string]: Json | undefined };

// ---------------------------------------------------------------------------------------------
// The protocol loop

export const PROTOCOL_VERSION: 2;

export interface Session<C = any, S extends boolean = false> {
  spec: Revision;
  scenario: Scenario;
  recorder: Recorder<C, S>;
  scripts: Scripts<C, S>;
  /** Answers `skipped` with this reason (throws; inside `batch` too). */
  skip(reason: string): never;
  /** Runs the batch: what escapes it is answered `escaped`, with the records so far. Await it. */
  batch<T>(fn: () => Promise<T>): Promise<T>;
}

/**
 * An adapter. `C` is your call object's type; `S` is `true` when `sync: true` (hooks then
 * return plain values where they can: `Adapter<MyCall, true>`).
 */
export interface Adapter<C = any, S extends boolean = false> {
  implementation: { name: string; version?: string; language?: string; homepage?: string };
  capabilities?: Capability[];
  specs?: Revision[];
  observation?: ObservationLevel;
  /** Listeners, guards, the answerer and the probes return plain values where they can. */
  sync?: S;
  recorder?: Omit<RecorderOptions<C>, 'spec'>;
  scripts?: ScriptsOptions<C>;
  /**
   * Builds a fresh pipeline, mounts the scripts, records the batch (`recorder.onModel`) and runs
   * it through `session.batch`. A throw is answered `errored`; a problem the kit noted too.
   */
  run(scenario: Scenario, session: Session<C, S>): Promise<void>;
}

export type Answer =
  | { trace: TraceRecord[] }
  | { skipped: { reason: string } }
  | { errored: { message: string; context?: string } }
  | { escaped: { message: string; trace: TraceRecord[] } };

/**
 * Throw (or `session.skip(reason)`) when your pipeline cannot express a scenario. Made during a
 * scenario, it is answered skipped whatever your pipeline does with the exception (a catch-all
 * that turns it into an error result included).
 */
export class Skip extends Error {
  constructor(reason: string);
}

/** Serves the protocol on stdin/stdout (or runs `--scenario FILE|ID` locally), then exits. */
export function serve(adapter: Adapter<any, any>, options?: { argv?: string[] }): Promise<never>;
export function serveStreams(
  adapter: Adapter<any, any>,
  streams: { input: NodeJS.ReadableStream; output: NodeJS.WritableStream },
): Promise<void>;
export function runScenario(adapter: Adapter<any, any>, scenario: object, options?: { spec?: Revision }): Promise<Answer>;
export function readyMessage(adapter: Adapter<any, any>): {
  ready: true;
  protocol: 3;
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
  adapter: Adapter<any, any>,
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

/** What `encode` throws: `path` names the field JSON cannot hold, `what` says what it holds. */
export class EncodeError extends Error {
  constructor(path: string, what: string);
  readonly path: string;
  readonly what: string;
}
/** A detached JSON copy of `value`; throws an `EncodeError` naming what JSON would lose or refuse (a BigInt, a function, a cycle, NaN, a Map). */
export function encode(value: unknown, path?: string): Json | undefined;
/** A scripted `{"throw": message}`. */
export class ScriptError extends Error {}
/** What a body throws when its signal aborted: `name` `AbortError`, `code` `ABORTED`. */
export class CancelledError extends Error {
  constructor(message?: string);
  readonly code: 'ABORTED';
}
