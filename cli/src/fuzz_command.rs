//! `tep fuzz`: random scenarios through one implementation (the engine is
//! `tep_conformance::fuzz`); prints the seed first, and on a failure the shrunk scenario, where
//! it was written and the command that replays it. With `--harness`, the implementation is a
//! shipped harness driven through its public interfaces, and the scenarios use only the
//! constructs it has one for (`tep_harness::fuzzing::restriction`).

use std::hash::{BuildHasher, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use tep_conformance::adapter::{AdapterOptions, ProcessAdapter, adopt_orphans, end_orphans};
use tep_conformance::fuzz::{
    CONFIRM_RUNS, FuzzOptions, FuzzReport, Restriction, fuzz as run_fuzz, size, to_corpus_json,
};
use tep_conformance::runner::{BuiltinReference, Implementation};
use tep_conformance::scenario::Scenario;
use tep_conformance::terminal::escape_controls as shown;
use tep_model::graph::Revision;
use tep_reference::mutant::Mutant;

use crate::output::{Stdout, check_writable, note, write_atomically};
use crate::signals::{Signals, kill_children};

/// The options of `tep fuzz`.
#[derive(Debug, clap::Args)]
pub struct FuzzArgs {
    /// The adapter command (split like a shell would). Default: the built-in reference.
    #[arg(long, value_name = "CMD")]
    adapter: Option<String>,
    /// The spec revision to generate for.
    #[arg(long, default_value = "rev2")]
    spec: Revision,
    /// Generate at most this many scenarios.
    #[arg(long, value_name = "N", default_value_t = 500)]
    cases: usize,
    /// Stop generating after this many seconds; also bounds shrinking a failure (counted from
    /// the failure, at most 300 s).
    #[arg(long, value_name = "SECS", value_parser = crate::parse_timeout)]
    time: Option<Duration>,
    /// The run's seed: the same seed generates the same scenarios. Default: a random one,
    /// printed first.
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// SHOULD-level violations are failures too.
    #[arg(long)]
    strict: bool,
    /// Seconds one scenario may take an adapter or a harness (0.1 to 86400).
    #[arg(long, value_name = "SECS", default_value = DEFAULT_TIMEOUT_ARG, value_parser = crate::parse_timeout)]
    timeout: Duration,
    #[command(flatten)]
    harness: crate::harness_command::HarnessArgs,
    /// Write the shrunk failing scenario here. Default: target/tep-fuzz/<its id>.json.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Break the built-in reference on purpose (see `tep mutants`), to watch fuzzing find it.
    #[arg(long, value_name = "NAME", conflicts_with = "adapter")]
    mutant: Vec<Mutant>,
    /// What else judges a scenario besides the invariants: the built-in reference's outcome,
    /// where the spec determines it (docs/conformance.md, "What the oracle compares"), or none.
    #[arg(long, value_enum, default_value_t = Oracle::Reference)]
    oracle: Oracle,
    /// Print how many generated scenarios used each construct of the scenario language.
    #[arg(long)]
    stats: bool,
}

/// `--oracle`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Oracle {
    Reference,
    None,
}

/// `--timeout`'s default, as `tep run`'s.
const DEFAULT_TIMEOUT_ARG: &str = "30";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Violations printed under a failure; the rest are counted.
const SHOWN_VIOLATIONS: usize = 5;

pub fn fuzz(args: FuzzArgs) -> Result<u8> {
    let seed = args.seed.unwrap_or_else(random_seed);
    if let Some(out) = &args.out {
        check_writable(out, "shrunk scenario")?;
    }
    // Signals are ours before the adapter starts: one during its handshake kills it.
    let signals = Signals::install()?;
    let (mut implementation, restriction) = start(&args)?;
    let who = implementation.ready().implementation.name.clone();
    // First, so that a run cut short (Ctrl-C, a CI time limit) can still be replayed.
    note(format_args!(
        "tep fuzz: seed {seed} (replay this run with --seed {seed}); {who} against {}, up to {} case(s){}",
        args.spec,
        args.cases,
        args.time
            .map(|t| format!(" or {} s", t.as_secs_f64()))
            .unwrap_or_default()
    ));
    let mut options = FuzzOptions::new(seed);
    options.spec = args.spec;
    options.cases = args.cases;
    options.time = args.time;
    options.strict = args.strict;
    options.oracle = args.oracle == Oracle::Reference;
    options.stats = args.stats;
    options.restriction = restriction;
    let stop = Arc::new(AtomicBool::new(false));
    options.stop = Some(stop.clone());
    signals.fuzz(stop);
    // A harness takes seconds a case: say how far it got, every ten cases.
    let slow = args.harness.harness.is_some();
    let started = std::time::Instant::now();
    let report = run_fuzz(implementation.as_mut(), &options, |case| {
        if slow && (case + 1) % 10 == 0 {
            note(format_args!(
                "tep fuzz: {} case(s) in {:.0} s",
                case + 1,
                started.elapsed().as_secs_f64()
            ));
        }
    })?;
    drop(implementation);
    end_orphans();
    // A signal killed the adapter mid-case; nothing it started outlives the run.
    let stopped_by = signals.exit_code().filter(|_| report.interrupted);
    if stopped_by.is_some() {
        kill_children();
    }

    let mut out = Stdout::new();
    if args.stats {
        write_stats(&mut out, &report)?;
    }
    let secs = report.elapsed.as_secs_f64();
    let rate = report.cases as f64 / secs.max(1e-9);
    // A shipped harness takes seconds a case: its rate reads better the other way up.
    let rate = if rate >= 1.0 || report.cases == 0 {
        format!("{rate:.0} per second")
    } else {
        format!("{:.1} s per case", secs / report.cases as f64)
    };
    writeln!(
        out,
        "{} case(s) in {secs:.1} s ({rate}): {} skipped, {} errored",
        report.cases, report.skipped, report.errored
    )?;
    if let Some(message) = &report.first_error {
        writeln!(out, "first error: {message}")?;
    }
    write_flaky(&mut out, &args, &report, seed)?;
    if let Some(code) = stopped_by {
        let judged = report.cases - report.skipped - report.errored;
        writeln!(
            out,
            "interrupted: {judged} scenario(s) judged before the signal; replay with --seed {seed}"
        )?;
        if report.failure.is_some() {
            write_failure(&mut out, &args, &report, seed)?;
        }
        return Ok(code);
    }
    if report.failure.is_some() {
        return write_failure(&mut out, &args, &report, seed);
    }
    let judged = report.cases - report.skipped - report.errored;
    if judged == 0 {
        writeln!(
            out,
            "nothing was tested: every generated scenario was skipped or errored"
        )?;
        return Ok(1);
    }
    writeln!(
        out,
        "no failure: {judged} scenario(s) judged{}",
        if args.strict {
            " (SHOULD-level included)"
        } else {
            ""
        }
    )?;
    Ok(if report.errored > 0 { 2 } else { 0 })
}

