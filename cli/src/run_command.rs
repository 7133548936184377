//! `tep run`: starts the implementations (one per job), streams each scenario as it finishes,
//! handles Ctrl-C, keeps the failing traces, and writes every requested report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::progress::{Live, Tallied};
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use tep_conformance::adapter::{AdapterOptions, ProcessAdapter, adopt_orphans, end_orphans};
use tep_conformance::baseline::{self, Baseline, BaselineOutcome};
use tep_conformance::html::compare::Comparison;
use tep_conformance::html::{self, TraceExcerpt};
use tep_conformance::outcome::{RunReport, ScenarioResult, Status};
use tep_conformance::protocol::Ready;
use tep_conformance::report::{self, JsonReport, RunContext, verdict};
use tep_conformance::runner::{
    BuiltinReference, Implementation, Plan, RunControl, RunEvent, RunOptions,
};
use tep_conformance::scenario::{Scenario, corpus};
use tep_conformance::suite;
use tep_conformance::terminal::escape_controls;
use tep_model::graph::Revision;
use tep_model::trace::{ObservationLevel, to_jsonl};
use tep_reference::mutant::Mutant;

use crate::args::{ColorWhen, Format, SelectArgs};
use crate::output::{check_dir_creatable, check_writable, write_atomically};
use crate::report_command;
use crate::signals::{Signals, kill_children};

/// The options of `tep run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The adapter command (split like a shell would). Default: the built-in reference.
    #[arg(long, value_name = "CMD")]
    pub adapter: Option<String>,
    /// The spec revision to test against.
    #[arg(long, default_value = "rev2")]
    pub spec: Revision,
    /// What to print on stdout: the text report, or the JSON report alone.
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// Also write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write the JSON report here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write the HTML report here: one self-contained page, the run drawn on the
    /// stage graph, failing traces with their witness lines.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Expected failures (JSON: {"expectedFailures":[{"id","reason","issue"?}]}).
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Write a baseline of this run's failures here (keeping the reasons of --baseline's
    /// entries that still apply).
    #[arg(long, value_name = "FILE")]
    pub write_baseline: Option<PathBuf>,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Run the scenario in this file instead of the embedded corpus (repeatable): one that
    /// `tep fuzz` wrote, or your own. The selection options still apply.
    #[arg(long = "scenario-file", value_name = "FILE")]
    pub scenario_files: Vec<PathBuf>,
    /// Seconds one scenario may take an adapter (0.1 to 86400).
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = crate::parse_timeout)]
    pub timeout: Duration,
    /// How many scenarios run at once: adapter processes (each with its own handshake), or
    /// threads for the built-in reference. Default: the number of cores.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// SHOULD-level violations fail the run too.
    #[arg(long)]
    pub strict: bool,
    /// Write every scenario's trace to DIR/<scenario>.jsonl.
    #[arg(long, value_name = "DIR")]
    pub traces: Option<PathBuf>,
    /// Where the failing scenarios' traces are kept (without --traces).
    /// Default: target/tep-runs/<UTC time of the run> (<time>-2 if another run has it).
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Colour the terminal report.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto")]
    pub color: ColorWhen,
    /// List every edge the run did not take, on a subset of the corpus too (a subset's text
    /// report counts them on one line; the JSON and HTML reports always list them).
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Break the built-in reference on purpose (see `tep mutants`), to watch the suite catch it.
    #[arg(long, value_name = "NAME", conflicts_with = "adapter")]
    pub mutant: Vec<Mutant>,
    /// Check the traces at this observation level (events, boundary, hooks, full), at most the one
    /// the implementation declares: records the level does not hold are dropped first.
    #[arg(long, value_name = "LEVEL")]
    pub observed: Option<ObservationLevel>,
    #[command(flatten)]
    pub docs_url: report_command::DocsUrlArg,
    #[command(flatten)]
    pub compare: report_command::CompareArg,
    #[command(flatten)]
    pub harness: crate::harness_command::HarnessArgs,
}

impl RunArgs {
    /// `--format json`: the JSON report alone on stdout, instead of the text report.
    fn json_stdout(&self) -> bool {
        self.format == Format::Json
    }
}

