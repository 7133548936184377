//! A run's outcome: how each scenario ended, the edges its traces took, and who was judged.
//!
//! Drive mode ([`crate::runner`]) produces it, `tep check` makes one of a single trace
//! ([`crate::report::outcome_of_check`]), and the reports ([`crate::report`], [`crate::html`],
//! [`crate::baseline`]) read it: they never depend on the driver.

use std::collections::BTreeSet;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tep_model::graph::{EdgeId, Revision, StageGraph};
use tep_model::trace::{Capability, ObservationLevel, TraceRecord};

use crate::expectations::Note;
use crate::protocol::Ready;
use tep_check::Verdict;
use tep_check::invariants::InvariantId;
use tep_check::{InvariantStatus, StepRecord, Violation};

/// Who a run judged.
#[derive(Debug, Clone)]
pub enum Subject {
    /// An implementation driven over the adapter protocol (or the built-in reference): its
    /// handshake says who it is, its capabilities, revisions, level and protocol.
    Driven(Ready),
    /// One recorded trace, checked on its own (`tep check`): no handshake, only what the check
    /// was told.
    Trace {
        /// The implementation the trace's header names, if it names one.
        implementation: Option<String>,
        /// The capabilities the trace was checked with.
        capabilities: Vec<Capability>,
    },
}

/// How a report names an implementation a checked trace does not name.
pub const UNNAMED_IMPLEMENTATION: &str = "an implementation the trace does not name";

impl Subject {
    /// The implementation's name.
    pub fn name(&self) -> &str {
        match self {
            Subject::Driven(ready) => &ready.implementation.name,
            Subject::Trace { implementation, .. } => {
                implementation.as_deref().unwrap_or(UNNAMED_IMPLEMENTATION)
            }
        }
    }
}

/// How a scenario ended.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
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
    /// How a judged trace ends, from tep-check's verdict on it (SHOULD violations warn: the
    /// run's `--strict` is applied when results are counted, [`ScenarioResult::fails`]).
    pub fn of(verdict: Verdict) -> Status {
        match verdict {
            Verdict::Violated => Status::Failed,
            Verdict::Warned => Status::Warned,
            Verdict::NothingChecked => Status::Skipped,
            _ => Status::Passed,
        }
    }

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
#[derive(Debug, Clone)]
pub struct ScenarioResult {
    pub id: String,
    pub status: Status,
    pub violations: Vec<Violation>,
    /// Information that is no verdict (wording the reference chose where nothing fixes it).
    pub notes: Vec<Note>,
    /// Why it was skipped or errored.
    pub reason: Option<String>,
    /// The tail of the adapter's stderr, for errored scenarios.
    pub stderr: Option<String>,
    /// Covered by the expected-failures baseline.
    pub expected_failure: bool,
    /// How long the implementation and the checker took over it.
    pub duration: Duration,
    /// The trace as checked (at the run's observation level), when there is one.
    pub trace: Option<Vec<TraceRecord>>,
    /// The edges its trace took.
    pub edges: Coverage,
    /// Every record's step on its call's graph, in trace order: the path the trace took
    /// (the HTML report draws it), and where each violation happened ([`Self::step_of`]).
    pub steps: Vec<StepRecord>,
}

impl ScenarioResult {
    pub(crate) fn new(id: &str, status: Status) -> Self {
        ScenarioResult {
            id: id.to_owned(),
            status,
            violations: Vec::new(),
            notes: Vec::new(),
            reason: None,
            stderr: None,
            expected_failure: false,
            duration: Duration::ZERO,
            trace: None,
            edges: Coverage::default(),
            steps: Vec::new(),
        }
    }

    pub(crate) fn skipped(id: &str, reason: String) -> Self {
        ScenarioResult {
            reason: Some(reason),
            ..ScenarioResult::new(id, Status::Skipped)
        }
    }

    /// The invariants that make this scenario fail (all levels when `strict`).
    pub fn failing_invariants(&self, strict: bool) -> BTreeSet<InvariantId> {
        self.violations
            .iter()
            .filter(|v| v.fails(strict))
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

    /// Whether the implementation produced something that was judged (a trace, checked).
    pub fn tested(&self) -> bool {
        matches!(
            self.status,
            Status::Passed | Status::Warned | Status::Failed
        )
    }

    /// The violation that makes it fail first: the first one of the failing level, in the
    /// order the checker found them (trace order; the scenario's expectations last).
    pub fn first_failing(&self, strict: bool) -> Option<&Violation> {
        self.violations
            .iter()
            .find(|v| v.fails(strict))
            .or_else(|| self.violations.first())
    }

    /// The step of the record `v` points at first, when that record visits a node.
    pub fn step_of(&self, v: &Violation) -> Option<&StepRecord> {
        let line = *v.lines.first()?;
        self.steps.iter().find(|s| s.line == line)
    }
}

/// The outcome of a whole run.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Who was judged: an implementation's handshake, or a checked trace's header.
    pub subject: Subject,
    pub spec: Revision,
    /// The observation level the traces were checked at.
    pub level: ObservationLevel,
    pub strict: bool,
    /// The selected scenarios that ran or were found not applicable, in corpus order.
    pub scenarios: Vec<ScenarioResult>,
    pub coverage: Coverage,
    /// Every invariant and whether this run could check it.
    pub invariants: Vec<(InvariantId, InvariantStatus)>,
    /// The run was interrupted (Ctrl-C): `not_run` did not run or did not finish.
    pub interrupted: bool,
    pub not_run: Vec<String>,
    /// Wall time of the whole run.
    pub duration: Duration,
    /// What an adapter on an older protocol could not be sent (empty on the current one).
    pub protocol_gap: ProtocolGap,
}

