//! `tep check`: a recorded trace (or a harness's own session log) checked in one pass, its
//! verdict as text or JSON, and on request the HTML page.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use tep_check::{
    CheckOptions, CheckReport, Checkable, InvariantId, InvariantStatus, Level, TraceCheck, Verdict,
    for_each_record_parallel, invariant, parsing_workers,
};
use tep_conformance::html::{self, TraceExcerpt};
use tep_conformance::listing;
use tep_conformance::report;
use tep_model::graph::Revision;
use tep_model::trace::{Capability, ObservationLevel, TraceHeader, TraceRecord};

use tep_harness::zstd_log::{self, ZstdFrames};

use crate::args::Format;
use crate::output::{self, Stdout};
use crate::{from_log, report_command};

/// The options of `tep check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    pub trace: PathBuf,
    /// The spec revision (default: the trace header's, else rev2).
    #[arg(long)]
    pub spec: Option<Revision>,
    /// The implementation's optional parts (default: the trace header's, else all).
    #[arg(long, value_delimiter = ',', value_name = "CAPS")]
    pub capabilities: Option<Vec<Capability>>,
    /// Which records the trace holds: events, boundary, hooks or full (default: the trace
    /// header's, else hooks). A harness's own session log is `events`.
    #[arg(long, value_name = "LEVEL")]
    pub observed: Option<ObservationLevel>,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
    /// SHOULD-level violations fail the check too.
    #[arg(long)]
    pub strict: bool,
    /// Also write the HTML report here: the trace drawn on the stage graph, its witness
    /// lines marked (a trace from stdin or a pipe is copied to a temporary file for it).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// How many threads parse the trace (or the session log) while one checks it; 1 reads,
    /// parses and checks on one thread. The verdict is the same. Default: one per core for a
    /// file of 4 MiB or more or one read from a pipe (for a session log one fewer: the thread
    /// that checks it parses too), else 1.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
    /// Read a harness's own session log instead of a trace, at level `events`; messages
    /// name the log's lines.
    #[arg(long, value_enum, value_name = "SOURCE")]
    pub from: Option<from_log::LogSource>,
    /// With `--from`: the tools whose calls are concurrency-safe (the log does not say;
    /// without it the exclusive-call barrier is not checkable).
    #[arg(long, value_delimiter = ',', value_name = "TOOLS", requires = "from")]
    pub safe: Option<Vec<String>>,
    #[command(flatten)]
    pub docs_url: report_command::DocsUrlArg,
}

/// The size of a trace file; `None` for stdin, a pipe, or what cannot be read (opening it
/// says why).
fn trace_bytes(path: &Path) -> Option<u64> {
    if path == Path::new("-") {
        return None;
    }
    let meta = std::fs::metadata(path).ok()?;
    meta.is_file().then_some(meta.len())
}

/// A reader that writes a copy of what it reads to a file: stdin, read again for the HTML
/// report's excerpt (a copy in memory would hold the whole trace).
struct Tee<R> {
    inner: R,
    copy: std::fs::File,
}

impl<R: Read> Read for Tee<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.copy.write_all(&buf[..n]).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot keep a copy of stdin for the HTML report: {e}"),
            )
        })?;
        Ok(n)
    }
}

/// Where standard input, or a trace that cannot be read twice (a FIFO, `<(zstd -dc …)`), is
/// copied for the HTML report; removed when dropped, or by the signal handler.
struct StdinCopy(PathBuf);

impl StdinCopy {
    /// A new file of this process's own in the temporary directory. `create_new`: never a
    /// file (or a symlink) that is already there, which is then not ours to remove either.
    fn create() -> Result<(StdinCopy, std::fs::File)> {
        let path =
            std::env::temp_dir().join(format!("tep-check-stdin-{}.jsonl", std::process::id()));
        let file = output::create_temporary(&path)
            .with_context(|| format!("cannot keep a copy of the trace in {}", path.display()))?;
        Ok((StdinCopy(path), file))
    }
}