/// What the reports say of the run beyond its results: when, how to rerun, where its traces
/// are. The keeper's unused directory is removed here and old runs pruned.
fn run_context(
    args: &RunArgs,
    mut keeper: TraceKeeper,
    started_at: chrono::DateTime<chrono::Utc>,
    subset: bool,
) -> RunContext {
    keeper.remove_if_unused();
    if keeper.created && args.traces.is_none() && args.run_dir.is_none() {
        prune_old_runs(&keeper.dir);
    }
    RunContext {
        started_at: started_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        rerun: rerun_prefix(args),
        command: std::env::args_os()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        traces: keeper.kept,
        run_dir: keeper.created.then_some(keeper.dir),
        excerpts: keeper.excerpts,
        subset,
        verbose: args.verbose,
    }
}

/// The default timeout of `--timeout`, left out of rerun commands.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

pub fn run(args: RunArgs) -> Result<u8> {
    let started = SystemTime::now();
    let started_at = chrono::DateTime::<chrono::Utc>::from(started);
    let (corpus, baseline, selected) = select_scenarios(&args)?;
    let options = RunOptions {
        spec: args.spec,
        strict: args.strict,
        observed: args.observed,
    };
    let jobs = args.jobs.map(usize::from).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(usize::from)
            .unwrap_or(1)
    });
    let mut keeper = TraceKeeper::new(&args, started_at);
    let run_dir_notice = check_outputs(&args, &mut keeper)?;
    // An earlier report that cannot be compared with stops the run before it starts.
    let old = match &args.compare.compare {
        Some(path) => Some((path.clone(), report_command::read(path)?)),
        None => None,
    };
    // Signals are ours before the first adapter starts: one during a handshake kills it.
    let signals = Signals::install()?;
    if args.adapter.is_some() {
        // So that no process an adapter starts outlives the run (Linux only; where it cannot be
        // had, the adapter's process group is still killed).
        let _ = adopt_orphans();
    }
    let (workers, ready, plan) = start_implementations(&args, jobs, &selected, &options)?;

    // From here on a signal interrupts the run: before the first line, so whoever sees it can.
    let control = RunControl::new();
    let interrupter = control.interrupter();
    signals.run(interrupter.clone());
    let mut live = Live::new(plan.runnable(), args.color.choice());
    if let Some(notice) = &run_dir_notice {
        live.notice(notice);
    }
    if !args.json_stdout() {
        live.write(&header(&ready, &args, &plan))?;
    }
    let strict = args.strict;
    // Outputs that could not be written: each is reported, none stops the others.
    let mut unwritten: Vec<anyhow::Error> = Vec::new();
    let outcome = plan.run_parallel(workers, control, |event| -> Result<()> {
        match event {
            RunEvent::Started { index, id } => live.started(index, id),
            RunEvent::Finished { index, result } => {
                let comparison = baseline.as_ref().map(|b| b.compare(result, strict));
                let verdict = verdict(result, strict, comparison.as_ref());
                if let Err(e) = keeper.keep(result) {
                    live.notice(&format!("tep: {e:#}"));
                    unwritten.push(e);
                }
                let line = (!args.json_stdout())
                    .then(|| report::scenario_line(result, strict, comparison.as_ref()));
                let (ran, tallied) = tally(result, verdict);
                live.finished(index, line, ran, tallied)?;
            }
            RunEvent::Interrupted { running } => live.notice(&format!(
                "tep: interrupted: no new scenario starts; waiting for {running} running \
                 scenario(s) (Ctrl-C again to abandon them)"
            )),
        }
        Ok(())
    });
    let abandoned = interrupter.abandoned();
    if abandoned {
        live.notice("tep: abandoning the running scenarios and stopping their adapters");
        kill_children();
    }
    // Every adapter has stopped: what none of them claimed does not outlive the run.
    end_orphans();
    let mut run = outcome?;
    if args.harness.harness.is_some() {
        tep_harness::evidence::mark_judged(&mut run.invariants);
    }
    live.flush_waiting()?;
    let outcome = baseline.as_ref().map(|b| b.apply(&mut run));
    let subset = !args.scenario_files.is_empty() || selected.len() < corpus.len();
    let ctx = run_context(&args, keeper, started_at, subset);
    let paths = html::paths(&run);
    // Stopped by SIGTERM or SIGHUP: 143 or 129, as a shell says it (130 for Ctrl-C).
    let stopped_by = signals.exit_code().filter(|_| run.interrupted);
    let reports = Reports {
        run: &run,
        baseline: outcome.as_ref(),
        ctx: &ctx,
        corpus: &corpus,
        paths: &paths,
        old: old.as_ref(),
    };
    let (json_text, comparison) = reports.write_files(&args, stopped_by, &mut unwritten)?;
    if let Some(path) = &args.write_baseline {
        write_baseline_file(path, &run, baseline.as_ref(), &mut live, &mut unwritten)?;
    }
    live.finish();
    if args.json_stdout() {
        live.write(&json_text)?;
    } else {
        live.write(&report::closing(&run, outcome.as_ref(), &ctx))?;
        if let Some(c) = &comparison {
            live.write(&(c.lines().join("\n") + "\n"))?;
        }
    }
    if unwritten.is_empty() {
        return Ok(stopped_by.unwrap_or_else(|| report::exit_code(&run, outcome.as_ref())));
    }
    // Every output was tried; those that failed are named, and the run is not a success.
    for e in &unwritten {
        live.notice(&format!("tep: error: {e:#}"));
    }
    Ok(report::EXIT_USAGE)
}