/// The scenarios an adapter on an older protocol was not sent (they use newer constructs), and
/// the invariants they exercise: breaches of those go unchecked by this run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtocolGap {
    /// The protocol the adapter declares.
    pub declared: u32,
    pub scenarios: Vec<String>,
    pub invariants: BTreeSet<InvariantId>,
}

/// The edges the traces of a run took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Coverage {
    /// Edges of the pipeline graph.
    pub edges: BTreeSet<EdgeId>,
    /// Edges of the Code Mode graph, taken by sub-calls.
    pub code_mode_edges: BTreeSet<EdgeId>,
    /// Edges of the pipeline graph no trace recorded but the records around them imply (below
    /// `full`): none of them is in `edges`.
    pub implied_edges: BTreeSet<EdgeId>,
    /// Edges of the Code Mode graph implied so, none of them in `code_mode_edges`.
    pub implied_code_mode_edges: BTreeSet<EdgeId>,
}

impl Coverage {
    /// What one trace's check took.
    pub fn of(check: &tep_check::CheckReport) -> Coverage {
        Coverage {
            edges: check.edges.clone(),
            code_mode_edges: check.code_mode_edges.clone(),
            implied_edges: check.implied_edges.clone(),
            implied_code_mode_edges: check.implied_code_mode_edges.clone(),
        }
    }

    pub(crate) fn extend(&mut self, other: &Coverage) {
        self.edges.extend(&other.edges);
        self.code_mode_edges.extend(&other.code_mode_edges);
        self.implied_edges.extend(&other.implied_edges);
        self.implied_code_mode_edges
            .extend(&other.implied_code_mode_edges);
        // An edge one trace records is observed, whatever another implies.
        self.implied_edges.retain(|e| !self.edges.contains(e));
        self.implied_code_mode_edges
            .retain(|e| !self.code_mode_edges.contains(e));
    }

    /// The pipeline edges taken, observed or implied.
    pub fn taken(&self) -> usize {
        self.edges.len() + self.implied_edges.len()
    }

    /// The Code Mode edges taken, observed or implied.
    pub fn code_mode_taken(&self) -> usize {
        self.code_mode_edges.len() + self.implied_code_mode_edges.len()
    }
}

impl RunReport {
    /// The name of the implementation judged.
    pub fn implementation_name(&self) -> &str {
        self.subject.name()
    }

    pub fn count(&self, status: Status) -> usize {
        self.scenarios.iter().filter(|s| s.status == status).count()
    }

    /// Whether any scenario was judged: a run that only skipped or errored tested nothing.
    pub fn tested(&self) -> bool {
        self.scenarios.iter().any(ScenarioResult::tested)
    }

    /// Edges of the revision's graph taken by at least one trace, from 0 to 1.
    pub fn edge_coverage(&self) -> f64 {
        let total = StageGraph::of(self.spec).edges().len();
        if total == 0 {
            return 1.0;
        }
        self.coverage.taken() as f64 / total as f64
    }

    /// The graph's edges no trace took, of those the run's level records.
    pub fn missing_edges(&self) -> Vec<String> {
        let c = &self.coverage;
        missing(
            StageGraph::of(self.spec),
            &c.edges,
            &c.implied_edges,
            self.level,
            true,
        )
    }

    /// The graph's edges the run's level does not record and no trace implied: whether they
    /// were taken, the level cannot say.
    pub fn unseen_edges(&self) -> Vec<String> {
        let c = &self.coverage;
        missing(
            StageGraph::of(self.spec),
            &c.edges,
            &c.implied_edges,
            self.level,
            false,
        )
    }

    /// Edges of the revision's Code Mode graph taken by sub-calls, from 0 to 1.
    pub fn code_mode_edge_coverage(&self) -> f64 {
        let total = StageGraph::code_mode(self.spec).edges().len();
        self.coverage.code_mode_taken() as f64 / total.max(1) as f64
    }

    /// The Code Mode graph's edges no sub-call took, of those the run's level records.
    pub fn missing_code_mode_edges(&self) -> Vec<String> {
        let c = &self.coverage;
        let graph = StageGraph::code_mode(self.spec);
        missing(
            graph,
            &c.code_mode_edges,
            &c.implied_code_mode_edges,
            self.level,
            true,
        )
    }

    /// The Code Mode graph's edges the run's level does not record and no sub-call implied.
    pub fn unseen_code_mode_edges(&self) -> Vec<String> {
        let c = &self.coverage;
        let graph = StageGraph::code_mode(self.spec);
        missing(
            graph,
            &c.code_mode_edges,
            &c.implied_code_mode_edges,
            self.level,
            false,
        )
    }
}

/// The edges neither observed nor implied whose visibility at `level` is `visible`.
fn missing(
    graph: &StageGraph,
    observed: &BTreeSet<EdgeId>,
    implied: &BTreeSet<EdgeId>,
    level: ObservationLevel,
    visible: bool,
) -> Vec<String> {
    graph
        .edge_ids()
        .filter(|(id, _)| !observed.contains(id) && !implied.contains(id))
        .filter(|(_, e)| tep_check::observation::sees_edge(level, e) == visible)
        .map(|(_, e)| e.describe())
        .collect()
}
