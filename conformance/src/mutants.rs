//! What each mutant of the reference breaks: the suite's expectation of `tep run --mutant`.
//!
//! The planted breaches of a trace (the checker's teeth) are `tep_check::mutation`'s; this
//! table is about the reference pipeline, so it lives on the drive side.

use tep_check::invariants::InvariantId;
use tep_reference::mutant::Mutant;

/// What a mutant of the reference breaks: the invariant named by the guarantee it breaks first,
/// then any other guarantee its one fault also breaks (each reported under its own id). The
/// suite must report a mutant under exactly these invariants.
pub fn breaks(mutant: Mutant) -> &'static [InvariantId] {
    use InvariantId as I;
    match mutant {
        Mutant::RunBodyAfterDeny => &[I::DenySkipsBody],
        Mutant::SkipPostForDenials => &[I::DenialReachesPost],
        Mutant::PostAfterThrow => &[I::ThrowSkipsPost],
        // Committing in completion order also injects the contexts in that order.
        Mutant::CommitInCompletionOrder => &[I::ModelOrderCommit, I::ContextsFifo],
        Mutant::ContextsBeforeResults => &[I::ContextsAfterAllResults],
        Mutant::ContextsReversed => &[I::ContextsFifo],
        // Guards that run before approval also take the approval out of its place, leave none
        // after its allow, and when they deny, the ask is never put to the prompt at all.
        Mutant::GuardsBeforeApproval => &[
            I::GuardsOnlyAfterAllow,
            I::ApprovalOnlyAfterAsk,
            I::ApprovalOnce,
            I::ApprovalAudited,
            I::AllowReachesGuards,
        ],
        Mutant::GuardDenyIgnored => &[I::GuardDenyBinds],
        Mutant::FinalizeTwice => &[I::FinalizeOnce],
        Mutant::ResultBeforeNotification => &[I::NotificationBeforeResult],
        Mutant::ResultDiffersFromNotification => &[I::FrozenOutcome],
        // Exclusive calls in a pool both overlap bodies and break the barrier.
        Mutant::ExclusiveInPool => &[I::OnlySafeBodiesOverlap, I::ExclusiveBarrier],
        Mutant::LateToolCall => &[I::ToolCallFirst],
        Mutant::BlockKeepsContexts => &[I::BlockDropsContexts],
        Mutant::EditWithoutRead => &[I::ReadBeforeEdit],
        Mutant::RewriteArguments => &[I::IdentityUnchanged],
        Mutant::AbsentApprovalAllows => &[I::ApprovalAbsentDenies],
        Mutant::DenialNotError => &[I::DenialIsError],
        Mutant::SubCallsOverlap => &[I::SubCallsSerialized],
        Mutant::SubCallContextsForwarded => &[I::SubCallContextsOmitted],
        Mutant::NoDispatchEvent => &[I::SubCallLogsDispatch],
        Mutant::GuardAllowOverridesDeny => &[I::GuardDenyBinds],
        Mutant::ObserverMutatesOutcome => &[I::FrozenOutcome],
        Mutant::PreRewritesArguments => &[I::IdentityUnchanged],
        Mutant::TimeoutAbandonsBody => &[I::BodySettlesBeforeCommit],
        Mutant::BodyThrowReachesWrappers => &[I::BodyThrowIsAResult],
        Mutant::ApprovalUnaudited => &[I::ApprovalAudited],
        Mutant::RejectionLeaksFields => &[I::RejectionIsToolCallError],
        Mutant::ThrowEscapes => &[I::ThrowIsNormalized],
        Mutant::FinalizeSkippedOnError => &[I::FinalizeOnce],
        Mutant::PoolCapIgnored => &[I::PoolCap],
        Mutant::ApprovalAskedTwice => &[I::ApprovalOnce],
        // The reused answer is not audited either.
        Mutant::ApprovalAnswerReused => &[I::ApprovalOnce, I::ApprovalAudited],
        // The trace says which listeners pre-execute entered; the scenario, their registration.
        Mutant::PreListenersReversed => &[I::WaterfallRegistrationOrder],
        Mutant::RetrySkipsInnerWrappers => &[I::RedispatchThroughWrappers],
        Mutant::AllowedOnceSkipsGuards => &[I::AllowReachesGuards],
        Mutant::GuardThrowDenies => &[I::GuardThrowIsNormalized],
        Mutant::FailureDropsDeferredContexts => &[I::DeferredContextsSurviveAThrow],
        Mutant::SubCallLogsToolCall => &[I::SubCallLogsNoCallOrResult],
    }
}
