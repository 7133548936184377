//! The documented ordering invariants, as data.
//!
//! Each invariant has a stable id, a level (MUST for what the doc states, SHOULD for what only
//! the reference semantics pin down), one sentence, where it comes from (words of the doc, an
//! edge of the flowchart, numbered items of `spec/reference-semantics.md`), the revisions it
//! applies to, the optional capability it needs, and how the checker checks it.
//! `docs/invariants.md` is generated from [`crate::catalog::CATALOG`].

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tep_model::graph::{NodeId, Revision};
use tep_model::trace::{Capability, ObservationLevel};

macro_rules! invariant_ids {
    ($( $variant:ident = $id:literal, )*) => {
        /// The stable id of an invariant.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema)]
        // Each variant's documentation is its catalog entry (`crate::invariant`); a doc comment
        // here would also change the published JSON Schemas.
        #[allow(missing_docs)]
        #[non_exhaustive]
        pub enum InvariantId {
            $( #[serde(rename = $id)] $variant, )*
        }

        impl InvariantId {
            /// Every id, in catalog order.
            pub const ALL: &'static [InvariantId] = &[$(InvariantId::$variant),*];

            /// The id as the docs and reports write it.
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
    WaterfallRegistrationOrder = "waterfall-registration-order",
    ApprovalOnlyAfterAsk = "approval-only-after-ask",
    ApprovalAbsentDenies = "approval-absent-denies",
    ApprovalOnce = "approval-once",
    GuardsOnlyAfterAllow = "guards-only-after-allow",
    AllowReachesGuards = "allow-reaches-guards",
    GuardDenyBinds = "guard-deny-binds",
    DenySkipsBody = "deny-skips-body",
    DenialReachesPost = "denial-reaches-post",
    DenialIsError = "denial-is-error",
    ThrowSkipsPost = "throw-skips-post",
    ThrowIsNormalized = "throw-is-normalized",
    GuardThrowIsNormalized = "guard-throw-is-normalized",
    ThrowIsError = "throw-is-error",
    BodyInsideExecute = "body-inside-execute",
    BodySettlesBeforeCommit = "body-settles-before-commit",
    BodyThrowIsAResult = "body-throw-is-a-result",
    DeferredContextsSurviveAThrow = "deferred-contexts-survive-a-throw",
    RedispatchThroughWrappers = "redispatch-through-wrappers",
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
    PoolCap = "pool-cap",
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
    SubCallLogsNoCallOrResult = "sub-call-logs-no-call-or-result",
    BindingSettles = "binding-settles",
    RejectionIsToolCallError = "rejection-is-tool-call-error",
    SubCallContextsOmitted = "sub-call-contexts-omitted",
    DispatchNotModelFacing = "dispatch-not-model-facing",
    CodeDispatchContentShape = "code-dispatch-content-shape",
    CodeDispatchSummaryShape = "code-dispatch-summary-shape",
    RequestOneResultPerCall = "request-one-result-per-call",
    RequestModelOrder = "request-model-order",
    RequestErrorsAsErrors = "request-errors-as-errors",
    RequestContextsAfterResults = "request-contexts-after-results",
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
#[error(
    "unknown invariant `{0}`{hint} (run `tep invariants list`)",
    hint = tep_model::suggest::hint(&self.0, InvariantId::ALL.iter().map(|i| i.as_str()))
)]
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
#[non_exhaustive]
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
// Exhaustive on purpose: the docs generator matches every kind of source, and a new kind must
// make it fail to build until the clause coverage knows it.
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
#[non_exhaustive]
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
    /// At the model's next request after the batch (a `request` record).
    Request,
}

impl CheckKind {
    /// When the check runs, in words.
    pub fn describe(self) -> &'static str {
        match self {
            CheckKind::Step => {
                "at every stage visit of the call, as a step the graph does not allow"
            }
            CheckKind::Stage => "at the stage visit named, against what the call recorded earlier",
            CheckKind::Batch => "across the calls of a batch, at every visit",
            CheckKind::BatchEnd => "when the batch closes",
            CheckKind::Expectation => "after a scenario run, against its expected outcome",
            CheckKind::Request => "at the model's next request after the batch",
        }
    }
}

/// One documented invariant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Invariant {
    /// Its stable id.
    pub id: InvariantId,
    /// MUST or SHOULD.
    pub level: Level,
    /// What it says, in one sentence (Markdown code spans allowed).
    pub statement: &'static str,
    /// Where the spec (or the reference semantics) says it.
    pub sources: &'static [Source],
    /// The first revision the invariant applies to.
    pub since: Revision,
    /// The last revision it applies to, if it was dropped later.
    pub until: Option<Revision>,
    /// The capability an implementation needs for the invariant to apply.
    pub requires: Option<Capability>,
    /// When its rule runs.
    pub check: CheckKind,
    /// The lowest observation level whose traces hold the records the check reads; below it
    /// the invariant is reported as not checkable.
    pub observed: ObservationLevel,
    /// The records the check reads.
    pub reads: &'static [Read],
}

/// A record a check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Read {
    /// Visits of a stage-graph node (stage records, or the session events that observe it).
    Node(NodeId),
    /// The approval audit events (`approval/asked`, `approval/decided`).
    Audit,
    /// `observer-settled` marks.
    ObserverMark,
    /// `body-settled` marks.
    BodyMark,
    /// The scenario's scripts and expectations (drive mode).
    Scenario,
    /// The model's next request after a batch (`request` records, level `boundary`).
    Request,
}

impl fmt::Display for Read {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Read::Node(n) => write!(f, "`{n}`"),
            Read::Audit => f.write_str("`approval/asked`, `approval/decided`"),
            Read::ObserverMark => f.write_str("mark `observer-settled`"),
            Read::BodyMark => f.write_str("mark `body-settled`"),
            Read::Scenario => f.write_str("the scenario"),
            Read::Request => f.write_str("the model's next `request`"),
        }
    }
}

impl Invariant {
    /// Whether it is part of `revision`.
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

/// A catalog entry that applies to every revision and needs no capability.
pub(crate) const fn entry(
    id: InvariantId,
    level: Level,
    statement: &'static str,
    sources: &'static [Source],
    check: CheckKind,
    observed: ObservationLevel,
    reads: &'static [Read],
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
        observed,
        reads,
    }
}

impl Invariant {
    /// The entry, applying from rev2 on.
    pub(crate) const fn rev2(mut self) -> Self {
        self.since = Revision::Rev2;
        self
    }

    /// The entry, applying to rev1 only.
    pub(crate) const fn rev1_only(mut self) -> Self {
        self.until = Some(Revision::Rev1);
        self
    }

    /// The entry, applying when the implementation declares `capability`.
    pub(crate) const fn needs(mut self, capability: Capability) -> Self {
        self.requires = Some(capability);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CATALOG, invariant};

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
                        tep_model::graph::StageGraph::of(rev)
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
