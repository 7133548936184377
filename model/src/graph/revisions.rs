//! The flowcharts of the spec revisions, as data.
//!
//! rev2 is written out node for node and edge for edge, in the order the doc declares them.
//! rev1 is derived from it by the few changes the earlier doc differs in (see [`REV1_CHANGES`]),
//! so that what the two share is written once.

use super::{
    Edge, EdgeStyle, GraphKind, Label, Node, NodeId, NodeKind, Outcome, Phase, Revision, Scope,
    StageGraph,
};

const fn node(id: NodeId, label: &'static str, kind: NodeKind, phase: Phase) -> Node {
    Node {
        id,
        label: Label::new(label),
        kind,
        phase,
        scope: Scope::Call,
    }
}

const fn batch_node(id: NodeId, label: &'static str, kind: NodeKind, phase: Phase) -> Node {
    Node {
        id,
        label: Label::new(label),
        kind,
        phase,
        scope: Scope::Batch,
    }
}

/// `from --> to`
const fn flow(from: NodeId, to: NodeId) -> Edge {
    Edge {
        from,
        to,
        label: None,
        style: EdgeStyle::Solid,
        outcomes: &[],
    }
}

/// `from -->|label| to`, taken on `outcomes`.
const fn on(from: NodeId, to: NodeId, label: &'static str, outcomes: &'static [Outcome]) -> Edge {
    Edge {
        from,
        to,
        label: Some(label),
        style: EdgeStyle::Solid,
        outcomes,
    }
}

/// `from -->|label| to`, taken whatever `from` ended with; the label only describes it.
const fn noted(from: NodeId, to: NodeId, label: &'static str) -> Edge {
    Edge {
        from,
        to,
        label: Some(label),
        style: EdgeStyle::Solid,
        outcomes: &[],
    }
}

/// `from -.->|label| to`, taken when `from` throws.
const fn throws(from: NodeId, to: NodeId, label: &'static str) -> Edge {
    Edge {
        from,
        to,
        label: Some(label),
        style: EdgeStyle::Dotted,
        outcomes: &[Outcome::Throw],
    }
}

use NodeId::*;

/// The rev2 flowchart's nodes, in declaration order. Labels use the markup of [`Label`].
const REV2_NODES: &[Node] = &[
    batch_node(
        Model,
        "Assistant message contains tool-call block",
        NodeKind::ModelMessage,
        Phase::Dispatch,
    ),
    node(
        ToolCall,
        "Session event: `tool/call`\nlogged before execution",
        NodeKind::SessionEvent,
        Phase::Prepare,
    ),
    node(
        PresentCall,
        "UI pending card\npresentCall(args)",
        NodeKind::Ui,
        Phase::Prepare,
    ),
    node(
        Pre,
        "`tools/pre-execute` waterfall\nhooks, permission, sandbox",
        NodeKind::Waterfall,
        Phase::Prepare,
    ),
    node(
        Guards,
        "Registered monotonic guards\ndeny or abstain; identity protected",
        NodeKind::Guard,
        Phase::Prepare,
    ),
    node(
        Denied,
        "denied or approval refused\ntool body skipped",
        NodeKind::Denial,
        Phase::Prepare,
    ),
    node(
        Approval,
        "`ctx.approval` one-shot prompt\nabsent or unanswerable: deny",
        NodeKind::Approval,
        Phase::Prepare,
    ),
    node(
        Around,
        "`tools/execute` waterfall\ntimeout, retry, metrics (around dispatch)",
        NodeKind::Waterfall,
        Phase::Execute,
    ),
    node(
        ToolBody,
        "Registered tool execute() body",
        NodeKind::ToolBody,
        Phase::Execute,
    ),
    node(
        FsGate,
        "`fs/write-intent` or `fs/edit-intent`\ntool-fs mutations only",
        NodeKind::FsGate,
        Phase::Execute,
    ),
    node(
        Owned,
        "Tool-owned session events\n`todo/write`, `fs/observed`, `hook/invoked`, `hook/result`, `tool/code-dispatch`",
        NodeKind::OwnedEvents,
        Phase::Execute,
    ),
    node(
        Post,
        "`tools/post-execute` waterfall\naccept, block, replace, add context",
        NodeKind::Waterfall,
        Phase::Commit,
    ),
    node(
        Normalized,
        "Registry outer normalization\npipeline/result snapshot throws become isError",
        NodeKind::Normalization,
        Phase::Commit,
    ),
    node(
        Finalize,
        "ToolDefinition.finalizeContent\nlast content-only invariant",
        NodeKind::Finalizer,
        Phase::Commit,
    ),
    node(
        Final,
        "`tools/result` synchronous notification\nfrozen authoritative outcome",
        NodeKind::Notification,
        Phase::Commit,
    ),
    node(
        Context,
        "Active-batch additionalContexts FIFO\ninjected user/message after recorded tool results",
        NodeKind::ContextInjection,
        Phase::Settle,
    ),
    node(
        ToolResult,
        "Session event: `tool/result`\nsingle model-facing outcome",
        NodeKind::SessionEvent,
        Phase::Commit,
    ),
    batch_node(
        AllResults,
        "Tool batch settled\nrecorded tool/result events complete",
        NodeKind::BatchSettled,
        Phase::Settle,
    ),
    node(
        PresentResult,
        "UI completed card\npresentResult(args, result)",
        NodeKind::Ui,
        Phase::Commit,
    ),
];

