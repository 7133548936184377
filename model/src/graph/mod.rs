//! The stage graph: the spec's flowchart as typed data, and the queries everything else uses.
//!
//! This module is the single source of truth of the project. The reference pipeline tags every
//! observation with a [`NodeId`]; the conformance checker walks each call's observations along
//! [`StageGraph::step`]; `cargo xtask docs` prints the Mermaid flowchart with
//! [`mermaid::print_flowchart`]; edge coverage is counted against [`StageGraph::edges`].
//! Nothing else in the workspace restates a node or an edge.
//!
//! Architecture invariant: this module knows nothing about tokio, sessions or traces. It is data
//! plus pure functions.

mod label;
pub mod mermaid;
mod revisions;

use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use label::{Label, Segment, escape_html};

/// A revision of the "Tool Execution Pipeline" doc.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Revision {
    /// The earlier revision: parallel `tools/result`, buffered `context/message`, no throw edges.
    Rev1,
    /// The current, normative revision.
    Rev2,
}

impl Revision {
    /// Every revision, oldest first.
    pub const ALL: [Revision; 2] = [Revision::Rev1, Revision::Rev2];
    /// The revision used when none is named.
    pub const CURRENT: Revision = Revision::Rev2;

    /// The short name used on the command line and in files (`rev1`, `rev2`).
    pub fn as_str(self) -> &'static str {
        match self {
            Revision::Rev1 => "rev1",
            Revision::Rev2 => "rev2",
        }
    }
}

impl Default for Revision {
    fn default() -> Self {
        Revision::CURRENT
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a revision name that is not `rev1` or `rev2`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown spec revision `{0}` (expected one of: rev1, rev2)")]
pub struct UnknownRevision(pub String);

impl FromStr for Revision {
    type Err = UnknownRevision;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "rev1" => Ok(Revision::Rev1),
            "rev2" => Ok(Revision::Rev2),
            other => Err(UnknownRevision(other.to_owned())),
        }
    }
}

/// The id of a stage-graph node, spelled as the Mermaid source spells it (`toolCall`, `fsGate`).
///
/// The enum is the union of every revision's nodes; [`StageGraph::contains`] says whether a
/// revision has a node.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum NodeId {
    Model,
    ToolCall,
    PresentCall,
    Pre,
    Guards,
    Denied,
    Approval,
    Around,
    ToolBody,
    FsGate,
    Owned,
    Post,
    Normalized,
    Finalize,
    Final,
    Context,
    ToolResult,
    AllResults,
    PresentResult,
    RunCode,
    DispatchStart,
    Dispatched,
}

impl NodeId {
    /// Every node id: the rev2 flowchart's, in its order, then Code Mode's.
    pub const ALL: [NodeId; 22] = [
        NodeId::Model,
        NodeId::ToolCall,
        NodeId::PresentCall,
        NodeId::Pre,
        NodeId::Guards,
        NodeId::Denied,
        NodeId::Approval,
        NodeId::Around,
        NodeId::ToolBody,
        NodeId::FsGate,
        NodeId::Owned,
        NodeId::Post,
        NodeId::Normalized,
        NodeId::Finalize,
        NodeId::Final,
        NodeId::Context,
        NodeId::ToolResult,
        NodeId::AllResults,
        NodeId::PresentResult,
        NodeId::RunCode,
        NodeId::DispatchStart,
        NodeId::Dispatched,
    ];

