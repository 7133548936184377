//! The built-in implementation: the reference pipeline with a scenario's scripted parts
//! installed. This is what an adapter does for another harness, written against our own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use tep_model::graph::Revision;
use tep_model::identity::CallId;
use tep_model::result::{AdditionalContext, ContentBlock, ContextOrigin, Failure, ToolResult};
use tep_model::session::{HookInvoked, HookResult};
use tep_model::trace::{
    Capability, Mark, MarkKind, ObservationLevel, Rejection, TraceHeader, TraceRecord,
};
use tep_reference::execution::Execution;
use tep_reference::fs::VirtualFs;
use tep_reference::mutant::Mutant;
use tep_reference::pipeline::code_mode::{
    Bindings, Program, ProgramLoader, ProgramOutput, ToolCallError,
};
use tep_reference::pipeline::{
    ApprovalOutcome, BoxFuture, DispatchCall, ExecuteNext, ExecuteWrapper, FinalizeContent,
    GuardVerdict, ModelCall, Named, PostDecision, PostExecute, PostNext, PreDecision,
    RegistryBuilder, ResultObserver, Tool, ToolContext, ToolRegistry, cancelled_failure, simple,
};
use tep_reference::recorder::Recorder;
use tep_reference::wrappers::{MetricsWrapper, RetryWrapper, TimeoutWrapper};

use crate::scenario::{
    ApprovalAnswer, BindingCall, BodyStep, FinalizeAction, GuardAction, OnReject, PostAction,
    PreAction, ProgramStep, Scenario, ThrowPhase, ToolSpec, WrapperSpec,
};

/// How long, in virtual time, a scenario may run before it is declared hung.
pub const VIRTUAL_TIME_LIMIT: Duration = Duration::from_secs(3600);

/// The name the built-in implementation reports.
pub fn implementation_name() -> String {
    format!("tep-reference {}", env!("CARGO_PKG_VERSION"))
}

/// How a run of the reference ended.
#[derive(Debug, Clone, PartialEq)]
pub enum ReferenceRun {
    /// The trace, starting with a header.
    Trace(Vec<TraceRecord>),
    /// An exception escaped the pipeline (only a mutant lets one): what escaped, and the trace
    /// up to it.
    Escaped {
        message: String,
        records: Vec<TraceRecord>,
    },
}

/// Runs a scenario on the reference pipeline (with `mutants`, if any) and returns its trace,
/// starting with a header. Runs on a paused clock: timeouts cost no real time. An exception
/// that escapes the pipeline is an error here; [`run_reference_to_the_end`] reports it.
pub fn run_reference(
    scenario: &Scenario,
    revision: Revision,
    mutants: &[Mutant],
) -> Result<Vec<TraceRecord>, String> {
    match run_reference_to_the_end(scenario, revision, mutants)? {
        ReferenceRun::Trace(records) => Ok(records),
        ReferenceRun::Escaped { message, .. } => {
            Err(format!("an exception escaped the pipeline: {message}"))
        }
    }
}

/// Runs a scenario on the reference pipeline, reporting an exception that escapes it.
pub fn run_reference_to_the_end(
    scenario: &Scenario,
    revision: Revision,
    mutants: &[Mutant],
) -> Result<ReferenceRun, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    runtime.block_on(async {
        let recorder = Recorder::new();
        let registry = build_registry(scenario, revision, mutants, recorder.clone())
            .map_err(|e| format!("scenario {}: {e}", scenario.id))?;
        let calls = scenario
            .calls
            .iter()
            .map(|c| ModelCall {
                call_id: c.call_id.clone(),
                name: c.tool.clone(),
                arguments: c.raw_arguments(),
            })
            .collect();
        tokio::time::timeout(VIRTUAL_TIME_LIMIT, registry.run_batch(calls))
            .await
            .map_err(|_| {
                format!(
                    "scenario {} did not finish within {VIRTUAL_TIME_LIMIT:?} of virtual time",
                    scenario.id
                )
            })?;
        // Let observers' unawaited work settle so their marks are in the trace. `validate`
        // bounds `asyncMs` (crate::scenario::limits); saturate anyway, this runs unvalidated scenarios too.
        let settle = scenario
            .observers
            .iter()
            .map(|o| o.async_ms)
            .max()
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(settle.saturating_add(1))).await;
        let mut records = vec![TraceRecord::Header(TraceHeader {
            spec: revision,
            implementation: Some(implementation_name()),
            capabilities: Some(Capability::ALL.to_vec()),
            observation: Some(ObservationLevel::Full),
        })];
        records.extend(recorder.records());
        Ok(match registry.escaped() {
            Some(message) => ReferenceRun::Escaped { message, records },
            None => ReferenceRun::Trace(records),
        })
    })
}

