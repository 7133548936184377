//! Where the reference's mutants live: the only place fault behaviour is written.
//!
//! The stage code reads as the spec. Each [`Mutant`](crate::mutant::Mutant) is either a
//! *decorator*, an extension point wrapped or reordered when the registry is built with it (the
//! stage code cannot tell), or a *seam*: one small function here that the stage code hands its
//! spec value (or its spec step) to. Without the cargo feature `mutants`, [`Faults`] is empty,
//! every seam is the identity and no decorator exists: such a build has no fault code at all.
//! `RegistryBuilder::mutant` and `TimeoutWrapper::abandoning` exist only with the feature.
//!
//! The spec's decision is written in the stage code, never here: the stage states the value
//! (`guard_deny(faults, denial, Some(reason))`, `guards_stop_at_deny(faults, true)`, with a
//! comment saying the rule) and a seam returns it unchanged unless its mutant is on; each
//! seam's doc names that parameter and its spec value. A seam that orders two steps runs them
//! in the order the stage hands them, and a seam that only keeps a mutant's state
//! ([`throw_escapes`], [`answer_given`]) does nothing without it.
//!
//! | Mutant | Kind | Seam (here) | Stage |
//! |---|---|---|---|
//! | `pre-listeners-reversed` | decorator | [`pre_listeners`] | `registry/builder.rs` |
//! | `approval-asked-twice` | decorator | [`approval`] | `registry/builder.rs` |
//! | `timeout-abandons-body` | decorator | `TimeoutWrapper::abandoning` | `wrappers.rs` |
//! | `retry-skips-inner-wrappers` | decorator | [`execute_wrappers`] | `registry/builder.rs` |
//! | `exclusive-in-pool` | seam | [`joins_pool`] | `registry/batch.rs` |
//! | `pool-cap-ignored` | seam | [`pool_cap`] | `registry/batch.rs` |
//! | `run-body-after-deny` | seam | [`runs_body`] | `registry/batch.rs` |
//! | `commit-in-completion-order` | seam | [`commit_head`] | `registry/batch.rs` |
//! | `contexts-before-results` | seam | [`contexts_after_all`], [`contexts_on_commit`] | `registry/settle.rs`, `registry/batch.rs` |
//! | `contexts-reversed` | seam | [`contexts_after_all`] | `registry/settle.rs` |
//! | `throw-escapes` | seam | [`throw_escapes`], [`batch_abandoned`], [`escaped`] | `registry/prepare/mod.rs`, `registry/batch.rs`, `registry/mod.rs` |
//! | `late-tool-call` | seam | [`tool_call_then`] | `registry/prepare/mod.rs` |
//! | `pre-rewrites-arguments` | seam | [`pre_rewritten`] | `registry/prepare/mod.rs` |
//! | `guards-before-approval` | seam | [`approval_then_guards`] | `registry/prepare/mod.rs` |
//! | `allowed-once-skips-guards` | seam | [`guards_after_allowed_once`] | `registry/prepare/mod.rs` |
//! | `absent-approval-allows` | seam | [`absent_approval_allows`] | `registry/prepare/approval.rs` |
//! | `approval-unaudited` | seam | [`approval_audit`] | `registry/prepare/approval.rs` |
//! | `approval-answer-reused` | seam | [`answer_reused`], [`answer_given`] | `registry/prepare/approval.rs` |
//! | `rewrite-arguments` | seam | [`guard_view`] | `registry/prepare/guards.rs` |
//! | `guard-deny-ignored` | seam | [`guard_deny`], [`guards_stop_at_deny`] | `registry/prepare/guards.rs` |
//! | `guard-allow-overrides-deny` | seam | [`guard_allow`], [`guards_stop_at_deny`] | `registry/prepare/guards.rs` |
//! | `guard-throw-denies` | seam | [`guard_throw`] | `registry/prepare/guards.rs` |
//! | `body-throw-reaches-wrappers` | seam | [`body_throw`] | `registry/execute.rs` |
//! | `failure-drops-deferred-contexts` | seam | [`deferred_kept`] | `registry/execute.rs` |
//! | `edit-without-read` | seam | [`read_before_edit`] | `tool.rs` |
//! | `denial-not-error` | seam | [`denial_result`] | `registry/commit/freeze.rs` |
//! | `post-after-throw` | seam | [`skip_post`] | `registry/commit/freeze.rs` |
//! | `skip-post-for-denials` | seam | [`skip_post`] | `registry/commit/freeze.rs` |
//! | `block-keeps-contexts` | seam | [`kept_by_block`] | `registry/commit/freeze.rs` |
//! | `finalize-twice` | seam | [`finalize_again`] | `registry/commit/freeze.rs` |
//! | `finalize-skipped-on-error` | seam | [`finalizer`] | `registry/commit/freeze.rs` |
//! | `observer-mutates-outcome` | seam | [`recorded_outcome`] | `registry/commit/mod.rs` |
//! | `result-before-notification` | seam | [`notify_then_record`] | `registry/commit/mod.rs` |
//! | `result-differs-from-notification` | seam | [`recorded_content`] | `registry/commit/mod.rs` |
//! | `sub-calls-overlap` | seam | [`sub_call_turn`] | `code_mode.rs` |
//! | `sub-call-contexts-forwarded` | seam | [`sub_call_contexts`] | `registry/sub_call.rs` |
//! | `sub-call-logs-tool-call` | seam | [`sub_call_tool_call`] | `registry/sub_call.rs` |
//! | `no-dispatch-event` | seam | [`dispatch_log`] | `registry/sub_call.rs` |
//! | `rejection-leaks-fields` | seam | [`rejection_details`] | `registry/sub_call.rs` |

