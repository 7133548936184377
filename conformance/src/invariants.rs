//! The documented ordering invariants, as data.
//!
//! Each invariant has a stable id, a level (MUST for what the doc states, SHOULD for what only
//! the reference semantics pin down), one sentence, where it comes from (words of the doc, an
//! edge of the flowchart, numbered items of `spec/reference-semantics.md`), the revisions it
//! applies to, the optional capability it needs, and how the checker checks it.
//! `docs/invariants.md` is generated from [`CATALOG`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tep_reference::graph::{NodeId, Revision};
use tep_reference::trace::Capability;

macro_rules! invariant_ids {
    ($( $variant:ident = $id:literal, )*) => {
        /// The stable id of an invariant.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        pub enum InvariantId {
            $( #[serde(rename = $id)] $variant, )*
        }

        impl InvariantId {
            /// Every id, in catalog order.
            pub const ALL: &'static [InvariantId] = &[$(InvariantId::$variant),*];

            pub fn as_str(self) -> &'static str {
                match self { $(InvariantId::$variant => $id,)* }
            }
        }
    };
}

invariant_ids! {
    StageGraphWalk = "stage-graph-walk",
    ToolCallFirst = "tool-call-first",
    ToolCallOnce = "tool-call-once",
    PreExecuteOnce = "pre-execute-once",
    ApprovalOnlyAfterAsk = "approval-only-after-ask",
    GuardsOnlyAfterAllow = "guards-only-after-allow",
    GuardDenyBinds = "guard-deny-binds",
    DenySkipsBody = "deny-skips-body",
    DenialReachesPost = "denial-reaches-post",
    DenialIsError = "denial-is-error",
    ThrowSkipsPost = "throw-skips-post",
    ThrowIsNormalized = "throw-is-normalized",
    ThrowIsError = "throw-is-error",
    BodyInsideExecute = "body-inside-execute",
    FsGateInsideBody = "fs-gate-inside-body",
    ReadBeforeEdit = "read-before-edit",
    OwnedEventsInsideBody = "owned-events-inside-body",
    IdentityUnchanged = "identity-unchanged",
    FinalizeOnce = "finalize-once",
    FinalizeBeforeNotification = "finalize-before-notification",
    FinalizeContentOnly = "finalize-content-only",
    NotificationBeforeResult = "notification-before-result",
    NotificationSynchronous = "notification-synchronous",
    NotificationAwaited = "notification-awaited",
    FrozenOutcome = "frozen-outcome",
    OneResultPerCall = "one-result-per-call",
    NoStageAfterResult = "no-stage-after-result",
    ResultNamesItsCall = "result-names-its-call",
    ToolResultMessageShape = "tool-result-message-shape",
    ToolResultFlatShape = "tool-result-flat-shape",
    ModelOrderStart = "model-order-start",
    OrderedStagesSerial = "ordered-stages-serial",
    ModelOrderCommit = "model-order-commit",
    OnlySafeBodiesOverlap = "only-safe-bodies-overlap",
    ExclusiveBarrier = "exclusive-barrier",
    BatchSettles = "batch-settles",
    ContextsAfterAllResults = "contexts-after-all-results",
    ContextsFifo = "contexts-fifo",
    ContextOriginOrder = "context-origin-order",
    BlockDropsContexts = "block-drops-contexts",
    ContextsAsUserMessages = "contexts-as-user-messages",
    ContextsAsContextMessages = "contexts-as-context-messages",
    ApprovalAudited = "approval-audited",
    UiPresentsEachCall = "ui-presents-each-call",
    SessionSeqIncreasing = "session-seq-increasing",
    RunCodeReserved = "run-code-reserved",
    CodeDispatchInsideBody = "code-dispatch-inside-body",
    SubCallsSerialized = "sub-calls-serialized",
    SubCallCarriesParentToken = "sub-call-carries-parent-token",
    SubCallIdScheme = "sub-call-id-scheme",
    SubCallStartLogged = "sub-call-start-logged",
    SubCallLogsDispatch = "sub-call-logs-dispatch",
    BindingSettles = "binding-settles",
    SubCallContextsOmitted = "sub-call-contexts-omitted",
    DispatchNotModelFacing = "dispatch-not-model-facing",
    CodeDispatchContentShape = "code-dispatch-content-shape",
    CodeDispatchSummaryShape = "code-dispatch-summary-shape",
    ExpectedOutcome = "expected-outcome",
    ExpectedContent = "expected-content",
}

