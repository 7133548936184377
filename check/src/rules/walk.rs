//! `stage-graph-walk`: every visit is a step of the graph. The core computes the step
//! (`crate::checker::walk`); this rule names the refused steps nothing more specific explains.

use tep_model::graph::NodeId as N;

use super::plant::{call_of, is_stage, stage};
use super::{Claim, Refused, Rule};
use crate::invariants::{CheckKind::Step, InvariantId as I, Level::Must, Read, Source::Doc, entry};
use crate::observation::ObservationLevel::Events;

pub(crate) const STAGE_GRAPH_WALK: Rule = Rule::new(entry(
    I::StageGraphWalk,
    Must,
    "Each call's stage visits follow edges of the stage graph, and the outcome a stage ends with selects the labeled edge taken next. A trace may pass over the stages its observation level does not hold.",
    &[Doc("Tool Execution Pipeline")],
    Step,
    Events,
    &[
        Read::Node(N::ToolCall),
        Read::Node(N::Pre),
        Read::Node(N::Approval),
        Read::Node(N::Guards),
        Read::Node(N::Denied),
        Read::Node(N::Around),
        Read::Node(N::ToolBody),
        Read::Node(N::FsGate),
        Read::Node(N::Post),
        Read::Node(N::Normalized),
        Read::Node(N::Finalize),
        Read::Node(N::Final),
        Read::Node(N::ToolResult),
        Read::Node(N::DispatchStart),
        Read::Node(N::RunCode),
    ],
))
.claims(refused)
.plants(|r| {
    // A dispatched call whose post-execute was never recorded: tools/execute straight to what
    // follows post-execute (a skipped guard after an allow is `allow-reaches-guards`').
    let p = (1..r.len()).find(|&i| {
        is_stage(&r[i], N::Post)
            && (0..i)
                .rev()
                .find(|&k| call_of(&r[k]) == call_of(&r[i]) && stage(&r[k]).is_some())
                .is_some_and(|k| is_stage(&r[k], N::Around))
    })?;
    r.remove(p);
    Some(())
});

fn refused(r: &Refused<'_>) -> Option<Claim> {
    let why = if r.missing.is_empty() {
        r.error.to_string()
    } else {
        let names: Vec<String> = r.missing.iter().map(|n| format!("`{n}`")).collect();
        format!(
            "{} {} not recorded (required at level {})",
            names.join(", "),
            if names.len() == 1 { "was" } else { "were" },
            r.level
        )
    };
    r.claim(
        format!("{} after {}: {why}", r.here(), r.call.at_position()),
        false,
    )
}