/// Installs a scenario's scripted parts in a reference registry.
pub fn build_registry(
    scenario: &Scenario,
    revision: Revision,
    mutants: &[Mutant],
    recorder: Recorder,
) -> Result<ToolRegistry, tep_reference::pipeline::RegistryError> {
    let mut builder: RegistryBuilder = ToolRegistry::builder()
        .revision(revision)
        .recorder(recorder.clone())
        .fs(VirtualFs::with_files(
            scenario.files.iter().map(|(p, c)| (p.as_str(), c.as_str())),
        ));
    if let Some(cap) = scenario.max_parallel {
        builder = builder.max_parallel(cap);
    }
    for &m in mutants {
        builder = builder.mutant(m);
    }
    builder = install_tools(builder, scenario, &recorder);
    for listener in &scenario.pre {
        let listener = listener.clone();
        builder = builder.pre_execute(simple::pre(
            &listener.id.clone(),
            move |exec| match listener.action(exec.call_id()) {
                PreAction::Pass => Ok(None),
                PreAction::Allow => Ok(Some(PreDecision::Allow)),
                PreAction::Deny(reason) => Ok(Some(PreDecision::Deny { reason })),
                PreAction::Ask(reason) => Ok(Some(PreDecision::Ask { reason })),
                PreAction::Rewrite(arguments) => Ok(Some(PreDecision::Rewrite { arguments })),
                PreAction::Throw(message) => Err(Failure::new(message)),
            },
        ));
    }
    if let Some(approval) = &scenario.approval {
        let approval = approval.clone();
        builder = builder.approval(simple::approval(move |request| {
            match approval.answer(&request.call_id) {
                ApprovalAnswer::AllowedOnce => Ok(ApprovalOutcome::AllowedOnce),
                ApprovalAnswer::Rejected => Ok(ApprovalOutcome::Rejected),
                ApprovalAnswer::Cancelled => Ok(ApprovalOutcome::Cancelled),
                ApprovalAnswer::Unavailable => Ok(ApprovalOutcome::Unavailable),
                ApprovalAnswer::Throw(message) => Err(Failure::new(message)),
            }
        }));
    }
    for guard in &scenario.guards {
        let guard = guard.clone();
        builder = builder.guard(simple::guard(&guard.id.clone(), move |exec| {
            match guard.action(exec.call_id()) {
                GuardAction::Abstain => Ok(GuardVerdict::Abstain),
                GuardAction::Deny(reason) => Ok(GuardVerdict::Deny(reason)),
                GuardAction::Allow => Ok(GuardVerdict::Allow),
                GuardAction::Throw(message) => Err(Failure::new(message)),
            }
        }));
    }
    for (n, wrapper) in scenario.wrappers.iter().enumerate() {
        builder = builder.wrap(installed_wrapper(n, wrapper, mutants));
    }
    for listener in &scenario.post {
        builder = builder.post_execute(Arc::new(ScriptedPost {
            id: listener.id.clone(),
            listener: listener.clone(),
        }));
    }
    let programs: HashMap<CallId, Vec<ProgramStep>> = scenario
        .calls
        .iter()
        .filter_map(|c| c.program.clone().map(|p| (c.call_id.clone(), p)))
        .collect();
    if !programs.is_empty() {
        builder = builder.code_mode(Arc::new(ScriptedPrograms {
            programs,
            recorder: recorder.clone(),
        }));
    }
    for observer in &scenario.observers {
        builder = builder.observe(Arc::new(ScriptedObserver {
            id: observer.id.clone(),
            async_ms: observer.async_ms,
            mutate: observer.mutate.clone(),
            recorder: recorder.clone(),
        }));
    }
    builder.build()
}

