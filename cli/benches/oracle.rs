//! What a fuzzing case costs, and what the differential oracle adds to it, on the path a real
//! `tep fuzz` takes: orphan handling included (this process adopts the adapter's orphans, reaps
//! them after every case and ends them at the end, as `tep fuzz --adapter` does).
//!
//! - `fuzz-case/{oracle,none}`: `tep fuzz` through `tep reference-adapter` (the adapter
//!   protocol, a process of its own, as an implementer runs it), the same cases with the oracle
//!   on and with `--oracle none`;
//! - `builtin/{oracle,none}`: the same on the built-in reference, in process (`tep fuzz` with no
//!   adapter), where nothing but the oracle separates the two;
//! - then, outside criterion, the adapter's cases per second with and without [`IDLE`] idle
//!   processes added to the machine (processes of no one we know, as a busy CI runner has),
//!   measured alternately in one window: the cleanup after each case must not grow with them.
//!
//! Each iteration fuzzes [`CASES`] generated scenarios of one seed (the built-in reference passes
//! them, so no shrinking happens). After the criterion groups it prints the ratios of the
//! medians, oracle / none (the target is under 1.3), and with / without the idle processes (the
//! target is under 1.25).
//!
//! Run with `cargo bench -p tep --bench oracle` (a release build of `tep`, which it drives).

use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use tep_conformance::adapter::{AdapterOptions, ProcessAdapter, adopt_orphans, end_orphans};
use tep_conformance::fuzz::{FuzzOptions, fuzz};
use tep_conformance::runner::{BuiltinReference, Implementation};

/// Cases per iteration.
const CASES: usize = 200;
/// Idle processes added to the machine for the comparison.
const IDLE: usize = 400;
/// Rounds of the idle comparison (each: one run without, one with).
const ROUNDS: usize = 5;
/// Cases per run of the idle comparison.
const IDLE_CASES: usize = 1_000;

fn options(cases: usize, oracle: bool) -> FuzzOptions {
    FuzzOptions {
        cases,
        oracle,
        ..FuzzOptions::new(5)
    }
}

/// The time this thread has run on a CPU (Linux's schedstat): what a case costs us, whatever
/// else a shared machine is doing. Zero elsewhere.
fn on_cpu() -> Duration {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .map_or(Duration::ZERO, Duration::from_nanos)
}

/// A run's wall time and this thread's CPU time in it.
#[derive(Clone, Copy)]
struct Spent {
    wall: Duration,
    cpu: Duration,
}

/// One iteration: `cases` cases through `implementation`.
fn run(implementation: &mut dyn Implementation, cases: usize, oracle: bool) -> Spent {
    let (started, cpu) = (Instant::now(), on_cpu());
    match fuzz(implementation, &options(cases, oracle), |_| {}) {
        Ok(report) => {
            assert!(report.failure.is_none(), "the reference fails a case");
            assert_eq!(report.errored, 0, "{:?}", report.first_error);
            black_box(report.cases);
        }
        Err(e) => panic!("fuzzing cannot run: {e}"),
    }
    Spent {
        wall: started.elapsed(),
        cpu: on_cpu().saturating_sub(cpu),
    }
}

/// The medians of the samples' wall and CPU times.
fn median(samples: &[Spent]) -> Option<Spent> {
    let middle = |mut times: Vec<Duration>| {
        times.sort();
        times.get(times.len() / 2).copied()
    };
    Some(Spent {
        wall: middle(samples.iter().map(|s| s.wall).collect())?,
        cpu: middle(samples.iter().map(|s| s.cpu).collect())?,
    })
}

/// Benches oracle / none on `implementation`; returns the two medians.
fn oracle_or_none(
    criterion: &mut Criterion,
    group: &str,
    implementation: &mut dyn Implementation,
) -> [Option<Spent>; 2] {
    let mut medians = [None, None];
    let mut group = criterion.benchmark_group(group);
    group.sampling_mode(SamplingMode::Flat);
    for (i, (name, oracle)) in [("oracle", true), ("none", false)].into_iter().enumerate() {
        let mut samples = Vec::new();
        group.bench_function(name, |b| {
            b.iter_custom(|iterations| {
                let mut total = Duration::ZERO;
                for _ in 0..iterations {
                    let t = run(implementation, CASES, oracle);
                    samples.push(t);
                    total += t.wall;
                }
                total
            })
        });
        medians[i] = median(&samples);
    }
    group.finish();
    medians
}