// Without the feature a seam ignores what only its fault would read.
#![cfg_attr(not(feature = "mutants"), allow(unused_variables))]

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

use super::extension::{Approval, ExecuteWrapper, PreDecision, PreExecute, ResultObserver};
use super::registry::types::{CallOutcome, Prepared};
use crate::execution::Execution;
use crate::recorder::Recorder;
use tep_model::identity::CallId;
use tep_model::result::{AdditionalContext, ContentBlock, Failure, ToolResult};
use tep_model::session::EventBody;
#[cfg(feature = "mutants")]
use {
    super::extension::{
        ApprovalOutcome, ApprovalRequest, BoxFuture, DispatchCall, ExecuteNext, Named, guarded,
        guarded_sync,
    },
    crate::mutant::Mutant,
    std::collections::BTreeSet,
    std::sync::{Mutex, PoisonError},
    tep_model::session::{ApprovalAsked, ToolCallData},
};

/// The mutants a registry was built with, and the state only they keep.
#[derive(Default)]
pub(super) struct Faults {
    #[cfg(feature = "mutants")]
    mutants: BTreeSet<Mutant>,
    /// A throw that escaped the pipeline (`throw-escapes`).
    #[cfg(feature = "mutants")]
    escaped: Mutex<Option<String>>,
    /// The tools an approval allowed once (`approval-answer-reused`).
    #[cfg(feature = "mutants")]
    allowed_tools: Mutex<BTreeSet<String>>,
}

#[cfg(feature = "mutants")]
impl Faults {
    pub(super) fn new(mutants: BTreeSet<Mutant>) -> Self {
        Faults {
            mutants,
            ..Faults::default()
        }
    }

    fn has(&self, mutant: Mutant) -> bool {
        self.mutants.contains(&mutant)
    }
}

// Printed as the set of mutants, empty without the feature.
#[cfg(feature = "mutants")]
impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.mutants.fmt(f)
    }
}

#[cfg(not(feature = "mutants"))]
impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("{}")
    }
}

// ---------------------------------------------------------------------------------------------
// Decorators, applied when the registry is built.

/// The `tools/pre-execute` listeners in the order they run: as registered
/// (`pre-listeners-reversed`: last registered first).
pub(super) fn pre_listeners(
    faults: &Faults,
    listeners: Vec<Arc<dyn PreExecute>>,
) -> Vec<Arc<dyn PreExecute>> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::PreListenersReversed) {
        return listeners.into_iter().rev().collect();
    }
    listeners
}

