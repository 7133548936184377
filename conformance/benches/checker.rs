//! Checker throughput against the JSON floor, and per-record cost as batches and programs widen.
//!
//! For each generated trace ([`tep_conformance::generate`]) one run measures, side by side:
//!
//! - `floor`: reading the JSON Lines into `serde::de::IgnoredAny` (the least any reader can do);
//! - `walk`: visiting every key, string and number of those lines through serde's visitor
//!   callbacks, borrowing every string and building nothing: the least a typed reader built on
//!   serde's visitors can do (serde_json reads `IgnoredAny` in a tighter loop than any visitor
//!   gets; `tep`'s own reader walks the bytes by hand and is not bound by it).
//!   Like `tep check` it reads from a `&str`, whose UTF-8 was checked once for the whole text;
//!   the floor reads bytes and checks no UTF-8 at all;
//! - `typed`: reading them into `TraceRecord`s the way `tep check` does ([`for_each_record`]:
//!   the hand-written single pass);
//! - `check`: the whole `tep check` pass on one thread ([`check_reader`], `tep check -j 1`);
//! - `threads`: the whole pass as `tep check` runs it by default, parsing on one worker thread
//!   per core while this thread checks ([`check_reader_parallel`]). Its time is wall time (the
//!   time a user waits), and its CPU time (every thread's) is reported beside it.
//!
//! The bench uses the allocator `tep` uses (mimalloc), so that it measures what ships.
//!
//! After the criterion groups it prints a table: nanoseconds per record (the median of the
//! samples, in on-CPU time where Linux reports it, so that a busy machine's other processes do
//! not count) and each pass's speed relative to the floor (1.0 = as fast as merely reading the
//! JSON; the goal is at least 0.5 for `check` on the corpus mix; `walk`'s ratio is the ceiling
//! of a reader that goes through serde's visitors), then the spread of `check`'s per-record
//! cost across widths (max / min; it must stay within 1.5), then, for the corpus mix, the median
//! `check/floor` of 21 pairs of the two run alternately, which a busy machine moves less than
//! the table's ratio of two medians measured apart. The floor runs on one thread;
//! `threads/floor` compares the parallel check's wall time with it, on as many cores as the
//! machine has (printed with the table).
//!
//! Run with `cargo bench -p tep-conformance --bench checker`; add `-- corpus` (or `wide`,
//! `program`, `contexts`, or several: `'wide|program'`) to run only those groups. The widest traces take a few seconds per iteration.

mod cpu_time;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};

type Group<'c> = BenchmarkGroup<'c, WallTime>;
type BenchGroup = fn(&mut Criterion);
use cpu_time::{describe_ratios, on_cpu, paired_ratios, pairs, process_cpu};
use serde::de::IgnoredAny;
use tep_check::CheckOptions;
use tep_check::{check_reader, check_reader_parallel, for_each_record, parsing_workers};
use tep_conformance::generate::{Shape, jsonl};
use tep_model::graph::Revision;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The passes measured on every trace.
const PASSES: [&str; 5] = ["floor", "walk", "typed", "check", "threads"];

/// The CPU time of the `threads` pass, per (trace, sample), in nanoseconds per iteration.
const THREADS_CPU: &str = "threads-cpu";

/// Per-iteration times of every (trace, pass), in nanoseconds, and each trace's record count.
#[derive(Default)]
struct Samples {
    times: BTreeMap<(String, &'static str), Vec<f64>>,
    records: BTreeMap<String, usize>,
}

thread_local! {
    static SAMPLES: RefCell<Samples> = RefCell::default();
}

/// The non-empty lines of a trace, found with memchr as `tep check` finds them.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let bytes = text.as_bytes();
    let mut start = 0;
    memchr::memchr_iter(b'\n', bytes)
        .chain([bytes.len()])
        .map(move |end| {
            // Both ends are at a newline or an end of the text: char boundaries.
            let line = &text[start..end];
            start = end + 1;
            line
        })
        .filter(|line| !line.is_empty())
}

/// Reads every line into `IgnoredAny`.
fn floor(text: &str) -> usize {
    lines(text)
        .filter(|line| serde_json::from_slice::<IgnoredAny>(line.as_bytes()).is_ok())
        .count()
}

/// A value visited through serde's callbacks: strings borrowed, nothing kept.
struct Walked;

impl<'de> serde::Deserialize<'de> for Walked {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Walked)
    }
}

