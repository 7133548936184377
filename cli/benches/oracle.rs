//! What the differential oracle costs a fuzzing case: `tep fuzz` through `tep reference-adapter`
//! (the adapter protocol, a process of its own, as an implementer runs it), the same cases with
//! the oracle on and with `--oracle none`, in one run.
//!
//! Each iteration fuzzes [`CASES`] generated scenarios of one seed (the built-in reference passes
//! them, so no shrinking happens). After the criterion group it prints the ratio of the medians,
//! oracle / none: the oracle's share of a case's time. The target is under 1.3.
//!
//! Run with `cargo bench -p tep --bench oracle` (a release build of `tep`, which it drives).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use tep_conformance::adapter::{AdapterOptions, ProcessAdapter};
use tep_conformance::fuzz::{FuzzOptions, fuzz};

/// Cases per iteration.
const CASES: usize = 200;

fn options(oracle: bool) -> FuzzOptions {
    FuzzOptions {
        cases: CASES,
        oracle,
        ..FuzzOptions::new(5)
    }
}

/// One iteration: `CASES` cases through a running adapter.
fn run(adapter: &mut ProcessAdapter, oracle: bool) -> Duration {
    let started = Instant::now();
    match fuzz(adapter, &options(oracle), |_| {}) {
        Ok(report) => {
            assert!(report.failure.is_none(), "the reference fails a case");
            black_box(report.cases);
        }
        Err(e) => panic!("fuzzing cannot run: {e}"),
    }
    started.elapsed()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let command = format!("{} reference-adapter", env!("CARGO_BIN_EXE_tep"));
    let mut adapter = ProcessAdapter::start(AdapterOptions::new(command))?;
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1));
    let mut medians = Vec::new();
    {
        let mut group = criterion.benchmark_group("fuzz-case");
        group.sampling_mode(SamplingMode::Flat);
        for (name, oracle) in [("oracle", true), ("none", false)] {
            let mut samples = Vec::new();
            group.bench_function(name, |b| {
                b.iter_custom(|iterations| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iterations {
                        let t = run(&mut adapter, oracle);
                        samples.push(t);
                        total += t;
                    }
                    total
                })
            });
            samples.sort();
            medians.push((name, samples.get(samples.len() / 2).copied()));
        }
        group.finish();
    }
    criterion.final_summary();
    if let [(_, Some(with)), (_, Some(without))] = medians[..] {
        let per_case = |d: Duration| d.as_secs_f64() * 1e6 / CASES as f64;
        println!(
            "\noracle: {:.0} µs per case, none: {:.0} µs per case; ratio {:.2} (target < 1.3)",
            per_case(with),
            per_case(without),
            with.as_secs_f64() / without.as_secs_f64()
        );
    }
    Ok(())
}