impl fmt::Display for InvariantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for an invariant id that does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown invariant `{0}` (run `tep invariants list`)")]
pub struct UnknownInvariant(pub String);

impl FromStr for InvariantId {
    type Err = UnknownInvariant;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        InvariantId::ALL
            .iter()
            .copied()
            .find(|i| i.as_str() == s)
            .ok_or_else(|| UnknownInvariant(s.to_owned()))
    }
}

/// RFC 2119 strength.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "UPPERCASE")]
pub enum Level {
    /// Stated by the doc (its words or its flowchart). A violation fails conformance.
    Must,
    /// Pinned down only by the reference semantics where the doc is silent. A violation is
    /// reported as a warning unless `--strict`.
    Should,
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
        })
    }
}

/// Where an invariant comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Words of the doc, verbatim, from the latest revision the invariant applies to (a test
    /// checks they occur there).
    Doc(&'static str),
    /// An edge of the flowchart.
    Edge(NodeId, NodeId),
    /// Numbered items of `spec/reference-semantics.md`.
    Semantics(&'static [u32]),
    /// The scenario's own scripts (drive mode only).
    Scenario,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Doc(words) => write!(f, "doc: \u{201c}{words}\u{201d}"),
            Source::Edge(from, to) => write!(f, "flowchart edge {from} \u{2192} {to}"),
            Source::Semantics(items) => {
                let items: Vec<String> = items.iter().map(u32::to_string).collect();
                write!(f, "reference semantics {}", items.join(", "))
            }
            Source::Scenario => f.write_str("the scenario's scripts"),
        }
    }
}

/// When in a trace an invariant is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckKind {
    /// At each stage visit of a call: a transition the graph does not allow, classified.
    Step,
    /// At a particular stage visit, against what the call recorded so far.
    Stage,
    /// Across the calls of a batch, at each visit.
    Batch,
    /// When a batch closes (at the next `model` or the end of the trace).
    BatchEnd,
    /// After the run, against the scenario's expectations (drive mode).
    Expectation,
}

impl CheckKind {
    pub fn describe(self) -> &'static str {
        match self {
            CheckKind::Step => {
                "at every stage visit of the call, as a step the graph does not allow"
            }
            CheckKind::Stage => "at the stage visit named, against what the call recorded earlier",
            CheckKind::Batch => "across the calls of a batch, at every visit",
            CheckKind::BatchEnd => "when the batch closes",
            CheckKind::Expectation => "after a scenario run, against its expected outcome",
        }
    }
}

/// One documented invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invariant {
    pub id: InvariantId,
    pub level: Level,
    pub statement: &'static str,
    pub sources: &'static [Source],
    /// The first revision the invariant applies to.
    pub since: Revision,
    /// The last revision it applies to, if it was dropped later.
    pub until: Option<Revision>,
    /// The capability an implementation needs for the invariant to apply.
    pub requires: Option<Capability>,
    pub check: CheckKind,
}

impl Invariant {
    pub fn applies_to(&self, revision: Revision) -> bool {
        revision >= self.since && self.until.is_none_or(|u| revision <= u)
    }

    /// The anchor of the invariant in `docs/invariants.md`.
    pub fn doc_link(&self) -> String {
        format!("docs/invariants.md#{}", self.id)
    }

    /// The revisions it applies to, as `rev1, rev2`.
    pub fn revisions(&self) -> Vec<Revision> {
        Revision::ALL
            .into_iter()
            .filter(|&r| self.applies_to(r))
            .collect()
    }
}