impl<'de> serde::de::Visitor<'de> for Walked {
    type Value = Walked;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Walked, E> {
        black_box(v);
        Ok(Walked)
    }
    fn visit_u64<E>(self, v: u64) -> Result<Walked, E> {
        black_box(v);
        Ok(Walked)
    }
    fn visit_i64<E>(self, v: i64) -> Result<Walked, E> {
        black_box(v);
        Ok(Walked)
    }
    fn visit_f64<E>(self, v: f64) -> Result<Walked, E> {
        black_box(v);
        Ok(Walked)
    }
    fn visit_unit<E>(self) -> Result<Walked, E> {
        Ok(Walked)
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Walked, E> {
        black_box(v);
        Ok(Walked)
    }
    fn visit_str<E>(self, v: &str) -> Result<Walked, E> {
        black_box(v);
        Ok(Walked)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Walked, A::Error> {
        while seq.next_element::<Walked>()?.is_some() {}
        Ok(Walked)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Walked, A::Error> {
        while let Some(key) = map.next_key::<&'de str>()? {
            black_box(key);
            map.next_value::<Walked>()?;
        }
        Ok(Walked)
    }
}

/// Visits every line, as [`floor`] reads it.
fn walk(text: &str) -> usize {
    lines(text)
        .filter(|line| serde_json::from_str::<Walked>(line).is_ok())
        .count()
}

fn typed(text: &str) -> usize {
    let mut n = 0;
    let _ = for_each_record(text.as_bytes(), |_, record| {
        black_box(&record);
        n += 1;
        Ok(())
    });
    n
}

fn check(text: &str, revision: Revision) -> usize {
    check_reader(&CheckOptions::new(revision), text.as_bytes()).map_or(0, |r| r.records)
}

fn threads(text: &str, revision: Revision) -> usize {
    let options = CheckOptions::new(revision);
    check_reader_parallel(&options, text.as_bytes(), parsing_workers(None)).map_or(0, |r| r.records)
}

/// Benches the three passes on one trace, recording each iteration's time.
fn bench_trace(group: &mut Group<'_>, shape: Shape, times: usize) {
    let Ok(text) = jsonl(shape, times) else {
        panic!("cannot generate {}", shape.name());
    };
    let records = floor(&text);
    let name = shape.name();
    assert_eq!(walk(&text), records, "{name} must be walked whole");
    assert_eq!(typed(&text), records, "{name} must read back whole");
    assert_eq!(
        check(&text, shape.revision()),
        records,
        "{name} must check whole"
    );
    assert_eq!(
        threads(&text, shape.revision()),
        records,
        "{name} must check whole in parallel"
    );
    SAMPLES.with(|s| s.borrow_mut().records.insert(name.clone(), records));
    group.throughput(Throughput::Elements(records as u64));
    for pass in PASSES {
        group.bench_with_input(BenchmarkId::new(pass, &name), &text, |b, text| {
            b.iter_custom(|iters| {
                let (start, cpu_start, all_start) = (Instant::now(), on_cpu(), process_cpu());
                for _ in 0..iters {
                    black_box(match pass {
                        "floor" => floor(text),
                        "walk" => walk(text),
                        "typed" => typed(text),
                        "check" => check(text, shape.revision()),
                        _ => threads(text, shape.revision()),
                    });
                }
                let elapsed = start.elapsed();
                let spent = match (cpu_start, on_cpu()) {
                    // The parallel pass is timed as a user waits for it.
                    _ if pass == "threads" => elapsed,
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => elapsed,
                };
                let per_iteration = |d: Duration| d.as_nanos() as f64 / iters as f64;
                SAMPLES.with(|s| {
                    let mut s = s.borrow_mut();
                    s.times
                        .entry((name.clone(), pass))
                        .or_default()
                        .push(per_iteration(spent));
                    if let (true, Some(a), Some(b)) = (pass == "threads", all_start, process_cpu())
                    {
                        s.times
                            .entry((name.clone(), THREADS_CPU))
                            .or_default()
                            .push(per_iteration(b.saturating_sub(a)));
                    }
                });
                elapsed
            })
        });
    }
}

fn configure<'c>(c: &'c mut Criterion, name: &str) -> Group<'c> {
    let mut group = c.benchmark_group(name);
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    group
}

/// The corpus mix, repeated to about 4 × 10⁵ records.
fn corpus(c: &mut Criterion) {
    let mut group = configure(c, "corpus");
    // Long enough that starting the parallel pass's threads is a small part of it, as it is
    // of `tep check` on a trace worth parallel parsing.
    bench_trace(&mut group, Shape::CorpusMix(Revision::Rev2), 300);
    group.finish();
}

const WIDTHS: [usize; 3] = [1_000, 10_000, 100_000];
/// Calls (or sub-calls) in every trace of a width group: the narrower shapes are repeated, so
/// that every trace is as long as the widest and none fits in a cache the others do not.
const CALLS: usize = 100_000;

fn wide(c: &mut Criterion) {
    let mut group = configure(c, "wide");
    for n in WIDTHS {
        bench_trace(&mut group, Shape::WideBatch(n), CALLS / n);
    }
    group.finish();
}

fn program(c: &mut Criterion) {
    let mut group = configure(c, "program");
    for n in WIDTHS {
        bench_trace(&mut group, Shape::LongProgram(n), CALLS / n);
    }
    group.finish();
}

