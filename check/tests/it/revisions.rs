//! The two revisions really differ where the spec does, and only there.
//!
//! Every scenario that applies to both revisions is run on the reference in each mode; each trace
//! is then checked against the *other* revision. The violations must all be invariants whose
//! revision window differs (plus the graph walk, since the graphs differ), and together they must
//! name every difference the shared scenarios can show.

use std::collections::BTreeSet;

use tep_check::CATALOG;
use tep_check::invariants::InvariantId;
use tep_check::{CheckOptions, check_records};
use tep_model::graph::Revision;

use crate::util::{corpus, trace_in};

/// Invariants that apply to one revision only, and the walk (whose graph changed).
fn changed() -> BTreeSet<InvariantId> {
    CATALOG
        .iter()
        .filter(|i| i.revisions().len() == 1)
        .map(|i| i.id)
        .chain([InvariantId::StageGraphWalk])
        .collect()
}

fn cross_check(produced: Revision, checked: Revision) -> BTreeSet<InvariantId> {
    let changed = changed();
    let mut reported = BTreeSet::new();
    for scenario in corpus().iter().filter(|s| s.revisions.len() == 2) {
        let trace = trace_in(&scenario.id, produced);
        let options = CheckOptions::new(checked).with_facts(scenario.facts.clone());
        let report = check_records(&options, &trace).unwrap();
        assert!(
            !report.violations.is_empty(),
            "{}: a {produced} trace passes the {checked} checker; the revisions should differ in every batch",
            scenario.id
        );
        let ids = report.invariants();
        let unexpected: Vec<_> = ids.difference(&changed).collect();
        assert!(
            unexpected.is_empty(),
            "{}: the {checked} checker rejects a {produced} trace for {unexpected:?}, which did not change between revisions",
            scenario.id
        );
        reported.extend(ids);
    }
    reported
}

#[test]
fn rev1_traces_fail_rev2_exactly_where_rev2_changed() {
    use InvariantId as I;
    let reported = cross_check(Revision::Rev1, Revision::Rev2);
    // No finalizeContent call for definitions that have one, the flat tool/result, buffered
    // context/message, no dispatch start event and rev1's dispatch summary: each is reported
    // as the rev2 invariant it breaks.
    let expected: BTreeSet<InvariantId> = [
        I::FinalizeOnce,
        I::ToolResultMessageShape,
        I::ContextsAsUserMessages,
        I::SubCallStartLogged,
        I::CodeDispatchContentShape,
    ]
    .into();
    assert_eq!(reported, expected);
}

#[test]
fn rev2_traces_fail_rev1_exactly_where_rev1_differs() {
    use InvariantId as I;
    let reported = cross_check(Revision::Rev2, Revision::Rev1);
    // rev1 has no finalize (nor dispatch start) stage: the walk reports it; rev1 awaits the
    // observers' work, which rev2 does not; and the event shapes are rev1's.
    let expected: BTreeSet<InvariantId> = [
        I::StageGraphWalk,
        I::NotificationAwaited,
        I::ToolResultFlatShape,
        I::ContextsAsContextMessages,
        I::CodeDispatchSummaryShape,
    ]
    .into();
    assert_eq!(reported, expected);
}