    /// The id as written in Mermaid and in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeId::Model => "model",
            NodeId::ToolCall => "toolCall",
            NodeId::PresentCall => "presentCall",
            NodeId::Pre => "pre",
            NodeId::Guards => "guards",
            NodeId::Denied => "denied",
            NodeId::Approval => "approval",
            NodeId::Around => "around",
            NodeId::ToolBody => "toolBody",
            NodeId::FsGate => "fsGate",
            NodeId::Owned => "owned",
            NodeId::Post => "post",
            NodeId::Normalized => "normalized",
            NodeId::Finalize => "finalize",
            NodeId::Final => "final",
            NodeId::Context => "context",
            NodeId::ToolResult => "toolResult",
            NodeId::AllResults => "allResults",
            NodeId::PresentResult => "presentResult",
            NodeId::RunCode => "runCode",
            NodeId::DispatchStart => "dispatchStart",
            NodeId::Dispatched => "dispatched",
        }
    }

    /// A short human name for diagnostics ("pre-execute", "tool body").
    pub fn describe(self) -> &'static str {
        match self {
            NodeId::Model => "assistant message",
            NodeId::ToolCall => "tool/call",
            NodeId::PresentCall => "presentCall",
            NodeId::Pre => "pre-execute",
            NodeId::Guards => "guards",
            NodeId::Denied => "denied",
            NodeId::Approval => "approval",
            NodeId::Around => "tools/execute",
            NodeId::ToolBody => "tool body",
            NodeId::FsGate => "fs gate",
            NodeId::Owned => "tool-owned event",
            NodeId::Post => "post-execute",
            NodeId::Normalized => "outer normalization",
            NodeId::Finalize => "finalizeContent",
            NodeId::Final => "tools/result",
            NodeId::Context => "context injection",
            NodeId::ToolResult => "tool/result",
            NodeId::AllResults => "batch settled",
            NodeId::PresentResult => "presentResult",
            NodeId::RunCode => "run_code program",
            NodeId::DispatchStart => "tool/code-dispatch-start",
            NodeId::Dispatched => "tool/code-dispatch",
        }
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error for a node id no revision has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown stage `{0}`{hint}",
    hint = crate::suggest::hint(&self.0, NodeId::ALL.iter().map(|n| n.as_str()))
)]
pub struct UnknownNode(pub String);

impl FromStr for NodeId {
    type Err = UnknownNode;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // A match, not a search of `ALL`: the trace reader names a node on most records, and
        // the compiler tells the names apart by length and bytes in a few steps. The test
        // `node_ids_round_trip` holds it to `as_str`.
        Ok(match s {
            "model" => NodeId::Model,
            "toolCall" => NodeId::ToolCall,
            "presentCall" => NodeId::PresentCall,
            "pre" => NodeId::Pre,
            "guards" => NodeId::Guards,
            "denied" => NodeId::Denied,
            "approval" => NodeId::Approval,
            "around" => NodeId::Around,
            "toolBody" => NodeId::ToolBody,
            "fsGate" => NodeId::FsGate,
            "owned" => NodeId::Owned,
            "post" => NodeId::Post,
            "normalized" => NodeId::Normalized,
            "finalize" => NodeId::Finalize,
            "final" => NodeId::Final,
            "context" => NodeId::Context,
            "toolResult" => NodeId::ToolResult,
            "allResults" => NodeId::AllResults,
            "presentResult" => NodeId::PresentResult,
            "runCode" => NodeId::RunCode,
            "dispatchStart" => NodeId::DispatchStart,
            "dispatched" => NodeId::Dispatched,
            _ => return Err(UnknownNode(s.to_owned())),
        })
    }
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    /// The assistant message whose tool-call block is the batch.
    ModelMessage,
    /// A session event appended to the durable log.
    SessionEvent,
    /// A UI presenter callback.
    Ui,
    /// An ordered waterfall of async listeners that may transform the call.
    Waterfall,
    /// Registered monotonic guards: each may only deny or abstain.
    Guard,
    /// The one-shot approval prompt that answers an `ask`.
    Approval,
    /// The point where a call is refused and its body skipped.
    Denial,
    /// The registered tool's `execute()` body.
    ToolBody,
    /// The filesystem intent gate below the filesystem tools.
    FsGate,
    /// Session events the tool body owns.
    OwnedEvents,
    /// Registry outer normalization: throws become `isError` results.
    Normalization,
    /// The definition-owned `finalizeContent` callback.
    Finalizer,
    /// The `tools/result` notification of the frozen outcome.
    Notification,
    /// Injection of additional contexts as model-visible messages.
    ContextInjection,
    /// The point where every call of the batch has its result recorded.
    BatchSettled,
    /// A Code Mode program, run by the `run_code` body, issuing binding calls.
    Program,
}

impl NodeKind {
    /// A short human name, as the docs print it.
    pub fn describe(self) -> &'static str {
        match self {
            NodeKind::ModelMessage => "model message",
            NodeKind::SessionEvent => "session event",
            NodeKind::Ui => "UI",
            NodeKind::Waterfall => "waterfall",
            NodeKind::Guard => "guard",
            NodeKind::Approval => "approval",
            NodeKind::Denial => "denial",
            NodeKind::ToolBody => "tool body",
            NodeKind::FsGate => "fs gate",
            NodeKind::OwnedEvents => "owned events",
            NodeKind::Normalization => "normalization",
            NodeKind::Finalizer => "finalizer",
            NodeKind::Notification => "notification",
            NodeKind::ContextInjection => "context injection",
            NodeKind::BatchSettled => "batch barrier",
            NodeKind::Program => "program",
        }
    }
}

