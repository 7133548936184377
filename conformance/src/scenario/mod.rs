//! Scenarios: language-neutral JSON scripts for every extension point, with the expected outcome.
//!
//! A scenario says what each scripted part does (pre-execute listeners, the approval prompt,
//! guards, `tools/execute` wrappers, tool bodies, post-execute listeners, `finalizeContent`,
//! `tools/result` observers) and what must come out. An implementation installs those parts in
//! its own pipeline (that is the adapter's whole job), runs the batch and returns the trace.
//! `docs/scenario-format.md` describes every field; `docs/schemas/scenario.schema.json` is
//! generated from these types.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tep_model::graph::{Outcome, Revision};
use tep_model::identity::CallId;
use tep_model::session::Todo;
use tep_model::trace::Capability;

use tep_check::invariants::InvariantId;

pub mod limits;
mod validation;
pub mod versions;

/// One scenario of the corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Scenario {
    /// Stable id; the file is `<id>.json`.
    pub id: String,
    /// What the scenario shows, in a sentence or two.
    pub description: String,
    /// The spec paragraph or flowchart edges it exercises.
    pub spec: String,
    /// The spec revisions it applies to (default: all).
    #[serde(default = "all_revisions")]
    pub revisions: Vec<Revision>,
    /// Optional parts an implementation needs; without them the scenario is N/A.
    #[serde(default)]
    pub requires: Vec<Capability>,
    /// Invariants this scenario would catch a breach of.
    pub exercises: Vec<InvariantId>,
    /// Tool definitions.
    pub tools: Vec<ToolSpec>,
    /// The batch: one assistant message's calls, in model order.
    pub calls: Vec<CallSpec>,
    /// `tools/pre-execute` listeners, in registration order.
    #[serde(default)]
    pub pre: Vec<Listener<PreAction>>,
    /// `ctx.approval`; absent means no approval is mounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalSpec>,
    /// Monotonic guards, in registration order.
    #[serde(default)]
    pub guards: Vec<Listener<GuardAction>>,
    /// `tools/execute` wrappers, outermost first.
    #[serde(default)]
    pub wrappers: Vec<WrapperSpec>,
    /// `tools/post-execute` listeners, in registration order.
    #[serde(default)]
    pub post: Vec<Listener<PostAction>>,
    /// `tools/result` observers.
    #[serde(default)]
    pub observers: Vec<ObserverSpec>,
    /// Files on disk before the batch (path to content).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// The cap of concurrently executing safe calls (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<usize>,
    pub expect: Expectation,
}

fn all_revisions() -> Vec<Revision> {
    Revision::ALL.to_vec()
}

/// A tool definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolSpec {
    pub name: String,
    /// `isConcurrencySafe` returns exactly `true`.
    #[serde(default)]
    pub concurrency_safe: bool,
    /// The timeout the definition declares (applied by a `timeout` wrapper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// The definition's `finalizeContent` and what it does; absent, the definition has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize: Option<FinalizeAction>,
}

/// One call of the batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallSpec {
    pub call_id: CallId,
    /// The tool called; a name no tool has is a call to an unknown tool.
    pub tool: String,
    /// The arguments (sent to the model-facing call as compact JSON).
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// What the body does, step by step, when it runs.
    #[serde(default)]
    pub body: Vec<BodyStep>,
    /// For a `run_code` call: the program its body runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<Vec<ProgramStep>>,
}

/// One step of a Code Mode program. Every binding call becomes a sub-call numbered in
/// submission order: `<callId>:code:1`, `:code:2`, ...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ProgramStep {
    /// Call one tool and wait for it.
    Call(BindingCall),
    /// Issue several calls at once (like `Promise.all`) and wait for all of them.
    All(Vec<BindingCall>),
    /// Try to call `run_code` itself (programs have no such binding: it rejects, nothing is
    /// dispatched).
    CallRunCode,
    /// Write a log line.
    Log(String),
    /// End the program with this value.
    Return(Value),
    /// Fail the program (a runtime failure: `CODE_RUN_FAILED`).
    Throw(String),
}

/// A binding call of a program. The program logs `<tool> -> <value>` when it resolves and
/// `<tool> rejected: <tool name>: <message>` when it rejects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BindingCall {
    pub tool: String,
    #[serde(default = "empty_object")]
    pub arguments: Value,
    /// What the sub-call's body does when it runs.
    #[serde(default)]
    pub body: Vec<BodyStep>,
    /// What the program does when the call rejects.
    #[serde(default)]
    pub on_reject: OnReject,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OnReject {
    /// Log the rejection and go on.
    #[default]
    Continue,
    /// Fail the program with the rejection's message.
    Fail,
}

