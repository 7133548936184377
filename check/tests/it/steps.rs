//! The walk's steps: kept only when asked, every one an edge of the graph on a clean trace, and
//! a refused one kept where the violation points.

use std::collections::BTreeSet;

use tep_check::{
    CheckOptions, CheckReport, Checker, EdgeId, GraphKind, InvariantId, NodeId, TraceRecord,
};
use tep_model::graph::{Revision, StageGraph};

use crate::util::{is_stage, position, trace};

fn checked(id: &str, keep: bool) -> CheckReport {
    check(&trace(id), keep)
}

fn check(records: &[tep_check::TraceRecord], keep: bool) -> CheckReport {
    let checker = Checker::new(CheckOptions::new(Revision::Rev2));
    let checker = if keep { checker.keep_steps() } else { checker };
    checker.check(records).unwrap()
}

/// `pre-deny-skips-body` with the body run through its wrapper after the deny, as the
/// reference's mutant `RunBodyAfterDeny` records it; its steps kept.
fn body_after_deny() -> CheckReport {
    let mut records = trace("pre-deny-skips-body");
    let identity = r#""identity":{"token":"tok-1","callId":"c1","name":"rm","arguments":{"path":"notes.txt"}}"#;
    let result = r#""result":{"isError":false,"content":[{"type":"text","text":"removed"}]}"#;
    let body = [
        format!(r#"{{"kind":"stage","node":"around","call":"c1",{identity}}}"#),
        format!(r#"{{"kind":"stage","node":"toolBody","call":"c1",{identity}}}"#),
        r#"{"kind":"mark","call":"c1","mark":"body-settled","by":"body"}"#.to_owned(),
        format!(r#"{{"kind":"stage","node":"around","call":"c1",{identity},{result}}}"#),
        format!(r#"{{"kind":"stage","node":"around","call":"c1",{identity}}}"#),
    ];
    let denied = position(&records, is_stage(NodeId::Denied, "c1"));
    for (k, line) in body.iter().enumerate() {
        let record: TraceRecord = serde_json::from_str(line).unwrap();
        records.insert(denied + 1 + k, record);
    }
    check(&records, true)
}

#[test]
fn steps_are_kept_only_when_asked() {
    assert!(checked("allow-runs-body", false).steps.is_empty());
    let report = checked("allow-runs-body", true);
    assert!(report.violations.is_empty());
    // A clean walk: every step is an edge (or a side branch), and its edges are the
    // report's coverage.
    let graph = StageGraph::of(Revision::Rev2);
    assert!(!report.steps.is_empty());
    for step in &report.steps {
        assert!(!step.refused, "{step:?}");
        if let Some(edge) = step.edge {
            let e = &graph.edges()[edge.0];
            assert_eq!((e.from, e.to), (step.from, step.to), "{step:?}");
        }
    }
    let edges: BTreeSet<EdgeId> = report.steps.iter().filter_map(|s| s.edge).collect();
    assert_eq!(edges, report.edges);
    // Lines in trace order, one step per record that visits a node.
    assert!(report.steps.windows(2).all(|w| w[0].line < w[1].line));
}

#[test]
fn a_refused_step_is_kept_where_the_violation_points() {
    let report = body_after_deny();
    let violation = report
        .violations
        .iter()
        .find(|v| v.invariant == InvariantId::DenySkipsBody)
        .unwrap();
    let step = report
        .steps
        .iter()
        .find(|s| s.line == violation.lines[0])
        .unwrap();
    assert_eq!(
        (step.graph, step.from, step.to, step.edge, step.refused),
        (
            GraphKind::Pipeline,
            NodeId::Denied,
            NodeId::Around,
            None,
            true
        )
    );
}
