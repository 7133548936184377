//! revisions/changes.md: what differs between rev1 and rev2.

use std::fmt::Write as _;

use tep_check::CATALOG;
use tep_conformance::scenario::Scenario;
use tep_model::graph::{EdgeStyle, NodeId, Revision, StageGraph};

use super::{cell, header};

fn node_list(graph: &StageGraph, ids: &[NodeId]) -> String {
    ids.iter()
        .filter_map(|id| graph.node(*id))
        .map(|n| {
            format!(
                "- `{}`: {}\n",
                n.id,
                cell(&n.label.plain_lines().join(" / "))
            )
        })
        .collect()
}

/// What the graphs, the invariants and the corpus say differently in rev1 and rev2.
pub fn changes_page(corpus: &[Scenario]) -> String {
    let (old, new) = (Revision::Rev1, Revision::Rev2);
    let mut out = header("the rev1 and rev2 stage graphs, the invariant catalog and the corpus");
    let _ = writeln!(out, "# Changes from {old} to {new}\n");
    out.push_str(
        "Computed from the definitions: the stage graphs of both revisions (rev1 is derived from \
         rev2 by the changes in `model/src/graph/revisions.rs`), the revision windows of the \
         invariants, and those of the scenarios. The two pages: \
         [rev1](rev1/tool-execution-pipeline.md), [rev2](../tool-execution-pipeline.md).\n\n",
    );
    let graphs = [
        ("The pipeline", StageGraph::of(old), StageGraph::of(new)),
        (
            "Code Mode sub-calls",
            StageGraph::code_mode(old),
            StageGraph::code_mode(new),
        ),
    ];
    for (title, before, after) in graphs {
        out.push_str(&graph_changes(title, before, after, old, new));
    }
    out.push_str(&invariant_changes(old, new));
    out.push_str(&scenario_changes(corpus, old, new));
    out
}

/// The section on one graph: its size in both revisions, and the nodes and edges `after` (of
/// revision `new`) adds to, removes from or relabels in `before` (of revision `old`).
fn graph_changes(
    title: &str,
    before: &StageGraph,
    after: &StageGraph,
    old: Revision,
    new: Revision,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {title}\n\n{old}: {} nodes, {} edges; {new}: {} nodes, {} edges.\n",
        before.nodes().len(),
        before.edges().len(),
        after.nodes().len(),
        after.edges().len()
    );
    let added: Vec<NodeId> = after
        .nodes()
        .iter()
        .map(|n| n.id)
        .filter(|id| !before.contains(*id))
        .collect();
    let removed: Vec<NodeId> = before
        .nodes()
        .iter()
        .map(|n| n.id)
        .filter(|id| !after.contains(*id))
        .collect();
    if !added.is_empty() {
        let _ = writeln!(out, "Nodes added in {new}:\n\n{}", node_list(after, &added));
    }
    if !removed.is_empty() {
        let _ = writeln!(
            out,
            "Nodes removed in {new}:\n\n{}",
            node_list(before, &removed)
        );
    }
    let relabeled: Vec<String> = before
        .nodes()
        .iter()
        .filter_map(|b| {
            let a = after.node(b.id)?;
            (a.label != b.label).then(|| {
                format!(
                    "- `{}`: {} → {}\n",
                    b.id,
                    cell(&b.label.plain_lines().join(" / ")),
                    cell(&a.label.plain_lines().join(" / "))
                )
            })
        })
        .collect();
    if !relabeled.is_empty() {
        let _ = writeln!(out, "Nodes relabeled:\n\n{}", relabeled.concat());
    }
    let (gained, lost) = (edges_not_in(after, before), edges_not_in(before, after));
    if !gained.is_empty() {
        let _ = writeln!(out, "Edges added in {new}:\n\n{gained}");
    }
    if !lost.is_empty() {
        let _ = writeln!(out, "Edges removed in {new}:\n\n{lost}");
    }
    out
}

/// The edges of `from` that `to` has not (same ends, label and style), one list item each.
fn edges_not_in(from: &StageGraph, to: &StageGraph) -> String {
    let same = |e: &tep_model::graph::Edge, graph: &StageGraph| {
        graph
            .edges()
            .iter()
            .any(|f| f.from == e.from && f.to == e.to && f.label == e.label && f.style == e.style)
    };
    from.edges()
        .iter()
        .filter(|e| !same(e, to))
        .map(|e| {
            let style = if e.style == EdgeStyle::Dotted {
                " (dotted)"
            } else {
                ""
            };
            format!("- `{}`{style}\n", e.describe())
        })
        .collect()
}

/// The "Invariants" section: the invariants of only one revision.
fn invariant_changes(old: Revision, new: Revision) -> String {
    let mut out = String::new();
    out.push_str("## Invariants\n\n");
    let only = |rev: Revision| -> String {
        CATALOG
            .iter()
            .filter(|i| i.revisions() == [rev])
            .map(|i| {
                format!(
                    "- [`{id}`](../invariants.md#{id}) ({}): {}\n",
                    i.level,
                    cell(i.statement),
                    id = i.id
                )
            })
            .collect()
    };
    let shared = CATALOG.iter().filter(|i| i.revisions().len() == 2).count();
    let _ = writeln!(out, "{shared} invariants apply to both revisions.\n");
    let _ = writeln!(out, "Only in {new}:\n\n{}", only(new));
    let _ = writeln!(out, "Only in {old}:\n\n{}", only(old));
    out
}

/// The "Scenarios" section: the scenarios of only one revision.
fn scenario_changes(corpus: &[Scenario], old: Revision, new: Revision) -> String {
    let mut out = String::new();
    out.push_str("## Scenarios\n\n");
    let scenarios = |rev: Revision| -> String {
        corpus
            .iter()
            .filter(|s| s.revisions == [rev])
            .map(|s| format!("- [`{id}`](../scenarios.md#{id})\n", id = s.id))
            .collect()
    };
    let both = corpus.iter().filter(|s| s.revisions.len() == 2).count();
    let _ = writeln!(out, "{both} scenarios apply to both revisions.\n");
    let _ = writeln!(
        out,
        "Only in {new} (mostly throws, which rev1's flowchart has no edge for, and `finalizeContent`):\n\n{}",
        scenarios(new)
    );
    let _ = writeln!(out, "Only in {old}:\n\n{}", scenarios(old));
    out
}