/// The embedded corpus or the `--scenario-file`s, the baseline read against it, and the
/// scenarios selected to run.
fn select_scenarios(args: &RunArgs) -> Result<(Vec<Scenario>, Option<Baseline>, Vec<Scenario>)> {
    let corpus = if args.scenario_files.is_empty() {
        corpus().context("the embedded scenario corpus is invalid")?
    } else {
        read_scenario_files(&args.scenario_files)?
    };
    let baseline = args
        .baseline
        .as_ref()
        .map(|path| Baseline::load(path, &corpus))
        .transpose()?;
    let selected: Vec<Scenario> = args
        .select
        .clone()
        .selection()
        .apply(&corpus)?
        .into_iter()
        .cloned()
        .collect();
    Ok((corpus, baseline, selected))
}

/// Where the default run directories go: `target/tep-runs` of the repository the current
/// directory is in (the nearest directory up from it holding `.git`), or of the current
/// directory outside one; relative when that is the current directory. One place per checkout,
/// whichever of its directories a run starts in.
fn runs_root() -> PathBuf {
    let here = Path::new("target").join("tep-runs");
    let Ok(cwd) = std::env::current_dir() else {
        return here;
    };
    match cwd.ancestors().find(|d| d.join(".git").exists()) {
        Some(top) if top != cwd => top.join("target").join("tep-runs"),
        _ => here,
    }
}

/// The default run directories kept: the newest this many.
const KEPT_RUNS: usize = 10;
/// A run directory younger than this is never pruned (a run still going may be writing it).
const PRUNE_AFTER: Duration = Duration::from_secs(3600);

/// Whether `name` is one of ours: `<UTC time>` (`20250601T101500Z`), or `<time>-N`.
fn is_run_name(name: &str) -> bool {
    let (time, n) = name.split_once('-').unwrap_or((name, "1"));
    let b = time.as_bytes();
    b.len() == 16
        && b[8] == b'T'
        && b[15] == b'Z'
        && b[..8].iter().chain(&b[9..15]).all(u8::is_ascii_digit)
        && !n.is_empty()
        && n.bytes().all(|c| c.is_ascii_digit())
}

