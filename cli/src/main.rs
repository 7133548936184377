//! `tep`: the conformance suite for tool execution pipelines.
//!
//! Exit codes: 0 conformant, 1 violations (or nothing tested, or a stale baseline entry), 2 usage
//! or environment error, 130 interrupted. A reader that goes away (a broken pipe, as in
//! `tep scenarios list | head -1`) ends the output quietly; the exit code still says what the
//! command found.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use tep_check::invariants::InvariantId;
use tep_check::{CATALOG, invariant};
use tep_conformance::adapter::{MAX_TIMEOUT, MIN_TIMEOUT};
use tep_conformance::listing;
use tep_conformance::scenario::{Scenario, corpus, corpus_files};
use tep_model::graph::Revision;
use tep_model::trace::TraceRecord;
use tep_reference::mutant::Mutant;

mod args;
mod check_command;
mod from_log;
mod fuzz_command;
mod harness_command;
mod output;
mod progress;
mod report_command;
mod run_command;
mod signals;

use args::{Format, SelectArgs};
use output::{Stdout, note};

/// Conformance suite for the tool execution pipeline of AI coding-agent harnesses.
#[derive(Debug, Parser)]
#[command(name = "tep", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of its largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Drive mode: run the scenario corpus against an implementation and check every trace.
    Run(run_command::RunArgs),
    /// Many runs side by side: their JSON reports as one page (--html), implementations as
    /// columns, and what changed since an earlier run (--compare).
    Report(report_command::ReportArgs),
    /// Generative mode: random scenarios through an implementation, judged by the invariants;
    /// the first failure is shrunk to a small scenario and written as a corpus file.
    Fuzz(fuzz_command::FuzzArgs),
    /// Replay mode: check a recorded trace (JSON Lines) from a file, or `-` for stdin.
    Check(check_command::CheckArgs),
    /// List, show or export the scenario corpus.
    Scenarios {
        #[command(subcommand)]
        action: ScenariosAction,
    },
    /// List the invariants, or explain one.
    Invariants {
        #[command(subcommand)]
        action: InvariantsAction,
    },
    /// List the mutants of the built-in reference.
    Mutants,
    /// Print a JSON Schema: scenario, trace-record, protocol-request, protocol-ready,
    /// protocol-answer, baseline, run-report, check-report, scenario-list or invariant-list.
    Schema { name: SchemaName },
    /// Serve the built-in reference over the adapter protocol on stdin/stdout.
    ReferenceAdapter {
        /// Break it on purpose.
        #[arg(long, value_name = "NAME")]
        mutant: Vec<Mutant>,
        /// Declare this protocol version instead of the newest: tep then sends it no scenario
        /// construct newer than that (and the adapter answers `errored` if it gets one).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(tep_conformance::protocol::PROTOCOL_VERSION)))]
        protocol: Option<u32>,
    },
    /// The scenario's tools over MCP, for a harness `tep run --harness` drives.
    #[command(hide = true)]
    HarnessMcp { run: PathBuf },
    /// The hook command of a harness `tep run --harness` drives.
    #[command(hide = true)]
    HarnessHook { run: PathBuf },
}