/// The sub-calls a program issues, with their ids, in submission order.
pub fn sub_calls(parent: &CallId, program: &[ProgramStep]) -> Vec<(CallId, BindingCall)> {
    program
        .iter()
        .flat_map(|step| match step {
            ProgramStep::Call(c) => vec![c.clone()],
            ProgramStep::All(cs) => cs.clone(),
            _ => vec![],
        })
        .enumerate()
        .map(|(i, c)| (parent.code_sub_call(i + 1), c))
        .collect()
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

impl CallSpec {
    /// The argument string as the model wrote it.
    pub fn raw_arguments(&self) -> String {
        serde_json::to_string(&self.arguments).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// A scripted listener: an id, and what it does for each call (`"*"` for every other call).
/// Calls it does not list get the default action (pass on; a guard abstains).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Listener<A> {
    pub id: String,
    #[serde(default)]
    pub decide: BTreeMap<String, A>,
}

impl<A: Clone + Default> Listener<A> {
    /// The action for a call.
    pub fn action(&self, call: &CallId) -> A {
        self.decide
            .get(call.as_str())
            .or_else(|| self.decide.get("*"))
            .cloned()
            .unwrap_or_default()
    }
}

/// What a pre-execute listener does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum PreAction {
    /// Calls `next` and returns its decision.
    #[default]
    Pass,
    /// Decides allow without calling `next`.
    Allow,
    /// Decides deny with the reason.
    Deny(String),
    /// Decides ask, with an optional reason.
    Ask(Option<String>),
    /// Tries to allow the call with these arguments instead (without calling `next`). Identity
    /// is protected: the pipeline must treat it as `allow` and keep the model's arguments.
    Rewrite(Value),
    /// Throws with the message.
    Throw(String),
}

/// What a guard says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GuardAction {
    #[default]
    Abstain,
    Deny(String),
    /// Tries to allow. Guards are monotonic: the pipeline must treat it as abstaining, and it
    /// is never consulted after an earlier guard denied.
    Allow,
    Throw(String),
}

/// What a post-execute listener does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PostAction {
    /// Calls `next` and returns its decision.
    #[default]
    Pass,
    /// Calls `next`, then adds a context to its decision.
    AddContext(String),
    /// Decides accept (without calling `next`).
    Accept(AcceptSpec),
    /// Decides block (without calling `next`).
    Block(BlockSpec),
    /// Throws with the message.
    Throw(String),
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AcceptSpec {
    /// Replaces the content with this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Replaces the value (re-rendered to content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Adds this context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockSpec {
    pub feedback: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// The approval prompt: an answer per call (`"*"` for every other call; default `rejected`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSpec {
    pub answers: BTreeMap<String, ApprovalAnswer>,
}

impl ApprovalSpec {
    pub fn answer(&self, call: &CallId) -> ApprovalAnswer {
        self.answers
            .get(call.as_str())
            .or_else(|| self.answers.get("*"))
            .cloned()
            .unwrap_or(ApprovalAnswer::Rejected)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalAnswer {
    AllowedOnce,
    Rejected,
    Cancelled,
    Unavailable,
    /// The prompt throws with the message.
    Throw(String),
}

impl ApprovalAnswer {
    /// The approval stage's outcome when the prompt gives this answer.
    pub fn outcome(&self) -> Outcome {
        match self {
            ApprovalAnswer::AllowedOnce => Outcome::AllowedOnce,
            ApprovalAnswer::Rejected => Outcome::Rejected,
            ApprovalAnswer::Cancelled => Outcome::Cancelled,
            ApprovalAnswer::Unavailable => Outcome::Unavailable,
            ApprovalAnswer::Throw(_) => Outcome::Throw,
        }
    }
}

/// A `tools/execute` wrapper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum WrapperSpec {
    /// Applies the tool's declared `timeoutMs`: cancels the body's signal at the deadline, waits
    /// for the body to stop, reports `TOOL_TIMEOUT`.
    Timeout,
    /// Dispatches again while the result is an error, up to `attempts` dispatches.
    Retry {
        attempts: u32,
        #[serde(default)]
        delay_ms: u64,
    },
    /// Counts calls (no visible effect).
    Metrics,
    /// Adds a wrapper context to the result of the listed calls (all if none listed).
    Context {
        text: String,
        #[serde(default)]
        calls: Vec<CallId>,
    },
    /// Throws, before or after dispatch, for the listed calls (all if none listed).
    Throw {
        message: String,
        #[serde(default)]
        phase: ThrowPhase,
        #[serde(default)]
        calls: Vec<CallId>,
    },
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ThrowPhase {
    /// Before calling `next`: the body never runs.
    Before,
    /// After `next` returned.
    #[default]
    After,
}

/// A `tools/result` observer whose asynchronous work takes `asyncMs` and then reports
/// `observer-settled`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObserverSpec {
    pub id: String,
    #[serde(default)]
    pub async_ms: u64,
    /// Tries to replace the announced outcome's content with this text. The outcome is frozen:
    /// the pipeline must record what it announced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mutate: Option<String>,
}

/// What `finalizeContent` does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum FinalizeAction {
    /// Keeps the content (returns nothing).
    Keep,
    /// Prefixes every text block's content.
    Prefix(String),
    /// Replaces the content with this text.
    Replace(String),
    /// Throws with the message.
    Throw(String),
}