/// Removes the default run directories beside `current` beyond the newest [`KEPT_RUNS`] (by
/// name, which is their start time), those an hour old or more; `current` stays, and so does
/// anything that is not named like a run directory. Best effort: what cannot be removed stays.
fn prune_old_runs(current: &Path) {
    let Some(parent) = current.parent() else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let mut runs: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            is_run_name(&name).then(|| (name, e.path()))
        })
        .filter(|(_, path)| path != current)
        .collect();
    // Newest first: the time, then the -N of runs started in the same second.
    runs.sort_by_key(|(name, _)| {
        let (time, n) = name.split_once('-').unwrap_or((name, "1"));
        std::cmp::Reverse((time.to_owned(), n.parse::<u64>().unwrap_or(0)))
    });
    for (_, path) in runs.into_iter().skip(KEPT_RUNS - 1) {
        let old = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= PRUNE_AFTER);
        if old {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// What the report files of a finished run are made of.
struct Reports<'a> {
    run: &'a RunReport,
    baseline: Option<&'a BaselineOutcome>,
    ctx: &'a RunContext,
    corpus: &'a [Scenario],
    paths: &'a BTreeMap<String, html::TakenPath>,
    /// `--compare`: the earlier report, and where it was read.
    old: Option<&'a (PathBuf, JsonReport)>,
}

impl Reports<'_> {
    /// Writes `--junit`, `--json` and `--html` (files first: they are written even when stdout
    /// is gone), each whole or not at all; a file that cannot be written joins `unwritten`.
    /// Returns the JSON report's text and the comparison with `--compare`'s report.
    fn write_files(
        &self,
        args: &RunArgs,
        stopped_by: Option<u8>,
        unwritten: &mut Vec<anyhow::Error>,
    ) -> Result<(String, Option<Comparison>)> {
        let corpus_hash = suite::corpus_hash();
        if let Some(path) = &args.junit {
            let xml = report::junit(self.run, self.baseline, self.ctx, &corpus_hash);
            unwritten.extend(write_atomically(path, &xml).err());
        }
        let mut json = report::json(self.run, self.baseline, self.ctx, &corpus_hash);
        if let Some(code) = stopped_by {
            json.exit_code = code;
        }
        let comparison = report_command::comparison(self.old, &json);
        let json_text = serde_json::to_string_pretty(&json)? + "\n";
        if let Some(path) = &args.json {
            unwritten.extend(write_atomically(path, &json_text).err());
        }
        if let Some(path) = &args.html {
            let page = html::Page {
                title: "tep run",
                report: &json,
                traces: &self.ctx.excerpts,
                corpus: self.corpus,
                paths: self.paths,
                docs_url: args.docs_url.docs_url.as_deref(),
                rerun: Some(self.ctx),
                compare: comparison.as_ref(),
            };
            unwritten.extend(write_atomically(path, &html::render(&page)).err());
        }
        Ok((json_text, comparison))
    }
}

/// One job's implementation.
type Worker = Box<dyn Implementation + Send>;

/// The implementations the jobs run on: the first (whose handshake decides the plan), then as
/// many more as there are jobs to fill, each with its own handshake.
fn start_implementations(
    args: &RunArgs,
    jobs: usize,
    selected: &[Scenario],
    options: &RunOptions,
) -> Result<(Vec<Worker>, Ready, Plan)> {
    let adapter_options = args.adapter.as_ref().map(|command| {
        let mut options = AdapterOptions::new(command.clone());
        options.timeout = args.timeout;
        options
    });
    if let Some(name) = &args.harness.harness {
        let mut drivers = crate::harness_command::drivers(&args.harness, name, args.timeout, jobs)?;
        let first = drivers.remove(0);
        let ready = first.ready().clone();
        let plan = Plan::new(&ready, selected, options)?;
        let wanted = jobs.min(plan.runnable()).max(1);
        let workers: Vec<Worker> = std::iter::once(first)
            .chain(drivers.into_iter().take(wanted - 1))
            .map(|d| Box::new(d) as Worker)
            .collect();
        return Ok((workers, ready, plan));
    }
    let first: Worker = match &adapter_options {
        Some(options) => Box::new(ProcessAdapter::start(options.clone())?),
        None => Box::new(BuiltinReference::new(args.mutant.clone())),
    };
    let ready = first.ready().clone();
    let plan = Plan::new(&ready, selected, options)?;
    let wanted = jobs.min(plan.runnable()).max(1);
    let mut workers = vec![first];
    match &adapter_options {
        Some(options) => workers.extend(start_adapters(options, wanted - 1, &ready)?),
        None => {
            for _ in 1..wanted {
                workers.push(Box::new(BuiltinReference::new(args.mutant.clone())));
            }
        }
    }
    Ok((workers, ready, plan))
}