/// `ctx.approval` as mounted (`approval-asked-twice`: every ask is put to it twice).
pub(super) fn approval(
    faults: &Faults,
    approval: Option<Arc<dyn Approval>>,
    recorder: &Recorder,
) -> Option<Arc<dyn Approval>> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::ApprovalAskedTwice) {
        return approval.map(|inner| {
            Arc::new(AskedTwice {
                inner,
                recorder: recorder.clone(),
            }) as Arc<dyn Approval>
        });
    }
    approval
}

/// An approval that asks its prompt again, as a harness that re-prompts on a re-render would:
/// the first answer is dropped and the second one counts.
#[cfg(feature = "mutants")]
struct AskedTwice {
    inner: Arc<dyn Approval>,
    recorder: Recorder,
}

#[cfg(feature = "mutants")]
impl Approval for AskedTwice {
    fn request<'a>(
        &'a self,
        request: &'a ApprovalRequest,
    ) -> BoxFuture<'a, Result<ApprovalOutcome, Failure>> {
        Box::pin(async move {
            let _dropped = guarded(self.inner.request(request)).await;
            let id = &request.call_id;
            self.recorder.append(
                Some(id),
                EventBody::ApprovalAsked(ApprovalAsked {
                    id: format!("approval-{id}-again"),
                    tool_name: request.tool_name.clone(),
                    call_id: Some(id.clone()),
                    reason: request.reason.clone(),
                }),
                None,
                None,
            );
            self.inner.request(request).await
        })
    }
}

/// The `tools/execute` wrappers, outermost first (`retry-skips-inner-wrappers`: each retry's
/// `next()` reaches the wrappers inside it the first time only, then the body directly, as a
/// waterfall that keeps one index per run does).
pub(super) fn execute_wrappers(
    faults: &Faults,
    wrappers: Vec<Arc<dyn ExecuteWrapper>>,
) -> Vec<Arc<dyn ExecuteWrapper>> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::RetrySkipsInnerWrappers) {
        return wrappers
            .into_iter()
            .map(|w| {
                if w.id() == "retry" {
                    Arc::new(SkipsInnerOnRedispatch(w)) as Arc<dyn ExecuteWrapper>
                } else {
                    w
                }
            })
            .collect();
    }
    wrappers
}

/// A retry handed a `next()` that runs the wrappers inside it once, then only the body.
#[cfg(feature = "mutants")]
struct SkipsInnerOnRedispatch(Arc<dyn ExecuteWrapper>);

#[cfg(feature = "mutants")]
impl Named for SkipsInnerOnRedispatch {
    fn id(&self) -> &str {
        self.0.id()
    }
}

#[cfg(feature = "mutants")]
impl ExecuteWrapper for SkipsInnerOnRedispatch {
    fn wrap<'a>(
        &'a self,
        call: DispatchCall<'a>,
        next: ExecuteNext<'a>,
    ) -> BoxFuture<'a, Result<ToolResult, Failure>> {
        self.0.wrap(call, next.inner_wrappers_once())
    }
}

// ---------------------------------------------------------------------------------------------
// Dispatch and Settle: the batch driver, the contexts.

/// Whether a call joins the rolling pool: a concurrency-safe one (`exclusive-in-pool`: any).
pub(super) fn joins_pool(faults: &Faults, safe: bool) -> bool {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::ExclusiveInPool) {
        return true;
    }
    safe
}

/// How many bodies of a pool run at once (`pool-cap-ignored`: all of them).
pub(super) fn pool_cap(faults: &Faults, cap: usize) -> usize {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::PoolCapIgnored) {
        return usize::MAX;
    }
    cap
}

/// Whether a call that ended its prepare stages as `prepared` runs its body: `runs`
/// (`run-body-after-deny`: a denied one too).
pub(super) fn runs_body(faults: &Faults, prepared: &Prepared, runs: bool) -> bool {
    #[cfg(feature = "mutants")]
    if matches!(prepared, Prepared::Denied(_)) && faults.has(Mutant::RunBodyAfterDeny) {
        return true;
    }
    runs
}

/// The call committed next: `head`, the head of line once it is ready
/// (`commit-in-completion-order`: the first of the `started` calls that is ready and not
/// committed yet).
pub(super) fn commit_head(
    faults: &Faults,
    head: Option<usize>,
    started: usize,
    ready_uncommitted: impl Fn(usize) -> bool,
) -> Option<usize> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::CommitInCompletionOrder) {
        return (0..started).find(|&i| ready_uncommitted(i));
    }
    head
}

