//! The checker streams: its state is bounded by the open batch, not by the trace.

use tep_check::invariants::InvariantId;
use tep_check::repeat_batches;
use tep_check::{
    CheckOptions, Checker, check_reader, check_reader_parallel, check_records, scanned,
};
use tep_model::graph::Revision;
use tep_model::trace::TraceRecord;

use crate::util as common;
use tep_check::shapes::{Shape, records};

fn long_trace(scenario: &str, batches: usize) -> Vec<TraceRecord> {
    repeat_batches(&common::trace(scenario), batches)
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
    assert!(
        report.violations.is_empty(),
        "{:?}",
        report.violations.first()
    );
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
    assert!(checker.finish().unwrap().violations.is_empty());
}

/// How many call states (and sub-call ids, and queued contexts) checking a trace of `shape`
/// scans per record. Machine-independent: a count, not a time.
fn scans_per_record(shape: Shape) -> f64 {
    let trace = records(shape);
    let before = scanned();
    let report = check_records(&CheckOptions::new(shape.revision()), &trace).unwrap();
    assert!(
        report.violations.is_empty(),
        "{:?}",
        report.violations.first()
    );
    (scanned() - before) as f64 / trace.len() as f64
}

#[test]
fn per_record_work_does_not_grow_with_the_batch_or_the_program() {
    let pairs = [
        (Shape::WideBatch(200), Shape::WideBatch(2_000)),
        (Shape::LongProgram(200), Shape::LongProgram(2_000)),
        (
            Shape::ManyContexts {
                calls: 100,
                contexts: 5,
            },
            Shape::ManyContexts {
                calls: 1_000,
                contexts: 5,
            },
        ),
    ];
    for (narrow, wide) in pairs {
        let (few, many) = (scans_per_record(narrow), scans_per_record(wide));
        // Some work is counted (every batch's end goes over its calls), so a ratio means something.
        assert!(few > 0.1, "{}: {few} scans per record", narrow.name());
        assert!(
            many <= 1.5 * few,
            "{}: {few:.2} scans per record, {}: {many:.2}",
            narrow.name(),
            wide.name()
        );
    }
}

#[test]
fn a_breach_is_reported_when_the_record_that_shows_it_is_fed() {
    let mut records = common::trace("allow-runs-body");
    let call = common::position(&records, common::is_event("tool/call", "c1"));
    // The call logged again, two records later.
    records.insert(call + 2, records[call].clone());
    let mut checker = Checker::new(CheckOptions::new(Revision::Rev2));
    for (i, record) in records.iter().enumerate() {
        checker.feed(i + 1, record).unwrap();
        let seen: Vec<_> = checker.violations().iter().map(|v| v.invariant).collect();
        if i < call + 2 {
            assert!(
                seen.is_empty(),
                "before the repeat, at line {}: {seen:?}",
                i + 1
            );
        } else {
            assert!(
                seen.contains(&InvariantId::ToolCallOnce),
                "line {}: {seen:?}",
                i + 1
            );
        }
    }
    let streamed = checker.violations().to_vec();
    let report = checker.finish().unwrap();
    assert_eq!(report.violations[..streamed.len()], streamed[..]);
}

#[test]
fn violations_past_the_cap_are_counted_not_kept() {
    use tep_check::MAX_VIOLATIONS;
    // One fault per batch (the batch never settles), in more batches than the cap.
    let mut one = common::trace("allow-runs-body");
    one.retain(|r| r.node() != Some(tep_model::graph::NodeId::AllResults));
    let batches = MAX_VIOLATIONS + 234;
    let report = check_records(
        &CheckOptions::new(Revision::Rev2),
        &repeat_batches(&one, batches),
    )
    .unwrap();
    assert_eq!(report.violations.len(), MAX_VIOLATIONS);
    assert_eq!(report.omitted, 234);
    assert!(
        report
            .violations
            .iter()
            .all(|v| v.invariant == InvariantId::BatchSettles),
        "{:?}",
        report.violations.first()
    );
    assert!(!report.violations.is_empty());
}

#[test]
fn a_parallel_check_reports_what_a_sequential_one_does() {
    let mix = repeat_batches(&common::corpus_mix(Revision::Rev2), 3);
    let header = tep_check::TraceHeader {
        spec: Revision::Rev2,
        implementation: None,
        capabilities: None,
        observation: Some(tep_check::ObservationLevel::Full),
    };
    let text = tep_model::trace::to_jsonl(
        &std::iter::once(TraceRecord::Header(header))
            .chain(mix)
            .collect::<Vec<_>>(),
    );
    let options = CheckOptions::new(Revision::Rev2);
    let one = check_reader(&options, text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
    for workers in 1..4 {
        let parallel = check_reader_parallel(&options, text.as_bytes(), workers)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(one, parallel, "{workers} workers");
    }
    assert!(one.records > 1000 && one.batches > 10, "{one:?}");
    assert!(one.violations.is_empty(), "{:?}", one.violations.first());
}

/// A cut (`Checker::cut_short`) spares the batch open when it is made, and only that one: the
/// call whose result is missing breaks `one-result-per-call` unless its own batch was cut.
#[test]
fn a_cut_spares_the_open_batch_and_no_later_one() {
    let two = long_trace("allow-runs-body", 2);
    let models: Vec<usize> = two
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r, TraceRecord::Stage(o) if o.node == tep_check::NodeId::Model))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(models.len(), 2);
    let results: Vec<usize> = two
        .iter()
        .enumerate()
        .filter(|(_, r)| common::is_event("tool/result", "c1")(r))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(results.len(), 2);
    // (the batch whose result is dropped, the batch the cut is made in, whether it breaks)
    for (dropped, cut, breaks) in [
        (0, None, true),
        (1, None, true),
        (0, Some(0), false),
        (1, Some(1), false),
        (0, Some(1), true),
        (1, Some(0), true),
    ] {
        let mut checker = Checker::new(CheckOptions::new(Revision::Rev2));
        for (i, record) in two.iter().enumerate() {
            if i == results[dropped] {
                continue;
            }
            checker.feed(i + 1, record).unwrap();
            // Made at the batch's last record: the next `model` record closes it.
            let last_of = |b: usize| models.get(b + 1).map_or(two.len() - 1, |m| m - 1);
            if cut.is_some_and(|b| i == last_of(b)) {
                checker.cut_short();
            }
        }
        let found = checker
            .finish()
            .unwrap()
            .violations
            .iter()
            .any(|v| v.invariant == InvariantId::OneResultPerCall);
        assert_eq!(
            found, breaks,
            "result of batch {dropped} dropped, cut in {cut:?}"
        );
    }
}
