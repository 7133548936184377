//! Drive mode: run the corpus through an implementation, check every trace, score the run.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::Serialize;
use tep_reference::graph::{EdgeId, Revision, StageGraph};
use tep_reference::mutant::Mutant;
use tep_reference::trace::{Capability, ObservationLevel, TraceRecord, to_jsonl};

use crate::checker::{CheckOptions, Checker, InvariantStatus, ScenarioFacts, Violation};
use crate::invariants::{InvariantId, Level};
use crate::observation::thin;
use crate::protocol::{ImplementationInfo, PROTOCOL_VERSION, Ready, RunOutcome};
use crate::rules::expectations::{Note, check_expectations};
use crate::scenario::Scenario;
use crate::scripted::{ReferenceRun, implementation_name, run_reference_to_the_end};

/// An implementation under test, however it is reached.
pub trait Implementation {
    /// The handshake: who it is, what it has, which revisions it implements.
    fn ready(&self) -> &Ready;
    /// Runs one scenario. Never panics; problems come back as `Errored`.
    fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer;
}

/// What an implementation answered for one scenario.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Ran(Vec<TraceRecord>),
    /// An exception escaped the pipeline: the trace up to the escape, and what escaped.
    Escaped {
        message: String,
        records: Vec<TraceRecord>,
    },
    Skipped(String),
    Errored {
        message: String,
        /// The tail of the adapter's stderr, when there is one.
        stderr: Option<String>,
    },
}

impl From<RunOutcome> for Answer {
    fn from(outcome: RunOutcome) -> Self {
        match outcome {
            RunOutcome::Trace(records) => Answer::Ran(records),
            RunOutcome::Escaped { message, trace } => Answer::Escaped {
                message,
                records: trace,
            },
            RunOutcome::Skipped { reason } => Answer::Skipped(reason),
            RunOutcome::Errored { message, context } => Answer::Errored {
                message: match context {
                    Some(context) => format!("{message} ({context})"),
                    None => message,
                },
                stderr: None,
            },
        }
    }
}

/// The built-in reference pipeline, in process (optionally with mutants).
#[derive(Debug, Clone)]
pub struct BuiltinReference {
    ready: Ready,
    mutants: Vec<Mutant>,
}

impl BuiltinReference {
    pub fn new(mutants: Vec<Mutant>) -> Self {
        let mut name = implementation_name();
        if !mutants.is_empty() {
            let names: Vec<&str> = mutants.iter().map(|m| m.name()).collect();
            name = format!("{name} (mutant: {})", names.join(", "));
        }
        BuiltinReference {
            ready: Ready {
                ready: true,
                protocol: PROTOCOL_VERSION,
                implementation: ImplementationInfo {
                    name,
                    version: Some(env!("CARGO_PKG_VERSION").to_owned()),
                    language: Some("Rust".to_owned()),
                    homepage: None,
                },
                capabilities: Capability::ALL.to_vec(),
                specs: Revision::ALL.to_vec(),
                observation: Some(tep_reference::trace::ObservationLevel::Full),
            },
            mutants,
        }
    }
}

impl Implementation for BuiltinReference {
    fn ready(&self) -> &Ready {
        &self.ready
    }

    fn run(&mut self, _seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
        match run_reference_to_the_end(scenario, spec, &self.mutants) {
            Ok(ReferenceRun::Trace(records)) => Answer::Ran(records),
            Ok(ReferenceRun::Escaped { message, records }) => Answer::Escaped { message, records },
            Err(message) => Answer::Errored {
                message,
                stderr: None,
            },
        }
    }
}

/// How a scenario ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Passed,
    /// Only SHOULD-level violations.
    Warned,
    Failed,
    /// N/A: outside the revision, a capability the implementation lacks, or the adapter skipped.
    Skipped,
    /// The adapter could not produce a usable answer.
    Errored,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Warned => "warned",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::Errored => "errored",
        }
    }
}

/// One scenario's verdict.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub id: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<Violation>,
    /// Information that is no verdict (wording the reference chose where nothing fixes it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Note>,
    /// Why it was skipped or errored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The tail of the adapter's stderr, for errored scenarios.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// Covered by the expected-failures baseline.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub expected_failure: bool,
    #[serde(skip)]
    pub trace: Option<Vec<TraceRecord>>,
}

impl ScenarioResult {
    /// The invariants that make this scenario fail (all levels when `strict`).
    pub fn failing_invariants(&self, strict: bool) -> BTreeSet<InvariantId> {
        self.violations
            .iter()
            .filter(|v| strict || v.level == Level::Must)
            .map(|v| v.invariant)
            .collect()
    }