/// The call whose contexts are injected as `outcome` is committed: `injected`, none
/// (`contexts-before-results`: `outcome`'s, right after its own result).
pub(super) fn contexts_on_commit<'a>(
    faults: &Faults,
    outcome: &'a CallOutcome,
    injected: Option<&'a CallOutcome>,
) -> Option<&'a CallOutcome> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::ContextsBeforeResults) {
        return Some(outcome);
    }
    injected
}

/// The outcomes whose contexts are injected once all results are committed, in injection
/// order: `injected`, every one in model order (`contexts-reversed`: last call first;
/// `contexts-before-results`: none, each was injected after its own result).
pub(super) fn contexts_after_all<'a>(
    faults: &Faults,
    injected: Vec<&'a CallOutcome>,
) -> Vec<&'a CallOutcome> {
    #[cfg(feature = "mutants")]
    {
        if faults.has(Mutant::ContextsBeforeResults) {
            return Vec::new();
        }
        if faults.has(Mutant::ContextsReversed) {
            return injected.into_iter().rev().collect();
        }
    }
    injected
}

/// A model call's prepare stages ended (`throw-escapes`: a throw among them escapes the
/// pipeline and the batch is abandoned).
pub(super) fn throw_escapes(faults: &Faults, prepared: &Prepared) {
    #[cfg(feature = "mutants")]
    if let Prepared::Threw(failure) = prepared
        && faults.has(Mutant::ThrowEscapes)
    {
        *faults
            .escaped
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(failure.message.clone());
    }
}

/// What escaped the pipeline: `escaped`, nothing (`throw-escapes`: a throw of the prepare
/// stages).
pub(super) fn escaped(faults: &Faults, escaped: Option<String>) -> Option<String> {
    #[cfg(feature = "mutants")]
    if let Some(thrown) = faults
        .escaped
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
    {
        return Some(thrown);
    }
    escaped
}

/// Whether the batch is abandoned: `abandoned`, never (`throw-escapes`: once a throw escaped).
pub(super) fn batch_abandoned(faults: &Faults, abandoned: bool) -> bool {
    #[cfg(feature = "mutants")]
    if escaped(faults, None).is_some() {
        return true;
    }
    abandoned
}

// ---------------------------------------------------------------------------------------------
// Prepare: the call event, pre-execute, approval, guards.

/// Logs the `tool/call` event, then decides (`late-tool-call`: decides first). Returns the
/// event's `seq` and the decision.
pub(super) async fn tool_call_then<D: Future>(
    faults: &Faults,
    log_call: impl FnOnce() -> u64,
    decide: D,
) -> (u64, D::Output) {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::LateToolCall) {
        let decided = decide.await;
        return (log_call(), decided);
    }
    let seq = log_call();
    (seq, decide.await)
}

/// The call the stages after pre-execute are handed: `later`, the call itself
/// (`pre-rewrites-arguments`: with the arguments a listener's rewrite asked for).
pub(super) fn pre_rewritten(
    faults: &Faults,
    decision: &Result<PreDecision, Failure>,
    later: Execution,
) -> Execution {
    #[cfg(feature = "mutants")]
    if let Ok(PreDecision::Rewrite { arguments }) = decision
        && faults.has(Mutant::PreRewritesArguments)
    {
        return with_arguments(&later, arguments.clone());
    }
    later
}

#[cfg(feature = "mutants")]
fn with_arguments(exec: &Execution, arguments: Value) -> Execution {
    Execution::new(
        exec.token(),
        exec.call_id().clone(),
        exec.root_call_id().clone(),
        exec.name().to_owned(),
        arguments,
        exec.parent(),
    )
}

/// The two stages of an asked call, in the order they run: approval, then the guards
/// (`guards-before-approval`: the guards first, while the ask is unanswered).
pub(super) fn approval_then_guards<S>(faults: &Faults, approval: S, guards: S) -> (S, S) {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::GuardsBeforeApproval) {
        return (guards, approval);
    }
    (approval, guards)
}

/// Whether the guards judge a call the approval prompt allowed once: `judged`, always
/// (`allowed-once-skips-guards`: never, the call goes on to its dispatch).
pub(super) fn guards_after_allowed_once(faults: &Faults, judged: bool) -> bool {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::AllowedOnceSkipsGuards) {
        return false;
    }
    judged
}

