//! The registry: runs a batch of calls through every stage of the graph.
//!
//! One driver task runs every *ordered* stage (the call event, pre-execute, approval, guards,
//! post-execute, normalization, `finalizeContent`, `tools/result`, the recorded `tool/result`)
//! strictly one at a time and in model order, while it keeps polling the `tools/execute` +
//! body futures of concurrency-safe calls. So bodies overlap and nothing else does, and a
//! head-of-line cursor commits results in model order however the bodies finish.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::extension::{
    Approval, ApprovalOutcome, ApprovalRequest, BoxFuture, Dispatch, ExecuteNext, ExecuteWrapper,
    Guard, GuardVerdict, PostDecision, PostExecute, PostNext, PreDecision, PreExecute, PreNext,
    Presenter, ResultObserver, guarded, guarded_sync,
};
use super::tool::{Tool, ToolContext};
use crate::fs::VirtualFs;
use crate::graph::{NodeId, Outcome, Revision};
use crate::identity::{CallId, Execution, Token, parse_arguments};
use crate::mutant::Mutant;
use crate::result::{
    AdditionalContext, ContentBlock, ContextOrigin, ErrorCode, Failure, ToolResult, content_text,
};
use crate::session::{
    ApprovalAsked, ApprovalDecided, CodeDispatch, CodeDispatchStart, ContextMessage, EventBody,
    FlatToolResult, MessageSource, Role, SurfaceOp, ToolCallData, ToolResultBlock,
    ToolResultBlockType, ToolResultData, ToolResultMessage, ToolResultRecord, UserMessage,
};
use crate::trace::{DeclaredCall, GuardVerdictKind, GuardVerdictRecord, Observation, Recorder};

pub use tep_model::RUN_CODE;

/// The default cap of concurrently executing calls in one parallel pool.
pub const DEFAULT_MAX_PARALLEL: usize = 10;

/// One call of an assistant message's tool-call block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCall {
    pub call_id: CallId,
    pub name: String,
    /// The raw argument string the model wrote.
    pub arguments: String,
}

impl ModelCall {
    pub fn new(call_id: &str, name: &str, arguments: &str) -> Self {
        ModelCall {
            call_id: call_id.into(),
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        }
    }
}

/// The committed outcome of one call.
#[derive(Debug, Clone)]
pub struct CallOutcome {
    pub call_id: CallId,
    /// The frozen outcome, the same value `tools/result` announced and `tool/result` recorded.
    pub result: Arc<ToolResult>,
}

/// What a batch produced, in model order.
#[derive(Debug, Clone, Default)]
pub struct BatchReport {
    pub outcomes: Vec<CallOutcome>,
}

/// Why a registry could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("`{0}` is reserved for the Code Mode transport and cannot be registered")]
    Reserved(String),
    #[error("a tool named `{0}` is already registered")]
    Duplicate(String),
}

/// Registers tools and extension points, in order.
#[derive(Default)]
pub struct RegistryBuilder {
    revision: Revision,
    tools: Vec<Arc<dyn Tool>>,
    pre: Vec<Arc<dyn PreExecute>>,
    approval: Option<Arc<dyn Approval>>,
    guards: Vec<Arc<dyn Guard>>,
    wrappers: Vec<Arc<dyn ExecuteWrapper>>,
    post: Vec<Arc<dyn PostExecute>>,
    observers: Vec<Arc<dyn ResultObserver>>,
    presenter: Option<Arc<dyn Presenter>>,
    fs: Option<VirtualFs>,
    max_parallel: Option<usize>,
    mutants: BTreeSet<Mutant>,
    recorder: Option<Recorder>,
    code_mode: Option<Arc<dyn crate::pipeline::code_mode::ProgramLoader>>,
}