#[derive(Debug, Subcommand)]
enum ScenariosAction {
    /// One line per scenario (or a JSON array).
    List {
        /// Only the scenarios of this revision.
        #[arg(long)]
        spec: Option<Revision>,
        #[command(flatten)]
        select: SelectArgs,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// A scenario's JSON.
    Show { id: String },
    /// Write every scenario (and the scenario schema) into DIR.
    Export { dir: PathBuf },
}

#[derive(Debug, Subcommand)]
enum InvariantsAction {
    /// One line per invariant (or a JSON array).
    List {
        /// Only the invariants of this revision.
        #[arg(long)]
        spec: Option<Revision>,
        #[arg(long, value_enum, default_value = "text")]
        format: Format,
    },
    /// Everything about one invariant.
    Explain { id: InvariantId },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum SchemaName {
    Scenario,
    TraceRecord,
    ProtocolRequest,
    ProtocolReady,
    ProtocolAnswer,
    Baseline,
    RunReport,
    /// What `tep check --format json` prints.
    CheckReport,
    /// What `tep scenarios list --format json` prints.
    ScenarioList,
    /// What `tep invariants list --format json` prints.
    InvariantList,
}

/// `--timeout`: seconds, within [`MIN_TIMEOUT`, `MAX_TIMEOUT`] (docs/limits.md says why).
pub(crate) fn parse_timeout(text: &str) -> Result<Duration, String> {
    let range = format!(
        "a number of seconds from {} to {}",
        MIN_TIMEOUT.as_secs_f64(),
        MAX_TIMEOUT.as_secs_f64()
    );
    let secs: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not {range}"))?;
    if !(MIN_TIMEOUT.as_secs_f64()..=MAX_TIMEOUT.as_secs_f64()).contains(&secs) {
        return Err(format!("{text} is out of range: give {range}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

fn main() -> ExitCode {
    // The version names the embedded corpus too; clap wants it for the whole program's life.
    let version: &'static str = Box::leak(tep_conformance::suite::long_version().into_boxed_str());
    let matches = Cli::command().version(version).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    let result = dispatch(cli.command);
    // Whatever is still buffered goes out now, while a broken pipe can still be ignored.
    let _ = Stdout::new().flush();
    match result {
        Ok(code) => ExitCode::from(code),
        // A signal is ending tep (its handler exits with its code): an error the stop caused,
        // such as an adapter killed mid-handshake, is not the outcome.
        Err(_) if signals::ending_code().is_some() => {
            ExitCode::from(signals::ending_code().unwrap_or(2))
        }
        Err(err) => {
            note(format_args!("tep: error: {err:#}"));
            ExitCode::from(2)
        }
    }
}

fn dispatch(command: Command) -> Result<u8> {
    match command {
        Command::Run(args) => run_command::run(args),
        Command::Report(args) => report_command::report(args),
        Command::Fuzz(args) => fuzz_command::fuzz(args),
        Command::Check(args) => check_command::check(args),
        Command::Scenarios { action } => scenarios(action),
        Command::Invariants { action } => invariants(action),
        Command::Mutants => {
            let mut out = Stdout::new();
            for m in Mutant::ALL {
                writeln!(out, "{:<34} {}", m.name(), m.description())?;
            }
            Ok(0)
        }
        Command::Schema { name } => {
            let schema = match name {
                SchemaName::Scenario => {
                    schemars::Schema::try_from(tep_conformance::scenario::versions::schema())
                        .map_err(|_| anyhow::anyhow!("the scenario schema is not a JSON object"))?
                }
                SchemaName::TraceRecord => schemars::schema_for!(TraceRecord),
                SchemaName::ProtocolRequest => {
                    schemars::schema_for!(tep_conformance::protocol::Request)
                }
                SchemaName::ProtocolReady => {
                    schemars::schema_for!(tep_conformance::protocol::Ready)
                }
                SchemaName::ProtocolAnswer => {
                    schemars::schema_for!(tep_conformance::protocol::RunAnswer)
                }
                SchemaName::Baseline => {
                    schemars::schema_for!(tep_conformance::baseline::BaselineFile)
                }
                SchemaName::CheckReport => schemars::schema_for!(listing::CheckJson),
                SchemaName::ScenarioList => schemars::schema_for!(Vec<listing::ScenarioRow>),
                SchemaName::InvariantList => schemars::schema_for!(Vec<listing::InvariantRow>),
                SchemaName::RunReport => {
                    schemars::schema_for!(tep_conformance::report::JsonReport)
                }
            };
            writeln!(Stdout::new(), "{}", serde_json::to_string_pretty(&schema)?)?;
            Ok(0)
        }
        Command::HarnessMcp { run } => harness_command::mcp(run),
        Command::HarnessHook { run } => harness_command::hook(run),
        Command::ReferenceAdapter { mutant, protocol } => {
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            let mut reference = tep_conformance::runner::BuiltinReference::new(mutant);
            if let Some(protocol) = protocol {
                reference = reference.with_protocol(protocol);
            }
            let served = tep_conformance::serve::serve_builtin(
                reference,
                stdin.lock(),
                stdout.lock(),
                std::io::stderr(),
            );
            match served {
                Ok(()) => Ok(0),
                // The runner went away: nobody is left to serve or to tell.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(0),
                Err(e) => Err(e).context("the reference adapter lost its stdin/stdout"),
            }
        }
    }
}

fn scenarios(action: ScenariosAction) -> Result<u8> {
    let corpus = corpus().context("the embedded scenario corpus is invalid")?;
    match action {
        ScenariosAction::List {
            spec,
            select,
            format,
        } => {
            let selection = select.selection();
            let selected: Vec<&Scenario> = if selection.is_everything() {
                corpus.iter().collect()
            } else {
                selection.apply(&corpus)?
            };
            let listed = selected
                .into_iter()
                .filter(|s| spec.is_none_or(|r| s.applies_to(r)));
            match format {
                Format::Json => {
                    let rows: Vec<listing::ScenarioRow> =
                        listed.map(listing::ScenarioRow::from).collect();
                    writeln!(Stdout::new(), "{}", listing::to_json_text(&rows)?)?;
                }
                Format::Text => {
                    let mut out = Stdout::new();
                    let listed: Vec<_> = listed.collect();
                    // The id column fits the longest id, so no description starts out of line.
                    let width = listed.iter().map(|s| s.id.len()).max().unwrap_or(0);
                    for s in listed {
                        let revs: Vec<&str> = s.revisions.iter().map(|r| r.as_str()).collect();
                        writeln!(
                            out,
                            "{:<width$} {:<10} {}",
                            s.id,
                            revs.join(","),
                            s.description
                        )?;
                    }
                }
            }
            Ok(0)
        }
        ScenariosAction::Show { id } => {
            let (_, text) = corpus_files()
                .iter()
                .find(|(file, _)| file.trim_end_matches(".json") == id)
                .with_context(|| {
                    let hint = tep_model::suggest::hint(
                        &id,
                        corpus_files()
                            .iter()
                            .map(|(f, _)| f.trim_end_matches(".json")),
                    );
                    format!("no scenario is called {id}{hint} (run `tep scenarios list`)")
                })?;
            write!(Stdout::new(), "{text}")?;
            Ok(0)
        }
        ScenariosAction::Export { dir } => {
            // create_dir_all on a file says only "File exists".
            if dir.exists() && !dir.is_dir() {
                anyhow::bail!(
                    "cannot export into {}: it is not a directory",
                    dir.display()
                );
            }
            std::fs::create_dir_all(&dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            let schema =
                serde_json::to_string_pretty(&tep_conformance::scenario::versions::schema())?
                    + "\n";
            // Each file whole or not at all; one that cannot be written does not stop the rest.
            let unwritten: Vec<anyhow::Error> = corpus_files()
                .iter()
                .map(|(file, text)| (*file, *text))
                .chain([("scenario.schema.json", schema.as_str())])
                .filter_map(|(file, text)| output::write_atomically(&dir.join(file), text).err())
                .collect();
            if let Some((last, others)) = unwritten.split_last() {
                for e in others {
                    note(format_args!("tep: error: {e:#}"));
                }
                return Err(anyhow::anyhow!("{last:#}"));
            }
            note(format_args!(
                "wrote {} scenarios and scenario.schema.json to {}",
                corpus.len(),
                dir.display()
            ));
            Ok(0)
        }
    }
}

fn invariants(action: InvariantsAction) -> Result<u8> {
    match action {
        InvariantsAction::List { spec, format } => {
            let listed = CATALOG
                .iter()
                .filter(|i| spec.is_none_or(|r| i.applies_to(r)));
            match format {
                Format::Json => {
                    let rows: Vec<listing::InvariantRow> =
                        listed.map(listing::InvariantRow::from).collect();
                    writeln!(Stdout::new(), "{}", listing::to_json_text(&rows)?)?;
                }
                Format::Text => {
                    let mut out = Stdout::new();
                    for inv in listed {
                        let revs: Vec<&str> = inv.revisions().iter().map(|r| r.as_str()).collect();
                        writeln!(
                            out,
                            "{:<30} {:<6} {:<6} {:<10} {}",
                            inv.id,
                            inv.level,
                            inv.observed.as_str(),
                            revs.join(","),
                            inv.statement
                        )?;
                    }
                }
            }
            Ok(0)
        }
        InvariantsAction::Explain { id } => {
            let inv = invariant(id);
            let corpus = corpus().context("the embedded scenario corpus is invalid")?;
            let mut out = Stdout::new();
            writeln!(out, "{} [{}]", inv.id, inv.level)?;
            writeln!(out, "  {}", inv.statement)?;
            let revs: Vec<&str> = inv.revisions().iter().map(|r| r.as_str()).collect();
            writeln!(out, "  revisions: {}", revs.join(", "))?;
            if let Some(cap) = inv.requires {
                writeln!(out, "  applies when the implementation declares: {cap}")?;
            }
            for source in inv.sources {
                writeln!(out, "  source: {source}")?;
            }
            writeln!(out, "  checked {}", inv.check.describe())?;
            let reads: Vec<String> = inv.reads.iter().map(ToString::to_string).collect();
            writeln!(
                out,
                "  needs a trace at --observed {} or above; reads {}",
                inv.observed,
                reads.join(", ")
            )?;
            let exercised: Vec<&str> = corpus
                .iter()
                .filter(|s| s.exercises.contains(&id))
                .map(|s| s.id.as_str())
                .collect();
            writeln!(out, "  scenarios: {}", exercised.join(", "))?;
            writeln!(out, "  more: {}", inv.doc_link())?;
            Ok(0)
        }
    }
}

/// Records are parsed in bulk on worker threads (`tep check`); glibc's allocator frees them
/// slowly (docs/architecture.md, "Reading a trace").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