/// Whether an ask without `ctx.approval` is allowed: `allowed`, never, it is denied
/// (`absent-approval-allows`: always).
pub(super) fn absent_approval_allows(faults: &Faults, allowed: bool) -> bool {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::AbsentApprovalAllows) {
        return true;
    }
    allowed
}

/// Records an `approval/asked` or `approval/decided` event (`approval-unaudited`: drops it).
pub(super) fn approval_audit(faults: &Faults, record: impl FnOnce()) {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::ApprovalUnaudited) {
        return;
    }
    record();
}

/// Whether an ask for `tool` is answered without asking: `reused`, never
/// (`approval-answer-reused`: once an approval allowed the tool).
pub(super) fn answer_reused(faults: &Faults, tool: &str, reused: bool) -> bool {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::ApprovalAnswerReused) {
        return faults
            .allowed_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(tool);
    }
    reused
}

/// An approval allowed `tool` once (`approval-answer-reused` remembers it).
pub(super) fn answer_given(faults: &Faults, tool: &str) {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::ApprovalAnswerReused) {
        faults
            .allowed_tools
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(tool.to_owned());
    }
}

/// The call the guards judge: `exec` itself (`rewrite-arguments`: with rewritten arguments).
pub(super) fn guard_view<'a>(faults: &Faults, exec: &'a Execution) -> Cow<'a, Execution> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::RewriteArguments) {
        return Cow::Owned(with_arguments(
            exec,
            serde_json::json!({ "rewritten": true }),
        ));
    }
    Cow::Borrowed(exec)
}

/// The denial after a guard's attempt to allow: unchanged, guards are monotonic
/// (`guard-allow-overrides-deny`: undone).
pub(super) fn guard_allow(faults: &Faults, denial: Option<String>) -> Option<String> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::GuardAllowOverridesDeny) {
        return None;
    }
    denial
}

/// The denial after a guard denied: `denied`, the guard's reason (`guard-deny-ignored`: the
/// denial `before` it, unchanged).
pub(super) fn guard_deny(
    faults: &Faults,
    before: Option<String>,
    denied: Option<String>,
) -> Option<String> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::GuardDenyIgnored) {
        return before;
    }
    denied
}

/// Whether a deny ends the consultation of the guards: `stops`, always (`guard-deny-ignored`,
/// `guard-allow-overrides-deny`: later guards are still consulted).
pub(super) fn guards_stop_at_deny(faults: &Faults, stops: bool) -> bool {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::GuardDenyIgnored) || faults.has(Mutant::GuardAllowOverridesDeny) {
        return false;
    }
    stops
}

/// How the guards end after their consultation: a throw if one threw, else the denial if one
/// denied (`guard-throw-denies`: a throw becomes a denial with its message).
pub(super) fn guard_throw(
    faults: &Faults,
    threw: Option<Failure>,
    denial: Option<String>,
) -> (Option<Failure>, Option<String>) {
    #[cfg(feature = "mutants")]
    if let Some(failure) = &threw
        && faults.has(Mutant::GuardThrowDenies)
    {
        return (None, Some(failure.message.clone()));
    }
    (threw, denial)
}

// ---------------------------------------------------------------------------------------------
// Execute: the body.

/// What the wrappers get from a body that ended with `executed`: `seen`, the normalized result
/// (`body-throw-reaches-wrappers`: a failure is recorded as thrown out of the innermost
/// `next()` and handed to the wrappers as `Err`).
pub(super) fn body_throw(
    faults: &Faults,
    executed: &Result<Value, Failure>,
    seen: Result<ToolResult, Failure>,
    record_throw: impl FnOnce(&Failure),
) -> Result<ToolResult, Failure> {
    #[cfg(feature = "mutants")]
    if let Err(failure) = executed
        && faults.has(Mutant::BodyThrowReachesWrappers)
    {
        record_throw(failure);
        return Err(failure.clone());
    }
    seen
}

