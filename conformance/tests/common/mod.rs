//! What the checker tests share: the reference's trace of a corpus scenario, drive mode's
//! options for it, and ways to find and move its records.

// Each test binary uses its own part of these.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;

use tep_check::invariants::InvariantId;
use tep_check::{CheckOptions, ScenarioFacts, Violation, check_records};
use tep_conformance::scenario::{Scenario, corpus};
use tep_conformance::scripted::run_reference;
use tep_model::graph::{NodeId, Revision};
use tep_model::identity::CallId;
use tep_model::trace::{MarkKind, ObservationLevel, TraceRecord};

pub fn scenario(id: &str) -> Scenario {
    corpus()
        .unwrap()
        .into_iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no scenario {id}"))
}

/// The reference's trace of scenario `id` (rev2).
pub fn trace(id: &str) -> Vec<TraceRecord> {
    run_reference(&scenario(id), Revision::Rev2, &[]).unwrap()
}

/// Drive mode's options for scenario `id` at `level` (rev2).
pub fn options(id: &str, level: ObservationLevel) -> CheckOptions {
    drive_options(&scenario(id), Revision::Rev2, level)
}

/// Drive mode's options for a scenario in `revision` at `level`.
pub fn drive_options(s: &Scenario, revision: Revision, level: ObservationLevel) -> CheckOptions {
    CheckOptions::new(revision)
        .observed(level)
        .with_facts(ScenarioFacts::from(s))
}

/// Every violation the checker reports, in its order.
pub fn findings(options: &CheckOptions, records: &[TraceRecord]) -> Vec<Violation> {
    check_records(options, records)
        .unwrap_or_else(|e| panic!("{e}"))
        .violations
}

pub fn violations(options: &CheckOptions, records: &[TraceRecord]) -> BTreeSet<InvariantId> {
    check_records(options, records)
        .unwrap_or_else(|e| panic!("{e}"))
        .invariants()
}

pub fn position(records: &[TraceRecord], pred: impl Fn(&TraceRecord) -> bool) -> usize {
    records.iter().position(pred).expect("the record is there")
}

pub fn is_stage(node: NodeId, call: &str) -> impl Fn(&TraceRecord) -> bool + '_ {
    move |r| matches!(r, TraceRecord::Stage(o) if o.node == node && o.call.as_ref().map(CallId::as_str) == Some(call))
}

pub fn is_event<'a>(ty: &'a str, call: &'a str) -> impl Fn(&TraceRecord) -> bool + 'a {
    move |r| matches!(r, TraceRecord::Event(e) if e.event.body.type_name() == ty && r.call().map(CallId::as_str) == Some(call))
}

/// The mark of a sub-call's binding settling in the program (resolved or rejected).
pub fn is_binding_settled(call: &str) -> impl Fn(&TraceRecord) -> bool + '_ {
    move |r| {
        matches!(r, TraceRecord::Mark(m) if m.call.as_str() == call
            && matches!(m.mark, MarkKind::BindingResolved | MarkKind::BindingRejected))
    }
}

/// Moves the record at `from` to stand before the record now at `to`.
pub fn move_record(records: &mut Vec<TraceRecord>, from: usize, to: usize) {
    let r = records.remove(from);
    records.insert(if to > from { to - 1 } else { to }, r);
}
