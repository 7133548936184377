//! The path a scenario's trace took, for drawing it: every record's step, each from where its
//! call really was (the checker follows a call on its detours).

use std::collections::{BTreeMap, BTreeSet};

use tep_check::StepRecord;

use crate::outcome::RunReport;
use crate::report::GraphName;

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

/// The paths of a run's scenarios, for [`Page::paths`]: each the path its trace took, as the
/// checker followed it (on a detour, from where the call really was).
pub fn paths(run: &RunReport) -> BTreeMap<String, TakenPath> {
    run.scenarios
        .iter()
        .map(|s| {
            let path = TakenPath {
                steps: s.steps.clone(),
            };
            (s.id.clone(), path)
        })
        .collect()
}

/// The path a scenario's trace took ([`paths`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TakenPath {
    /// Every record's step, in trace order, each from where its call really was.
    pub steps: Vec<StepRecord>,
}