impl std::fmt::Debug for RegistryBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegistryBuilder")
            .field("revision", &self.revision)
            .field(
                "tools",
                &self
                    .tools
                    .iter()
                    .map(|t| t.name().to_owned())
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl RegistryBuilder {
    /// Which revision's pipeline to run (rev2 unless told).
    pub fn revision(mut self, revision: Revision) -> Self {
        self.revision = revision;
        self
    }

    pub fn tool(self, tool: impl Tool + 'static) -> Self {
        self.tool_arc(Arc::new(tool))
    }

    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a `tools/pre-execute` listener after those already registered.
    pub fn pre_execute(mut self, listener: Arc<dyn PreExecute>) -> Self {
        self.pre.push(listener);
        self
    }

    /// Mounts `ctx.approval`.
    pub fn approval(mut self, approval: Arc<dyn Approval>) -> Self {
        self.approval = Some(approval);
        self
    }

    /// Adds a monotonic guard after those already registered.
    pub fn guard(mut self, guard: Arc<dyn Guard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// Adds a `tools/execute` wrapper inside those already registered.
    pub fn wrap(mut self, wrapper: Arc<dyn ExecuteWrapper>) -> Self {
        self.wrappers.push(wrapper);
        self
    }

    /// Adds a `tools/post-execute` listener after those already registered.
    pub fn post_execute(mut self, listener: Arc<dyn PostExecute>) -> Self {
        self.post.push(listener);
        self
    }

    /// Adds a `tools/result` observer.
    pub fn observe(mut self, observer: Arc<dyn ResultObserver>) -> Self {
        self.observers.push(observer);
        self
    }

    pub fn presenter(mut self, presenter: Arc<dyn Presenter>) -> Self {
        self.presenter = Some(presenter);
        self
    }

    pub fn fs(mut self, fs: VirtualFs) -> Self {
        self.fs = Some(fs);
        self
    }

    /// Caps how many concurrency-safe calls execute at once (at least 1).
    pub fn max_parallel(mut self, cap: usize) -> Self {
        self.max_parallel = Some(cap.max(1));
        self
    }

    /// Records into `recorder` (shared with scripted parts that add marks) instead of a new one.
    pub fn recorder(mut self, recorder: Recorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Turns Code Mode on: the reserved `run_code` tool runs the programs `loader` provides.
    pub fn code_mode(mut self, loader: Arc<dyn crate::pipeline::code_mode::ProgramLoader>) -> Self {
        self.code_mode = Some(loader);
        self
    }

    /// Breaks the pipeline on purpose (see [`crate::mutant`]).
    pub fn mutant(mut self, mutant: Mutant) -> Self {
        self.mutants.insert(mutant);
        self
    }

    pub fn build(self) -> Result<ToolRegistry, RegistryError> {
        let mut tools = BTreeMap::new();
        for tool in self.tools {
            let name = tool.name().to_owned();
            if name == RUN_CODE {
                return Err(RegistryError::Reserved(name));
            }
            if tools.insert(name.clone(), tool).is_some() {
                return Err(RegistryError::Duplicate(name));
            }
        }
        Ok(ToolRegistry {
            revision: self.revision,
            tools,
            pre: self.pre,
            approval: self.approval,
            guards: self.guards,
            wrappers: self.wrappers,
            post: self.post,
            observers: self.observers,
            presenter: self.presenter,
            fs: self.fs.unwrap_or_default(),
            recorder: self.recorder.unwrap_or_default(),
            max_parallel: self.max_parallel.unwrap_or(DEFAULT_MAX_PARALLEL),
            mutants: self.mutants,
            run_code: self.code_mode.map(|loader| {
                Arc::new(crate::pipeline::code_mode::RunCode { loader }) as Arc<dyn Tool>
            }),
            tokens: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            escaped: Mutex::new(None),
            allowed_tools: Mutex::default(),
        })
    }
}

/// The tool execution pipeline (see the module docs).
pub struct ToolRegistry {
    revision: Revision,
    tools: BTreeMap<String, Arc<dyn Tool>>,
    pre: Vec<Arc<dyn PreExecute>>,
    approval: Option<Arc<dyn Approval>>,
    guards: Vec<Arc<dyn Guard>>,
    wrappers: Vec<Arc<dyn ExecuteWrapper>>,
    post: Vec<Arc<dyn PostExecute>>,
    observers: Vec<Arc<dyn ResultObserver>>,
    presenter: Option<Arc<dyn Presenter>>,
    fs: VirtualFs,
    recorder: Recorder,
    max_parallel: usize,
    mutants: BTreeSet<Mutant>,
    /// The reserved `run_code` tool, when Code Mode is on.
    run_code: Option<Arc<dyn Tool>>,
    tokens: AtomicU64,
    steps: AtomicU64,
    /// A throw that escaped the pipeline (only the mutant `throw-escapes` lets one).
    escaped: Mutex<Option<String>>,
    /// The tools an approval allowed once (only the mutant `approval-answer-reused` reads it).
    allowed_tools: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("revision", &self.revision)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("mutants", &self.mutants)
            .finish_non_exhaustive()
    }
}

/// A call of the batch, classified before anything runs.
struct CallPlan {
    call: ModelCall,
    args: Value,
    /// The visible definition, captured once: its `finalizeContent` is the one called even if
    /// the registry changed meanwhile.
    tool: Option<Arc<dyn Tool>>,
    safe: bool,
}

/// How a call's prepare stages ended.
enum Prepared {
    Allowed,
    Denied(String),
    Threw(Failure),
}

/// A call whose prepare stages ran.
struct Started {
    exec: Execution,
    call_seq: u64,
    prepared: Prepared,
}

/// What a call brings to its commit.
enum Settled {
    Denied(String),
    Threw(Failure),
    Executed(Result<ToolResult, Failure>),
}

type Inflight<'a> = FuturesUnordered<BoxFuture<'a, (usize, Result<ToolResult, Failure>)>>;

impl ToolRegistry {
    pub fn builder() -> RegistryBuilder {
        RegistryBuilder::default()
    }

    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// The trace of everything this registry ran.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    pub fn fs(&self) -> &VirtualFs {
        &self.fs
    }

    /// What escaped the pipeline, when a throw did (a conforming registry lets none escape:
    /// only the mutant `throw-escapes` abandons the batch with one).
    pub fn escaped(&self) -> Option<String> {
        self.escaped
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn broken(&self, mutant: Mutant) -> bool {
        self.mutants.contains(&mutant)
    }

    /// The mutant `approval-answer-reused`: whether a tool was allowed once already.
    fn reuse_answer(&self, tool: &str) -> bool {
        self.allowed_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tool)
    }

    fn remember_answer(&self, tool: &str) {
        self.allowed_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tool.to_owned());
    }

    fn mint(&self) -> Token {
        Token::mint(self.tokens.fetch_add(1, Ordering::Relaxed) + 1)
    }

    fn observe(&self, observation: Observation) {
        self.recorder.observe(observation);
    }

    /// A visit of `node` by `exec`: its call id, and for a Code Mode sub-call its parent call.
    pub(crate) fn stage(&self, node: NodeId, exec: &Execution) -> Observation {
        let mut obs = Observation::at(node).call(exec.call_id());
        if exec.parent().is_some() {
            obs.parent = Some(exec.root_call_id().clone());
        }
        obs
    }

    /// The names of the registered tools (never `run_code`).
    pub fn tool_names(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// Runs the calls of one assistant message through the pipeline and injects their contexts.
    pub async fn run_batch(&self, calls: Vec<ModelCall>) -> BatchReport {
        let step = self.steps.fetch_add(1, Ordering::Relaxed) + 1;
        let plans: Vec<CallPlan> = calls.into_iter().map(|call| self.plan(call)).collect();
        let mut model = Observation::at(NodeId::Model);
        model.calls = Some(
            plans
                .iter()
                .map(|p| DeclaredCall {
                    call_id: p.call.call_id.clone(),
                    name: p.call.name.clone(),
                    concurrency_safe: Some(p.safe),
                })
                .collect(),
        );
        self.observe(model);

        let mut outcomes = Vec::with_capacity(plans.len());
        let mut start = 0;
        while start < plans.len() {
            // Consecutive concurrency-safe calls share a rolling pool; any other call runs alone
            // and is a barrier.
            let end = if plans[start].safe || self.broken(Mutant::ExclusiveInPool) {
                plans[start..]
                    .iter()
                    .position(|p| !(p.safe || self.broken(Mutant::ExclusiveInPool)))
                    .map_or(plans.len(), |k| start + k)
            } else {
                start + 1
            };
            self.run_group(&plans[start..end], step, &mut outcomes)
                .await;
            if self.escaped().is_some() {
                return BatchReport { outcomes };
            }
            start = end;
        }

        self.observe(Observation::at(NodeId::AllResults));
        if !self.broken(Mutant::ContextsBeforeResults) {
            let mut ordered: Vec<&CallOutcome> = outcomes.iter().collect();
            if self.broken(Mutant::ContextsReversed) {
                ordered.reverse();
            }
            for outcome in ordered {
                self.inject_contexts(outcome);
            }
        }
        BatchReport { outcomes }
    }

    fn plan(&self, call: ModelCall) -> CallPlan {
        let args = parse_arguments(&call.arguments);
        let tool = if call.name == RUN_CODE {
            self.run_code.clone()
        } else {
            self.tools.get(&call.name).cloned()
        };
        // Only an exact `true` from the visible definition makes a call parallel; a panicking
        // classifier makes it exclusive.
        let safe = tool
            .as_ref()
            .is_some_and(|t| guarded_sync(|| Ok(t.is_concurrency_safe(&args))).unwrap_or(false));
        CallPlan {
            call,
            args,
            tool,
            safe,
        }
    }

    /// Runs `fut` (an ordered stage) while the bodies in flight keep running.
    async fn polling<T>(
        &self,
        fut: impl Future<Output = T>,
        inflight: &mut Inflight<'_>,
        finished: &mut BTreeMap<usize, Result<ToolResult, Failure>>,
    ) -> T {
        let mut fut = std::pin::pin!(fut);
        loop {
            // Bodies first: a call allowed a moment ago starts its body before the next
            // ordered stage of another call.
            tokio::select! {
                biased;
                Some((i, r)) = inflight.next(), if !inflight.is_empty() => {
                    finished.insert(i, r);
                }
                out = &mut fut => return out,
            }
        }
    }

    async fn run_group(&self, plans: &[CallPlan], step: u64, outcomes: &mut Vec<CallOutcome>) {
        let mut inflight: Inflight<'_> = FuturesUnordered::new();
        let mut finished: BTreeMap<usize, Result<ToolResult, Failure>> = BTreeMap::new();
        let mut started: Vec<Started> = Vec::with_capacity(plans.len());
        let mut committed = vec![false; plans.len()];
        let mut next_commit = 0;
        while next_commit < plans.len() {
            let ready = |i: usize| {
                started.get(i).is_some_and(|s| match s.prepared {
                    Prepared::Allowed => finished.contains_key(&i),
                    Prepared::Denied(_) if self.broken(Mutant::RunBodyAfterDeny) => {
                        finished.contains_key(&i)
                    }
                    _ => true,
                })
            };
            let head = if self.broken(Mutant::CommitInCompletionOrder) {
                (0..started.len()).find(|&i| !committed[i] && ready(i))
            } else {
                Some(next_commit).filter(|&i| ready(i))
            };
            if let Some(i) = head {
                let body = finished.remove(&i);
                let settled = match (&started[i].prepared, body) {
                    (Prepared::Denied(reason), _) => Settled::Denied(reason.clone()),
                    (Prepared::Threw(failure), _) => Settled::Threw(failure.clone()),
                    (Prepared::Allowed, Some(result)) => Settled::Executed(result),
                    (Prepared::Allowed, None) => continue,
                };
                let outcome = self
                    .polling(
                        self.commit(&plans[i], &started[i], settled, step),
                        &mut inflight,
                        &mut finished,
                    )
                    .await;
                if self.broken(Mutant::ContextsBeforeResults) {
                    self.inject_contexts(&outcome);
                }
                outcomes.push(outcome);
                committed[i] = true;
                while next_commit < plans.len() && committed[next_commit] {
                    next_commit += 1;
                }
                continue;
            }
            let cap = if self.broken(Mutant::PoolCapIgnored) {
                usize::MAX
            } else {
                self.max_parallel
            };
            if started.len() < plans.len() && inflight.len() < cap {
                let i = started.len();
                let s = self
                    .polling(self.prepare(&plans[i], step), &mut inflight, &mut finished)
                    .await;
                let runs_body = match s.prepared {
                    Prepared::Allowed => true,
                    Prepared::Denied(_) => self.broken(Mutant::RunBodyAfterDeny),
                    Prepared::Threw(_) => false,
                };
                if runs_body {
                    inflight.push(Box::pin(self.execute(i, &plans[i], s.exec.clone())));
                }
                started.push(s);
                if self.escaped().is_some() {
                    // The throw escaped: the batch is abandoned where it stands.
                    return;
                }
                continue;
            }
            match inflight.next().await {
                Some((i, result)) => {
                    finished.insert(i, result);
                }
                // Unreachable: the head of line is either settled or in flight.
                None => break,
            }
        }
    }

    // -----------------------------------------------------------------------------------------
    // Prepare: tool/call, presentCall, pre-execute, approval, guards, denial.

    fn log_call(&self, plan: &CallPlan, step: u64) -> u64 {
        let seq = self.recorder.append(
            Some(&plan.call.call_id),
            EventBody::ToolCall(ToolCallData {
                turn: 1,
                step,
                call_id: plan.call.call_id.clone(),
                name: plan.call.name.clone(),
                arguments: plan.call.arguments.clone(),
            }),
            None,
            None,
        );
        self.observe(Observation::at(NodeId::PresentCall).call(&plan.call.call_id));
        if let Some(presenter) = &self.presenter {
            // A presenter that fails falls back to the generic card; nothing else changes.
            let _ = guarded_sync(|| {
                presenter.present_call(&plan.call.call_id, &plan.args);
                Ok(())
            });
        }
        seq
    }

    async fn prepare(&self, plan: &CallPlan, step: u64) -> Started {
        let id = &plan.call.call_id;
        let exec = Execution::new(
            self.mint(),
            id.clone(),
            id.clone(),
            plan.call.name.clone(),
            plan.args.clone(),
            None,
        );
        let early_seq = (!self.broken(Mutant::LateToolCall)).then(|| self.log_call(plan, step));
        let (prepared, rewritten) = self.decide(&exec).await;
        let exec = rewritten.unwrap_or(exec);
        if let Prepared::Threw(failure) = &prepared
            && self.broken(Mutant::ThrowEscapes)
        {
            *self.escaped.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(failure.message.clone());
        }
        let call_seq = early_seq.unwrap_or_else(|| self.log_call(plan, step));
        if let Prepared::Denied(reason) = &prepared {
            self.observe(self.stage(NodeId::Denied, &exec).reason(reason.clone()));
        }
        Started {
            exec,
            call_seq,
            prepared,
        }
    }

    /// Pre-execute, approval and guards. The mutant `pre-rewrites-arguments` also returns the
    /// rewritten execution the later stages are then handed.
    async fn decide(&self, exec: &Execution) -> (Prepared, Option<Execution>) {
        let entered = Mutex::new(Vec::new());
        let reversed: Vec<_>;
        let listeners = if self.broken(Mutant::PreListenersReversed) {
            reversed = self.pre.iter().rev().cloned().collect();
            &reversed
        } else {
            &self.pre
        };
        let decision = PreNext::new(listeners, exec, &entered).run().await;
        if let Ok(PreDecision::Rewrite { arguments }) = &decision
            && self.broken(Mutant::PreRewritesArguments)
        {
            let mut obs = self.stage(NodeId::Pre, exec).identity(exec.identity());
            obs.listeners = Some(entered.into_inner().unwrap_or_else(PoisonError::into_inner));
            self.observe(obs.outcome(Outcome::Allow));
            let rewritten = Execution::new(
                exec.token(),
                exec.call_id().clone(),
                exec.root_call_id().clone(),
                exec.name().to_owned(),
                arguments.clone(),
                exec.parent(),
            );
            return (self.run_guards(&rewritten).await, Some(rewritten));
        }
        (self.decided(exec, decision, entered).await, None)
    }

    async fn decided(
        &self,
        exec: &Execution,
        decision: Result<PreDecision, Failure>,
        entered: Mutex<Vec<String>>,
    ) -> Prepared {
        let mut obs = self.stage(NodeId::Pre, exec).identity(exec.identity());
        obs.listeners = Some(entered.into_inner().unwrap_or_else(PoisonError::into_inner));
        match decision {
            Err(failure) => {
                self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                Prepared::Threw(failure)
            }
            Ok(PreDecision::Deny { reason }) => {
                self.observe(obs.outcome(Outcome::Deny).reason(reason.clone()));
                Prepared::Denied(reason)
            }
            // Identity is protected: an attempt to rewrite the arguments is an allow.
            Ok(PreDecision::Allow | PreDecision::Rewrite { .. }) => {
                self.observe(obs.outcome(Outcome::Allow));
                self.run_guards(exec).await
            }
            Ok(PreDecision::Ask { reason }) => {
                let mut obs = obs.outcome(Outcome::Ask);
                obs.reason = reason.clone();
                self.observe(obs);
                if self.broken(Mutant::GuardsBeforeApproval) {
                    let guarded = self.run_guards(exec).await;
                    if !matches!(guarded, Prepared::Allowed) {
                        return guarded;
                    }
                    return self.ask(exec, reason).await.unwrap_or(Prepared::Allowed);
                }
                match self.ask(exec, reason).await {
                    Some(refused) => refused,
                    None => self.run_guards(exec).await,
                }
            }
        }
    }

    /// Resolves an `ask` through `ctx.approval`. `None` means allowed once.
    async fn ask(&self, exec: &Execution, reason: Option<String>) -> Option<Prepared> {
        let id = exec.call_id();
        let obs = self.stage(NodeId::Approval, exec);
        let Some(approval) = &self.approval else {
            if self.broken(Mutant::AbsentApprovalAllows) {
                self.observe(obs.outcome(Outcome::AllowedOnce));
                return None;
            }
            let reason = reason.unwrap_or_else(|| {
                format!(
                    "tool \"{}\" requires approval (not yet supported)",
                    exec.name()
                )
            });
            self.observe(obs.outcome(Outcome::Unavailable).reason(reason.clone()));
            return Some(Prepared::Denied(reason));
        };
        if self.broken(Mutant::ApprovalAnswerReused) && self.reuse_answer(exec.name()) {
            // The first allowed-once answer for the tool is taken for this ask too.
            self.observe(obs.outcome(Outcome::AllowedOnce));
            return None;
        }
        let approval_id = format!("approval-{id}");
        let audited = !self.broken(Mutant::ApprovalUnaudited);
        if audited {
            self.recorder.append(
                Some(id),
                EventBody::ApprovalAsked(ApprovalAsked {
                    id: approval_id.clone(),
                    tool_name: exec.name().to_owned(),
                    call_id: Some(id.clone()),
                    reason: reason.clone(),
                }),
                None,
                None,
            );
        }
        let request = ApprovalRequest {
            tool_name: exec.name().to_owned(),
            call_id: id.clone(),
            reason,
            cancel: CancellationToken::new(),
        };
        let mut answer = guarded(approval.request(&request)).await;
        if self.broken(Mutant::ApprovalAskedTwice) {
            // Asked again, as a harness that re-prompts on a re-render would.
            self.recorder.append(
                Some(id),
                EventBody::ApprovalAsked(ApprovalAsked {
                    id: format!("approval-{id}-again"),
                    tool_name: exec.name().to_owned(),
                    call_id: Some(id.clone()),
                    reason: request.reason.clone(),
                }),
                None,
                None,
            );
            answer = guarded(approval.request(&request)).await;
        }
        let outcome = match answer {
            Err(failure) => {
                self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                return Some(Prepared::Threw(failure));
            }
            Ok(ApprovalOutcome::AllowedOnce) => Outcome::AllowedOnce,
            Ok(ApprovalOutcome::Rejected) => Outcome::Rejected,
            Ok(ApprovalOutcome::Cancelled) => Outcome::Cancelled,
            Ok(ApprovalOutcome::Unavailable) => Outcome::Unavailable,
        };
        if audited {
            self.recorder.append(
                Some(id),
                EventBody::ApprovalDecided(ApprovalDecided {
                    id: approval_id,
                    outcome,
                }),
                None,
                None,
            );
        }
        if outcome == Outcome::AllowedOnce {
            if self.broken(Mutant::ApprovalAnswerReused) {
                self.remember_answer(exec.name());
            }
            self.observe(obs.outcome(outcome));
            return None;
        }
        let reason = format!("approval {outcome} for tool \"{}\"", exec.name());
        self.observe(obs.outcome(outcome).reason(reason.clone()));
        Some(Prepared::Denied(reason))
    }

    async fn run_guards(&self, exec: &Execution) -> Prepared {
        let rewritten;
        let seen = if self.broken(Mutant::RewriteArguments) {
            rewritten = Execution::new(
                exec.token(),
                exec.call_id().clone(),
                exec.root_call_id().clone(),
                exec.name().to_owned(),
                serde_json::json!({ "rewritten": true }),
                exec.parent(),
            );
            &rewritten
        } else {
            exec
        };
        let mut verdicts = Vec::new();
        let mut denial: Option<String> = None;
        let mut threw: Option<Failure> = None;
        for guard in &self.guards {
            match guarded(guard.check(seen)).await {
                Ok(GuardVerdict::Abstain) => verdicts.push(GuardVerdictRecord {
                    guard: guard.id().to_owned(),
                    verdict: GuardVerdictKind::Abstain,
                    reason: None,
                }),
                // Monotonic: an attempt to allow counts as abstaining.
                Ok(GuardVerdict::Allow) => {
                    verdicts.push(GuardVerdictRecord {
                        guard: guard.id().to_owned(),
                        verdict: GuardVerdictKind::Allow,
                        reason: None,
                    });
                    if self.broken(Mutant::GuardAllowOverridesDeny) {
                        denial = None;
                    }
                }
                Ok(GuardVerdict::Deny(reason)) => {
                    verdicts.push(GuardVerdictRecord {
                        guard: guard.id().to_owned(),
                        verdict: GuardVerdictKind::Deny,
                        reason: Some(reason.clone()),
                    });
                    if self.broken(Mutant::GuardDenyIgnored) {
                        continue;
                    }
                    // The first reason wins; later guards are not consulted.
                    denial = Some(reason);
                    if !self.broken(Mutant::GuardAllowOverridesDeny) {
                        break;
                    }
                }
                Err(failure) => {
                    verdicts.push(GuardVerdictRecord {
                        guard: guard.id().to_owned(),
                        verdict: GuardVerdictKind::Throw,
                        reason: Some(failure.message.clone()),
                    });
                    threw = Some(failure);
                    break;
                }
            }
        }
        let mut obs = self.stage(NodeId::Guards, exec).identity(seen.identity());
        obs.listeners = Some(verdicts.iter().map(|v| v.guard.clone()).collect());
        obs.verdicts = Some(verdicts);
        if let Some(failure) = threw {
            self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
            Prepared::Threw(failure)
        } else if let Some(reason) = denial {
            self.observe(obs.outcome(Outcome::Deny).reason(reason.clone()));
            Prepared::Denied(reason)
        } else {
            self.observe(obs.outcome(Outcome::Allow));
            Prepared::Allowed
        }
    }

    // -----------------------------------------------------------------------------------------
    // Execute: the tools/execute waterfall around the body. The only stage that overlaps.

    async fn execute<'a>(
        &'a self,
        index: usize,
        plan: &'a CallPlan,
        exec: Execution,
    ) -> (usize, Result<ToolResult, Failure>) {
        let deferred = Mutex::new(Vec::new());
        let dispatcher = BodyDispatcher {
            registry: self,
            exec: &exec,
            tool: plan.tool.as_deref(),
            deferred: &deferred,
        };
        let declared = plan.tool.as_ref().and_then(|t| t.timeout());
        let next = ExecuteNext::new(&self.wrappers, &exec, declared, &dispatcher);
        let outcome = next.run(CancellationToken::new()).await;
        let obs = self.stage(NodeId::Around, &exec).identity(exec.identity());
        self.observe(match &outcome {
            Err(failure) => obs.outcome(Outcome::Throw).reason(failure.message.clone()),
            Ok(_) => obs,
        });
        let deferred = deferred
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        let outcome = outcome.map(|mut result| {
            // Tool-deferred contexts come first, then the wrappers'.
            let mut contexts: Vec<AdditionalContext> = deferred
                .into_iter()
                .map(|text| AdditionalContext {
                    origin: ContextOrigin::Tool,
                    text,
                })
                .collect();
            contexts.append(&mut result.additional_contexts);
            result.additional_contexts = contexts;
            result
        });
        (index, outcome)
    }

    // -----------------------------------------------------------------------------------------
    // Commit: post-execute, normalization, finalizeContent, tools/result, tool/result.

    /// Post-execute, outer normalization and `finalizeContent`: the candidate becomes the frozen
    /// outcome. Shared by a model's calls and Code Mode sub-calls.
    async fn settle(&self, plan: &CallPlan, exec: &Execution, settled: Settled) -> Arc<ToolResult> {
        let (mut result, mut threw, denied) = match settled {
            Settled::Denied(reason) => {
                let mut result = ToolResult::denial(&reason);
                if self.broken(Mutant::DenialNotError) {
                    result.is_error = false;
                }
                (result, None, true)
            }
            Settled::Threw(failure) => (ToolResult::from_failure(&failure), Some(failure), false),
            Settled::Executed(Ok(result)) => (result, None, false),
            Settled::Executed(Err(failure)) => {
                (ToolResult::from_failure(&failure), Some(failure), false)
            }
        };

        let skip_post = (threw.is_some() && !self.broken(Mutant::PostAfterThrow))
            || (denied && self.broken(Mutant::SkipPostForDenials));
        if !skip_post {
            let entered = Mutex::new(Vec::new());
            let decision = PostNext::new(&self.post, exec, &result, &entered)
                .run()
                .await;
            let mut obs = self
                .stage(NodeId::Post, exec)
                .identity(exec.identity())
                .result(&result);
            obs.listeners = Some(entered.into_inner().unwrap_or_else(PoisonError::into_inner));
            let kind = match &decision {
                Ok(PostDecision::Block { .. }) => Outcome::Block,
                _ => Outcome::Accept,
            };
            match decision.and_then(|d| self.apply_post(d, result.clone(), plan)) {
                Ok(next) => {
                    self.observe(obs.outcome(kind));
                    result = next;
                }
                Err(failure) => {
                    self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                    threw = Some(failure);
                }
            }
        }

        if let Some(failure) = threw {
            // Outer normalization: the throw becomes an `isError` result; contexts are lost.
            if self.revision == Revision::Rev2 {
                self.observe(
                    self.stage(NodeId::Normalized, exec)
                        .reason(failure.message.clone()),
                );
            }
            result = ToolResult::from_failure(&failure);
        }

        if self.revision == Revision::Rev2 {
            result = self.finalize(plan, exec, result);
            if self.broken(Mutant::FinalizeTwice) {
                result = self.finalize(plan, exec, result);
            }
        }
        Arc::new(result)
    }

    /// The `tools/result` notification of the frozen outcome.
    /// Returns the outcome to record: the frozen one (observers' attempts to change it are
    /// ignored; the mutant `observer-mutates-outcome` lets them through).
    async fn announce(&self, exec: &Execution, frozen: &Arc<ToolResult>) -> Arc<ToolResult> {
        self.observe(
            self.stage(NodeId::Final, exec)
                .identity(exec.identity())
                .result(frozen),
        );
        let mut recorded = frozen.clone();
        for observer in &self.observers {
            let amended = guarded_sync(|| Ok(observer.amend(exec, frozen)))
                .ok()
                .flatten();
            if let Some(content) = amended
                && self.broken(Mutant::ObserverMutatesOutcome)
            {
                recorded = Arc::new(ToolResult {
                    content,
                    ..(*recorded).clone()
                });
            }
        }
        let work: Vec<BoxFuture<'static, ()>> = self
            .observers
            .iter()
            .filter_map(|o| guarded_sync(|| Ok(o.notify(exec, frozen))).ok().flatten())
            .collect();
        match self.revision {
            // Synchronous notification: observers were called; their async work is not awaited.
            Revision::Rev2 => {
                for w in work {
                    tokio::spawn(w);
                }
            }
            // Parallel notification: the observers' work is awaited together.
            Revision::Rev1 => {
                futures_util::future::join_all(work).await;
            }
        }
        recorded
    }

    /// Settles, announces and records a model's call, in model order.
    async fn commit(
        &self,
        plan: &CallPlan,
        started: &Started,
        settled: Settled,
        step: u64,
    ) -> CallOutcome {
        let exec = &started.exec;
        let id = exec.call_id();
        let frozen = self.settle(plan, exec, settled).await;
        let recorded_early = self
            .broken(Mutant::ResultBeforeNotification)
            .then(|| self.record_result(plan, started, &frozen, step));
        let recorded = self.announce(exec, &frozen).await;
        if recorded_early.is_none() {
            self.record_result(plan, started, &recorded, step);
        }
        self.observe(Observation::at(NodeId::PresentResult).call(id));
        if let Some(presenter) = &self.presenter {
            let _ = guarded_sync(|| {
                presenter.present_result(id, &plan.args, &frozen);
                Ok(())
            });
        }
        CallOutcome {
            call_id: id.clone(),
            result: frozen,
        }
    }

    /// A Code Mode sub-call: the `n`-th binding call of the program `parent` runs. It re-enters
    /// every stage from pre-execute to `tools/result`, logged by `tool/code-dispatch-start`
    /// (rev2) and `tool/code-dispatch`; the caller holds the lane, so sub-calls run one at a time.
    pub(crate) async fn run_sub_call(
        &self,
        parent: &ToolContext<'_>,
        n: usize,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, crate::pipeline::code_mode::ToolCallError> {
        let outer = parent.execution();
        let id = outer.call_id().code_sub_call(n);
        let plan = self.plan(ModelCall {
            call_id: id.clone(),
            name: tool.to_owned(),
            arguments: serde_json::to_string(&arguments).unwrap_or_default(),
        });
        let exec = Execution::new(
            self.mint(),
            id.clone(),
            outer.call_id().clone(),
            tool.to_owned(),
            plan.args.clone(),
            Some(outer.token()),
        );
        if self.revision == Revision::Rev2 {
            self.recorder.append(
                Some(&id),
                EventBody::CodeDispatchStart(CodeDispatchStart {
                    root_call_id: outer.root_call_id().clone(),
                    parent_call_id: outer.call_id().clone(),
                    sub_call_id: id.clone(),
                    name: tool.to_owned(),
                    arguments: plan.args.clone(),
                }),
                None,
                None,
            );
        }
        let (prepared, rewritten) = self.decide(&exec).await;
        let exec = rewritten.unwrap_or(exec);
        let settled = match prepared {
            Prepared::Allowed => Settled::Executed(self.execute(0, &plan, exec.clone()).await.1),
            Prepared::Denied(reason) => {
                self.observe(self.stage(NodeId::Denied, &exec).reason(reason.clone()));
                Settled::Denied(reason)
            }
            Prepared::Threw(failure) => Settled::Threw(failure),
        };
        let frozen = self.settle(&plan, &exec, settled).await;
        let frozen = self.announce(&exec, &frozen).await;
        // The doc: sub-calls omit their additional contexts (nothing can be injected mid-run
        // without breaking call/result adjacency). The mutant forwards them to the parent.
        if self.broken(Mutant::SubCallContextsForwarded) {
            for context in &frozen.additional_contexts {
                parent.defer_context(context.text.clone());
            }
        }
        if !self.broken(Mutant::NoDispatchEvent) {
            let text = content_text(&frozen.content);
            self.recorder.append(
                Some(&id),
                EventBody::CodeDispatch(CodeDispatch {
                    root_call_id: (self.revision == Revision::Rev2)
                        .then(|| outer.root_call_id().clone()),
                    parent_call_id: outer.call_id().clone(),
                    sub_call_id: id.clone(),
                    name: tool.to_owned(),
                    arguments: plan.args.clone(),
                    is_error: frozen.is_error,
                    content: (self.revision == Revision::Rev2).then(|| frozen.content.clone()),
                    result_summary: (self.revision == Revision::Rev1)
                        .then(|| text.chars().take(200).collect()),
                }),
                None,
                None,
            );
        }
        if frozen.is_error {
            let mut details = std::collections::BTreeMap::new();
            if self.broken(Mutant::RejectionLeaksFields) {
                details.insert(
                    "content".to_owned(),
                    serde_json::to_value(&frozen.content).unwrap_or_default(),
                );
            }
            Err(crate::pipeline::code_mode::ToolCallError {
                tool_name: tool.to_owned(),
                message: frozen
                    .error
                    .as_ref()
                    .map_or_else(|| content_text(&frozen.content), |e| e.message.clone()),
                details,
            })
        } else {
            Ok(frozen
                .value
                .clone()
                .unwrap_or_else(|| Value::String(content_text(&frozen.content))))
        }
    }

    fn apply_post(
        &self,
        decision: PostDecision,
        mut result: ToolResult,
        plan: &CallPlan,
    ) -> Result<ToolResult, Failure> {
        let post_context = |text| AdditionalContext {
            origin: ContextOrigin::Post,
            text,
        };
        match decision {
            PostDecision::Accept {
                content: Some(_),
                value: Some(_),
                ..
            } => Err(Failure::new(
                "a post-execute accept cannot replace both content and value",
            )),
            PostDecision::Accept {
                content,
                value,
                contexts,
            } => {
                if let Some(value) = value {
                    if result.is_error {
                        return Err(Failure::new(
                            "a post-execute accept cannot replace the value of a failed result",
                        ));
                    }
                    result.content = match &plan.tool {
                        Some(tool) => tool.render(&plan.args, &value),
                        None => vec![ContentBlock::text(value.to_string())],
                    };
                    result.value = Some(value);
                }
                if let Some(content) = content {
                    result.content = content;
                }
                result
                    .additional_contexts
                    .extend(contexts.into_iter().map(post_context));
                Ok(result)
            }
            PostDecision::Block { feedback, contexts } => {
                let text = content_text(&feedback);
                let message = if text.is_empty() {
                    "tool result blocked by post-execute policy".to_owned()
                } else {
                    text
                };
                let mut kept = if self.broken(Mutant::BlockKeepsContexts) {
                    std::mem::take(&mut result.additional_contexts)
                } else {
                    Vec::new()
                };
                kept.extend(contexts.into_iter().map(post_context));
                Ok(ToolResult {
                    is_error: true,
                    content: feedback,
                    error: Some(crate::result::ResultError {
                        message,
                        info: None,
                    }),
                    meta: None,
                    additional_contexts: kept,
                    value: None,
                })
            }
        }
    }

    /// The definition's `finalizeContent`, captured when the call was planned. A call whose
    /// definition has none (an unknown tool, `run_code`) has no finalize stage.
    fn finalize(&self, plan: &CallPlan, exec: &Execution, candidate: ToolResult) -> ToolResult {
        let Some(finalizer) = plan.tool.as_ref().and_then(|t| t.finalizer()) else {
            return candidate;
        };
        if candidate.is_error && self.broken(Mutant::FinalizeSkippedOnError) {
            return candidate;
        }
        let outcome = guarded_sync(|| finalizer.finalize_content(exec, &candidate));
        let obs = self
            .stage(NodeId::Finalize, exec)
            .identity(exec.identity())
            .result(&candidate);
        match outcome {
            Ok(content) => {
                self.observe(obs);
                match content {
                    Some(content) => ToolResult {
                        content,
                        ..candidate
                    },
                    None => candidate,
                }
            }
            Err(failure) => {
                // The callback is not called again; the call ends as a plain error.
                self.observe(obs.outcome(Outcome::Throw).reason(failure.message.clone()));
                ToolResult::from_failure(&failure)
            }
        }
    }

    fn record_result(
        &self,
        plan: &CallPlan,
        started: &Started,
        frozen: &Arc<ToolResult>,
        step: u64,
    ) -> u64 {
        let id = &plan.call.call_id;
        let mut content = frozen.content.clone();
        if self.broken(Mutant::ResultDiffersFromNotification) {
            content.push(ContentBlock::text("(edited after notification)"));
        }
        let error = frozen.error.as_ref().and_then(|e| e.info.clone());
        let data = match self.revision {
            Revision::Rev2 => ToolResultData::Message(ToolResultRecord {
                turn: 1,
                step,
                message: ToolResultMessage {
                    id: format!("result-{id}"),
                    role: Role::User,
                    source: MessageSource::Tool {
                        call_id: id.clone(),
                    },
                    content: vec![ToolResultBlock {
                        kind: ToolResultBlockType::ToolResult,
                        tool_call_id: id.clone(),
                        content,
                        is_error: frozen.is_error,
                    }],
                },
                error,
                meta: frozen.meta.clone(),
            }),
            Revision::Rev1 => ToolResultData::Flat(FlatToolResult {
                call_id: id.clone(),
                content,
                is_error: frozen.is_error,
                error,
                meta: frozen.meta.clone(),
            }),
        };
        self.recorder.append(
            Some(id),
            EventBody::ToolResult(data),
            Some(SurfaceOp::Append),
            Some(vec![started.call_seq]),
        )
    }

    /// Injects one call's additional contexts, in order: rev2 as `user/message` events of the
    /// active batch, rev1 as buffered `context/message` events.
    fn inject_contexts(&self, outcome: &CallOutcome) {
        let id = &outcome.call_id;
        for (n, context) in outcome.result.additional_contexts.iter().enumerate() {
            let content = vec![ContentBlock::text(context.text.clone())];
            let source = MessageSource::Tool {
                call_id: id.clone(),
            };
            let (body, surface) = match self.revision {
                Revision::Rev2 => (
                    EventBody::UserMessage(UserMessage {
                        id: format!("context-{id}-{}", n + 1),
                        role: Role::User,
                        content,
                        source,
                    }),
                    Some(SurfaceOp::Append),
                ),
                Revision::Rev1 => (
                    EventBody::ContextMessage(ContextMessage { content, source }),
                    None,
                ),
            };
            self.recorder.append(Some(id), body, surface, None);
        }
    }
}

/// The innermost `next()` of `tools/execute`: one dispatch of the tool body.
struct BodyDispatcher<'a> {
    registry: &'a ToolRegistry,
    exec: &'a Execution,
    tool: Option<&'a dyn Tool>,
    deferred: &'a Mutex<Vec<String>>,
}