/// The implementation fuzzed, and what may be generated for it: a harness is driven only
/// through the constructs its profile has a public interface for.
fn start(args: &FuzzArgs) -> Result<(Box<dyn Implementation>, Restriction)> {
    let implementation: Box<dyn Implementation> = match &args.adapter {
        None if args.harness.harness.is_some() => {
            let name = args.harness.harness.as_deref().unwrap_or_default();
            let profile = crate::harness_command::profile(&args.harness, name)?;
            let driver = crate::harness_command::drivers(&args.harness, name, args.timeout, 1)?
                .pop()
                .context("no harness driver")?;
            return Ok((
                Box::new(driver),
                tep_harness::fuzzing::restriction(&profile),
            ));
        }
        Some(command) => {
            // No process an adapter starts outlives the run (Linux; elsewhere its group is killed).
            let _ = adopt_orphans();
            let mut options = AdapterOptions::new(command.clone());
            options.timeout = args.timeout;
            Box::new(ProcessAdapter::start(options)?)
        }
        None => Box::new(BuiltinReference::new(args.mutant.clone())),
    };
    Ok((implementation, Restriction::NONE))
}

/// `--stats`: each construct and the share of the generated scenarios that used it.
fn write_stats(out: &mut Stdout, report: &FuzzReport) -> Result<()> {
    writeln!(
        out,
        "constructs of the {} generated scenario(s):",
        report.cases
    )?;
    let width = report.constructs.keys().map(String::len).max().unwrap_or(0);
    for (construct, n) in &report.constructs {
        let share = 100.0 * *n as f64 / report.cases.max(1) as f64;
        writeln!(out, "  {construct:<width$}  {n:>6}  {share:5.1}%")?;
    }
    Ok(())
}

/// The failures that did not reproduce every time: listed apart, each scenario written beside
/// where a failure's goes, never a failure of the run.
fn write_flaky(out: &mut Stdout, args: &FuzzArgs, report: &FuzzReport, seed: u64) -> Result<()> {
    if report.flaky.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "flaky, not counted as failures ({}): each replayed {CONFIRM_RUNS} times, failed fewer",
        report.flaky.len()
    )?;
    let dir = args
        .out
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| Path::new("target").join("tep-fuzz"), Path::to_path_buf);
    for flaky in &report.flaky {
        let path = dir.join(format!("{}.json", flaky.scenario.id));
        write_atomically(&path, &to_corpus_json(&flaky.scenario))?;
        let level = flaky
            .violations
            .first()
            .map(|v| format!(" [{}]", v.level))
            .unwrap_or_default();
        let how = if flaky.never_reproduced() {
            "could not be reproduced".to_owned()
        } else {
            format!("failed {} of {}", flaky.failed, flaky.runs)
        };
        writeln!(
            out,
            "  case {} of seed {seed}: {}{level}, {how}: {}",
            flaky.case,
            flaky.check,
            path.display()
        )?;
        if let Some(v) = flaky.violations.first() {
            writeln!(out, "    {}", v.message)?;
        }
    }
    Ok(())
}