/// The rev2 flowchart's edges, in declaration order.
const REV2_EDGES: &[Edge] = &[
    flow(Model, ToolCall),
    flow(ToolCall, PresentCall),
    flow(ToolCall, Pre),
    on(Pre, Guards, "allow", &[Outcome::Allow]),
    on(Guards, Around, "allow", &[Outcome::Allow]),
    on(Guards, Denied, "deny", &[Outcome::Deny]),
    throws(Guards, Normalized, "throw"),
    flow(Around, ToolBody),
    on(Pre, Denied, "deny", &[Outcome::Deny]),
    on(Pre, Approval, "ask", &[Outcome::Ask]),
    on(Approval, Guards, "allowed-once", &[Outcome::AllowedOnce]),
    on(
        Approval,
        Denied,
        "rejected, cancelled, unavailable",
        &[Outcome::Rejected, Outcome::Cancelled, Outcome::Unavailable],
    ),
    throws(Approval, Normalized, "throw"),
    flow(Denied, Post),
    throws(Pre, Normalized, "throw"),
    flow(ToolBody, FsGate),
    flow(FsGate, ToolBody),
    flow(ToolBody, Owned),
    flow(ToolBody, Around),
    flow(Around, Post),
    throws(Around, Normalized, "wrapper throws"),
    throws(Post, Normalized, "throw"),
    flow(Post, Finalize),
    flow(Normalized, Finalize),
    flow(Finalize, Final),
    flow(Final, ToolResult),
    flow(ToolResult, PresentResult),
    flow(ToolResult, AllResults),
    flow(AllResults, Context),
];

/// How an earlier revision differs from rev2.
struct RevisionChanges {
    /// Nodes the revision does not have. Edges touching them go too, except that a solid edge
    /// into a removed node is carried through to that node's single successor (rev1's
    /// `post --> final` is rev2's `post --> finalize --> final` without `finalize`).
    removed: &'static [NodeId],
    /// Nodes whose label reads differently.
    relabeled: &'static [(NodeId, &'static str)],
}

/// rev1: no outer normalization, no `finalizeContent`, no throw edges; a parallel `tools/result`
/// notification; buffered `context/message` injection. Its flat text lost the `<code>`/`<br/>`
/// markup; it is restored where rev2 has the same words.
const REV1_CHANGES: RevisionChanges = RevisionChanges {
    removed: &[Normalized, Finalize],
    relabeled: &[
        (
            Final,
            "`tools/result` parallel notification\nfrozen authoritative outcome",
        ),
        (
            Context,
            "Buffered additionalContext\ncontext/message after all tool results",
        ),
        (
            AllResults,
            "All calls in the step settled\nand tool/result events recorded",
        ),
    ],
};

pub(super) fn rev2() -> StageGraph {
    StageGraph::new(
        Revision::Rev2,
        GraphKind::Pipeline,
        REV2_NODES.to_vec(),
        REV2_EDGES.to_vec(),
    )
}

pub(super) fn rev1() -> StageGraph {
    let (nodes, edges) = derive(REV2_NODES, REV2_EDGES, &REV1_CHANGES);
    StageGraph::new(Revision::Rev1, GraphKind::Pipeline, nodes, edges)
}

/// The stages a Code Mode sub-call shares with a model's call: everything from pre-execute to
/// the `tools/result` notification. A sub-call has no `tool/call`, no UI cards, no `tool/result`
/// and no batch of its own.
const SUB_CALL_STAGES: &[NodeId] = &[
    Pre, Guards, Denied, Approval, Around, ToolBody, FsGate, Owned, Post, Normalized, Finalize,
    Final,
];

