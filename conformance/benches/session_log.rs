//! The session-log reader (`tep check --from deepseek-harness`) against the JSON floor, and its
//! memory as a log grows.
//!
//! The log is made of real ones: the session logs of deepseek-harness 0.1.0-rc.8 the project
//! keeps (`cli/tests/data/deepseek-harness/rc8-*.jsonl`, copies of the shared fixtures), one
//! session header, then all their other lines, repeated as often as a size needs. Each
//! repetition is the same batches again, its approval prompts numbered anew (a real session's
//! prompt ids all differ), so the converter's and the checker's state must not grow with it.
//!
//! - `floor`: reading each line, from the same reader and as the converter reads it (where it
//!   lies in the reader's buffer), into `serde::de::IgnoredAny` (the least any reader can do);
//! - `read`: [`deepseek_harness::convert`], every record made and dropped;
//! - `check`: what `tep check --from deepseek-harness -j 1` does: convert and check each record
//!   ([`TraceCheck`]), on one thread;
//! - `threads`: what it does by default on a long log: the lines parsed on one thread per core
//!   but one, and on this one when it would otherwise wait
//!   ([`deepseek_harness::convert_parallel`]) while this thread checks. Its wall time is what a
//!   user waits; its CPU time is every thread's.
//!
//! The criterion group times them on about 10⁵ lines; after it the bench prints their speed
//! relative to the floor (1.0 = as fast as merely reading the JSON; the goal is at least 0.5
//! for `check`), in CPU time (this thread's, from Linux's schedstat) and in wall time, and
//! `check/floor` again from 21 pairs of the two run alternately (the median of the pairs'
//! ratios, which a busy machine moves less than the ratio of two medians measured apart). Then, in
//! a process of its own for each size, it checks 10⁵, 10⁶ and 5·10⁶ lines streamed from one
//! repetition held in memory, on one thread and then with `threads`, and prints lines per
//! second, the ratio to the floor and the process's peak resident memory (`VmHWM`) after each:
//! it must stay flat as the log grows.
//!
//! Between the two, it checks a log whose one batch runs a program of 1,000 and then 16,000
//! sub-calls (made from the real Code Mode log), and prints the lines a second of each and
//! their ratio: a line must cost about the same in a large batch as in a small one.
//!
//! Run with `cargo bench -p tep-conformance --bench session_log`; `-- --quick` is criterion's.
//! The 5·10⁶-line run reads about 3 GB of JSON and takes some seconds.

mod cpu_time;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::{BufRead, Read};
use std::process::Command;
use std::time::{Duration, Instant};

use cpu_time::{describe_ratios, on_cpu, paired_ratios, pairs, process_cpu};
use criterion::{Criterion, SamplingMode, Throughput};
use serde::de::IgnoredAny;
use tep_check::TraceCheck;
use tep_check::deepseek_harness::{self, Options, parsing_workers};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The real logs, in the project.
const LOGS: [&str; 4] = [
    "rc8-session.jsonl",
    "rc8-cli-s2.jsonl",
    "rc8-cli-s3.jsonl",
    "rc8-cli-s4.jsonl",
];

/// The sizes of the memory runs, in lines.
const SIZES: [usize; 3] = [100_000, 1_000_000, 5_000_000];

/// The environment variable that makes this bench a child that checks that many lines.
const CHILD: &str = "TEP_SESSION_LOG_BENCH_LINES";

const PASSES: [&str; 4] = ["floor", "read", "check", "threads"];

/// One session header and the lines of every log after their own headers, each ending in a
/// newline: what is repeated, cut after every approval prompt id (where a repetition's number
/// goes).
struct Unit {
    header: Vec<u8>,
    pieces: Vec<Vec<u8>>,
    lines: usize,
}

impl Unit {
    /// The `n`th repetition of the body, into `out`.
    fn body(&self, n: usize, out: &mut Vec<u8>) {
        out.clear();
        for (i, piece) in self.pieces.iter().enumerate() {
            if i > 0 {
                out.extend_from_slice(format!("-{n}").as_bytes());
            }
            out.extend_from_slice(piece);
        }
    }
}

/// The approval prompt ids of the lines, quoted.
fn prompt_ids(body: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for line in body.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let kind = event["type"].as_str().unwrap_or_default();
        if let ("approval/asked" | "approval/decided", Some(id)) =
            (kind, event["data"]["id"].as_str())
        {
            ids.push(format!("\"{id}\""));
        }
    }
    ids.sort();
    ids.dedup();
    ids
}