/// Prints the shrunk failure, writes its scenario, and says how to replay it.
fn write_failure(out: &mut Stdout, args: &FuzzArgs, report: &FuzzReport, seed: u64) -> Result<u8> {
    let Some(failure) = &report.failure else {
        return Ok(0);
    };
    let path = args.out.clone().unwrap_or_else(|| {
        Path::new("target")
            .join("tep-fuzz")
            .join(format!("{}.json", failure.scenario.id))
    });
    let json = to_corpus_json(&failure.scenario);
    // The failure is printed whether or not its file can be written: a read-only checkout
    // must not lose what the fuzzing found.
    let written = write_atomically(&path, &json);
    let level = failure
        .violations
        .first()
        .map(|v| v.level.to_string())
        .unwrap_or_default();
    writeln!(
        out,
        "\nFAILED at case {} of seed {seed}: {} [{level}]",
        failure.case, failure.check
    )?;
    let m = &failure.minimised;
    let dropped = match m.dropped.len() {
        0 => String::new(),
        _ => format!(
            ", then dropped what it did not need ({}) in {} run(s)",
            m.dropped.join(", "),
            m.runs
        ),
    };
    writeln!(
        out,
        "  failed all {CONFIRM_RUNS} of its runs; shrunk from size {} to {} in {} run(s) (each kept one \
         replayed {CONFIRM_RUNS} times){dropped}; {}{}",
        failure.original_size,
        size(&failure.scenario),
        failure.shrink_runs,
        failure.shrink_stop,
        if m.cut_short {
            " (dropping parts stopped at its budget)"
        } else {
            ""
        }
    )?;
    for violation in failure.violations.iter().take(SHOWN_VIOLATIONS) {
        writeln!(out, "  {}", violation.message)?;
    }
    if failure.violations.len() > SHOWN_VIOLATIONS {
        writeln!(
            out,
            "  and {} more",
            failure.violations.len() - SHOWN_VIOLATIONS
        )?;
    }
    writeln!(out, "  docs/invariants.md#{}", failure.invariant)?;
    if let Err(e) = written {
        writeln!(out, "\nthe shrunk scenario (not written: {e:#}):\n{json}")?;
        writeln!(
            out,
            "replay: save it to a file and run {}",
            replay_command(args, Path::new("FILE"))
        )?;
        note(format_args!("tep: error: {e:#}"));
        // The verdict stands, but an output was lost: as `tep run` does, exit 2.
        return Ok(2);
    }
    writeln!(
        out,
        "\nscenario {}: {}",
        shown(&path.display().to_string()),
        outline(&failure.scenario)
    )?;
    writeln!(out, "replay: {}", replay_command(args, &path))?;
    Ok(1)
}

/// What a scenario holds, on one line: `2 calls (read, bash), 1 guard, 1 wrapper (timeout)`.
fn outline(scenario: &Scenario) -> String {
    let count = |n: usize, one: &str, many: &str| match n {
        0 => None,
        1 => Some(format!("1 {one}")),
        n => Some(format!("{n} {many}")),
    };
    let tools: Vec<&str> = scenario.calls.iter().map(|c| c.tool.as_str()).collect();
    let wrappers: Vec<String> = scenario
        .wrappers
        .iter()
        .filter_map(|w| {
            serde_json::to_value(w)
                .ok()
                .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
        })
        .collect();
    let parts = [
        count(scenario.calls.len(), "call", "calls").map(|c| format!("{c} ({})", tools.join(", "))),
        count(
            scenario.pre.len(),
            "pre-execute listener",
            "pre-execute listeners",
        ),
        scenario.approval.as_ref().map(|_| "an approval".to_owned()),
        count(scenario.guards.len(), "guard", "guards"),
        count(scenario.wrappers.len(), "wrapper", "wrappers")
            .map(|w| format!("{w} ({})", wrappers.join(", "))),
        count(
            scenario.post.len(),
            "post-execute listener",
            "post-execute listeners",
        ),
        count(scenario.observers.len(), "observer", "observers"),
        count(scenario.files.len(), "file", "files"),
    ];
    let parts: Vec<String> = parts.into_iter().flatten().collect();
    shown(&parts.join(", ")).into_owned()
}

/// The `tep run` command line that runs the written scenario the way it failed.
fn replay_command(args: &FuzzArgs, scenario: &Path) -> String {
    let program = std::env::args_os()
        .next()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tep".to_owned());
    let mut words = vec![program, "run".to_owned()];
    if let Some(adapter) = &args.adapter {
        words.extend(["--adapter".to_owned(), adapter.clone()]);
    }
    words.extend(crate::harness_command::rerun_words(&args.harness));
    for mutant in &args.mutant {
        words.extend(["--mutant".to_owned(), mutant.name().to_owned()]);
    }
    if args.timeout != DEFAULT_TIMEOUT {
        words.extend([
            "--timeout".to_owned(),
            args.timeout.as_secs_f64().to_string(),
        ]);
    }
    if args.spec != Revision::CURRENT {
        words.extend(["--spec".to_owned(), args.spec.to_string()]);
    }
    if args.strict {
        words.push("--strict".to_owned());
    }
    words.extend([
        "--scenario-file".to_owned(),
        scenario.to_string_lossy().into_owned(),
    ]);
    shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
}

/// A seed nobody chose: std's per-process random hasher keys, which need no dependency.
fn random_seed() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    hasher.finish()
}