/// Each tool of the scenario, scripted with the bodies of the calls (and sub-calls) that call it.
fn install_tools(
    mut builder: RegistryBuilder,
    scenario: &Scenario,
    recorder: &Recorder,
) -> RegistryBuilder {
    let sub_calls = scenario.all_sub_calls();
    for tool in &scenario.tools {
        let bodies = scenario
            .calls
            .iter()
            .filter(|c| c.tool == tool.name)
            .map(|c| (c.call_id.clone(), c.body.clone()))
            .chain(
                sub_calls
                    .iter()
                    .filter(|(_, c)| c.tool == tool.name)
                    .map(|(id, c)| (id.clone(), c.body.clone())),
            )
            .collect();
        builder = builder.tool(ScriptedTool {
            spec: tool.clone(),
            finalize: tool.finalize.clone().map(ScriptedFinalizer),
            bodies,
            attempts: Mutex::new(HashMap::new()),
            recorder: recorder.clone(),
        });
    }
    builder
}

/// What the scenario's wrapper at index `n` installs: the reference's own timeout, retry and
/// metrics wrappers, the others scripted.
fn installed_wrapper(
    n: usize,
    wrapper: &WrapperSpec,
    mutants: &[Mutant],
) -> Arc<dyn ExecuteWrapper> {
    match wrapper {
        WrapperSpec::Timeout if mutants.contains(&Mutant::TimeoutAbandonsBody) => {
            Arc::new(TimeoutWrapper::abandoning())
        }
        WrapperSpec::Timeout => Arc::new(TimeoutWrapper::new()),
        WrapperSpec::Retry { attempts, delay_ms } => Arc::new(RetryWrapper::new(
            *attempts,
            Duration::from_millis(*delay_ms),
        )),
        WrapperSpec::Metrics => Arc::new(MetricsWrapper::new()),
        other => Arc::new(ScriptedWrapper {
            id: format!("wrapper-{}", n + 1),
            spec: other.clone(),
        }),
    }
}

struct ScriptedTool {
    recorder: Recorder,
    spec: ToolSpec,
    finalize: Option<ScriptedFinalizer>,
    bodies: HashMap<CallId, Vec<BodyStep>>,
    attempts: Mutex<HashMap<CallId, u32>>,
}

