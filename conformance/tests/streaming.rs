//! The checker streams: its state is bounded by the open batch, not by the trace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use tep_conformance::checker::{CheckOptions, Checker};
use tep_conformance::scenario::corpus;
use tep_conformance::scripted::run_reference;
use tep_conformance::trace_io::repeat_batches;
use tep_reference::graph::Revision;
use tep_reference::trace::TraceRecord;

fn long_trace(scenario: &str, batches: usize) -> Vec<TraceRecord> {
    let scenario = corpus()
        .unwrap()
        .into_iter()
        .find(|s| s.id == scenario)
        .unwrap();
    repeat_batches(
        &run_reference(&scenario, Revision::Rev2, &[]).unwrap(),
        batches,
    )
}

#[test]
fn state_is_bounded_by_the_open_batch_not_the_trace_length() {
    let batches = 2_000;
    let trace = long_trace("mixed-batch", batches);
    let mut checker = Checker::new(CheckOptions::new(Revision::Rev2));
    let mut most = 0;
    for (i, record) in trace.iter().enumerate() {
        checker.feed(i + 1, record).unwrap();
        most = most.max(checker.tracked_calls());
    }
    assert_eq!(most, 6, "never more than the six calls of one batch");
    let report = checker.finish().unwrap();
    assert!(report.is_clean(), "{:?}", report.violations.first());
    assert_eq!(report.records, trace.len());
}

#[test]
fn sub_calls_are_dropped_with_their_batch() {
    let trace = long_trace("code-mode-every-path", 500);
    let mut checker = Checker::new(CheckOptions::new(Revision::Rev2));
    let mut most = 0;
    for (i, record) in trace.iter().enumerate() {
        checker.feed(i + 1, record).unwrap();
        most = most.max(checker.tracked_calls());
    }
    assert_eq!(most, 6, "the run_code call and its five sub-calls");
    assert!(checker.finish().unwrap().is_clean());
}