/// The contexts the body deferred that the dispatch's result carries: all of them
/// (`failure-drops-deferred-contexts`: none when the result is a failure).
pub(super) fn deferred_kept(
    faults: &Faults,
    result: &ToolResult,
    deferred: Vec<String>,
) -> Vec<String> {
    #[cfg(feature = "mutants")]
    if result.is_error && faults.has(Mutant::FailureDropsDeferredContexts) {
        return Vec::new();
    }
    deferred
}

/// Whether the fs gate enforces read-before-edit: `enforced`, always (`edit-without-read`:
/// never).
pub(super) fn read_before_edit(faults: &Faults, enforced: bool) -> bool {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::EditWithoutRead) {
        return false;
    }
    enforced
}

// ---------------------------------------------------------------------------------------------
// Commit, its first stages: post-execute, normalization, finalizeContent.

/// A denial's result: an error (`denial-not-error`: a success).
pub(super) fn denial_result(faults: &Faults, denial: ToolResult) -> ToolResult {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::DenialNotError) {
        return ToolResult {
            is_error: false,
            ..denial
        };
    }
    denial
}

/// Whether post-execute is skipped: `skip`, after a throw only
/// (`post-after-throw`: not after a throw; `skip-post-for-denials`: also for a `denied` call).
pub(super) fn skip_post(faults: &Faults, skip: bool, denied: bool) -> bool {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::PostAfterThrow) || faults.has(Mutant::SkipPostForDenials) {
        return (skip && !faults.has(Mutant::PostAfterThrow))
            || (denied && faults.has(Mutant::SkipPostForDenials));
    }
    skip
}

/// The contexts a post-execute block keeps of the `earlier` ones: `kept`, none
/// (`block-keeps-contexts`: all of them).
pub(super) fn kept_by_block(
    faults: &Faults,
    earlier: Vec<AdditionalContext>,
    kept: Vec<AdditionalContext>,
) -> Vec<AdditionalContext> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::BlockKeepsContexts) {
        return earlier;
    }
    kept
}

/// The `finalizeContent` that runs on `candidate`: the definition's (`finalize-skipped-on-error`:
/// none for an error).
pub(super) fn finalizer<'a, F: ?Sized>(
    faults: &Faults,
    finalizer: Option<&'a F>,
    candidate: &ToolResult,
) -> Option<&'a F> {
    #[cfg(feature = "mutants")]
    if candidate.is_error && faults.has(Mutant::FinalizeSkippedOnError) {
        return None;
    }
    finalizer
}

/// The finalized result, finalized once (`finalize-twice`: `finalize` runs on it again).
pub(super) fn finalize_again(
    faults: &Faults,
    finalized: ToolResult,
    finalize: impl FnOnce(ToolResult) -> ToolResult,
) -> ToolResult {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::FinalizeTwice) {
        return finalize(finalized);
    }
    finalized
}

// ---------------------------------------------------------------------------------------------
// Commit, its last stages: tools/result and tool/result.

/// The outcome `tool/result` records: the frozen one, observers' attempts to change it are
/// ignored (`observer-mutates-outcome`: the last attempt's content replaces it).
pub(super) fn recorded_outcome(
    faults: &Faults,
    observers: &[Arc<dyn ResultObserver>],
    exec: &Execution,
    frozen: &Arc<ToolResult>,
) -> Arc<ToolResult> {
    #[cfg(feature = "mutants")]
    if let Some(amended) = amended_by_observers(faults, observers, exec, frozen) {
        return amended;
    }
    frozen.clone()
}

/// Asks every observer for its change (with the feature they are asked, and ignored, as they
/// always were); with `observer-mutates-outcome`, the outcome the last change makes.
#[cfg(feature = "mutants")]
fn amended_by_observers(
    faults: &Faults,
    observers: &[Arc<dyn ResultObserver>],
    exec: &Execution,
    frozen: &Arc<ToolResult>,
) -> Option<Arc<ToolResult>> {
    let mut recorded = None;
    for observer in observers {
        let amended = guarded_sync(|| Ok(observer.amend(exec, frozen)))
            .ok()
            .flatten();
        if let Some(content) = amended
            && faults.has(Mutant::ObserverMutatesOutcome)
        {
            let base: &ToolResult = recorded.as_deref().unwrap_or(frozen.as_ref());
            recorded = Some(Arc::new(ToolResult {
                content,
                ..base.clone()
            }));
        }
    }
    recorded
}