impl Drop for StdinCopy {
    fn drop(&mut self) {
        output::remove_temporary(&self.0);
    }
}

/// What checking a trace found, and what the reports say about it.
struct Checked {
    name: String,
    options: CheckOptions,
    report: CheckReport,
    /// The revision the trace's header names, when it has one.
    header_spec: Option<Revision>,
    header_implementation: Option<String>,
    statuses: Vec<(InvariantId, InvariantStatus)>,
    from: Option<from_log::FromLog>,
    log_summary: Option<tep_check::deepseek_harness::Summary>,
    /// What the check says ([`tep_check::Verdict`]; SHOULD violations fail with `--strict`).
    verdict: Verdict,
}

impl Checked {
    fn with_status(
        &self,
        wanted: fn(&InvariantStatus) -> Option<String>,
    ) -> Vec<(InvariantId, String)> {
        self.statuses
            .iter()
            .filter_map(|(id, s)| Some((*id, wanted(s)?)))
            .collect()
    }

    fn checked(&self) -> Vec<InvariantId> {
        self.statuses
            .iter()
            .filter(|(_, s)| *s == InvariantStatus::Checked)
            .map(|(id, _)| *id)
            .collect()
    }

    fn not_checkable(&self) -> Vec<(InvariantId, String)> {
        self.with_status(|s| match s {
            InvariantStatus::NotCheckable(why) => Some(why.clone()),
            _ => None,
        })
    }

    fn partly(&self) -> Vec<(InvariantId, String)> {
        self.with_status(|s| match s {
            InvariantStatus::PartlyCheckable(what) => Some(what.clone()),
            _ => None,
        })
    }
}

/// Checks a trace in one pass. The header (if any) chooses the revision, capabilities and
/// observation level unless the command line does.
pub fn check(args: CheckArgs) -> Result<u8> {
    if args.from.is_some() && args.observed.is_some_and(|l| l != ObservationLevel::Events) {
        anyhow::bail!("--from reads a session log, which holds level `events`: drop --observed");
    }
    // A signal removes the temporary files (the page being written, the trace's copy) and exits.
    let _signals = crate::signals::Signals::install_exiting()?;
    if let Some(out) = &args.html {
        output::check_writable(out, "HTML report")?;
    }
    // The page quotes the trace read again: what cannot be read twice is copied as it is read.
    let (stdin_copy, copy_file) = if trace_bytes(&args.trace).is_none() && args.html.is_some() {
        let (copy, file) = StdinCopy::create()?;
        (Some(copy), Some(file))
    } else {
        (None, None)
    };
    let checked = read_and_check(&args, copy_file)?;
    let code = u8::from(!checked.verdict.passes());
    match args.format {
        Format::Json => write_json(&checked)?,
        Format::Text => write_text(&checked)?,
    }
    if let Some(out) = &args.html {
        let source = stdin_copy
            .as_ref()
            .map_or(args.trace.as_path(), |c| c.0.as_path());
        write_html(out, source, checked, &args)?;
    }
    Ok(code)
}