/// `--write-baseline`: this run's failures as a baseline, unless the run was interrupted.
fn write_baseline_file(
    path: &Path,
    run: &RunReport,
    baseline: Option<&Baseline>,
    live: &mut Live,
    unwritten: &mut Vec<anyhow::Error>,
) -> Result<()> {
    if run.interrupted {
        live.notice(&format!(
            "tep: not writing {}: the run was interrupted",
            path.display()
        ));
        return Ok(());
    }
    let file = baseline::write(run, baseline);
    let text = serde_json::to_string_pretty(&file)? + "\n";
    match write_atomically(path, &text) {
        Err(e) => unwritten.push(e),
        Ok(()) => live.notice(&format!(
            "tep: wrote {} baseline entr{} to {} (use it with --baseline {})",
            file.expected_failures.len(),
            if file.expected_failures.len() == 1 {
                "y"
            } else {
                "ies"
            },
            path.display(),
            path.display()
        )),
    }
    Ok(())
}

/// Whether a finished scenario ran (a skip decided before the run did not), and how the
/// progress display counts it.
fn tally(result: &ScenarioResult, verdict: report::Verdict) -> (bool, Tallied) {
    let ran = !(result.status == Status::Skipped && result.duration.is_zero());
    let tallied = if verdict.fails_the_run() {
        Tallied::Failed
    } else if result.status == Status::Skipped {
        Tallied::Skipped
    } else {
        Tallied::Passed
    };
    (ran, tallied)
}

/// The scenarios of `--scenario-file`, each parsed and validated like a corpus file; two files
/// may not give the same id (reports and baselines key on it).
fn read_scenario_files(paths: &[PathBuf]) -> Result<Vec<Scenario>> {
    let mut scenarios: Vec<Scenario> = Vec::with_capacity(paths.len());
    for path in paths {
        let text = tep_conformance::input::read_bounded(
            path,
            "scenario file",
            tep_conformance::input::MAX_SCENARIO_FILE_BYTES,
        )
        .with_context(|| format!("cannot read the scenario file {}", path.display()))?;
        let scenario = Scenario::from_json(&text)
            .with_context(|| format!("{} is not a valid scenario", path.display()))?;
        if scenarios.iter().any(|s| s.id == scenario.id) {
            bail!(
                "two scenario files give the id {:?} ({} is the second)",
                scenario.id,
                path.display()
            );
        }
        scenarios.push(scenario);
    }
    Ok(scenarios)
}

/// Every output is tried before the first adapter starts, not found unwritable after the run:
/// the reports, the baseline, and the directory the traces are kept in.
/// Returns a notice to show when the run directory is not the default one.
fn check_outputs(args: &RunArgs, keeper: &mut TraceKeeper) -> Result<Option<String>> {
    for (path, what) in [
        (&args.junit, "JUnit report"),
        (&args.json, "JSON report"),
        (&args.html, "HTML report"),
        (&args.write_baseline, "baseline"),
    ] {
        if let Some(path) = path {
            check_writable(path, what)?;
        }
    }
    if let Some(dir) = &args.traces {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create the traces directory {}", dir.display()))?;
        check_writable(
            &dir.join(format!(".tep-probe-{}", std::process::id())),
            "traces",
        )?;
    } else if args.run_dir.is_some() {
        check_dir_creatable(&keeper.dir, "run directory")?;
    } else if let Err(e) = keeper.claim_default_dir() {
        // The default place (`target/tep-runs`, in a read-only checkout, say) falls back to
        // the system's temporary directory: a run that may pass should not fail for want of
        // a place it may never use. A `--run-dir` given is used or refused.
        // A name of this run's own, made now with mkdir (which refuses what exists, a symlink
        // planted in the shared temporary directory included); removed at the end if empty.
        let name = keeper
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let fallback = std::env::temp_dir().join(format!("tep-run-{name}-{}", std::process::id()));
        std::fs::create_dir(&fallback)
            .with_context(|| format!("cannot create {}", fallback.display()))
            .with_context(|| format!("{e:#}"))?;
        keeper.created = true;
        keeper.made = vec![fallback.clone()];
        let notice = format!(
            "tep: {e:#}; failing traces go to {} instead (choose with --run-dir)",
            fallback.display()
        );
        keeper.dir = fallback;
        return Ok(Some(notice));
    }
    Ok(None)
}

