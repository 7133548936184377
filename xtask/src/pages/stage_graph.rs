//! stage-graph.md: the stage graphs as node and edge tables, with the scenarios taking each edge.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tep_check::{CheckOptions, check_records};
use tep_conformance::scenario::Scenario;
use tep_conformance::scripted::run_reference;
use tep_model::graph::{EdgeId, EdgeStyle, Revision, StageGraph};

use super::{cell, header};

/// The edges each scenario's reference trace takes, per revision.
/// For each edge (of the pipeline graph, and of the Code Mode graph), the scenarios taking it.
type EdgeScenarios = BTreeMap<EdgeId, Vec<String>>;

fn edges_by_scenario(
    corpus: &[Scenario],
    revision: Revision,
) -> Result<(EdgeScenarios, EdgeScenarios), String> {
    let mut by_edge = EdgeScenarios::new();
    let mut by_code_mode_edge = EdgeScenarios::new();
    for s in corpus.iter().filter(|s| s.applies_to(revision)) {
        let trace = run_reference(s, revision, &[])?;
        let report = check_records(&CheckOptions::new(revision), &trace)
            .map_err(|e| format!("{}: {e}", s.id))?;
        if !report.violations.is_empty() {
            return Err(format!(
                "scenario {} fails on the reference ({revision})",
                s.id
            ));
        }
        for edge in report.edges {
            by_edge.entry(edge).or_default().push(s.id.clone());
        }
        for edge in report.code_mode_edges {
            by_code_mode_edge
                .entry(edge)
                .or_default()
                .push(s.id.clone());
        }
    }
    Ok((by_edge, by_code_mode_edge))
}

/// The node and edge tables of a graph, with the scenarios taking each edge.
fn graph_tables(graph: &StageGraph, by_edge: &EdgeScenarios) -> String {
    let mut out = String::new();
    out.push_str("| node | label | kind | phase |\n|---|---|---|---|\n");
    for node in graph.nodes() {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {:?} |",
            node.id,
            cell(&node.label.plain_lines().join(" / ")),
            node.kind.describe(),
            node.phase
        );
    }
    out.push_str(
        "\n| # | from | to | label | style | scenarios taking it |\n|---|---|---|---|---|---|\n",
    );
    for (id, edge) in graph.edge_ids() {
        let scenarios = by_edge.get(&id).map(Vec::as_slice).unwrap_or_default();
        let shown: Vec<String> = scenarios
            .iter()
            .take(4)
            .map(|s| format!("[`{s}`](scenarios.md#{s})"))
            .collect();
        let more = scenarios.len().saturating_sub(4);
        let _ = writeln!(
            out,
            "| {} | `{}` | `{}` | {} | {} | {}{} |",
            id.0 + 1,
            edge.from,
            edge.to,
            edge.label.map_or("—".to_owned(), |l| format!("`{l}`")),
            match edge.style {
                EdgeStyle::Solid => "solid",
                EdgeStyle::Dotted => "dotted",
            },
            if scenarios.is_empty() {
                "**none**".to_owned()
            } else {
                shown.join(", ")
            },
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    out.push('\n');
    out
}

pub fn stage_graph_page(corpus: &[Scenario]) -> Result<String, String> {
    let mut out = header("the stage graph in model/src/graph/ and the scenario corpus");
    out.push_str("# The stage graph as tables\n\n");
    out.push_str(
        "The flowchart of [tool-execution-pipeline.md](tool-execution-pipeline.md), node by node and \
         edge by edge, with the scenarios whose reference trace takes each edge. An edge no \
         scenario takes would be a gap in the corpus; `tep run` reports the coverage.\n\n",
    );
    for revision in Revision::ALL.into_iter().rev() {
        let (pipeline, code_mode) = edges_by_scenario(corpus, revision)?;
        let graphs = [
            ("the pipeline", StageGraph::of(revision), pipeline),
            (
                "Code Mode sub-calls",
                StageGraph::code_mode(revision),
                code_mode,
            ),
        ];
        for (title, graph, by_edge) in graphs {
            let _ = writeln!(
                out,
                "## {revision}, {title}: {} nodes, {} edges\n",
                graph.nodes().len(),
                graph.edges().len()
            );
            out.push_str(&graph_tables(graph, &by_edge));
        }
    }
    Ok(out)
}