impl Dispatch for BodyDispatcher<'_> {
    fn dispatch<'b>(
        &'b self,
        cancel: CancellationToken,
    ) -> BoxFuture<'b, Result<ToolResult, Failure>> {
        Box::pin(async move {
            let Some(tool) = self.tool else {
                return Ok(ToolResult::failure(
                    format!("unknown tool: {}", self.exec.name()),
                    Some(ErrorCode::UnknownTool.into()),
                ));
            };
            if cancel.is_cancelled() {
                return Ok(ToolResult::failure(
                    "tool call was cancelled before dispatch",
                    Some(ErrorCode::AbortedBeforeDispatch.into()),
                ));
            }
            let registry = self.registry;
            // Control leaves the wrappers for the body.
            registry.observe(
                registry
                    .stage(NodeId::Around, self.exec)
                    .identity(self.exec.identity()),
            );
            registry.observe(
                registry
                    .stage(NodeId::ToolBody, self.exec)
                    .identity(self.exec.identity()),
            );
            let ctx = ToolContext {
                registry: self.registry,
                exec: self.exec,
                cancel,
                deferred: self.deferred,
            };
            // The body's own failure is normalized here, before any wrapper sees it.
            let executed = guarded(tool.execute(ctx)).await;
            if let Err(failure) = &executed
                && registry.broken(Mutant::BodyThrowReachesWrappers)
            {
                registry.observe(
                    registry
                        .stage(NodeId::Around, self.exec)
                        .identity(self.exec.identity())
                        .outcome(Outcome::Throw)
                        .reason(failure.message.clone()),
                );
                return Err(failure.clone());
            }
            let result = match executed {
                Ok(value) => {
                    let args = self.exec.arguments();
                    match guarded_sync(|| Ok(tool.render(args, &value))) {
                        Ok(content) => ToolResult::success(value, content),
                        Err(failure) => ToolResult::from_failure(&failure),
                    }
                }
                Err(failure) => ToolResult::from_failure(&failure),
            };
            // Control returns to the innermost wrapper with what the dispatch produced.
            registry.observe(
                registry
                    .stage(NodeId::Around, self.exec)
                    .identity(self.exec.identity())
                    .result(&result),
            );
            Ok(result)
        })
    }
}