/// The reader's buffer: `tep check` parses whole lines where they lie in it, so each fill is
/// one read of the file (the default 8 KiB would take eight reads where one does).
const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Reads the trace (or session log) and checks it as it is read.
fn read_and_check(args: &CheckArgs, stdin_copy: Option<std::fs::File>) -> Result<Checked> {
    let mut from = args
        .from
        .map(|source| from_log::FromLog::new(source, args.safe.clone()));
    // Threads that parse (a trace's records, a log's lines) while this one checks (none: it
    // parses too).
    let workers = match (args.jobs, &from) {
        (Some(1), _) => 0,
        (Some(n), _) => usize::from(n),
        (None, Some(log)) => log.parsing_workers(trace_bytes(&args.trace)),
        (None, None) => parsing_workers(trace_bytes(&args.trace)),
    };
    let name = args.trace.display().to_string();
    let source: Box<dyn Read> = match (name == "-", stdin_copy) {
        (true, Some(copy)) => Box::new(Tee {
            inner: std::io::stdin(),
            copy,
        }),
        (true, None) => Box::new(std::io::stdin()),
        (false, copy) => {
            let file =
                std::fs::File::open(&args.trace).with_context(|| format!("cannot open {name}"))?;
            match copy {
                Some(copy) => Box::new(Tee { inner: file, copy }),
                None => Box::new(file),
            }
        }
    };
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, source);
    // A session log may be the harness's default `session.jsonl.zstd`: read its frames' text.
    let compressed = from.is_some()
        && zstd_log::starts_compressed(&mut reader)
            .with_context(|| format!("cannot read {name}"))?;
    let mut unpacked = None;
    let reader: &mut dyn BufRead = match compressed {
        true => unpacked.insert(BufReader::with_capacity(
            READ_BUFFER_BYTES,
            ZstdFrames::new(reader),
        )),
        false => &mut reader,
    };
    // The trace's header decides the options (tep-check's rule); the command line overrides it.
    let (spec, capabilities, observed) = (args.spec, args.capabilities.clone(), args.observed);
    let mut check = TraceCheck::new(Box::new(move |header: Option<&TraceHeader>| {
        let mut options = CheckOptions::from_header(header);
        if let Some(spec) = spec {
            options = options.with_revision(spec);
        }
        if let Some(caps) = &capabilities {
            options = options.with_capabilities(caps.iter().copied());
        }
        if let Some(level) = observed {
            options = options.observed(level);
        }
        options
    }));
    if args.html.is_some() {
        check = check.keep_steps();
    }
    let mut log_summary = None;
    let result = match &from {
        // Records and cuts (a turn a crash interrupted, a log that ends inside a turn) alike.
        Some(from) => from
            .read(reader, workers, |line, made| made.feed(&mut check, line))
            .map(|s| {
                log_summary = Some(s);
            }),
        // Parsing is most of the work: the other cores parse while this thread checks.
        None => for_each_record_parallel(reader, workers, |line, record: &TraceRecord| {
            check.feed(line, record)
        }),
    };
    if let (Some(from), Some(unpacked)) = (from.as_mut(), &unpacked) {
        let frames = unpacked.get_ref();
        from.zstd = Some(tep_conformance::listing::ZstdJson {
            frames: frames.frames(),
            broken_off: frames.broken_off(),
        });
    }
    let header_spec = check.header().map(|h| h.spec);
    let header_implementation = check.header().and_then(|h| h.implementation.clone());
    let checked = result.and_then(|()| check.finish());
    let (options, mut report) = checked.with_context(|| match &from {
        Some(from) => format!("{name} is not a valid {} session log", from.source.name()),
        None => format!("{name} is not a valid trace"),
    })?;
    if let (Some(from), Some(summary)) = (&from, &log_summary) {
        from.add_breaches(&mut report, summary);
    }
    let verdict = report.verdict(args.strict);
    let statuses = match &from {
        Some(from) => from.statuses(options.statuses()),
        None => options.statuses(),
    };
    Ok(Checked {
        name,
        options,
        report,
        header_spec,
        header_implementation,
        statuses,
        from,
        log_summary,
        verdict,
    })
}

fn write_json(c: &Checked) -> Result<()> {
    let value = listing::CheckJson {
        trace: c.name.clone(),
        spec: c.options.revision,
        observation: c.options.level,
        records: c.report.records,
        batches: c.report.batches,
        conformant: c.verdict.passes(),
        verdict: c.verdict.to_string(),
        summary: c.verdict.describe(Checkable::of(&c.statuses)),
        violations: c.report.violations.clone(),
        omitted: c.report.omitted,
        checked: c.checked(),
        partly_checkable: c
            .partly()
            .into_iter()
            .map(|(invariant, catches)| listing::PartlyCheckable { invariant, catches })
            .collect(),
        not_checkable: c
            .not_checkable()
            .into_iter()
            .map(|(invariant, why)| listing::NotCheckable { invariant, why })
            .collect(),
        session_log: c
            .from
            .as_ref()
            .zip(c.log_summary.as_ref())
            .map(|(from, summary)| from.json(summary)),
    };
    writeln!(Stdout::new(), "{}", listing::to_json_text(&value)?)?;
    Ok(())
}