impl ScriptedTool {
    async fn run(&self, ctx: &ToolContext<'_>) -> Result<Value, Failure> {
        let id = ctx.execution().call_id().clone();
        let attempt = {
            let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
            let n = attempts.entry(id.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let steps = self.bodies.get(&id).map(Vec::as_slice).unwrap_or_default();
        for step in steps {
            match step {
                BodyStep::Sleep(ms) => {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(*ms)) => {}
                        () = ctx.cancelled() => return Err(cancelled_failure()),
                    }
                }
                BodyStep::Hang => {
                    ctx.cancelled().await;
                    return Err(cancelled_failure());
                }
                BodyStep::SlowStop(ms) => {
                    ctx.cancelled().await;
                    tokio::time::sleep(Duration::from_millis(*ms)).await;
                    return Err(cancelled_failure());
                }
                BodyStep::Read(path) => {
                    ctx.read_file(path)?;
                }
                BodyStep::Write(w) => ctx.write_file(&w.path, &w.content)?,
                BodyStep::Edit(e) => ctx.edit_file(&e.path, &e.old, &e.new)?,
                BodyStep::ExternalWrite(w) => {
                    ctx.shared_fs().put(&w.path, &w.content);
                }
                BodyStep::Todo(todos) => ctx.write_todos(todos.clone()),
                BodyStep::Hook(h) => ctx.record_hook(
                    HookInvoked {
                        turn: 1,
                        point: h.point.clone(),
                        dialect: "claude-code".to_owned(),
                        matcher: None,
                        handler_id: h.handler_id.clone(),
                    },
                    HookResult {
                        turn: 1,
                        point: h.point.clone(),
                        handler_id: h.handler_id.clone(),
                        decision: h.decision.clone(),
                        exit_code: Some(0),
                        stderr_summary: None,
                        duration_ms: 0.into(),
                    },
                ),
                BodyStep::DeferContext(text) => ctx.defer_context(text.clone()),
                BodyStep::FailUntilAttempt(n) => {
                    if attempt < *n {
                        return Err(Failure::new(format!("attempt {attempt} fails")));
                    }
                }
                BodyStep::Return(value) => return Ok(value.clone()),
                BodyStep::Throw(message) => return Err(Failure::new(message.clone())),
            }
        }
        Ok(Value::String("ok".to_owned()))
    }
}

impl Tool for ScriptedTool {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn is_concurrency_safe(&self, _args: &Value) -> bool {
        self.spec.concurrency_safe
    }

    fn timeout(&self) -> Option<Duration> {
        self.spec.timeout_ms.map(Duration::from_millis)
    }

    fn execute<'a>(&'a self, ctx: ToolContext<'a>) -> BoxFuture<'a, Result<Value, Failure>> {
        Box::pin(async move {
            let outcome = self.run(&ctx).await;
            // The body's steps ended (returned, threw, or stopped after cancellation). A body
            // the pipeline abandons never gets here.
            self.recorder.mark(Mark {
                call: ctx.execution().call_id().clone(),
                mark: MarkKind::BodySettled,
                by: "body".to_owned(),
                after_ms: 0,
                rejection: None,
            });
            outcome
        })
    }

    fn finalizer(&self) -> Option<&dyn FinalizeContent> {
        self.finalize.as_ref().map(|f| f as &dyn FinalizeContent)
    }
}

/// A tool's scripted `finalizeContent`.
struct ScriptedFinalizer(FinalizeAction);

impl FinalizeContent for ScriptedFinalizer {
    fn finalize_content(
        &self,
        _exec: &Execution,
        candidate: &ToolResult,
    ) -> Result<Option<Vec<ContentBlock>>, Failure> {
        match &self.0 {
            FinalizeAction::Keep => Ok(None),
            FinalizeAction::Prefix(prefix) => Ok(Some(
                candidate
                    .content
                    .iter()
                    .map(|b| ContentBlock::text(format!("{prefix}{}", b.as_text())))
                    .collect(),
            )),
            FinalizeAction::Replace(text) => Ok(Some(vec![ContentBlock::text(text.clone())])),
            FinalizeAction::Throw(message) => Err(Failure::new(message.clone())),
        }
    }
}

struct ScriptedWrapper {
    id: String,
    spec: WrapperSpec,
}

impl Named for ScriptedWrapper {
    fn id(&self) -> &str {
        &self.id
    }
}

impl ExecuteWrapper for ScriptedWrapper {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        Box::pin(async move {
            let applies =
                |calls: &[CallId]| calls.is_empty() || calls.contains(call.exec.call_id());
            match &self.spec {
                WrapperSpec::Context { text, calls } if applies(calls) => {
                    let mut result = next.run(call.cancel.clone()).await?;
                    result.additional_contexts.push(AdditionalContext {
                        origin: ContextOrigin::Wrapper,
                        text: text.clone(),
                    });
                    Ok(result)
                }
                WrapperSpec::Throw {
                    message,
                    phase,
                    calls,
                } if applies(calls) => {
                    if *phase == ThrowPhase::After {
                        next.run(call.cancel.clone()).await?;
                    }
                    Err(Failure::new(message.clone()))
                }
                _ => next.run(call.cancel.clone()).await,
            }
        })
    }
}