fn contexts(c: &mut Criterion) {
    let mut group = configure(c, "contexts");
    bench_trace(
        &mut group,
        Shape::ManyContexts {
            calls: 1_000,
            contexts: 10,
        },
        10,
    );
    group.finish();
}

fn median(samples: &[f64]) -> f64 {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// The table of ratios, from what the groups that ran recorded.
fn report() {
    SAMPLES.with(|s| {
        let s = s.borrow();
        let per_record = |name: &str, pass: &'static str| -> Option<f64> {
            let samples = s.times.get(&(name.to_owned(), pass))?;
            let records = *s.records.get(name)?;
            Some(median(samples) / records as f64)
        };
        println!();
        println!(
            "ns per record (median of the samples), and speed relative to the IgnoredAny floor;"
        );
        println!(
            "`threads` is wall time with {} parsing thread(s) on {} core(s), `cpu` its CPU time:",
            parsing_workers(None),
            std::thread::available_parallelism().map_or(1, usize::from)
        );
        println!(
            "{:<28} {:>9} {:>7} {:>7} {:>7} {:>7} {:>7} {:>7} {:>11} {:>11} {:>11} {:>13}",
            "trace",
            "records",
            "floor",
            "walk",
            "typed",
            "check",
            "threads",
            "cpu",
            "walk/floor",
            "typed/floor",
            "check/floor",
            "threads/floor"
        );
        for (name, records) in &s.records {
            let (Some(f), Some(w), Some(t), Some(c), Some(p), Some(cpu)) = (
                per_record(name, "floor"),
                per_record(name, "walk"),
                per_record(name, "typed"),
                per_record(name, "check"),
                per_record(name, "threads"),
                per_record(name, THREADS_CPU),
            ) else {
                continue;
            };
            println!(
                "{name:<28} {records:>9} {f:>7.0} {w:>7.0} {t:>7.0} {c:>7.0} {p:>7.0} {cpu:>7.0} {:>10.2}x {:>10.2}x {:>10.2}x {:>12.2}x",
                f / w,
                f / t,
                f / c,
                f / p
            );
        }
        for family in ["wide-batch", "long-program"] {
            let costs: Vec<(usize, f64)> = WIDTHS
                .iter()
                .filter_map(|n| Some((*n, per_record(&format!("{family}-{n}"), "check")?)))
                .collect();
            if costs.len() < 2 {
                continue;
            }
            let most = costs.iter().map(|c| c.1).fold(f64::MIN, f64::max);
            let least = costs.iter().map(|c| c.1).fold(f64::MAX, f64::min);
            let listed: Vec<String> = costs
                .iter()
                .map(|(n, c)| format!("{n}: {c:.0} ns"))
                .collect();
            println!(
                "{family}: check per record {} (max/min {:.2}, goal <= 1.5)",
                listed.join(", "),
                most / least
            );
        }
    });
}

/// The goal's own figure: `check/floor` on the corpus mix, the two passes run in alternating
/// pairs on one thread ([`paired_ratios`]), which a busy machine moves less than the table's
/// ratio of two medians measured apart.
fn paired_corpus() {
    let shape = Shape::CorpusMix(Revision::Rev2);
    let Ok(text) = jsonl(shape, 300) else {
        panic!("cannot generate {}", shape.name());
    };
    let ratios = paired_ratios(
        pairs(21),
        || {
            black_box(floor(&text));
        },
        || {
            black_box(check(&text, shape.revision()));
        },
    );
    println!(
        "{}: check/floor, the two in alternating pairs on one thread, CPU time: {}",
        shape.name(),
        describe_ratios(&ratios)
    );
}

/// Criterion's options that take a value (so the value is not a filter).
const VALUED: [&str; 14] = [
    "--save-baseline",
    "-s",
    "--baseline",
    "-b",
    "--baseline-lenient",
    "--load-baseline",
    "--sample-size",
    "--warm-up-time",
    "--measurement-time",
    "--nresamples",
    "--noise-threshold",
    "--confidence-level",
    "--significance-level",
    "--output-format",
];

/// Whether the command line's filter (if any; alternatives split on `|`) can select a bench of
/// `group`: the traces of the other groups are then not even generated.
fn wanted(group: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let filters: Vec<&String> = args
        .iter()
        .enumerate()
        .filter(|(i, a)| {
            !a.starts_with('-') && (*i == 0 || !VALUED.contains(&args[i - 1].as_str()))
        })
        .map(|(_, a)| a)
        .collect();
    filters.is_empty()
        || filters
            .iter()
            .any(|f| group.contains(f.as_str()) || f.contains(group))
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    let groups: [(&str, BenchGroup); 4] = [
        ("corpus", corpus),
        ("wide", wide),
        ("program", program),
        ("contexts", contexts),
    ];
    for (name, group) in groups {
        if wanted(name) {
            group(&mut c);
        }
    }
    c.final_summary();
    report();
    if wanted("corpus") {
        paired_corpus();
    }
}
