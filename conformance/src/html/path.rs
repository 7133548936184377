//! The path a scenario's trace took, for drawing it: every record's step, each from where its
//! call really was, and the edges the path took.

use std::collections::{BTreeMap, BTreeSet};

use tep_check::StepRecord;
use tep_model::graph::{GraphKind, NodeId, Revision, StageGraph};

use super::Page;
use crate::report::{EdgeCoverage, GraphName};
use crate::runner::RunReport;

/// Whether a step is drawn as a line of its own: it is not one edge of the graph.
pub(super) fn is_line(step: &StepRecord) -> bool {
    step.edge.is_none() && step.from != step.to
}

/// The steps of a path that are not one edge, as `from>to:r` (refused) or `from>to:i`
/// (implied), for the row's data.
pub(super) fn line_steps(steps: &[StepRecord], graph: GraphName) -> String {
    let mut seen = BTreeSet::new();
    steps
        .iter()
        .filter(|step| GraphName::from(step.graph) == graph && is_line(step))
        .filter(|step| seen.insert((step.from, step.to)))
        .map(|step| {
            format!(
                "{}>{}:{}",
                step.from,
                step.to,
                if step.refused { "r" } else { "i" }
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The paths of a run's scenarios, for [`Page::paths`]: each the path its trace took.
pub fn paths(run: &RunReport) -> BTreeMap<String, TakenPath> {
    run.scenarios
        .iter()
        .map(|s| {
            let path = taken_path(run.spec, &s.steps, s.trace.as_deref());
            (s.id.clone(), path)
        })
        .collect()
}

/// The path a trace took. When the checker refuses a step it keeps the call where it stood,
/// so the call's next steps start there too until one is legal from there: here those steps
/// start where the call really was (`records` name each step's call), and are edges when the
/// graph has one from there. Without the records, the checker's steps.
pub fn taken_path(
    spec: Revision,
    steps: &[StepRecord],
    records: Option<&[tep_model::trace::TraceRecord]>,
) -> TakenPath {
    let Some(records) = records else {
        return TakenPath {
            steps: steps.to_vec(),
            phantom: BTreeSet::new(),
        };
    };
    let mut phantom = BTreeSet::new();
    // Per call on a detour: where the checker holds it, and where it really is.
    let mut detours: BTreeMap<(bool, String), (NodeId, NodeId)> = BTreeMap::new();
    let mut path = Vec::with_capacity(steps.len());
    for step in steps {
        let call = step
            .line
            .checked_sub(1)
            .and_then(|i| records.get(i))
            .and_then(|r| r.call());
        let Some(call) = call else {
            path.push(*step);
            continue;
        };
        let key = (step.graph == GraphKind::CodeMode, call.to_string());
        match detours.get(&key).copied() {
            Some((held, really)) if held == step.from => {
                let graph = match step.graph {
                    GraphKind::Pipeline => StageGraph::of(spec),
                    GraphKind::CodeMode => StageGraph::code_mode(spec),
                };
                let edge = graph.edge(really, step.to).map(|(id, _)| id);
                if let Some(held_edge) = step.edge.filter(|e| Some(*e) != edge) {
                    phantom.insert((
                        GraphName::from(step.graph) == GraphName::CodeMode,
                        held_edge.0,
                    ));
                }
                path.push(StepRecord {
                    from: really,
                    edge,
                    refused: edge.is_none(),
                    ..*step
                });
                if step.refused {
                    detours.insert(key, (held, step.to));
                } else {
                    detours.remove(&key);
                }
            }
            _ => {
                if step.refused {
                    detours.insert(key, (step.from, step.to));
                } else {
                    detours.remove(&key);
                }
                path.push(*step);
            }
        }
    }
    TakenPath {
        steps: path,
        phantom,
    }
}

/// The path a scenario's trace took ([`paths`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TakenPath {
    /// Every record's step, in trace order, each from where its call really was.
    pub steps: Vec<StepRecord>,
    /// The edges the checker counted for steps it started where it held a call after a
    /// refused step (graph is Code Mode, edge number): the call did not take them.
    pub phantom: BTreeSet<(bool, usize)>,
}

impl TakenPath {
    /// The edges of `graph` the path took: those the report says (`reported`, which also
    /// holds what no single step shows) and those of its steps, less the phantom ones.
    pub(super) fn edges(&self, graph: GraphName, reported: &[usize]) -> Vec<usize> {
        let code_mode = graph == GraphName::CodeMode;
        let mut edges: BTreeSet<usize> = reported.iter().copied().collect();
        edges.extend(path_edges(&self.steps, graph));
        edges.retain(|e| !self.phantom.contains(&(code_mode, *e)));
        edges.into_iter().collect()
    }
}

/// The coverage of `graph` counted from the scenarios' paths (which follow a call on its
/// detours), when the page has them: the edges and their counts agree with the rows.
pub(super) fn path_coverage(page: &Page<'_>, graph: GraphName) -> Option<EdgeCoverage> {
    if page.paths.is_empty() {
        return None;
    }
    let mut coverage = match graph {
        GraphName::Pipeline => page.report.coverage.edges.clone(),
        GraphName::CodeMode => page.report.coverage.code_mode_edges.clone(),
    };
    for e in &mut coverage.edges {
        e.scenarios = 0;
    }
    for s in &page.report.scenarios {
        let Some(path) = page.paths.get(&s.id) else {
            continue;
        };
        let reported = match graph {
            GraphName::Pipeline => &s.edges,
            GraphName::CodeMode => &s.code_mode_edges,
        };
        for n in path.edges(graph, reported) {
            if let Some(e) = coverage.edges.get_mut(n) {
                e.scenarios += 1;
            }
        }
    }
    coverage.taken = coverage.edges.iter().filter(|e| e.scenarios > 0).count();
    Some(coverage)
}

/// The edges of `graph` a path took, by number.
pub(super) fn path_edges(steps: &[StepRecord], graph: GraphName) -> Vec<usize> {
    let edges: BTreeSet<usize> = steps
        .iter()
        .filter(|s| GraphName::from(s.graph) == graph)
        .filter_map(|s| s.edge.map(|e| e.0))
        .collect();
    edges.into_iter().collect()
}
