//! `tep report`: many JSON run reports on one page (`--html`), implementations as columns, and
//! what changed since an earlier run (`--compare`); also the HTML options `tep run` shares.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use tep_conformance::html::compare::{self, Comparison};
use tep_conformance::html::matrix::{self, MatrixPage, Run};
use tep_conformance::report::JsonReport;

use crate::output::{check_writable, write_atomically};

/// The options of `tep report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The JSON reports of `tep run --json FILE`, one column each, in this order.
    #[arg(value_name = "RUN.json", required = true)]
    pub reports: Vec<PathBuf>,
    /// Write the page here: a matrix of the runs' verdicts, scenarios and invariants as rows.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub compare: CompareArg,
}

/// `--compare OLD.json`, on `tep run` and `tep report`.
#[derive(Debug, Args)]
pub struct CompareArg {
    /// An earlier JSON report of the same implementation: say what is newly failing, what is
    /// fixed, and which scenarios are new (compared by scenario id).
    #[arg(long, value_name = "OLD.json")]
    pub compare: Option<PathBuf>,
}

/// `--docs-url`, on every command that writes an HTML report.
#[derive(Debug, Args)]
pub struct DocsUrlArg {
    /// Where the project publishes tep's docs/ directory: the page's invariants link to
    /// URL/invariants.md#ID (they are embedded in the page either way).
    #[arg(long, value_name = "URL")]
    pub docs_url: Option<String>,
}

/// This tep's version, which a report it reads must not be newer than.
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

/// Reads a JSON run report, bounded (`input::MAX_REPORT_BYTES`); a file that is not one, or a
/// newer tep's, is a usage error naming it.
pub fn read(path: &Path) -> Result<JsonReport> {
    Ok(compare::read_report(path, version())?)
}

/// The comparison of `new` with `--compare OLD.json`, read before the run.
pub fn comparison(old: Option<&(PathBuf, JsonReport)>, new: &JsonReport) -> Option<Comparison> {
    old.map(|(path, old)| compare::compare(old, new, &path.display().to_string()))
}

pub fn report(args: ReportArgs) -> Result<u8> {
    // A signal removes the page's temporary file and exits 128 + the signal.
    let _signals = crate::signals::Signals::install_exiting()?;
    if let Some(path) = &args.html {
        check_writable(path, "HTML report")?;
    }
    let mut reports = Vec::with_capacity(args.reports.len());
    for path in &args.reports {
        reports.push((path.display().to_string(), read(path)?));
    }
    let old = match &args.compare.compare {
        Some(path) => Some((path.clone(), read(path)?)),
        None => None,
    };
    // The run compared is the one of the same implementation, else the first.
    let compared = old.as_ref().and_then(|(_, old)| {
        reports
            .iter()
            .find(|(_, r)| r.implementation.name == old.implementation.name)
            .or(reports.first())
            .map(|(_, r)| r)
    });
    let comparison = compared.and_then(|new| comparison(old.as_ref(), new));
    let mut out = crate::output::Stdout::new();
    use std::io::Write as _;
    for (file, r) in &reports {
        let c = &r.summary;
        writeln!(
            out,
            "{file}: {} against {}, {}: {} passed, {} failed, {} errored, {} skipped",
            r.implementation.name,
            r.spec,
            if r.conformant {
                "conformant"
            } else {
                "not conformant"
            },
            c.passed,
            c.failed,
            c.errored,
            c.skipped
        )?;
    }
    if let Some(c) = &comparison {
        for line in c.lines() {
            writeln!(out, "{line}")?;
        }
    }
    if let Some(path) = &args.html {
        let runs: Vec<Run<'_>> = reports
            .iter()
            .map(|(file, report)| Run { file, report })
            .collect();
        if runs.is_empty() {
            bail!("no report given");
        }
        let page = MatrixPage {
            runs: &runs,
            compare: comparison.as_ref(),
            version: version(),
        };
        // Whole or not at all: a full disk or a signal leaves the old page, never half of one.
        write_atomically(path, &matrix::render(&page))
            .with_context(|| format!("cannot write the HTML report {}", path.display()))?;
    }
    Ok(0)
}