fn write_text(c: &Checked) -> Result<()> {
    let mut out = Stdout::new();
    let (options, report) = (&c.options, &c.report);
    let note = match c.header_spec {
        Some(h) if h != options.revision => format!(" (its header says {h})"),
        _ => String::new(),
    };
    writeln!(
        out,
        "tep check: {} against {}{note} at level {}, {} records, {} batch(es)",
        c.name, options.revision, options.level, report.records, report.batches
    )?;
    if let (Some(from), Some(summary)) = (&c.from, &c.log_summary) {
        from.write_text(&mut out, summary, &c.statuses)?;
    }
    for v in &report.violations {
        let inv = invariant(v.invariant);
        writeln!(out, "{} [{}]: {}", v.invariant, v.level, v.message)?;
        let sources: Vec<String> = inv.sources.iter().map(ToString::to_string).collect();
        writeln!(out, "  {} ({})", inv.doc_link(), sources.join("; "))?;
    }
    if report.omitted > 0 {
        writeln!(out, "... and {} more violations not shown", report.omitted)?;
    }
    let not_checkable = c.not_checkable();
    writeln!(
        out,
        "checked {} invariant(s); not checkable at level {}: {}",
        c.checked().len(),
        options.level,
        if not_checkable.is_empty() {
            "none".to_owned()
        } else {
            not_checkable
                .iter()
                .map(|(id, _)| id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        }
    )?;
    for (id, what) in &c.partly() {
        writeln!(
            out,
            "partly checkable at level {}: {id}: {what}",
            options.level
        )?;
    }
    if c.verdict == Verdict::NothingChecked {
        writeln!(
            out,
            "nothing was checked: the trace holds no batch (no `model` record)"
        )?;
    }
    let must = report.count_at(Level::Must);
    writeln!(
        out,
        "{} violation(s): {must} MUST, {} SHOULD",
        report.violations.len(),
        report.violations.len() - must
    )?;
    writeln!(
        out,
        "verdict: {}",
        c.verdict.describe(Checkable::of(&c.statuses))
    )?;
    Ok(())
}

/// The HTML page of the check: the trace's excerpt read again from `source`.
fn write_html(out: &Path, source: &Path, c: Checked, args: &CheckArgs) -> Result<()> {
    let name = c.name;
    let witnesses: BTreeSet<usize> = c
        .report
        .violations
        .iter()
        .flat_map(|v| v.lines.iter().copied())
        .collect();
    let file = std::fs::File::open(source).with_context(|| format!("cannot open {name}"))?;
    // The witness lines are lines of the text that was checked: a compressed log's, unpacked.
    let excerpt = match c.from.as_ref().is_some_and(|f| f.zstd.is_some()) {
        true => TraceExcerpt::read(
            BufReader::new(ZstdFrames::new(BufReader::new(file))),
            &witnesses,
        ),
        false => TraceExcerpt::read(BufReader::new(file), &witnesses),
    }
    .with_context(|| format!("cannot read {name}"))?;
    let mut run = report::outcome_of_check(
        &name,
        c.header_implementation.as_deref(),
        &c.options,
        c.report,
        args.strict,
    );
    // What this trace could check, as the text and JSON reports say (a session log's own
    // limits included).
    run.invariants = c.statuses;
    let ctx = report::RunContext::default();
    let json = report::json(&run, None, &ctx, &tep_conformance::suite::corpus_hash());
    let traces = BTreeMap::from([(name.clone(), excerpt)]);
    let page = html::Page {
        title: &format!("tep check {name}"),
        report: &json,
        traces: &traces,
        corpus: &[],
        paths: &html::paths(&run),
        docs_url: args.docs_url.docs_url.as_deref(),
        rerun: None,
        compare: None,
    };
    output::write_atomically(out, &html::render(&page))?;
    Ok(())
}