/// Runs the `tools/result` notification, then records `tool/result` with the outcome it
/// returns (`result-before-notification`: records the frozen outcome first).
pub(super) async fn notify_then_record(
    faults: &Faults,
    frozen: &Arc<ToolResult>,
    notify: impl Future<Output = Arc<ToolResult>>,
    record: impl FnOnce(&Arc<ToolResult>) -> u64,
) {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::ResultBeforeNotification) {
        record(frozen);
        notify.await;
        return;
    }
    let recorded = notify.await;
    record(&recorded);
}

/// The content `tool/result` records: the announced one (`result-differs-from-notification`:
/// with a block added).
pub(super) fn recorded_content(faults: &Faults, content: Vec<ContentBlock>) -> Vec<ContentBlock> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::ResultDiffersFromNotification) {
        let mut content = content;
        content.push(ContentBlock::text("(edited after notification)"));
        return content;
    }
    content
}

// ---------------------------------------------------------------------------------------------
// Code Mode sub-calls.

/// A sub-call waits for its turn in the one lane (`sub-calls-overlap`: it does not wait).
pub(super) async fn sub_call_turn<G>(faults: &Faults, turn: impl Future<Output = G>) -> Option<G> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::SubCallsOverlap) {
        return None;
    }
    Some(turn.await)
}

/// The contexts of a sub-call's `frozen` outcome deferred onto the `run_code` call:
/// `forwarded`, none (`sub-call-contexts-forwarded`: all of them).
pub(super) fn sub_call_contexts(
    faults: &Faults,
    frozen: &ToolResult,
    forwarded: Vec<String>,
) -> Vec<String> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::SubCallContextsForwarded) {
        return frozen
            .additional_contexts
            .iter()
            .map(|context| context.text.clone())
            .collect();
    }
    forwarded
}

/// The `tool/call` event the sub-call `call_id` (of `tool`, with `arguments`) is logged with:
/// `logged`, none, its dispatch events log it (`sub-call-logs-tool-call`: one, as if the model
/// had called it).
pub(super) fn sub_call_tool_call(
    faults: &Faults,
    call_id: &CallId,
    tool: &str,
    arguments: &str,
    logged: Option<EventBody>,
) -> Option<EventBody> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::SubCallLogsToolCall) {
        return Some(EventBody::ToolCall(ToolCallData {
            turn: 1,
            step: 1,
            call_id: call_id.clone(),
            name: tool.to_owned(),
            arguments: arguments.to_owned(),
        }));
    }
    logged
}

/// Records a sub-call's `tool/code-dispatch` event (`no-dispatch-event`: drops it).
pub(super) fn dispatch_log(faults: &Faults, record: impl FnOnce()) {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::NoDispatchEvent) {
        return;
    }
    record();
}