/// One step of a tool body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BodyStep {
    /// Waits this many milliseconds, or until cancelled (then the body fails as cancelled).
    Sleep(u64),
    /// Waits until cancelled, then fails as cancelled.
    Hang,
    /// Waits until cancelled, then takes this many milliseconds more to stop (ignoring the
    /// signal meanwhile), then fails as cancelled.
    SlowStop(u64),
    /// Reads a file through the fs tools (`fs/observed`); a missing file makes the body throw.
    Read(String),
    /// Writes a file through `fs/write-intent`; a refusal makes the body throw.
    Write(WriteSpec),
    /// Edits a file through `fs/edit-intent`; a refusal makes the body throw.
    Edit(EditSpec),
    /// Another actor changes a file (no gate, not observed by the agent).
    ExternalWrite(WriteSpec),
    /// Records a `todo/write` snapshot.
    Todo(Vec<Todo>),
    /// Records a hook handler's `hook/invoked` and `hook/result`.
    Hook(HookSpec),
    /// Defers a context to after the batch's results.
    DeferContext(String),
    /// Fails (throws) unless this dispatch is at least the given attempt (1-based).
    FailUntilAttempt(u32),
    /// Returns this value (strings render raw, other JSON pretty-printed).
    Return(Value),
    /// Throws with the message.
    Throw(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteSpec {
    pub path: String,
    pub content: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditSpec {
    pub path: String,
    pub old: String,
    pub new: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HookSpec {
    pub point: String,
    pub handler_id: String,
    pub decision: String,
}

/// The observable outcome the scripts determine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Expectation {
    /// Per call.
    pub calls: BTreeMap<String, CallExpectation>,
    /// The injected contexts, in order (empty: none).
    #[serde(default)]
    pub contexts: Vec<ExpectedContext>,
    /// What the scripts leave to the implementation, so nothing compares it. `tep fuzz`'s
    /// oracle writes it (docs/conformance.md, "What the oracle compares").
    #[serde(default, skip_serializing_if = "Undetermined::is_empty")]
    pub undetermined: Undetermined,
}

/// Outcomes a scenario does not determine: they depend on timing near a deadline, or on the
/// order in which parallel calls reach the same file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Undetermined {
    /// Calls whose outcome is not compared (they need no `calls` entry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallId>,
    /// The injected contexts are not compared.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub contexts: bool,
}

impl Undetermined {
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty() && !self.contexts
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CallExpectation {
    pub is_error: bool,
    /// How many times the body was dispatched.
    pub body_runs: u32,
    /// Whether post-execute ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_runs: Option<bool>,
    /// The exact model-facing text, where the scripts and the spec or the reference semantics
    /// fix it (SHOULD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Text the model-facing content must include (SHOULD), e.g. the tool's name in a refusal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_includes: Option<String>,
    /// The error code (`TOOL_TIMEOUT`, `UNKNOWN_TOOL`, ...) (SHOULD: reference semantics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
    /// The reference's wording where nothing fixes it: shown for information when an
    /// implementation words it differently, never a violation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_content: Option<String>,
    /// How many times pre-execute ran (MUST; compared at level `hooks` and above). `tep fuzz`'s
    /// oracle writes it where the scenario mounts pre-execute listeners.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_runs: Option<u32>,
    /// How many times the mounted approval prompt answered (MUST; `hooks` and above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_runs: Option<u32>,
    /// How many times the guards ran (MUST; `hooks` and above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guard_runs: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExpectedContext {
    pub call: CallId,
    pub text: String,
}

/// Why a scenario is not well-formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("scenario {id}: {message}")]
pub struct ScenarioError {
    pub id: String,
    pub message: String,
}

impl Scenario {
    /// Parses and validates a scenario file.
    pub fn from_json(text: &str) -> Result<Scenario, ScenarioError> {
        let scenario: Scenario = serde_json::from_str(text).map_err(|e| ScenarioError {
            id: "<unparsed>".to_owned(),
            message: e.to_string(),
        })?;
        scenario.validate()?;
        Ok(scenario)
    }

    pub fn applies_to(&self, revision: Revision) -> bool {
        self.revisions.contains(&revision)
    }

    /// Every sub-call of every `run_code` call in the batch, in order.
    pub fn all_sub_calls(&self) -> Vec<(CallId, BindingCall)> {
        self.calls
            .iter()
            .filter_map(|c| c.program.as_ref().map(|p| sub_calls(&c.call_id, p)))
            .flatten()
            .collect()
    }

    /// The capabilities the scripts actually use.
    pub fn used_capabilities(&self) -> BTreeSet<Capability> {
        let mut used = BTreeSet::new();
        if self.approval.is_some() {
            used.insert(Capability::Approval);
        }
        if self.calls.iter().any(|c| c.tool == tep_model::RUN_CODE) {
            used.insert(Capability::CodeMode);
        }
        let bodies: Vec<Vec<BodyStep>> = self
            .calls
            .iter()
            .map(|c| c.body.clone())
            .chain(self.all_sub_calls().into_iter().map(|(_, b)| b.body))
            .collect();
        for body in &bodies {
            for step in body {
                match step {
                    BodyStep::Read(_) | BodyStep::Write(_) | BodyStep::Edit(_) => {
                        used.insert(Capability::FsGate);
                    }
                    BodyStep::Todo(_) | BodyStep::Hook(_) => {
                        used.insert(Capability::OwnedEvents);
                    }
                    _ => {}
                }
            }
        }
        let safe_calls = self
            .calls
            .iter()
            .filter(|c| {
                self.tools
                    .iter()
                    .any(|t| t.name == c.tool && t.concurrency_safe)
            })
            .count();
        if safe_calls >= 2 {
            used.insert(Capability::Parallel);
        }
        used
    }
}

/// The corpus files, embedded at build time from `conformance/scenarios/`.
mod embedded {
    include!(concat!(env!("OUT_DIR"), "/corpus.rs"));
}

/// The scenario corpus, in file-name order.
pub fn corpus() -> Result<Vec<Scenario>, ScenarioError> {
    embedded::CORPUS
        .iter()
        .map(|(file, text)| {
            let scenario = Scenario::from_json(text).map_err(|e| ScenarioError {
                id: file.to_string(),
                message: e.to_string(),
            })?;
            let stem = file.trim_end_matches(".json");
            if scenario.id != stem {
                return Err(ScenarioError {
                    id: file.to_string(),
                    message: format!("the id `{}` does not match the file name", scenario.id),
                });
            }
            Ok(scenario)
        })
        .collect()
}

/// The contexts a body defers before any step that could end it (a wait, a file step, a
/// failure, a return): every run of the body reaches them.
fn deferred_before_any_end(body: &[BodyStep]) -> Vec<String> {
    let mut texts = Vec::new();
    for step in body {
        match step {
            BodyStep::DeferContext(text) => texts.push(text.clone()),
            BodyStep::Todo(_) | BodyStep::Hook(_) | BodyStep::ExternalWrite(_) => {}
            _ => break,
        }
    }
    texts
}

/// The raw JSON of each corpus file, by file name.
pub fn corpus_files() -> &'static [(&'static str, &'static str)] {
    embedded::CORPUS
}

/// What a scenario's scripts say that its trace does not (which tools finalize, whether an
/// approval prompt is mounted): the checker's [`ScenarioFacts`](tep_check::ScenarioFacts) in drive mode.
impl From<&Scenario> for tep_check::ScenarioFacts {
    fn from(scenario: &Scenario) -> Self {
        tep_check::ScenarioFacts {
            finalizers: scenario
                .tools
                .iter()
                .filter(|t| t.finalize.is_some())
                .map(|t| t.name.clone())
                .collect(),
            prompt: scenario.approval.is_some(),
            answers: scenario
                .approval
                .iter()
                .flat_map(|a| a.answers.iter())
                .map(|(call, answer)| (call.clone(), answer.outcome()))
                // An id with no entry gets the prompt's default answer.
                .chain(
                    scenario
                        .approval
                        .as_ref()
                        .filter(|a| !a.answers.contains_key("*"))
                        .map(|_| ("*".to_owned(), Outcome::Rejected)),
                )
                .collect(),
            max_parallel: scenario.max_parallel,
            pre: scenario.pre.iter().map(|l| l.id.clone()).collect(),
            post: scenario.post.iter().map(|l| l.id.clone()).collect(),
            deferred: scenario
                .calls
                .iter()
                // A call to a tool no definition has runs no body.
                .filter(|c| scenario.tools.iter().any(|t| t.name == c.tool))
                .map(|c| {
                    (
                        c.call_id.as_str().to_owned(),
                        deferred_before_any_end(&c.body),
                    )
                })
                .filter(|(_, texts)| !texts.is_empty())
                .collect(),
        }
    }
}
