//! Checker throughput, against the cost of merely parsing the same JSON Lines.
//!
//! Two ratios matter, both measured in one run: checking against parsing (the price of the
//! invariants per record), and per-record cost as the trace grows 1x, 10x, 100x (it must stay
//! flat: one pass, state bounded by the open batch). Run with `cargo bench -p tep-conformance`.

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tep_conformance::checker::CheckOptions;
use tep_conformance::scenario::corpus;
use tep_conformance::scripted::run_reference;
use tep_conformance::trace_io::{check_reader, for_each_record, repeat_batches};
use tep_reference::graph::Revision;
use tep_reference::trace::to_jsonl;

fn long_jsonl(batches: usize) -> (String, usize) {
    let scenario = corpus()
        .ok()
        .and_then(|c| c.into_iter().find(|s| s.id == "mixed-batch"))
        .map(|s| run_reference(&s, Revision::Rev2, &[]));
    let Some(Ok(one)) = scenario else {
        panic!("the mixed-batch scenario must run on the reference");
    };
    let records = repeat_batches(&one, batches);
    (to_jsonl(&records), records.len())
}

fn throughput(c: &mut Criterion) {
    let options = CheckOptions::new(Revision::Rev2);
    let mut group = c.benchmark_group("trace");
    for batches in [10, 100, 1000] {
        let (jsonl, records) = long_jsonl(batches);
        group.throughput(Throughput::Elements(records as u64));
        group.bench_with_input(BenchmarkId::new("parse", batches), &jsonl, |b, text| {
            b.iter(|| {
                let mut n = 0;
                let _ = for_each_record(text.as_bytes(), |_, _| {
                    n += 1;
                    Ok(())
                });
                n
            })
        });
        group.bench_with_input(
            BenchmarkId::new("parse+check", batches),
            &jsonl,
            |b, text| b.iter(|| check_reader(&options, text.as_bytes()).map(|r| r.records)),
        );
    }
    group.finish();
}

criterion_group!(benches, throughput);
criterion_main!(benches);