/// What Code Mode adds around the shared stages (rev2; rev1 logs no start event).
const CODE_MODE_NODES: &[Node] = &[
    node(
        RunCode,
        "`run_code` program\nissues binding calls, one at a time",
        NodeKind::Program,
        Phase::Execute,
    ),
    node(
        DispatchStart,
        "Session event: `tool/code-dispatch-start`\nsub-call parent:code:n, parent token",
        NodeKind::SessionEvent,
        Phase::Prepare,
    ),
    node(
        Dispatched,
        "Session event: `tool/code-dispatch`\ncommitted; never a model message",
        NodeKind::SessionEvent,
        Phase::Commit,
    ),
];

/// The binding settles in the program once the sub-call's outcome is frozen; the dispatch log is
/// side work with no order against the settlement (the doc orders neither), so `dispatched` is a
/// side branch of `final`, like the UI's completed card.
const CODE_MODE_EDGES: &[Edge] = &[
    flow(RunCode, DispatchStart),
    flow(DispatchStart, Pre),
    flow(Final, Dispatched),
    noted(Final, RunCode, "binding resolves or rejects"),
];

/// rev1's Code Mode has no start event (reference semantics §5).
const CODE_MODE_REV1_CHANGES: RevisionChanges = RevisionChanges {
    removed: &[DispatchStart],
    relabeled: &[],
};

pub(super) fn code_mode(revision: Revision) -> StageGraph {
    let base = StageGraph::of(revision);
    let shared = |id: NodeId| SUB_CALL_STAGES.contains(&id);
    let mut nodes: Vec<Node> = CODE_MODE_NODES[..2].to_vec();
    nodes.extend(base.nodes().iter().filter(|n| shared(n.id)).copied());
    nodes.extend_from_slice(&CODE_MODE_NODES[2..]);
    let mut edges: Vec<Edge> = CODE_MODE_EDGES[..2].to_vec();
    edges.extend(
        base.edges()
            .iter()
            .filter(|e| shared(e.from) && shared(e.to))
            .copied(),
    );
    edges.extend_from_slice(&CODE_MODE_EDGES[2..]);
    let (nodes, edges) = match revision {
        Revision::Rev2 => (nodes, edges),
        Revision::Rev1 => derive(&nodes, &edges, &CODE_MODE_REV1_CHANGES),
    };
    StageGraph::new(revision, GraphKind::CodeMode, nodes, edges)
}

/// Applies `changes` to a graph given as nodes and edges.
fn derive(
    base_nodes: &[Node],
    base_edges: &[Edge],
    changes: &RevisionChanges,
) -> (Vec<Node>, Vec<Edge>) {
    let removed = |id: NodeId| changes.removed.contains(&id);
    let nodes = base_nodes
        .iter()
        .filter(|n| !removed(n.id))
        .map(
            |n| match changes.relabeled.iter().find(|(id, _)| *id == n.id) {
                Some(&(_, label)) => Node {
                    label: Label::new(label),
                    ..*n
                },
                None => *n,
            },
        )
        .collect();
    // Where a removed node leads on (its single successor, followed through removed nodes).
    let carry = |mut id: NodeId| -> Option<NodeId> {
        while removed(id) {
            let mut next = base_edges.iter().filter(|e| e.from == id);
            let only = next.next()?;
            if next.next().is_some() {
                return None;
            }
            id = only.to;
        }
        Some(id)
    };
    let edges = base_edges
        .iter()
        .filter(|e| !removed(e.from))
        .filter_map(|e| {
            if !removed(e.to) {
                return Some(*e);
            }
            if e.style == EdgeStyle::Dotted || e.label.is_some() {
                return None;
            }
            carry(e.to).map(|to| Edge { to, ..*e })
        })
        .collect();
    (nodes, edges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_mode_shares_the_pipeline_stages() {
        let g = code_mode(Revision::Rev2);
        assert_eq!(g.entry(), RunCode);
        assert!(g.edge(RunCode, DispatchStart).is_some());
        assert!(g.edge(Pre, Approval).is_some() && g.edge(Post, Normalized).is_some());
        assert!(!g.contains(ToolCall) && !g.contains(ToolResult) && !g.contains(Context));
        let r1 = code_mode(Revision::Rev1);
        assert!(r1.edge(RunCode, Pre).is_some(), "rev1 logs no start event");
        assert!(!r1.contains(Normalized) && r1.edge(Post, Final).is_some());
    }

    #[test]
    fn rev1_has_17_nodes_and_22_edges() {
        let g = rev1();
        assert_eq!(g.nodes().len(), 17);
        assert_eq!(g.edges().len(), 22);
        assert!(g.edge(Post, Final).is_some());
        assert!(g.edges().iter().all(|e| e.style == EdgeStyle::Solid));
    }
}