/// The fields beyond the tool name and message a rejected binding hands the program: `details`,
/// none (`rejection-leaks-fields`: the sub-call's content too).
pub(super) fn rejection_details(
    faults: &Faults,
    details: BTreeMap<String, Value>,
    frozen: &ToolResult,
) -> BTreeMap<String, Value> {
    #[cfg(feature = "mutants")]
    if faults.has(Mutant::RejectionLeaksFields) {
        let mut details = details;
        details.insert(
            "content".to_owned(),
            serde_json::to_value(&frozen.content).unwrap_or_default(),
        );
        return details;
    }
    details
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_module_docs_say_where_every_mutant_lives() {
        let docs = include_str!("faults.rs");
        for mutant in crate::mutant::Mutant::ALL {
            let row = format!("//! | `{}` |", mutant.name());
            assert!(
                docs.contains(&row),
                "no row for {mutant} in the faults docs"
            );
        }
    }

    /// Each seam of a row is called (`faults::seam(`) from one of the row's stage files, so the
    /// table follows the stage modules when they move.
    #[test]
    fn the_table_names_the_files_that_call_each_seam() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let quoted = |cell: &str| -> Vec<String> {
            cell.split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .collect()
        };
        let mut rows = 0;
        for line in include_str!("faults.rs").lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let [_, mutant, _, seams, stages, _] = cells[..] else {
                continue;
            };
            if !line.starts_with("//! | `") {
                continue;
            }
            rows += 1;
            let texts: Vec<String> = quoted(stages)
                .iter()
                .map(|file| {
                    let path = [src.join("pipeline").join(file), src.join(file)]
                        .into_iter()
                        .find(|p| p.is_file())
                        .unwrap_or_else(|| panic!("{mutant}: no stage file {file}"));
                    std::fs::read_to_string(path).unwrap_or_default()
                })
                .collect();
            for seam in quoted(seams) {
                if !seams.contains(&format!("[`{seam}`]")) {
                    continue; // not a seam of this module (`TimeoutWrapper::abandoning`)
                }
                let call = format!("faults::{seam}(");
                assert!(
                    texts.iter().any(|t| t.contains(&call)),
                    "{mutant}: no stage file of its row calls {call}"
                );
            }
        }
        assert_eq!(rows, crate::mutant::Mutant::ALL.len());
    }

    /// The seams whose tail is not a parameter as it came, and why each is still the identity.
    const SHAPED_TAILS: &[(&str, &str)] = &[
        // Runs the stage's two steps in the order the stage hands them.
        ("tool_call_then", "(seq, decide.await)"),
        // Borrows the call the stage hands it.
        ("guard_view", "Cow::Borrowed(exec)"),
        // The frozen outcome itself (a shared pointer to it).
        ("recorded_outcome", "frozen.clone()"),
        // Waits for the turn the stage hands it.
        ("sub_call_turn", "Some(turn.await)"),
    ];

    /// Without its mutant a seam returns what the stage handed it: the spec's value is written
    /// in the stage code, never here. So the tail of a seam that returns a value is one of its
    /// parameters (or a tuple of them), never a value of its own (`true`, `None`,
    /// `Some(reason)`).
    #[test]
    fn every_seam_returns_the_value_the_stage_hands_it() {
        let source = include_str!("faults.rs");
        let source = &source[..source.find("#[cfg(test)]").unwrap_or(source.len())];
        let (mut seams, mut own_values) = (0, Vec::new());
        for (start, _) in source.match_indices("\npub(super) ") {
            let item = &source[start + 1..];
            let Some(fn_at) = item.lines().next().and_then(|l| l.find(" fn ")) else {
                continue;
            };
            let Some(open) = item[fn_at..].find('(').map(|i| fn_at + i) else {
                continue;
            };
            let name = item[fn_at + 4..open].split('<').next().unwrap_or_default();
            let close = balanced(item, open);
            let parameters: Vec<&str> = split_top_level(&item[open + 1..close])
                .into_iter()
                .filter_map(|p| p.split(':').next().map(str::trim))
                .collect();
            let body = &item[close..item.find("\n}\n").unwrap_or(item.len())];
            let tail = body.lines().last().unwrap_or_default().trim();
            if tail.ends_with(';') || tail.ends_with('}') || tail.is_empty() {
                continue; // no value: a step seam or a mutant's state
            }
            seams += 1;
            let names = tail.trim_start_matches('(').trim_end_matches(')');
            let plain = names.split(", ").all(|n| parameters.contains(&n));
            if !plain && !SHAPED_TAILS.contains(&(name, tail)) {
                own_values.push(format!("{name} returns `{tail}`"));
            }
        }
        assert!(seams > 30, "found {seams} seams");
        assert!(
            own_values.is_empty(),
            "seams that return a value of their own without their mutant, not one the stage \
             handed them (write the spec's value in the stage code):\n{}",
            own_values.join("\n")
        );
    }

    /// The index of the parenthesis closing the one at `open`.
    fn balanced(text: &str, open: usize) -> usize {
        let mut depth = 0;
        for (i, c) in text.char_indices().skip(open) {
            match c {
                '(' | '<' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '>' if !text[..i].ends_with('-') => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                return i;
            }
        }
        text.len()
    }

    /// `text` split at the commas outside any brackets.
    fn split_top_level(text: &str) -> Vec<&str> {
        let (mut parts, mut depth, mut from) = (Vec::new(), 0i32, 0);
        for (i, c) in text.char_indices() {
            match c {
                '(' | '<' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                '>' if !text[..i].ends_with('-') => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&text[from..i]);
                    from = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&text[from..]);
        parts
    }
}