struct ScriptedPost {
    id: String,
    listener: crate::scenario::Listener<PostAction>,
}

impl Named for ScriptedPost {
    fn id(&self) -> &str {
        &self.id
    }
}

impl PostExecute for ScriptedPost {
    fn call<'a>(
        &'a self,
        exec: &'a Execution,
        _result: &'a ToolResult,
        next: PostNext<'a>,
    ) -> BoxFuture<'a, Result<PostDecision, Failure>> {
        Box::pin(async move {
            match self.listener.action(exec.call_id()) {
                PostAction::Pass => next.run().await,
                PostAction::AddContext(text) => {
                    let mut decision = next.run().await?;
                    match &mut decision {
                        PostDecision::Accept { contexts, .. }
                        | PostDecision::Block { contexts, .. } => contexts.push(text),
                    }
                    Ok(decision)
                }
                PostAction::Accept(spec) => Ok(PostDecision::Accept {
                    content: spec.content.map(|t| vec![ContentBlock::text(t)]),
                    value: spec.value,
                    contexts: spec.context.into_iter().collect(),
                }),
                PostAction::Block(spec) => Ok(PostDecision::Block {
                    feedback: vec![ContentBlock::text(spec.feedback)],
                    contexts: spec.context.into_iter().collect(),
                }),
                PostAction::Throw(message) => Err(Failure::new(message)),
            }
        })
    }
}

struct ScriptedObserver {
    id: String,
    async_ms: u64,
    mutate: Option<String>,
    recorder: Recorder,
}

impl Named for ScriptedObserver {
    fn id(&self) -> &str {
        &self.id
    }
}

impl ResultObserver for ScriptedObserver {
    fn notify(
        &self,
        exec: &Execution,
        _result: &Arc<ToolResult>,
    ) -> Option<BoxFuture<'static, ()>> {
        let recorder = self.recorder.clone();
        let mark = Mark {
            call: exec.call_id().clone(),
            mark: MarkKind::ObserverSettled,
            by: self.id.clone(),
            after_ms: self.async_ms,
            rejection: None,
        };
        let delay = Duration::from_millis(self.async_ms);
        Some(Box::pin(async move {
            tokio::time::sleep(delay).await;
            recorder.mark(mark);
        }))
    }

    fn amend(&self, _exec: &Execution, _result: &ToolResult) -> Option<Vec<ContentBlock>> {
        self.mutate
            .clone()
            .map(|text| vec![ContentBlock::text(text)])
    }
}

/// The programs of a scenario's `run_code` calls.
struct ScriptedPrograms {
    programs: HashMap<CallId, Vec<ProgramStep>>,
    recorder: Recorder,
}

impl ProgramLoader for ScriptedPrograms {
    fn load(&self, exec: &Execution) -> Result<Arc<dyn Program>, Failure> {
        let steps = self
            .programs
            .get(exec.call_id())
            .cloned()
            .ok_or_else(|| Failure::new(format!("no program for {}", exec.call_id())))?;
        Ok(Arc::new(ScriptedProgram {
            steps,
            recorder: self.recorder.clone(),
        }))
    }
}

/// A scripted program: it calls its bindings in order and records how each one settled.
struct ScriptedProgram {
    steps: Vec<ProgramStep>,
    recorder: Recorder,
}