    /// Whether the scenario counts as a failure.
    pub fn fails(&self, strict: bool) -> bool {
        match self.status {
            Status::Failed | Status::Errored => true,
            Status::Warned => strict,
            Status::Passed | Status::Skipped => false,
        }
    }
}

/// Options of a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub spec: Revision,
    /// SHOULD violations fail the run too.
    pub strict: bool,
    /// Run only these scenarios (all when empty).
    pub only: Vec<String>,
    /// Write each trace as `<dir>/<scenario>.jsonl`.
    pub traces_dir: Option<PathBuf>,
    /// Check the traces at this observation level (at most the implementation's): the records
    /// it does not hold are dropped first. Default: the implementation's level.
    pub observed: Option<ObservationLevel>,
}

/// The outcome of a whole run.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub implementation: ImplementationInfo,
    pub spec: Revision,
    /// The observation level the traces were checked at.
    pub level: ObservationLevel,
    pub strict: bool,
    pub scenarios: Vec<ScenarioResult>,
    pub coverage: Coverage,
    /// Every invariant and whether this run could check it.
    pub invariants: Vec<(InvariantId, InvariantStatus)>,
}

/// The edges the traces of a run took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Edges of the pipeline graph.
    pub edges: BTreeSet<EdgeId>,
    /// Edges of the Code Mode graph, taken by sub-calls.
    pub code_mode_edges: BTreeSet<EdgeId>,
}

impl RunReport {
    pub fn count(&self, status: Status) -> usize {
        self.scenarios.iter().filter(|s| s.status == status).count()
    }

    /// Edges of the revision's graph taken by at least one trace, from 0 to 1.
    pub fn edge_coverage(&self) -> f64 {
        let total = StageGraph::of(self.spec).edges().len();
        if total == 0 {
            return 1.0;
        }
        self.coverage.edges.len() as f64 / total as f64
    }

    /// The graph's edges no trace took.
    pub fn missing_edges(&self) -> Vec<String> {
        missing(StageGraph::of(self.spec), &self.coverage.edges)
    }

    /// Edges of the revision's Code Mode graph taken by sub-calls, from 0 to 1.
    pub fn code_mode_edge_coverage(&self) -> f64 {
        let total = StageGraph::code_mode(self.spec).edges().len();
        self.coverage.code_mode_edges.len() as f64 / total.max(1) as f64
    }

    /// The Code Mode graph's edges no sub-call took.
    pub fn missing_code_mode_edges(&self) -> Vec<String> {
        missing(
            StageGraph::code_mode(self.spec),
            &self.coverage.code_mode_edges,
        )
    }
}

fn missing(graph: &StageGraph, taken: &BTreeSet<EdgeId>) -> Vec<String> {
    graph
        .edge_ids()
        .filter(|(id, _)| !taken.contains(id))
        .map(|(_, e)| e.describe())
        .collect()
}

/// Why a run could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    #[error(
        "the implementation implements {declared}, not {requested}; run with --spec {declared}"
    )]
    SpecNotImplemented {
        requested: Revision,
        declared: String,
    },
    #[error("no scenario is called {0} (run `tep scenarios list`)")]
    UnknownScenario(String),
    #[error("cannot write traces to {path}: {message}")]
    Traces { path: String, message: String },
    #[error(
        "the implementation records its traces at level {declared}; they cannot be checked at {requested}"
    )]
    ObservedAboveDeclared {
        requested: ObservationLevel,
        declared: ObservationLevel,
    },
}

