//! Deliberate breakages of the reference pipeline.
//!
//! A conformance suite is only as good as the bugs it catches. Each mutant breaks exactly one
//! documented guarantee; `tep reference-adapter --mutant NAME` runs the reference with it so the
//! suite can be run against a known-broken implementation (the end-to-end tests require every
//! mutant to be caught, with the invariant it breaks). Without a mutant the reference is correct.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

macro_rules! mutants {
    ($( $(#[doc = $doc:literal])* $variant:ident = $name:literal, )*) => {
        /// A deliberate breakage (see the module docs).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum Mutant {
            $( $(#[doc = $doc])* $variant, )*
        }

        impl Mutant {
            /// Every mutant.
            pub const ALL: &'static [Mutant] = &[$(Mutant::$variant),*];

            /// The kebab-case name used on the command line.
            pub fn name(self) -> &'static str {
                match self { $(Mutant::$variant => $name,)* }
            }

            /// What the mutant breaks, in one sentence.
            pub fn description(self) -> &'static str {
                match self { $(Mutant::$variant => concat!($($doc),*).trim_ascii(),)* }
            }
        }
    };
}

mutants! {
    /// A denied call still runs its tool body.
    RunBodyAfterDeny = "run-body-after-deny",
    /// A denied call skips `tools/post-execute`.
    SkipPostForDenials = "skip-post-for-denials",
    /// `tools/post-execute` runs after a throw.
    PostAfterThrow = "post-after-throw",
    /// Results are committed in the order the bodies finish, not in model order.
    CommitInCompletionOrder = "commit-in-completion-order",
    /// Each call's contexts are injected right after its own result.
    ContextsBeforeResults = "contexts-before-results",
    /// Contexts are injected last call first.
    ContextsReversed = "contexts-reversed",
    /// Guards run while an ask is still unanswered, before approval.
    GuardsBeforeApproval = "guards-before-approval",
    /// A guard's deny is recorded but the call goes on.
    GuardDenyIgnored = "guard-deny-ignored",
    /// `finalizeContent` is called twice.
    FinalizeTwice = "finalize-twice",
    /// The `tool/result` event is appended before the `tools/result` notification.
    ResultBeforeNotification = "result-before-notification",
    /// The recorded `tool/result` differs from the outcome `tools/result` announced.
    ResultDiffersFromNotification = "result-differs-from-notification",
    /// Calls that are not concurrency-safe join the parallel pool.
    ExclusiveInPool = "exclusive-in-pool",
    /// The `tool/call` event is logged after pre-execute.
    LateToolCall = "late-tool-call",
    /// A post-execute block keeps the tool-deferred and wrapper contexts.
    BlockKeepsContexts = "block-keeps-contexts",
    /// The fs gate lets an edit through without a read of the current version.
    EditWithoutRead = "edit-without-read",
    /// Guards are handed rewritten arguments.
    RewriteArguments = "rewrite-arguments",
    /// A missing approval lets an asked call run.
    AbsentApprovalAllows = "absent-approval-allows",
    /// A denial is recorded as a success.
    DenialNotError = "denial-not-error",
    /// Code Mode sub-calls run side by side instead of one at a time.
    SubCallsOverlap = "sub-calls-overlap",
    /// Code Mode sub-call contexts are forwarded to the `run_code` call.
    SubCallContextsForwarded = "sub-call-contexts-forwarded",
    /// Code Mode sub-calls are not logged as `tool/code-dispatch`.
    NoDispatchEvent = "no-dispatch-event",
    /// Guards are consulted after a deny, and a later guard's allow undoes it.
    GuardAllowOverridesDeny = "guard-allow-overrides-deny",
    /// An observer's change to the announced outcome reaches the recorded `tool/result`.
    ObserverMutatesOutcome = "observer-mutates-outcome",
    /// A pre-execute listener's rewritten arguments are handed to the later stages.
    PreRewritesArguments = "pre-rewrites-arguments",
    /// The timeout wrapper returns at its deadline without waiting for the body to stop.
    TimeoutAbandonsBody = "timeout-abandons-body",
    /// A body's throw reaches the `tools/execute` wrappers as a throw.
    BodyThrowReachesWrappers = "body-throw-reaches-wrappers",
    /// Approval prompts are answered without `approval/asked` and `approval/decided`.
    ApprovalUnaudited = "approval-unaudited",
    /// A rejected binding hands the program the sub-call's content too.
    RejectionLeaksFields = "rejection-leaks-fields",
    /// A pre-execute throw escapes the pipeline instead of being normalized.
    ThrowEscapes = "throw-escapes",
    /// `finalizeContent` is skipped when the candidate is an error.
    FinalizeSkippedOnError = "finalize-skipped-on-error",
    /// The parallel pool ignores its cap: every concurrency-safe call of a run executes at once.
    PoolCapIgnored = "pool-cap-ignored",
    /// The approval prompt is asked twice for one ask.
    ApprovalAskedTwice = "approval-asked-twice",
    /// A tool allowed once is allowed again, without asking, for every later ask.
    ApprovalAnswerReused = "approval-answer-reused",
    /// Pre-execute listeners run last registered first.
    PreListenersReversed = "pre-listeners-reversed",
    /// A retry's second `next()` goes straight to the body, past the wrappers inside the retry.
    RetrySkipsInnerWrappers = "retry-skips-inner-wrappers",
    /// A call the approval prompt allowed once goes on to its dispatch without the guards.
    AllowedOnceSkipsGuards = "allowed-once-skips-guards",
    /// A guard's throw is taken for a deny with its message.
    GuardThrowDenies = "guard-throw-denies",
    /// The contexts a body deferred are dropped when it fails.
    FailureDropsDeferredContexts = "failure-drops-deferred-contexts",
    /// A Code Mode sub-call is also logged as a `tool/call`, as a model's call is.
    SubCallLogsToolCall = "sub-call-logs-tool-call",
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for a mutant name that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown mutant `{0}`{hint} (run `tep mutants`)",
    hint = tep_model::suggest::hint(&self.0, Mutant::ALL.iter().map(|m| m.name()))
)]
pub struct UnknownMutant(pub String);

impl FromStr for Mutant {
    type Err = UnknownMutant;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mutant::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMutant(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_describe() {
        for &m in Mutant::ALL {
            assert_eq!(m.name().parse::<Mutant>(), Ok(m));
            assert!(!m.description().is_empty());
        }
        assert!("nope".parse::<Mutant>().is_err());
    }
}