/// The first line: who is tested, against what.
fn header(ready: &Ready, args: &RunArgs, plan: &Plan) -> String {
    let implementation = &ready.implementation;
    let mut who = implementation.name.clone();
    if let Some(version) = implementation
        .version
        .as_ref()
        .filter(|v| !implementation.name.contains(v.as_str()))
    {
        who.push(' ');
        who.push_str(version);
    }
    if let Some(language) = &implementation.language {
        who.push_str(&format!(" ({language})"));
    }
    let source = if args.scenario_files.is_empty() {
        let hash = suite::corpus_hash();
        format!("corpus {}", hash.get(..19).unwrap_or(&hash))
    } else {
        format!("{} scenario file(s)", args.scenario_files.len())
    };
    format!(
        "tep {} ({source}): {} against {}, observation level {}, {} scenario(s) selected, {} to run\n\n",
        suite::VERSION,
        escape_controls(&who),
        args.spec,
        args.observed.unwrap_or(ready.level()),
        plan.len(),
        plan.runnable(),
    )
}

/// Starts `n` more adapter processes at once, each with its own handshake, which must agree
/// with the first one's.
fn start_adapters(options: &AdapterOptions, n: usize, first: &Ready) -> Result<Vec<Worker>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| scope.spawn(|| ProcessAdapter::start(options.clone())))
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(i, handle)| {
                let adapter = handle
                    .join()
                    .map_err(|_| anyhow!("starting adapter process {} panicked", i + 2))??;
                if adapter.ready() != first {
                    bail!(
                        "adapter process {} answered the handshake differently from the first \
                         (--jobs starts one process per job; they must agree): {:?} vs {:?}",
                        i + 2,
                        adapter.ready(),
                        first
                    );
                }
                Ok(Box::new(adapter) as Worker)
            })
            .collect()
    })
}

/// The command line that reruns one scenario the way this run ran it.
fn rerun_prefix(args: &RunArgs) -> Vec<String> {
    let program = std::env::args_os()
        .next()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "tep".to_owned());
    let mut words = vec![program, "run".to_owned()];
    if let Some(adapter) = &args.adapter {
        words.extend(["--adapter".to_owned(), adapter.clone()]);
    }
    words.extend(crate::harness_command::rerun_words(&args.harness));
    if args.spec != Revision::Rev2 {
        words.extend(["--spec".to_owned(), args.spec.to_string()]);
    }
    for mutant in &args.mutant {
        words.extend(["--mutant".to_owned(), mutant.name().to_owned()]);
    }
    if let Some(level) = args.observed {
        words.extend(["--observed".to_owned(), level.to_string()]);
    }
    if args.strict {
        words.push("--strict".to_owned());
    }
    for file in &args.scenario_files {
        words.extend([
            "--scenario-file".to_owned(),
            file.to_string_lossy().into_owned(),
        ]);
    }
    if args.timeout != DEFAULT_TIMEOUT {
        words.extend([
            "--timeout".to_owned(),
            args.timeout.as_secs_f64().to_string(),
        ]);
    }
    words
}

/// Writes traces: every one into `--traces DIR`, or else the failing ones into the run
/// directory (created on the first). No trace stays in memory: of a failing one the reports
/// keep only what they show (the excerpt around its witnesses, the path it took), so a run's
/// memory does not grow with its failing scenarios.
struct TraceKeeper {
    dir: PathBuf,
    /// Keep every trace (`--traces`), not only the failing ones.
    all: bool,
    created: bool,
    /// The directories made before the run, deepest first: removed at its end if no trace
    /// went into them (the check leaves nothing behind).
    made: Vec<PathBuf>,
    kept: BTreeMap<String, PathBuf>,
    /// What the reports quote of each failing trace.
    excerpts: BTreeMap<String, TraceExcerpt>,
}