/// The catalog entry of `id`.
pub fn invariant(id: InvariantId) -> &'static Invariant {
    // Every id has an entry (tests::catalog_is_complete); the fallback is never taken.
    CATALOG.iter().find(|i| i.id == id).unwrap_or(&CATALOG[0])
}

use CheckKind::*;
use InvariantId as I;
use Level::*;
use NodeId as N;
use Source::*;

const fn inv(
    id: InvariantId,
    level: Level,
    statement: &'static str,
    sources: &'static [Source],
    check: CheckKind,
) -> Invariant {
    Invariant {
        id,
        level,
        statement,
        sources,
        since: Revision::Rev1,
        until: None,
        requires: None,
        check,
    }
}

const fn rev2(mut i: Invariant) -> Invariant {
    i.since = Revision::Rev2;
    i
}

const fn rev1_only(mut i: Invariant) -> Invariant {
    i.until = Some(Revision::Rev1);
    i
}

const fn needs(mut i: Invariant, capability: Capability) -> Invariant {
    i.requires = Some(capability);
    i
}

/// Every invariant, in the order the docs list them.
pub const CATALOG: &[Invariant] = &[
    inv(
        I::StageGraphWalk,
        Must,
        "Each call's stage visits follow edges of the stage graph, and the outcome a stage ends with selects the labeled edge taken next.",
        &[Doc("Tool Execution Pipeline")],
        Step,
    ),
    inv(
        I::ToolCallFirst,
        Must,
        "The `tool/call` session event is logged before any other stage of its call.",
        &[
            Doc("logged before execution"),
            Edge(N::Model, N::ToolCall),
            Edge(N::ToolCall, N::Pre),
            Semantics(&[4]),
        ],
        Step,
    ),
    inv(
        I::ToolCallOnce,
        Must,
        "A call is logged once: there is one `tool/call` per call id.",
        &[Doc("logged before execution"), Semantics(&[4])],
        Step,
    ),
    inv(
        I::PreExecuteOnce,
        Must,
        "`tools/pre-execute` runs once per call, right after its `tool/call`.",
        &[Edge(N::ToolCall, N::Pre), Semantics(&[41])],
        Step,
    ),
    inv(
        I::ApprovalOnlyAfterAsk,
        Must,
        "`ctx.approval` is consulted only when pre-execute decided `ask`.",
        &[Edge(N::Pre, N::Approval), Semantics(&[17])],
        Step,
    ),
    inv(
        I::GuardsOnlyAfterAllow,
        Must,
        "Guards run only after a final allow: pre-execute `allow`, or approval `allowed-once`; approval resolves an ask before the guards.",
        &[
            Doc("`ctx.approval` resolves asks before monotonic guards"),
            Edge(N::Pre, N::Guards),
            Edge(N::Approval, N::Guards),
            Semantics(&[19]),
        ],
        Step,
    ),
    inv(
        I::GuardDenyBinds,
        Must,
        "Guards are monotonic: when a guard denies, the call is denied with the first guard's reason, whatever any listener decided.",
        &[
            Doc("deny or abstain; identity protected"),
            Doc("owner policy that must not be reordered remains a registered guard"),
            Semantics(&[20]),
        ],
        Stage,
    ),
    inv(
        I::DenySkipsBody,
        Must,
        "After a denial (pre-execute `deny`, an approval refused or absent, a guard's deny) neither `tools/execute` nor the tool body runs for that call.",
        &[Doc("tool body skipped"), Semantics(&[22])],
        Step,
    ),
    inv(
        I::DenialReachesPost,
        Must,
        "A denied call still runs `tools/post-execute`, which is handed the denial.",
        &[Edge(N::Denied, N::Post), Semantics(&[22])],
        Step,
    ),
    inv(
        I::DenialIsError,
        Must,
        "The outcome of a denied call is an error (`isError: true`).",
        &[Doc("denied or approval refused"), Semantics(&[22])],
        Stage,
    ),
    rev2(inv(
        I::ThrowSkipsPost,
        Must,
        "After a throw (pre-execute, approval, a guard, a wrapper or post-execute itself) `tools/post-execute` does not run.",
        &[
            Edge(N::Pre, N::Normalized),
            Edge(N::Around, N::Normalized),
            Semantics(&[23, 28, 35]),
        ],
        Step,
    )),
    rev2(inv(
        I::ThrowIsNormalized,
        Must,
        "A throw is caught by the registry's outer normalization before finalization: nothing escapes the pipeline.",
        &[
            Doc("pipeline/result snapshot throws become isError"),
            Edge(N::Normalized, N::Finalize),
            Semantics(&[23, 42]),
        ],
        Step,
    )),
    rev2(inv(
        I::ThrowIsError,
        Must,
        "A normalized throw ends as an error outcome (`isError: true`).",
        &[Doc("throws become isError"), Semantics(&[42])],
        Stage,
    )),
    inv(
        I::BodyInsideExecute,
        Must,
        "The tool body runs only when dispatched by the `tools/execute` waterfall, and returns to it.",
        &[
            Doc("Around-dispatch concerns such as timeouts wrap `tools/execute`"),
            Edge(N::Around, N::ToolBody),
            Edge(N::ToolBody, N::Around),
            Semantics(&[25]),
        ],
        Step,
    ),
    needs(
        inv(
            I::FsGateInsideBody,
            Must,
            "`fs/write-intent` and `fs/edit-intent` are gated only while a tool body runs, and the body resumes after the gate.",
            &[
                Doc("tool-fs mutations only"),
                Edge(N::ToolBody, N::FsGate),
                Edge(N::FsGate, N::ToolBody),
            ],
            Step,
        ),
        Capability::FsGate,
    ),
    needs(
        inv(
            I::ReadBeforeEdit,
            Must,
            "The fs gate lets a mutation of an existing file through only if the agent observed the file (`fs/observed`) at its current version.",
            &[Doc(
                "Filesystem read-before-edit checks stay below `tool-fs` on `fs/*` events",
            )],
            Stage,
        ),
        Capability::FsGate,
    ),
    needs(
        inv(
            I::OwnedEventsInsideBody,
            Must,
            "Tool-owned session events (`todo/write`, `fs/observed`, `hook/invoked`, `hook/result`, `tool/code-dispatch`) are recorded only while the tool body runs.",
            &[
                Doc("Tool-owned session events"),
                Edge(N::ToolBody, N::Owned),
            ],
            Step,
        ),
        Capability::OwnedEvents,
    ),
    inv(
        I::IdentityUnchanged,
        Must,
        "Every stage of a call is handed the same identity: one token, the call id, the tool name and the arguments the model sent.",
        &[Doc("identity protected"), Semantics(&[21])],
        Stage,
    ),
    rev2(inv(
        I::FinalizeOnce,
        Must,
        "`finalizeContent` is called exactly once per call, after post-execute or normalization.",
        &[Doc("ToolDefinition.finalizeContent"), Semantics(&[37])],
        Step,
    )),
    rev2(inv(
        I::FinalizeBeforeNotification,
        Must,
        "`finalizeContent` runs before the `tools/result` notification.",
        &[
            Doc("Definition-owned `finalizeContent` and `tools/result` run afterward"),
            Edge(N::Finalize, N::Final),
        ],
        Step,
    )),
    rev2(inv(
        I::FinalizeContentOnly,
        Must,
        "`finalizeContent` changes content only: the announced outcome equals its candidate in everything but content, unless the callback itself failed.",
        &[
            Doc("enforces its synchronous content-only invariant"),
            Semantics(&[37]),
        ],
        Stage,
    )),
    inv(
        I::NotificationBeforeResult,
        Must,
        "The `tools/result` notification precedes the call's `tool/result` session event.",
        &[Edge(N::Final, N::ToolResult), Semantics(&[8])],
        Step,
    ),
    rev2(inv(
        I::NotificationSynchronous,
        Must,
        "`tools/result` is a synchronous notification: recording `tool/result` does not wait for an observer's asynchronous work.",
        &[Doc("synchronous notification"), Semantics(&[39])],
        Stage,
    )),
    rev1_only(inv(
        I::NotificationAwaited,
        Must,
        "`tools/result` is a parallel notification: the observers' work is awaited before `tool/result` is recorded.",
        &[
            Doc("parallel notification"),
            Doc("The awaited `tools/result` notification"),
        ],
        Stage,
    )),
    inv(
        I::FrozenOutcome,
        Must,
        "The `tool/result` event records exactly the outcome `tools/result` announced: content, `isError` and error code.",
        &[Doc("frozen authoritative outcome"), Semantics(&[39])],
        Stage,
    ),
    inv(
        I::OneResultPerCall,
        Must,
        "Every call of the batch gets exactly one `tools/result` notification and one `tool/result` event.",
        &[Doc("single model-facing outcome"), Semantics(&[40])],
        Step,
    ),
    inv(
        I::NoStageAfterResult,
        Must,
        "After a call's `tool/result` only its completed card and its injected contexts follow; no stage of it runs again.",
        &[
            Doc("single model-facing outcome"),
            Edge(N::ToolResult, N::AllResults),
        ],
        Step,
    ),
    inv(
        I::ResultNamesItsCall,
        Should,
        "A `tool/result` names its call and the `tool/call` event it answers (`sourceEventSeqs: [callSeq]`).",
        &[Semantics(&[8])],
        Stage,
    ),
    rev2(inv(
        I::ToolResultMessageShape,
        Should,
        "The `tool/result` data is `{turn, step, message: ToolResultMessage, error?, meta?}`.",
        &[Semantics(&[8])],
        Stage,
    )),
    rev1_only(inv(
        I::ToolResultFlatShape,
        Should,
        "The rev1 `tool/result` data is the flat `{callId, content, isError, error?, meta?}`.",
        &[Semantics(&[8])],
        Stage,
    )),
    inv(
        I::ModelOrderStart,
        Must,
        "Calls start (`tool/call`) in model order.",
        &[
            Doc("Assistant message contains tool-call block"),
            Semantics(&[4, 5]),
        ],
        Batch,
    ),
    inv(
        I::OrderedStagesSerial,
        Must,
        "Ordered stages never interleave between calls: once a call's prepare stages (`tool/call` to the decision) or commit stages (post-execute to `tool/result`) begin, no other call's ordered stage runs until they end.",
        &[Semantics(&[5])],
        Batch,
    ),
    inv(
        I::ModelOrderCommit,
        Must,
        "Calls commit in model order: a call's commit stages begin only after every earlier call's `tool/result`, however the bodies finish.",
        &[Doc("recorded tool/result events complete"), Semantics(&[7])],
        Batch,
    ),
    needs(
        inv(
            I::OnlySafeBodiesOverlap,
            Must,
            "Only tool bodies of concurrency-safe calls overlap; the body of any other call runs while no other body runs.",
            &[Semantics(&[2, 3, 5])],
            Batch,
        ),
        Capability::Parallel,
    ),
    inv(
        I::ExclusiveBarrier,
        Should,
        "A call that is not concurrency-safe is a barrier: it starts after every earlier call's result, and nothing of another call happens until its own result.",
        &[Semantics(&[2])],
        Batch,
    ),
    inv(
        I::BatchSettles,
        Must,
        "The batch settles (`allResults`) exactly once, after every call's `tool/result`.",
        &[
            Doc("Tool batch settled"),
            Edge(N::ToolResult, N::AllResults),
        ],
        BatchEnd,
    ),
    inv(
        I::ContextsAfterAllResults,
        Must,
        "Additional contexts are injected only after every result of the batch is recorded.",
        &[
            Doc("after recorded tool results"),
            Edge(N::AllResults, N::Context),
            Semantics(&[9]),
        ],
        Step,
    ),
    inv(
        I::ContextsFifo,
        Must,
        "The injected contexts are exactly the announced outcomes' `additionalContexts`, in call order and in each call's order: none lost, none invented.",
        &[
            Doc("Active-batch additionalContexts FIFO"),
            Semantics(&[8, 9]),
        ],
        BatchEnd,
    ),
    inv(
        I::ContextOriginOrder,
        Should,
        "Within a call, contexts are ordered tool-deferred, then wrapper, then post-execute.",
        &[Semantics(&[30, 34])],
        Stage,
    ),
    inv(
        I::BlockDropsContexts,
        Should,
        "A post-execute block keeps only the block decision's own contexts; tool-deferred and wrapper contexts are dropped.",
        &[Semantics(&[33])],
        Stage,
    ),
    rev2(inv(
        I::ContextsAsUserMessages,
        Must,
        "Contexts are injected as `user/message` session events.",
        &[Doc("injected user/message after recorded tool results")],
        Stage,
    )),
    rev1_only(inv(
        I::ContextsAsContextMessages,
        Must,
        "Contexts are injected as buffered `context/message` session events.",
        &[Doc("context/message after all tool results")],
        Stage,
    )),
    needs(
        inv(
            I::ApprovalAudited,
            Should,
            "An answered approval is audited: `approval/asked` precedes `approval/decided`, whose outcome is the approval stage's outcome.",
            &[Semantics(&[18])],
            Stage,
        ),
        Capability::Approval,
    ),
    needs(
        inv(
            I::UiPresentsEachCall,
            Should,
            "Each call is shown once as pending (`presentCall`) and once as completed (`presentResult`).",
            &[Doc("UI pending card"), Doc("UI completed card")],
            BatchEnd,
        ),
        Capability::Ui,
    ),
    inv(
        I::SessionSeqIncreasing,
        Should,
        "Session events carry strictly increasing `seq` numbers.",
        &[Semantics(&[8])],
        Stage,
    ),
    needs(
        inv(
            I::RunCodeReserved,
            Must,
            "`run_code` is reserved: a program's binding calls never reach it, so no sub-call is a `run_code` call.",
            &[Doc("the reserved `run_code` transport"), Semantics(&[43])],
            Stage,
        ),
        Capability::CodeMode,
    ),
    needs(
        inv(
            I::CodeDispatchInsideBody,
            Must,
            "Sub-calls run inside their `run_code` call's body: every stage of a sub-call happens while the parent is in its body.",
            &[
                Doc("its serialized sub-calls through the pipeline"),
                Semantics(&[49]),
            ],
            Batch,
        ),
        Capability::CodeMode,
    ),
    needs(
        inv(
            I::SubCallsSerialized,
            Must,
            "Sub-calls run one at a time, in submission order: a sub-call starts only after the previous one is logged as `tool/code-dispatch`.",
            &[Doc("its serialized sub-calls through the pipeline")],
            Batch,
        ),
        Capability::CodeMode,
    ),
    needs(
        inv(
            I::SubCallCarriesParentToken,
            Must,
            "Every stage of a sub-call is handed the parent `run_code` execution's token.",
            &[Doc("sub-calls carry the parent token"), Semantics(&[44])],
            Stage,
        ),
        Capability::CodeMode,
    ),
    needs(
        inv(
            I::SubCallIdScheme,
            Should,
            "Sub-calls are numbered `<parent>:code:<n>`, from 1, in the order they start.",
            &[Semantics(&[44])],
            Batch,
        ),
        Capability::CodeMode,
    ),
    needs(
        rev2(inv(
            I::SubCallStartLogged,
            Should,
            "A sub-call logs `tool/code-dispatch-start` when it actually starts, before its first stage.",
            &[Semantics(&[46])],
            Step,
        )),
        Capability::CodeMode,
    ),
    needs(
        inv(
            I::SubCallLogsDispatch,
            Must,
            "Every sub-call is logged as `tool/code-dispatch`, with the outcome its `tools/result` announced, after that notification.",
            &[Doc("log `tool/code-dispatch`"), Semantics(&[46])],
            Step,
        ),
        Capability::CodeMode,
    ),
    needs(
        inv(
            I::BindingSettles,
            Must,
            "Every logged sub-call settles its binding in the program: it resolves for a success, and a denial or failure rejects it with the tool name and message.",
            &[
                Doc("return denials as binding rejections"),
                Semantics(&[47]),
            ],
            Stage,
        ),
        Capability::CodeMode,
    ),
    needs(
        inv(
            I::SubCallContextsOmitted,
            Must,
            "A sub-call's additional contexts are omitted: never injected, and not forwarded to the `run_code` call.",
            &[Doc(
                "omit `additionalContexts` to preserve call/result adjacency",
            )],
            Stage,
        ),
        Capability::CodeMode,
    ),
    needs(
        inv(
            I::DispatchNotModelFacing,
            Should,
            "Dispatch events never become model messages: they carry no surface operation.",
            &[Semantics(&[50])],
            Stage,
        ),
        Capability::CodeMode,
    ),
    needs(
        rev2(inv(
            I::CodeDispatchContentShape,
            Should,
            "The rev2 `tool/code-dispatch` data carries `rootCallId` and the full `content`.",
            &[Semantics(&[46])],
            Stage,
        )),
        Capability::CodeMode,
    ),
    needs(
        rev1_only(inv(
            I::CodeDispatchSummaryShape,
            Should,
            "The rev1 `tool/code-dispatch` data carries a `resultSummary` of at most 200 characters and no `rootCallId`.",
            &[Semantics(&[46])],
            Stage,
        )),
        Capability::CodeMode,
    ),
    inv(
        I::ExpectedOutcome,
        Must,
        "The run ends as the scenario's scripts determine: which bodies ran and how often, whether post-execute ran, each call's `isError`, and the injected contexts.",
        &[Scenario],
        Expectation,
    ),
    inv(
        I::ExpectedContent,
        Should,
        "The model-facing content and error codes are those of the reference semantics.",
        &[Scenario, Semantics(&[22, 31, 42])],
        Expectation,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_is_complete_and_in_id_order() {
        let ids: Vec<InvariantId> = CATALOG.iter().map(|i| i.id).collect();
        assert_eq!(ids, InvariantId::ALL.to_vec());
    }

    #[test]
    fn ids_round_trip() {
        for &id in InvariantId::ALL {
            assert_eq!(id.as_str().parse::<InvariantId>(), Ok(id));
            assert_eq!(invariant(id).id, id);
        }
    }

    #[test]
    fn doc_quotes_occur_in_the_latest_revision_they_apply_to() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec");
        let text = |rev: Revision| {
            let file = match rev {
                Revision::Rev1 => "rev1.txt",
                Revision::Rev2 => "rev2.txt",
            };
            let raw = std::fs::read_to_string(root.join(file)).unwrap_or_default();
            // Compare words: markup and line breaks differ between the two files.
            raw.replace("<code>", "`")
                .replace("</code>", "`")
                .replace("<br/>", " ")
                .replace('\n', " ")
        };
        for inv in CATALOG {
            for source in inv.sources {
                let Source::Doc(words) = source else { continue };
                let Some(&rev) = inv.revisions().last() else {
                    continue;
                };
                let spec = text(rev);
                let plain = words.replace('`', "");
                assert!(
                    spec.contains(words) || spec.replace('`', "").contains(&plain),
                    "{}: {rev} does not say \u{201c}{words}\u{201d}",
                    inv.id
                );
            }
        }
    }

    #[test]
    fn edges_cited_exist_in_each_revision_they_apply_to() {
        for inv in CATALOG {
            for source in inv.sources {
                let Source::Edge(from, to) = source else {
                    continue;
                };
                for rev in inv.revisions() {
                    assert!(
                        tep_reference::graph::StageGraph::of(rev)
                            .edge(*from, *to)
                            .is_some(),
                        "{}: {rev} has no edge {from} --> {to}",
                        inv.id
                    );
                }
            }
        }
    }

    #[test]
    fn semantics_items_exist() {
        for inv in CATALOG {
            for source in inv.sources {
                if let Source::Semantics(items) = source {
                    assert!(items.iter().all(|&n| (1..=51).contains(&n)), "{}", inv.id);
                }
            }
        }
    }
}