fn unit() -> Unit {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/data/deepseek-harness");
    let mut header = Vec::new();
    let mut body = String::new();
    let mut lines = 0;
    for name in LOGS {
        let text = std::fs::read_to_string(dir.join(name))
            .unwrap_or_else(|e| panic!("cannot read {name}: {e}"));
        let mut rows = text.lines().filter(|l| !l.trim().is_empty());
        let first = rows.next().unwrap_or_default();
        if header.is_empty() {
            header = format!("{first}\n").into_bytes();
        }
        for row in rows {
            body.push_str(row);
            body.push('\n');
            lines += 1;
        }
    }
    // Cut before the closing quote of every prompt id.
    let mut cuts: Vec<usize> = prompt_ids(&body)
        .iter()
        .flat_map(|id| {
            body.match_indices(id.as_str())
                .map(|(at, id)| at + id.len() - 1)
        })
        .collect();
    cuts.sort_unstable();
    assert!(!cuts.is_empty(), "the logs ask no approval");
    let mut pieces = Vec::new();
    let mut from = 0;
    for cut in cuts {
        pieces.push(body.as_bytes()[from..cut].to_vec());
        from = cut;
    }
    pieces.push(body.as_bytes()[from..].to_vec());
    Unit {
        header,
        pieces,
        lines,
    }
}

/// The header, then `times` repetitions of the body, as one reader: one repetition in memory at
/// a time.
struct Repeated<'u> {
    unit: &'u Unit,
    times: usize,
    /// The repetition being given (0: the header).
    at_rep: usize,
    current: Vec<u8>,
    at: usize,
}

impl<'u> Repeated<'u> {
    fn new(unit: &'u Unit, times: usize) -> Self {
        Repeated {
            unit,
            times,
            at_rep: 0,
            current: unit.header.clone(),
            at: 0,
        }
    }
}

impl Read for Repeated<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let available = self.fill_buf()?;
            let n = available.len().min(out.len());
            out[..n].copy_from_slice(&available[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for Repeated<'_> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        Ok(&self.current[self.at..])
    }

    fn consume(&mut self, n: usize) {
        self.at += n;
        if self.at >= self.current.len() && self.at_rep < self.times {
            self.at_rep += 1;
            self.at = 0;
            self.unit.body(self.at_rep, &mut self.current);
        }
    }
}

/// Reads every line as the converter does (from the same reader, each line where it lies in
/// the reader's buffer, one straddling two fills gathered) into `IgnoredAny`.
fn floor(mut log: Repeated<'_>) -> usize {
    let ignored = |line: &[u8]| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        !line.is_empty() && serde_json::from_slice::<IgnoredAny>(line).is_ok()
    };
    let mut partial = Vec::new();
    let mut n = 0;
    loop {
        let available = match log.fill_buf() {
            Ok(bytes) if !bytes.is_empty() => bytes,
            _ => return n + usize::from(ignored(&partial)),
        };
        let Some(first) = memchr::memchr(b'\n', available) else {
            partial.extend_from_slice(available);
            let used = available.len();
            log.consume(used);
            continue;
        };
        let mut start = 0;
        if !partial.is_empty() {
            partial.extend_from_slice(&available[..first]);
            n += usize::from(ignored(&partial));
            partial.clear();
            start = first + 1;
        }
        let from = start;
        for end in memchr::memchr_iter(b'\n', &available[from..]) {
            n += usize::from(ignored(&available[start..from + end]));
            start = from + end + 1;
        }
        partial.extend_from_slice(&available[start..]);
        let used = available.len();
        log.consume(used);
    }
}

/// Converts the log, dropping every record.
fn read(log: Repeated<'_>) -> usize {
    match deepseek_harness::convert(log, Options::default(), |_, made| {
        black_box(made);
        Ok(())
    }) {
        Ok(summary) => summary.lines,
        Err(e) => panic!("the log cannot be read: {e}"),
    }
}

/// Converts and checks the log, as `tep check --from deepseek-harness` does, its lines parsed
/// on `workers` threads while this one checks (none: all on this thread, `-j 1`).
fn check(log: Repeated<'_>, workers: usize) -> usize {
    let mut check = TraceCheck::default();
    let summary =
        deepseek_harness::convert_parallel(log, Options::default(), workers, |line, made| {
            made.feed(&mut check, line)
        });
    match (summary, check.finish()) {
        (Ok(summary), Ok((_, report))) => {
            black_box(report.violations.len());
            summary.lines
        }
        (Err(e), _) => panic!("the log cannot be read: {e}"),
        (_, Err(e)) => panic!("the log cannot be checked: {e}"),
    }
}