impl ScriptedProgram {
    /// Records how a binding settled (a mark), logs it, and fails the program if told to.
    fn settle(
        &self,
        id: CallId,
        call: &BindingCall,
        outcome: Result<Value, ToolCallError>,
        logs: &mut Vec<String>,
    ) -> Result<(), Failure> {
        let (mark, rejection) = match &outcome {
            Ok(_) => (MarkKind::BindingResolved, None),
            Err(e) => (
                MarkKind::BindingRejected,
                Some(Rejection {
                    tool_name: e.tool_name.clone(),
                    message: e.message.clone(),
                    other: e.details.clone(),
                }),
            ),
        };
        self.recorder.mark(Mark {
            call: id,
            mark,
            by: "program".to_owned(),
            after_ms: 0,
            rejection,
        });
        match outcome {
            Ok(value) => {
                let shown = match value {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                logs.push(format!("{} -> {shown}", call.tool));
                Ok(())
            }
            Err(e) => {
                logs.push(format!("{} rejected: {e}", call.tool));
                match call.on_reject {
                    OnReject::Continue => Ok(()),
                    OnReject::Fail => Err(Failure::new(e.to_string())),
                }
            }
        }
    }

    /// Runs the program's steps, settling each binding as it resolves or rejects.
    async fn steps(&self, bindings: &Bindings<'_>) -> Result<ProgramOutput, Failure> {
        let parent = bindings.parent().call_id().clone();
        let mut logs = Vec::new();
        let mut issued = 0;
        for step in &self.steps {
            match step {
                ProgramStep::Call(call) => {
                    issued += 1;
                    let outcome = bindings.call(&call.tool, call.arguments.clone()).await;
                    self.settle(parent.code_sub_call(issued), call, outcome, &mut logs)?;
                }
                ProgramStep::All(calls) => {
                    let first = issued + 1;
                    issued += calls.len();
                    let outcomes = bindings
                        .call_all(
                            calls
                                .iter()
                                .map(|c| (c.tool.clone(), c.arguments.clone()))
                                .collect(),
                        )
                        .await;
                    // Every binding of the group settles before the program reacts to the
                    // first rejection it does not catch.
                    let mut failure = None;
                    for (k, (call, outcome)) in calls.iter().zip(outcomes).enumerate() {
                        let settled =
                            self.settle(parent.code_sub_call(first + k), call, outcome, &mut logs);
                        failure = failure.or(settled.err());
                    }
                    if let Some(failure) = failure {
                        return Err(failure);
                    }
                }
                ProgramStep::CallRunCode => {
                    if let Err(e) = bindings
                        .call(tep_model::RUN_CODE, Value::Object(Default::default()))
                        .await
                    {
                        logs.push(format!("run_code rejected: {e}"));
                    }
                }
                ProgramStep::Log(line) => logs.push(line.clone()),
                ProgramStep::Return(value) => {
                    return Ok(ProgramOutput {
                        logs,
                        value: Some(value.clone()),
                    });
                }
                ProgramStep::Throw(message) => return Err(Failure::new(message.clone())),
            }
        }
        Ok(ProgramOutput { logs, value: None })
    }
}

impl Program for ScriptedProgram {
    fn run<'a>(
        &'a self,
        bindings: &'a Bindings<'a>,
    ) -> BoxFuture<'a, Result<ProgramOutput, Failure>> {
        Box::pin(async move {
            let outcome = self.steps(bindings).await;
            // The program is the `run_code` body's work: its end is the body's.
            self.recorder.mark(Mark {
                call: bindings.parent().call_id().clone(),
                mark: MarkKind::BodySettled,
                by: "program".to_owned(),
                after_ms: 0,
                rejection: None,
            });
            outcome
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unvalidated_huge_observer_delay_does_not_overflow() {
        let (_, text) = crate::scenario::corpus_files()
            .iter()
            .find(|(file, _)| *file == "tools-result-is-synchronous.json")
            .unwrap_or_else(|| panic!("the scenario is in the corpus"));
        let mut scenario: Scenario = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
        scenario.observers[0].async_ms = u64::MAX;
        // The observer cannot settle in the trace (its delay saturates too); the run must end.
        let records =
            run_reference(&scenario, Revision::Rev2, &[]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(records.first(), Some(TraceRecord::Header(_))));
        assert!(records.len() > 1);
    }
}