/// When, in the life of a batch, a node is visited. Ordering invariants are stated per phase:
/// `Prepare` and `Commit` stages run in model order and never overlap; only `Execute` stages of
/// concurrency-safe calls may overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    /// The batch arrives.
    Dispatch,
    /// Ordered stages before dispatch: call event, pre-execute, approval, guards, denial.
    Prepare,
    /// `tools/execute` and the tool body: the only stages that may overlap between calls.
    Execute,
    /// Ordered stages after dispatch, ending with the recorded `tool/result`.
    Commit,
    /// After every result of the batch is recorded.
    Settle,
}

/// Whether a node is visited once per call or once per batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Scope {
    /// Once per batch; observations carry no call id.
    Batch,
    /// Per call; observations carry the call id.
    Call,
}

/// How an edge is drawn. In rev2 the dotted edges are exactly the throw paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeStyle {
    /// `-->`
    Solid,
    /// `-.->`
    Dotted,
}

/// The outcome a stage visit ends with. Labeled edges are selected by outcome: an edge labeled
/// `deny` is taken exactly when the source stage decided `deny`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Pre-execute (or every guard, or the fs gate) let the call go on.
    Allow,
    /// Pre-execute, a guard or the fs gate refused.
    Deny,
    /// Pre-execute asked for approval.
    Ask,
    /// The approval prompt granted this one call.
    AllowedOnce,
    /// The approval prompt was answered with a refusal.
    Rejected,
    /// The approval prompt was cancelled.
    Cancelled,
    /// No approval is mounted, or it could not answer.
    Unavailable,
    /// The stage threw (an error or a panic).
    Throw,
    /// Post-execute accepted the result (possibly replacing content or adding context).
    Accept,
    /// Post-execute blocked the result.
    Block,
    /// A Code Mode binding call resolved in the program.
    Resolve,
    /// A Code Mode binding call rejected in the program (a denied or failed sub-call).
    Reject,
}

impl Outcome {
    /// The outcome as traces spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Allow => "allow",
            Outcome::Deny => "deny",
            Outcome::Ask => "ask",
            Outcome::AllowedOnce => "allowed-once",
            Outcome::Rejected => "rejected",
            Outcome::Cancelled => "cancelled",
            Outcome::Unavailable => "unavailable",
            Outcome::Throw => "throw",
            Outcome::Accept => "accept",
            Outcome::Block => "block",
            Outcome::Resolve => "resolve",
            Outcome::Reject => "reject",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node of the stage graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub id: NodeId,
    pub label: Label,
    pub kind: NodeKind,
    pub phase: Phase,
    pub scope: Scope,
}

/// An edge of the stage graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub from: NodeId,
    pub to: NodeId,
    /// The label as the flowchart prints it (`allow`, `rejected, cancelled, unavailable`).
    pub label: Option<&'static str>,
    pub style: EdgeStyle,
    /// The outcomes of `from` that select this edge. Empty for an edge taken for any outcome no
    /// sibling claims (unlabeled, or labeled only to describe what happens on it).
    pub outcomes: &'static [Outcome],
}

impl Edge {
    /// The edge as `from -> to` (with its label), for messages.
    pub fn describe(&self) -> String {
        match self.label {
            Some(label) => format!("{} -->|{}| {}", self.from, label, self.to),
            None => format!("{} --> {}", self.from, self.to),
        }
    }
}

/// The index of an edge in [`StageGraph::edges`], stable for a revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EdgeId(pub usize);

/// Why a step from one node to another is not a step of the graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// The graph has no edge between the two nodes.
    #[error("the graph has no edge {from} --> {to}")]
    NoEdge { from: NodeId, to: NodeId },
    /// The edge exists but the source stage's outcome selects another edge.
    #[error("{from} ended with {outcome}, which does not lead to {to} (edge {edge})", outcome = outcome.map_or("no outcome", Outcome::as_str))]
    OutcomeMismatch {
        from: NodeId,
        to: NodeId,
        outcome: Option<Outcome>,
        edge: String,
    },
}

/// Which flow a graph draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GraphKind {
    /// The tool execution pipeline of a model's call (the spec's flowchart).
    Pipeline,
    /// A Code Mode sub-call re-entering the pipeline from a `run_code` program.
    CodeMode,
}