fn run(pass: &str, log: Repeated<'_>) -> usize {
    match pass {
        "floor" => floor(log),
        "read" => read(log),
        "check" => check(log, 0),
        // `tep check`'s default on a long log: one parsing thread per core.
        _ => check(log, parsing_workers(None)),
    }
}

/// Per-iteration (CPU, wall) times of every pass, in nanoseconds.
type Samples = BTreeMap<&'static str, Vec<(f64, f64)>>;

thread_local! {
    static SAMPLES: RefCell<Samples> = RefCell::default();
}

/// Repetitions for about `lines` lines (at least one).
fn times_for(unit: &Unit, lines: usize) -> usize {
    (lines.saturating_sub(1)).div_ceil(unit.lines).max(1)
}

fn bench(c: &mut Criterion, unit: &Unit) -> usize {
    let times = times_for(unit, 100_000);
    let lines = 1 + times * unit.lines;
    for pass in PASSES {
        assert_eq!(
            run(pass, Repeated::new(unit, times)),
            lines,
            "{pass} reads every line"
        );
    }
    let mut group = c.benchmark_group("session-log");
    group
        .sampling_mode(SamplingMode::Flat)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(lines as u64));
    for pass in PASSES {
        group.bench_function(pass, |b| {
            b.iter_custom(|iters| {
                // The parallel pass's CPU time is every thread's.
                let cpu_now = || match pass {
                    "threads" => process_cpu(),
                    _ => on_cpu(),
                };
                let (start, cpu) = (Instant::now(), cpu_now());
                for _ in 0..iters {
                    black_box(run(pass, Repeated::new(unit, times)));
                }
                let wall = start.elapsed();
                let spent = match (cpu, cpu_now()) {
                    (Some(a), Some(b)) => b.saturating_sub(a),
                    _ => wall,
                };
                let per = |d: Duration| d.as_nanos() as f64 / iters as f64;
                SAMPLES.with(|s| {
                    s.borrow_mut()
                        .entry(pass)
                        .or_default()
                        .push((per(spent), per(wall)))
                });
                wall
            })
        });
    }
    group.finish();
    lines
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn report(lines: usize) {
    SAMPLES.with(|s| {
        let s = s.borrow();
        let per_line = |pass: &str, wall: bool| -> Option<f64> {
            let samples = s.get(pass)?;
            let times = samples.iter().map(|(cpu, w)| if wall { *w } else { *cpu });
            Some(median(times.collect()) / lines as f64)
        };
        println!();
        println!("{lines} lines of real deepseek-harness logs, ns per line (median), and speed relative to the IgnoredAny floor:");
        println!(
            "`threads` parses on {} thread(s) and the one that checks, on {} core(s); its cpu is every thread's:",
            parsing_workers(None),
            std::thread::available_parallelism().map_or(1, usize::from)
        );
        println!(
            "{:<6} {:>8} {:>8} {:>8} {:>8} {:>11} {:>12} {:>14} {:>13}",
            "time",
            "floor",
            "read",
            "check",
            "threads",
            "read/floor",
            "check/floor",
            "threads/floor",
            "check lines/s"
        );
        for (name, wall) in [("cpu", false), ("wall", true)] {
            let (Some(f), Some(r), Some(c), Some(t)) = (
                per_line("floor", wall),
                per_line("read", wall),
                per_line("check", wall),
                per_line("threads", wall),
            ) else {
                continue;
            };
            println!(
                "{name:<6} {f:>8.0} {r:>8.0} {c:>8.0} {t:>8.0} {:>10.2}x {:>11.2}x {:>13.2}x {:>13.0}",
                f / r,
                f / c,
                f / t,
                1e9 / c
            );
        }
    });
}

/// The goal's own figure: `check/floor` on the bench's log, the two passes run in alternating
/// pairs on one thread ([`paired_ratios`]), which a busy machine moves less than the table's
/// ratio of two medians measured apart.
fn paired(unit: &Unit, lines: usize) {
    let times = times_for(unit, lines);
    let ratios = paired_ratios(
        pairs(21),
        || {
            black_box(floor(Repeated::new(unit, times)));
        },
        || {
            black_box(check(Repeated::new(unit, times), 0));
        },
    );
    println!(
        "check/floor, the two in alternating pairs on one thread, CPU time: {}",
        describe_ratios(&ratios)
    );
}