impl TraceKeeper {
    fn new(args: &RunArgs, started_at: chrono::DateTime<chrono::Utc>) -> Self {
        let (dir, all) = match (&args.traces, &args.run_dir) {
            (Some(traces), _) => (traces.clone(), true),
            (None, Some(run_dir)) => (run_dir.clone(), false),
            (None, None) => (
                runs_root().join(started_at.format("%Y%m%dT%H%M%SZ").to_string()),
                false,
            ),
        };
        TraceKeeper {
            dir,
            all,
            created: false,
            made: Vec::new(),
            kept: BTreeMap::new(),
            excerpts: BTreeMap::new(),
        }
    }

    /// Makes the default run directory, one of this run's own: two runs started in the same
    /// second (two jobs of a CI matrix, tests in parallel) would otherwise share
    /// `<time>`, each overwriting the other's traces, and race on the probe. The
    /// second takes `<time>-2`, and so on; `mkdir` decides who has which.
    fn claim_default_dir(&mut self) -> Result<()> {
        let parent = self.dir.parent().map(Path::to_path_buf).unwrap_or_default();
        let name = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let missing: Vec<PathBuf> = parent
            .ancestors()
            .take_while(|d| !d.as_os_str().is_empty() && !d.exists())
            .map(Path::to_path_buf)
            .collect();
        let mut attempt = 1;
        let claimed = loop {
            let dir = match attempt {
                1 => self.dir.clone(),
                n => parent.join(format!("{name}-{n}")),
            };
            let made = std::fs::create_dir_all(&parent).and_then(|()| std::fs::create_dir(&dir));
            match made {
                Ok(()) => break dir,
                // Taken by another run, or the parent just removed by one ending empty.
                Err(e)
                    if attempt < 1000
                        && matches!(
                            e.kind(),
                            std::io::ErrorKind::AlreadyExists | std::io::ErrorKind::NotFound
                        ) =>
                {
                    attempt += 1;
                }
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("cannot create the run directory {}", dir.display())
                    });
                }
            }
        };
        let probe = claimed.join(format!(".tep-probe-{}", std::process::id()));
        let probed = std::fs::File::create_new(&probe);
        let _ = std::fs::remove_file(&probe);
        if let Err(e) = probed {
            let _ = std::fs::remove_dir(&claimed);
            return Err(e).with_context(|| {
                format!("cannot write into the run directory {}", claimed.display())
            });
        }
        self.dir = claimed.clone();
        self.created = true;
        self.made = std::iter::once(claimed).chain(missing).collect();
        Ok(())
    }

    /// Removes what [`Self::claim_default_dir`] or the fallback made, if it stayed empty.
    fn remove_if_unused(&mut self) {
        if !self.kept.is_empty() {
            return;
        }
        for (i, dir) in self.made.iter().enumerate() {
            // A directory another run is using is not empty: it stays, and so do its parents.
            if std::fs::remove_dir(dir).is_err() {
                break;
            }
            if i == 0 {
                self.created = false;
            }
        }
    }

    /// Writes `result`'s trace where it is kept and drops it; a failing one's excerpt and
    /// path are taken first, so a trace that cannot be written is still quoted.
    fn keep(&mut self, result: &mut ScenarioResult) -> Result<()> {
        let failing = !matches!(result.status, Status::Passed | Status::Skipped);
        let Some(records) = result.trace.take() else {
            return Ok(());
        };
        if !(self.all || failing) {
            return Ok(());
        }
        let jsonl = to_jsonl(&records);
        if failing {
            let witnesses = result
                .violations
                .iter()
                .flat_map(|v| v.lines.iter().copied());
            let excerpt = TraceExcerpt::of(&jsonl, &witnesses.collect());
            self.excerpts.insert(result.id.clone(), excerpt);
        }
        drop(records);
        if !self.created {
            std::fs::create_dir_all(&self.dir)
                .with_context(|| format!("cannot create {}", self.dir.display()))?;
            self.created = true;
        }
        let path = self.dir.join(format!("{}.jsonl", result.id));
        write_atomically(&path, &jsonl)
            .with_context(|| format!("cannot keep the trace of {}", result.id))?;
        self.kept.insert(result.id.clone(), path);
        Ok(())
    }
}