/// A revision's stage graph: nodes and edges in the order the flowchart declares them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageGraph {
    revision: Revision,
    kind: GraphKind,
    nodes: Vec<Node>,
    edges: Vec<Edge>,
}

static REV1: LazyLock<StageGraph> = LazyLock::new(revisions::rev1);
static REV2: LazyLock<StageGraph> = LazyLock::new(revisions::rev2);
static CODE_MODE_REV1: LazyLock<StageGraph> =
    LazyLock::new(|| revisions::code_mode(Revision::Rev1));
static CODE_MODE_REV2: LazyLock<StageGraph> =
    LazyLock::new(|| revisions::code_mode(Revision::Rev2));

impl StageGraph {
    /// The graph of the current revision.
    pub fn rev2() -> &'static StageGraph {
        &REV2
    }

    /// The graph of the earlier revision.
    pub fn rev1() -> &'static StageGraph {
        &REV1
    }

    /// The graph of a revision.
    pub fn of(revision: Revision) -> &'static StageGraph {
        match revision {
            Revision::Rev1 => Self::rev1(),
            Revision::Rev2 => Self::rev2(),
        }
    }

    /// The graph a Code Mode sub-call walks in a revision: from the `run_code` program through
    /// the pipeline's stages (shared with [`StageGraph::of`]) back to the program.
    pub fn code_mode(revision: Revision) -> &'static StageGraph {
        match revision {
            Revision::Rev1 => &CODE_MODE_REV1,
            Revision::Rev2 => &CODE_MODE_REV2,
        }
    }

    pub(crate) fn new(
        revision: Revision,
        kind: GraphKind,
        nodes: Vec<Node>,
        edges: Vec<Edge>,
    ) -> Self {
        StageGraph {
            revision,
            kind,
            nodes,
            edges,
        }
    }

    pub fn revision(&self) -> Revision {
        self.revision
    }

    pub fn kind(&self) -> GraphKind {
        self.kind
    }

    /// The node a walk starts from: `model` for a call, `runCode` for a Code Mode sub-call.
    pub fn entry(&self) -> NodeId {
        match self.kind {
            GraphKind::Pipeline => NodeId::Model,
            GraphKind::CodeMode => NodeId::RunCode,
        }
    }

    /// Nodes in declaration order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Edges in declaration order.
    pub fn edges(&self) -> &[Edge] {
        &self.edges
    }

    /// Edges with their ids.
    pub fn edge_ids(&self) -> impl Iterator<Item = (EdgeId, &Edge)> {
        self.edges.iter().enumerate().map(|(i, e)| (EdgeId(i), e))
    }

    /// The node with this id, if this revision has it.
    pub fn node(&self, id: NodeId) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.node(id).is_some()
    }

    /// Edges leaving `id`, in declaration order.
    pub fn outgoing(&self, id: NodeId) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.from == id)
    }

    /// Edges entering `id`, in declaration order.
    pub fn incoming(&self, id: NodeId) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(move |e| e.to == id)
    }

    /// Nodes reachable from `id` over one edge.
    pub fn successors(&self, id: NodeId) -> impl Iterator<Item = NodeId> {
        self.outgoing(id).map(|e| e.to)
    }

    /// The edge `from --> to`, if any, with its id.
    pub fn edge(&self, from: NodeId, to: NodeId) -> Option<(EdgeId, &Edge)> {
        self.edge_ids().find(|(_, e)| e.from == from && e.to == to)
    }

    /// A leaf has no outgoing edge (`presentCall`, `owned`, `presentResult`, `context`).
    /// Visiting a leaf is a side branch: it does not move a call's position on the graph.
    pub fn is_leaf(&self, id: NodeId) -> bool {
        self.outgoing(id).next().is_none()
    }

    /// Whether every edge leaving `id` is labeled, so that a visit must record an outcome to
    /// say which edge it takes (`pre`, `guards`, `approval`).
    pub fn requires_outcome(&self, id: NodeId) -> bool {
        let mut out = self.outgoing(id).peekable();
        out.peek().is_some() && out.all(|e| !e.outcomes.is_empty())
    }

    /// The outcomes that label an edge leaving `id`.
    pub fn decisive_outcomes(&self, id: NodeId) -> Vec<Outcome> {
        let mut v: Vec<Outcome> = self
            .outgoing(id)
            .flat_map(|e| e.outcomes.iter().copied())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// The step rule every walk obeys: a call positioned at `from`, whose visit there ended with
    /// `outcome`, may next visit `to` only over an edge `from --> to` that the outcome selects.
    /// A labeled edge is selected by the outcomes it names; an unlabeled edge by any outcome that
    /// no labeled sibling names (including no outcome at all).
    pub fn step(
        &self,
        from: NodeId,
        outcome: Option<Outcome>,
        to: NodeId,
    ) -> Result<(EdgeId, &Edge), StepError> {
        let (id, edge) = self.edge(from, to).ok_or(StepError::NoEdge { from, to })?;
        let selected = if !edge.outcomes.is_empty() {
            outcome.is_some_and(|o| edge.outcomes.contains(&o))
        } else {
            outcome.is_none_or(|o| !self.decisive_outcomes(from).contains(&o))
        };
        if selected {
            Ok((id, edge))
        } else {
            Err(StepError::OutcomeMismatch {
                from,
                to,
                outcome,
                edge: edge.describe(),
            })
        }
    }

    /// The non-leaf nodes a call positioned at `from` with `outcome` may visit next.
    pub fn next_stops(&self, from: NodeId, outcome: Option<Outcome>) -> Vec<NodeId> {
        self.outgoing(from)
            .filter(|e| !self.is_leaf(e.to))
            .filter(|e| self.step(from, outcome, e.to).is_ok())
            .map(|e| e.to)
            .collect()
    }

    /// Checks a walk given as `(node, outcome)` visits, starting at `start`: every visit must be a
    /// step from the position (leaves are side branches and keep the position). Returns the edges
    /// taken, or the index of the first visit that is not a step and why.
    pub fn check_walk(
        &self,
        start: NodeId,
        visits: &[(NodeId, Option<Outcome>)],
    ) -> Result<Vec<EdgeId>, (usize, StepError)> {
        let mut position = (start, None);
        let mut taken = Vec::with_capacity(visits.len());
        for (i, &(node, outcome)) in visits.iter().enumerate() {
            let (id, _) = self
                .step(position.0, position.1, node)
                .map_err(|e| (i, e))?;
            taken.push(id);
            if !self.is_leaf(node) {
                position = (node, outcome);
            }
        }
        Ok(taken)
    }

    /// Whether `to` can be reached from `from` (ignoring outcomes).
    pub fn reachable(&self, from: NodeId, to: NodeId) -> bool {
        let mut seen = vec![from];
        let mut stack = vec![from];
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            for s in self.successors(n) {
                if !seen.contains(&s) {
                    seen.push(s);
                    stack.push(s);
                }
            }
        }
        false
    }

    /// Every code name written in a node label (`tool/call`, `tools/pre-execute`, ...).
    pub fn code_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self
            .nodes
            .iter()
            .flat_map(|n| n.label.code_names())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_well_formed() {
        for rev in Revision::ALL {
            for node in StageGraph::of(rev)
                .nodes()
                .iter()
                .chain(StageGraph::code_mode(rev).nodes())
            {
                assert!(node.label.is_well_formed(), "{rev} {}", node.id);
            }
        }
    }

    #[test]
    fn rev2_has_19_nodes_and_29_edges() {
        let g = StageGraph::rev2();
        assert_eq!(g.nodes().len(), 19);
        assert_eq!(g.edges().len(), 29);
    }

    #[test]
    fn edges_join_declared_nodes_and_labels_name_their_outcomes() {
        for g in Revision::ALL
            .into_iter()
            .flat_map(|r| [StageGraph::of(r), StageGraph::code_mode(r)])
        {
            let rev = g.revision();
            for e in g.edges() {
                assert!(
                    g.contains(e.from) && g.contains(e.to),
                    "{rev}: {}",
                    e.describe()
                );
                // An edge selected by outcomes says which in its label.
                assert!(
                    e.outcomes.is_empty() || e.label.is_some(),
                    "{}",
                    e.describe()
                );
            }
        }
    }

    #[test]
    fn step_follows_labels() {
        let g = StageGraph::rev2();
        assert!(
            g.step(NodeId::Pre, Some(Outcome::Allow), NodeId::Guards)
                .is_ok()
        );
        assert!(matches!(
            g.step(NodeId::Pre, Some(Outcome::Deny), NodeId::Guards),
            Err(StepError::OutcomeMismatch { .. })
        ));
        assert!(matches!(
            g.step(NodeId::Pre, None, NodeId::ToolBody),
            Err(StepError::NoEdge { .. })
        ));
        // An unlabeled edge is not taken by an outcome a labeled sibling claims.
        assert!(
            g.step(NodeId::Post, Some(Outcome::Throw), NodeId::Finalize)
                .is_err()
        );
        assert!(
            g.step(NodeId::Post, Some(Outcome::Block), NodeId::Finalize)
                .is_ok()
        );
        assert!(
            g.step(NodeId::Approval, Some(Outcome::Cancelled), NodeId::Denied)
                .is_ok()
        );
    }

    #[test]
    fn leaves_keep_the_position() {
        let g = StageGraph::rev2();
        let walk = [
            (NodeId::ToolCall, None),
            (NodeId::PresentCall, None),
            (NodeId::Pre, Some(Outcome::Deny)),
            (NodeId::Denied, None),
            (NodeId::Post, Some(Outcome::Accept)),
            (NodeId::Finalize, None),
            (NodeId::Final, None),
            (NodeId::ToolResult, None),
            (NodeId::PresentResult, None),
            (NodeId::AllResults, None),
            (NodeId::Context, None),
        ];
        assert_eq!(g.check_walk(NodeId::Model, &walk).map(|v| v.len()), Ok(11));
        let bad = [
            (NodeId::ToolCall, None),
            (NodeId::Pre, Some(Outcome::Deny)),
            (NodeId::ToolBody, None),
        ];
        assert_eq!(g.check_walk(NodeId::Model, &bad).map_err(|e| e.0), Err(2));
    }

    #[test]
    fn every_node_is_on_a_path_from_the_entry_to_the_end() {
        for g in Revision::ALL
            .into_iter()
            .flat_map(|r| [StageGraph::of(r), StageGraph::code_mode(r)])
        {
            let end = match g.kind() {
                GraphKind::Pipeline => NodeId::AllResults,
                GraphKind::CodeMode => NodeId::RunCode,
            };
            for node in g.nodes() {
                assert!(
                    g.reachable(g.entry(), node.id),
                    "{}: {} is unreachable",
                    g.revision(),
                    node.id
                );
                // Only side branches end a walk early: UI cards, owned events, contexts, and
                // the Code Mode dispatch log.
                let side_branch = matches!(
                    node.kind,
                    NodeKind::Ui | NodeKind::OwnedEvents | NodeKind::ContextInjection
                ) || node.id == NodeId::Dispatched;
                assert_eq!(
                    g.is_leaf(node.id),
                    side_branch,
                    "{}: {}",
                    g.revision(),
                    node.id
                );
                if !side_branch && node.phase != Phase::Settle {
                    assert!(
                        g.reachable(node.id, end),
                        "{}: {} never ends",
                        g.revision(),
                        node.id
                    );
                }
                if node.id != g.entry() {
                    assert!(
                        g.incoming(node.id).next().is_some(),
                        "{}: nothing enters {}",
                        g.revision(),
                        node.id
                    );
                }
            }
        }
        let g = StageGraph::rev2();
        assert!(
            !g.reachable(NodeId::ToolResult, NodeId::Pre),
            "no way back once recorded"
        );
        assert_eq!(
            g.successors(NodeId::Approval).collect::<Vec<_>>(),
            vec![NodeId::Guards, NodeId::Denied, NodeId::Normalized]
        );
    }

    #[test]
    fn outcome_required_exactly_where_every_edge_is_labeled() {
        let g = StageGraph::rev2();
        let required: Vec<NodeId> = NodeId::ALL
            .into_iter()
            .filter(|&n| g.requires_outcome(n))
            .collect();
        assert_eq!(
            required,
            vec![NodeId::Pre, NodeId::Guards, NodeId::Approval]
        );
    }

    #[test]
    fn node_ids_round_trip() {
        // The single-pass trace reader takes a node `FromStr` reads for the one serde reads.
        for n in NodeId::ALL {
            assert_eq!(n.as_str().parse::<NodeId>(), Ok(n));
            assert_eq!(
                serde_json::to_value(n).ok(),
                Some(serde_json::Value::String(n.as_str().to_owned()))
            );
            assert_eq!(
                serde_json::from_value::<NodeId>(serde_json::Value::String(n.as_str().into())).ok(),
                Some(n)
            );
        }
    }
}