/// In a child: checks `lines` lines and prints `lines floor-cpu-ns check-cpu-ns check-wall-ns
/// peak-kB`.
fn child(unit: &Unit, lines: usize) {
    let times = times_for(unit, lines);
    let cpu = || on_cpu().unwrap_or_default();
    let start = cpu();
    let read = floor(Repeated::new(unit, times));
    let floor_cpu = cpu().saturating_sub(start);
    let (start, wall) = (cpu(), Instant::now());
    assert_eq!(check(Repeated::new(unit, times), 0), read);
    let (check_cpu, check_wall) = (cpu().saturating_sub(start), wall.elapsed());
    let peak = peak_kb();
    let wall = Instant::now();
    assert_eq!(
        check(Repeated::new(unit, times), parsing_workers(None)),
        read
    );
    let threads_wall = wall.elapsed();
    println!(
        "{read} {} {} {} {peak} {} {}",
        floor_cpu.as_nanos(),
        check_cpu.as_nanos(),
        check_wall.as_nanos(),
        threads_wall.as_nanos(),
        peak_kb()
    );
}

/// The process's peak resident memory so far, in kB (`VmHWM`).
fn peak_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
}

/// Runs a child per size and prints the table.
fn sizes() {
    let Ok(me) = std::env::current_exe() else {
        return;
    };
    println!();
    println!(
        "a process per size: the whole check, its speed relative to the floor, and the process's peak memory"
    );
    println!("(after the check on one thread, then after `threads`, whose time is wall time):");
    println!(
        "{:>9} {:>10} {:>10} {:>12} {:>13} {:>11} {:>9} {:>11} {:>14} {:>9}",
        "lines",
        "floor s",
        "check s",
        "check wall s",
        "check/floor",
        "lines/s",
        "peak MB",
        "threads s",
        "threads/floor",
        "peak MB"
    );
    for size in SIZES {
        let out = match Command::new(&me).env(CHILD, size.to_string()).output() {
            Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).into_owned(),
            Ok(out) => panic!(
                "the {size}-line run failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) => panic!("cannot run {}: {e}", me.display()),
        };
        let fields: Vec<f64> = out
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        let [lines, floor, check, wall, peak, threads, threads_peak] = fields[..] else {
            panic!("the {size}-line run printed {out}");
        };
        println!(
            "{lines:>9} {:>10.2} {:>10.2} {:>12.2} {:>12.2}x {:>11.0} {:>9.1} {:>11.2} {:>13.2}x {:>9.1}",
            floor / 1e9,
            check / 1e9,
            wall / 1e9,
            floor / check,
            lines / (check / 1e9),
            peak / 1024.0,
            threads / 1e9,
            floor / threads,
            threads_peak / 1024.0
        );
    }
}

/// The sub-calls of the one program of [`program_log`], small and large.
const PROGRAM_SIZES: [usize; 2] = [1_000, 16_000];