/// Runs the corpus (or the scenarios named in `options.only`) through `implementation`.
pub fn run_suite(
    implementation: &mut dyn Implementation,
    corpus: &[Scenario],
    options: &RunOptions,
) -> Result<RunReport, RunError> {
    let ready = implementation.ready().clone();
    if !ready.specs.contains(&options.spec) {
        return Err(RunError::SpecNotImplemented {
            requested: options.spec,
            declared: ready
                .specs
                .iter()
                .map(|r| r.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    if let Some(unknown) = options
        .only
        .iter()
        .find(|id| !corpus.iter().any(|s| &s.id == *id))
    {
        return Err(RunError::UnknownScenario(unknown.clone()));
    }
    if let Some(dir) = &options.traces_dir {
        std::fs::create_dir_all(dir).map_err(|e| RunError::Traces {
            path: dir.display().to_string(),
            message: e.to_string(),
        })?;
    }
    let declared = ready.level();
    let level = options.observed.unwrap_or(declared);
    if level > declared {
        return Err(RunError::ObservedAboveDeclared {
            requested: level,
            declared,
        });
    }
    let capabilities: BTreeSet<Capability> = ready.capabilities.iter().copied().collect();
    let check_options = CheckOptions {
        revision: options.spec,
        capabilities: Some(capabilities.clone()),
        level,
        facts: None,
        // Protocol 1 bodies did not record `body-settled`.
        body_marks: ready.protocol >= 2,
    };
    let mut report = RunReport {
        implementation: ready.implementation.clone(),
        spec: options.spec,
        level,
        strict: options.strict,
        scenarios: Vec::new(),
        coverage: Coverage::default(),
        invariants: CheckOptions {
            facts: Some(ScenarioFacts::default()),
            ..check_options.clone()
        }
        .statuses(),
    };
    let selected = corpus
        .iter()
        .filter(|s| options.only.is_empty() || options.only.contains(&s.id));
    for (n, scenario) in selected.enumerate() {
        let skipped = |reason: String| ScenarioResult {
            id: scenario.id.clone(),
            status: Status::Skipped,
            violations: Vec::new(),
            notes: Vec::new(),
            reason: Some(reason),
            stderr: None,
            expected_failure: false,
            trace: None,
        };
        if !scenario.applies_to(options.spec) {
            report
                .scenarios
                .push(skipped(format!("N/A: not part of {}", options.spec)));
            continue;
        }
        let missing: Vec<&str> = scenario
            .requires
            .iter()
            .filter(|c| !capabilities.contains(c))
            .map(|c| c.as_str())
            .collect();
        if !missing.is_empty() {
            report.scenarios.push(skipped(format!(
                "N/A: the implementation does not declare {}",
                missing.join(", ")
            )));
            continue;
        }
        let answer = implementation.run(n as u64 + 1, options.spec, scenario);
        let result = match answer.clone() {
            Answer::Skipped(reason) => skipped(reason),
            Answer::Errored { message, stderr } => ScenarioResult {
                id: scenario.id.clone(),
                status: Status::Errored,
                violations: Vec::new(),
                notes: Vec::new(),
                reason: Some(message),
                stderr,
                expected_failure: false,
                trace: None,
            },
            Answer::Ran(records) | Answer::Escaped { records, .. } => {
                let escaped = match &answer {
                    Answer::Escaped { message, .. } => Some(message.clone()),
                    _ => None,
                };
                let records = if level < declared {
                    thin(&records, level)
                } else {
                    records
                };
                if let Some(dir) = &options.traces_dir {
                    let path = dir.join(format!("{}.jsonl", scenario.id));
                    std::fs::write(&path, to_jsonl(&records)).map_err(|e| RunError::Traces {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    })?;
                }
                judge(
                    scenario,
                    &check_options,
                    records,
                    escaped.as_deref(),
                    &mut report.coverage,
                )
            }
        };
        report.scenarios.push(result);
    }
    Ok(report)
}

/// Checks one trace: the invariants, then the scenario's expectations.
/// `escaped` is what escaped the pipeline when the trace ends in an escape.
pub fn judge(
    scenario: &Scenario,
    options: &CheckOptions,
    records: Vec<TraceRecord>,
    escaped: Option<&str>,
    coverage: &mut Coverage,
) -> ScenarioResult {
    let mut result = ScenarioResult {
        id: scenario.id.clone(),
        status: Status::Passed,
        violations: Vec::new(),
        notes: Vec::new(),
        reason: None,
        stderr: None,
        expected_failure: false,
        trace: None,
    };
    let options = CheckOptions {
        facts: Some(ScenarioFacts::of(scenario)),
        ..options.clone()
    };
    let checked = (|| {
        let mut checker = Checker::new(options.clone());
        for (i, record) in records.iter().enumerate() {
            checker.feed(i + 1, record)?;
        }
        if let Some(message) = escaped {
            checker.escape(records.len() + 1, message);
        }
        checker.finish()
    })();
    match checked {
        Err(e) => {
            result.status = Status::Errored;
            result.reason = Some(format!("the trace is malformed: {e}"));
        }
        Ok(check) => {
            coverage.edges.extend(check.edges);
            coverage.code_mode_edges.extend(check.code_mode_edges);
            result.violations = check.violations;
            let (violations, notes) = check_expectations(scenario, &records, options.level);
            result.violations.extend(violations);
            result.notes = notes;
            result.status = if result.violations.iter().any(|v| v.level == Level::Must) {
                Status::Failed
            } else if result.violations.is_empty() {
                Status::Passed
            } else {
                Status::Warned
            };
        }
    }
    result.trace = Some(records);
    result
}