/// `n` idle processes that are none of ours: started while this process is not a subreaper,
/// by a shell that exits at once, so they are reparented away from us (to init, or to the
/// machine's own subreaper), as unrelated processes are. Their pids, to kill them after.
fn idle_processes(n: usize) -> Vec<i32> {
    let _ = rustix::process::set_child_subreaper(None);
    let script =
        format!("for i in $(seq {n}); do sleep 600 </dev/null >/dev/null 2>&1 & echo $!; done");
    let spawned = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .spawn();
    let mut pids = Vec::new();
    if let Ok(mut shell) = spawned {
        if let Some(out) = shell.stdout.take() {
            pids.extend(
                BufReader::new(out)
                    .lines()
                    .map_while(Result::ok)
                    .filter_map(|line| line.trim().parse::<i32>().ok()),
            );
        }
        let _ = shell.wait();
    }
    let _ = adopt_orphans();
    assert_eq!(pids.len(), n, "cannot start {n} idle processes");
    pids
}

/// Kills the idle processes, and waits (up to 10 s) until whoever adopted them has reaped
/// them: a zombie is still a process in `/proc`.
fn kill_all(pids: &[i32]) {
    for pid in pids
        .iter()
        .filter_map(|&p| rustix::process::Pid::from_raw(p))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && pids
            .iter()
            .any(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
    {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn processes_on_the_machine() -> usize {
    std::fs::read_dir("/proc").map_or(0, |dir| {
        dir.filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count()
    })
}

/// Cases per second through `adapter` without and with [`IDLE`] idle processes, alternately.
fn with_and_without_idle_processes(adapter: &mut ProcessAdapter) -> [Option<Spent>; 2] {
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let mut seen = [0, 0];
    for _ in 0..ROUNDS {
        seen[0] = processes_on_the_machine();
        without.push(run(adapter, IDLE_CASES, true));
        let idle = idle_processes(IDLE);
        seen[1] = processes_on_the_machine();
        with.push(run(adapter, IDLE_CASES, true));
        kill_all(&idle);
    }
    println!(
        "\nidle comparison: {ROUNDS} rounds of {IDLE_CASES} cases (oracle on), alternately with {} \
         and {} processes on the machine",
        seen[0], seen[1]
    );
    [median(&without), median(&with)]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // As `tep fuzz --adapter` does: the adapter's orphans are ours to reap and end.
    adopt_orphans()?;
    let command = format!("{} reference-adapter", env!("CARGO_BIN_EXE_tep"));
    let mut adapter = ProcessAdapter::start(AdapterOptions::new(command))?;
    let mut builtin = BuiltinReference::new(Vec::new());
    let mut criterion = Criterion::default()
        .configure_from_args()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1));
    let through_adapter = oracle_or_none(&mut criterion, "fuzz-case", &mut adapter);
    let in_process = oracle_or_none(&mut criterion, "builtin", &mut builtin);
    criterion.final_summary();
    let idle = with_and_without_idle_processes(&mut adapter);
    drop(adapter);
    end_orphans();

    let per_case = |d: Duration, cases: usize| d.as_secs_f64() * 1e6 / cases as f64;
    let rate = |d: Duration, cases: usize| cases as f64 / d.as_secs_f64();
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64();
    println!("medians; `cpu` is this process's thread (the adapter's own CPU is not in it):");
    for (what, medians) in [
        ("tep reference-adapter", through_adapter),
        ("built-in reference", in_process),
    ] {
        if let [Some(with), Some(without)] = medians {
            println!(
                "{what}: oracle {:.0} µs per case ({:.0} cpu), none {:.0} µs ({:.0} cpu); \
                 ratio {:.2} wall, {:.2} cpu (target < 1.3)",
                per_case(with.wall, CASES),
                per_case(with.cpu, CASES),
                per_case(without.wall, CASES),
                per_case(without.cpu, CASES),
                ratio(with.wall, without.wall),
                ratio(with.cpu, without.cpu),
            );
        }
    }
    if let [Some(without), Some(with)] = idle {
        println!(
            "tep reference-adapter, oracle on: {:.0} cases/s ({:.0} µs cpu per case), {:.0} cases/s \
             ({:.0} µs cpu) with {IDLE} idle processes added; ratio {:.2} wall, {:.2} cpu \
             (target < 1.25)",
            rate(without.wall, IDLE_CASES),
            per_case(without.cpu, IDLE_CASES),
            rate(with.wall, IDLE_CASES),
            per_case(with.cpu, IDLE_CASES),
            ratio(with.wall, without.wall),
            ratio(with.cpu, without.cpu),
        );
    }
    Ok(())
}