/// A log whose one batch runs one Code Mode program of `subs` sub-calls, each with its
/// dispatch events and a PreToolUse and a PostToolUse hook (six lines), made from the real
/// Code Mode log `rc8-cli-s3.jsonl`: its lines up to the `run_code` call's `tool/call`, the
/// sub-calls, then its lines from the `run_code` call's `tool/result` on (its own five
/// sub-calls left out). The lines after the sub-calls are numbered on from theirs, and what
/// they name by `seq` (`sourceEventSeqs`) with them.
fn program_log(subs: usize) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../cli/tests/data/deepseek-harness/rc8-cli-s3.jsonl");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let real: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let kind = |v: &serde_json::Value| v["type"].as_str().unwrap_or_default().to_owned();
    let call_of_result = |v: &serde_json::Value| {
        v.pointer("/data/message/source/callId")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned)
    };
    let started = real
        .iter()
        .position(|v| kind(v) == "tool/call" && v["data"]["callId"] == "rc1")
        .unwrap_or_else(|| panic!("{} calls no run_code rc1", path.display()));
    let settled = real
        .iter()
        .position(|v| kind(v) == "tool/result" && call_of_result(v).as_deref() == Some("rc1"))
        .unwrap_or_else(|| panic!("{} has no result of rc1", path.display()));
    let seq_of = |v: &serde_json::Value| v["seq"].as_u64();
    let mut seq = real[..=started]
        .iter()
        .filter_map(seq_of)
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    let mut push = |line: &serde_json::Value| {
        out.push_str(&line.to_string());
        out.push('\n');
    };
    real[..=started].iter().for_each(&mut push);
    let mut event = |kind: &str, data: serde_json::Value| {
        seq += 1;
        serde_json::json!({"type": kind, "seq": seq, "time": 1, "data": data})
    };
    for k in 1..=subs {
        let sub = format!("rc1:code:{k}");
        let arguments = serde_json::json!({"label": format!("k{k}")});
        push(&event(
            "tool/code-dispatch-start",
            serde_json::json!({"rootCallId": "rc1", "parentCallId": "rc1", "subCallId": sub, "name": "mcp__probe__body", "arguments": arguments}),
        ));
        for point in ["PreToolUse", "PostToolUse"] {
            let handler = format!("claude-code:{point}:{k}");
            push(&event(
                "hook/invoked",
                serde_json::json!({"turn": 1, "point": point, "dialect": "claude-code", "handlerId": handler, "matcher": "mcp__probe__.*"}),
            ));
            push(&event(
                "hook/result",
                serde_json::json!({"turn": 1, "point": point, "handlerId": handler, "decision": "pass", "exitCode": 0, "durationMs": 1.5}),
            ));
        }
        push(&event(
            "tool/code-dispatch",
            serde_json::json!({"rootCallId": "rc1", "parentCallId": "rc1", "subCallId": sub, "name": "mcp__probe__body", "arguments": arguments, "isError": false, "content": [{"type": "text", "text": "ok"}]}),
        ));
    }
    let mut renumbered = BTreeMap::new();
    for line in &real[settled..] {
        let mut line = line.clone();
        if let Some(old) = seq_of(&line) {
            seq += 1;
            renumbered.insert(old, seq);
            line["seq"] = serde_json::json!(seq);
        }
        if let Some(named) = line
            .get_mut("sourceEventSeqs")
            .and_then(serde_json::Value::as_array_mut)
        {
            for n in named {
                if let Some(new) = n.as_u64().and_then(|old| renumbered.get(&old)) {
                    *n = serde_json::json!(new);
                }
            }
        }
        push(&line);
    }
    out
}

/// How a batch's size changes the cost of a line: one program of 1,000 and of 16,000
/// sub-calls, each checked on one thread, in lines a second. The ratio of the two is about 1
/// when a line costs the same whatever the batch holds (0.93 when this was written; 0.38 while
/// each hook and dispatch event looked through the batch's every call).
fn batch_size() {
    let mut speeds = Vec::new();
    for subs in PROGRAM_SIZES {
        let log = program_log(subs);
        let mut best = f64::MAX;
        let mut lines = 0;
        for _ in 0..3 {
            let (cpu, wall) = (on_cpu(), Instant::now());
            let mut check = TraceCheck::default();
            let summary = deepseek_harness::convert_parallel(
                log.as_bytes(),
                Options::default(),
                0,
                |line, made| made.feed(&mut check, line),
            )
            .unwrap_or_else(|e| panic!("the program log cannot be read: {e}"));
            let (_, report) = check
                .finish()
                .unwrap_or_else(|e| panic!("the program log cannot be checked: {e}"));
            assert!(
                report.violations.is_empty() && summary.breaches.is_empty(),
                "the program log breaks {:?} {:?}",
                report.violations,
                summary.breaches
            );
            // This thread's CPU time where Linux tells it, else wall time.
            let spent = match (cpu, on_cpu()) {
                (Some(a), Some(b)) => b.saturating_sub(a),
                _ => wall.elapsed(),
            };
            best = best.min(spent.as_secs_f64());
            lines = summary.lines;
        }
        speeds.push((subs, lines, lines as f64 / best.max(1e-9)));
    }
    println!();
    println!(
        "a batch's size: one program of n sub-calls (six lines each), one thread, best of 3 in CPU time:"
    );
    println!("{:>9} {:>9} {:>12}", "sub-calls", "lines", "lines/s");
    for (subs, lines, speed) in &speeds {
        println!("{subs:>9} {lines:>9} {speed:>12.0}");
    }
    if let [(_, _, small), .., (_, _, large)] = speeds[..] {
        println!(
            "large/small: {:.2}x (1.0: a line costs the same in any batch)",
            large / small
        );
    }
}

fn main() {
    let unit = unit();
    if let Some(lines) = std::env::var(CHILD).ok().and_then(|n| n.parse().ok()) {
        child(&unit, lines);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    let lines = bench(&mut c, &unit);
    c.final_summary();
    report(lines);
    paired(&unit, lines);
    batch_size();
    sizes();
}
