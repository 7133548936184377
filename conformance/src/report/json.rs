//! The JSON report's types (its schema is generated from them) and how a run becomes one.

use std::collections::BTreeSet;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tep_model::graph::{EdgeId, GraphKind, NodeId, Revision, StageGraph};
use tep_model::trace::{Capability, ObservationLevel};

use crate::baseline::{BaselineOutcome, StaleEntry};
use crate::outcome::{RunReport, ScenarioResult, Status, Subject};
use crate::protocol::PROTOCOL_VERSION;
use tep_check::invariant;
use tep_check::invariants::{InvariantId, Level};
use tep_check::{InvariantStatus, StepRecord, Violation};

use super::*;

/// The JSON report of `tep run` (`--format json`, `--json FILE`); its schema is
/// `docs/schemas/run-report.schema.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JsonReport {
    /// Always `tep`.
    pub tool: String,
    /// The suite's version.
    pub version: String,
    /// `sha256:…` of the embedded scenario corpus (see `tep --version`).
    pub corpus_hash: String,
    /// The adapter protocol version the runner speaks.
    pub protocol: u32,
    /// The spec revision tested against.
    pub spec: Revision,
    /// SHOULD-level violations fail the run too.
    pub strict: bool,
    /// The observation level the traces were checked at.
    pub observation: ObservationLevel,
    /// Who was tested, from its handshake.
    pub implementation: ImplementationReport,
    /// When the run started (RFC 3339, UTC).
    pub started_at: String,
    /// Wall time of the whole run, in seconds.
    pub duration_seconds: f64,
    /// The exit code `tep run` ends with: 0 conformant, 1 not, 130 interrupted.
    pub exit_code: u8,
    /// Something was tested, nothing failed unexpectedly, no baseline entry is stale, and the
    /// run was not interrupted.
    pub conformant: bool,
    /// At least one scenario passed or failed.
    pub tested: bool,
    /// Ctrl-C stopped the run: `notRun` lists what did not run.
    pub interrupted: bool,
    /// Scenario counts.
    pub summary: Counts,
    pub coverage: CoverageReport,
    /// Every invariant, and whether this run could check it.
    pub invariants: Vec<InvariantReport>,
    /// The comparison with `--baseline`, if one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineReport>,
    /// The directory the failing scenarios' traces were kept in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_directory: Option<String>,
    /// The command line the run was made with, quoted for a POSIX shell (it can be pasted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The scenarios, in corpus order.
    pub scenarios: Vec<ScenarioReport>,
    /// Selected scenarios that did not run (interrupted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
}

/// The implementation, as its handshake (`ready`) describes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImplementationReport {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage: Option<String>,
    /// The adapter protocol version it speaks.
    pub protocol: u32,
    pub capabilities: Vec<Capability>,
    /// The spec revisions it implements.
    pub specs: Vec<Revision>,
    /// The observation level it declares.
    pub observation: ObservationLevel,
}

/// Edge coverage of both graphs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CoverageReport {
    /// The revision's stage graph.
    pub edges: EdgeCoverage,
    /// The revision's Code Mode graph, taken by sub-calls.
    pub code_mode_edges: EdgeCoverage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EdgeCoverage {
    pub taken: usize,
    pub total: usize,
    /// `taken / total`, from 0 to 1.
    pub ratio: f64,
    /// Of `taken`, the edges no trace recorded but the records around them imply (only below
    /// level `full`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub implied: usize,
    /// The edges no trace took, of those the run's level records.
    pub missing: Vec<String>,
    /// The edges the run's level does not record and no trace implied: neither taken nor
    /// missing, as far as the level can tell.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<String>,
    /// Every edge of the graph in declaration order, with how many scenarios took it. An edge's
    /// index here is its number: in a scenario's `edges`, a violation's `step`, and the
    /// `data-edge` of its group in the docs' SVG picture of the graph.
    pub edges: Vec<EdgeTaken>,
}

/// One edge of a graph, and how many scenarios took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EdgeTaken {
    /// As the flowchart prints it: `pre -->|deny| denied`.
    pub edge: String,
    pub from: NodeId,
    pub to: NodeId,
    /// How many scenarios' traces took it (recorded or implied).
    pub scenarios: usize,
    /// Of those, how many only imply it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub implied: usize,
}

/// Whether the run could check an invariant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InvariantReport {
    pub invariant: InvariantId,
    pub status: InvariantCheck,
    /// Why it was not checkable or not applicable; what it still catches when partly checkable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum InvariantCheck {
    Checked,
    /// Some of its breaches are caught at this level; `why` says which.
    PartlyCheckable,
    /// The observation level lacks the records the check reads, or does not record its breach.
    NotCheckable,
    /// Outside the revision, or about a part the implementation does not declare.
    NotApplicable,
}

/// The comparison with the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaselineReport {
    /// The baseline file.
    pub file: String,
    /// Entries that matched a failure.
    pub expected: Vec<String>,
    /// Failures no entry lists (`scenario:invariant`, or `scenario (errored)`).
    pub unexpected: Vec<String>,
    /// Entries to remove.
    pub stale: Vec<StaleEntry>,
}

/// One scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScenarioReport {
    pub id: String,
    pub status: Status,
    /// How long the implementation and the checker took over it, in seconds.
    pub duration_seconds: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<ViolationReport>,
    /// Information that is no verdict.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<NoteReport>,
    /// Why it was skipped or errored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The tail of the adapter's stderr, for errored scenarios.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stderr: Option<String>,
    /// It fails exactly as the baseline expects.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expected_failure: bool,
    /// The reasons of the baseline entries that expect its failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_reason: Option<String>,
    /// Where its trace was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    /// The edges of the stage graph its trace took (their numbers: `coverage.edges.edges`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<usize>,
    /// The edges of the Code Mode graph its sub-calls took (`coverage.codeModeEdges.edges`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code_mode_edges: Vec<usize>,
    /// The edges of the stage graph its trace does not record but implies (below `full`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub implied_edges: Vec<usize>,
    /// The edges of the Code Mode graph its sub-calls imply so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub implied_code_mode_edges: Vec<usize>,
}

impl ScenarioReport {
    /// The violation a scenario is grouped by: its first that fails the run (MUST, or any level
    /// under `--strict`: tep-check's `Level::fails`), else its first.
    pub fn first_failing(&self, strict: bool) -> Option<&ViolationReport> {
        self.violations
            .iter()
            .find(|v| v.level.fails(strict))
            .or_else(|| self.violations.first())
    }
}

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ViolationReport {
    pub invariant: InvariantId,
    pub level: Level,
    /// Witness lines of the trace (1-based), the offending one first.
    pub lines: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// One plain sentence, in the trace's vocabulary.
    pub message: String,
    /// The invariant's entry in `docs/invariants.md`.
    pub doc: String,
    /// Where the invariant comes from.
    pub sources: Vec<String>,
    /// Where on the graph it happened: the step of the record it points at first, when that
    /// record visits a node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<StepReport>,
}

/// A record's step on its call's graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StepReport {
    /// The graph the call walks: the stage graph, or the Code Mode graph for a sub-call.
    pub graph: GraphName,
    /// Where the step starts: the edge's source, or where the call stood.
    pub from: NodeId,
    /// The node the record visits.
    pub to: NodeId,
    /// The edge taken (its number in that graph's `coverage` edges), when the step is one edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edge: Option<usize>,
    /// The graph has no such step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
}

/// Which graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GraphName {
    /// The revision's stage graph.
    Pipeline,
    /// The revision's Code Mode graph.
    CodeMode,
}

impl From<GraphKind> for GraphName {
    fn from(kind: GraphKind) -> Self {
        match kind {
            GraphKind::Pipeline => GraphName::Pipeline,
            GraphKind::CodeMode => GraphName::CodeMode,
        }
    }
}

fn step_report(step: &StepRecord) -> StepReport {
    StepReport {
        graph: step.graph.into(),
        from: step.from,
        to: step.to,
        edge: step.edge.map(|e| e.0),
        refused: step.refused,
    }
}

/// Information that is no verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NoteReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    pub lines: Vec<usize>,
    pub message: String,
}

fn violation_report(v: &Violation, step: Option<&StepRecord>) -> ViolationReport {
    let inv = invariant(v.invariant);
    ViolationReport {
        invariant: v.invariant,
        level: v.level,
        lines: v.lines.clone(),
        call: v.call.as_ref().map(ToString::to_string),
        message: v.message.clone(),
        doc: inv.doc_link(),
        sources: inv.sources.iter().map(ToString::to_string).collect(),
        step: step.map(step_report),
    }
}

fn rounded(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

fn edge_coverage(
    graph: &StageGraph,
    ratio: f64,
    (missing, unseen): (Vec<String>, Vec<String>),
    taken_by: impl Fn(&ScenarioResult) -> (&BTreeSet<EdgeId>, &BTreeSet<EdgeId>),
    scenarios: &[ScenarioResult],
) -> EdgeCoverage {
    // Per edge: the scenarios that took it, and those of them that only imply it.
    let mut counts = vec![(0, 0); graph.edges().len()];
    for s in scenarios {
        let (observed, implied) = taken_by(s);
        for edge in observed.union(implied) {
            if let Some((n, only_implied)) = counts.get_mut(edge.0) {
                *n += 1;
                if !observed.contains(edge) {
                    *only_implied += 1;
                }
            }
        }
    }
    EdgeCoverage {
        taken: counts.iter().filter(|(n, _)| *n > 0).count(),
        total: counts.len(),
        ratio,
        implied: counts.iter().filter(|(n, i)| *n > 0 && n == i).count(),
        missing,
        unseen,
        edges: graph
            .edges()
            .iter()
            .zip(counts)
            .map(|(e, (scenarios, implied))| EdgeTaken {
                edge: e.describe(),
                from: e.from,
                to: e.to,
                scenarios,
                implied,
            })
            .collect(),
    }
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The machine-readable report.
pub fn json(
    report: &RunReport,
    baseline: Option<&BaselineOutcome>,
    ctx: &RunContext,
    corpus_hash: &str,
) -> JsonReport {
    let scenarios = report
        .scenarios
        .iter()
        .map(|s| scenario_report(s, baseline, ctx))
        .collect();
    JsonReport {
        tool: "tep".to_owned(),
        version: crate::suite::VERSION.to_owned(),
        corpus_hash: corpus_hash.to_owned(),
        protocol: PROTOCOL_VERSION,
        spec: report.spec,
        strict: report.strict,
        observation: report.level,
        implementation: implementation_report(report),
        started_at: ctx.started_at.clone(),
        duration_seconds: rounded(report.duration.as_secs_f64()),
        exit_code: exit_code(report, baseline),
        conformant: conformant(report, baseline),
        tested: report.tested(),
        interrupted: report.interrupted,
        summary: counts(report, baseline),
        coverage: CoverageReport {
            edges: edge_coverage(
                StageGraph::of(report.spec),
                report.edge_coverage(),
                (report.missing_edges(), report.unseen_edges()),
                |s| (&s.edges.edges, &s.edges.implied_edges),
                &report.scenarios,
            ),
            code_mode_edges: edge_coverage(
                StageGraph::code_mode(report.spec),
                report.code_mode_edge_coverage(),
                (
                    report.missing_code_mode_edges(),
                    report.unseen_code_mode_edges(),
                ),
                |s| (&s.edges.code_mode_edges, &s.edges.implied_code_mode_edges),
                &report.scenarios,
            ),
        },
        invariants: report
            .invariants
            .iter()
            .map(|(id, status)| invariant_report(*id, status))
            .collect(),
        baseline: baseline.map(|b| BaselineReport {
            file: b.path.clone(),
            expected: b.expected.clone(),
            unexpected: b.unexpected.clone(),
            stale: b.stale.clone(),
        }),
        run_directory: ctx.run_dir.as_ref().map(|d| d.display().to_string()),
        command: Some(ctx.command_line()).filter(|c| !c.is_empty()),
        scenarios,
        not_run: report.not_run.clone(),
    }
}

/// One scenario's entry: its verdict, what the baseline said of it, its trace file and edges.
fn scenario_report(
    s: &ScenarioResult,
    baseline: Option<&BaselineOutcome>,
    ctx: &RunContext,
) -> ScenarioReport {
    let comparison = baseline.and_then(|b| b.comparisons.get(&s.id));
    ScenarioReport {
        id: s.id.clone(),
        status: s.status,
        duration_seconds: rounded(s.duration.as_secs_f64()),
        violations: s
            .violations
            .iter()
            .map(|v| violation_report(v, s.step_of(v)))
            .collect(),
        notes: s
            .notes
            .iter()
            .map(|n| NoteReport {
                call: n.call.as_ref().map(ToString::to_string),
                lines: n.lines.clone(),
                message: n.message.clone(),
            })
            .collect(),
        reason: s.reason.clone(),
        stderr: s.stderr.clone(),
        expected_failure: s.expected_failure,
        baseline_reason: comparison
            .filter(|c| !c.reasons.is_empty())
            .map(|c| c.reasons.join("; ")),
        trace: ctx.traces.get(&s.id).map(|p| p.display().to_string()),
        edges: s.edges.edges.iter().map(|e| e.0).collect(),
        code_mode_edges: s.edges.code_mode_edges.iter().map(|e| e.0).collect(),
        implied_edges: s.edges.implied_edges.iter().map(|e| e.0).collect(),
        implied_code_mode_edges: s
            .edges
            .implied_code_mode_edges
            .iter()
            .map(|e| e.0)
            .collect(),
    }
}

/// Who was tested: a driven implementation as its handshake describes it; a checked trace's
/// implementation as the check was told (the header's name, the revision, level and
/// capabilities it was checked with), on the protocol this runner speaks.
fn implementation_report(report: &RunReport) -> ImplementationReport {
    match &report.subject {
        Subject::Driven(ready) => ImplementationReport {
            name: ready.implementation.name.clone(),
            version: ready.implementation.version.clone(),
            language: ready.implementation.language.clone(),
            homepage: ready.implementation.homepage.clone(),
            protocol: ready.protocol,
            capabilities: ready.capabilities.clone(),
            specs: ready.specs.clone(),
            observation: ready.level(),
        },
        Subject::Trace { capabilities, .. } => ImplementationReport {
            name: report.subject.name().to_owned(),
            version: None,
            language: None,
            homepage: None,
            protocol: PROTOCOL_VERSION,
            capabilities: capabilities.clone(),
            specs: vec![report.spec],
            observation: report.level,
        },
    }
}

/// Whether an invariant was checked in the run, and if not fully, why.
fn invariant_report(id: InvariantId, status: &InvariantStatus) -> InvariantReport {
    let (status, why) = match status {
        InvariantStatus::Checked => (InvariantCheck::Checked, None),
        InvariantStatus::PartlyCheckable(what) => {
            (InvariantCheck::PartlyCheckable, Some(what.clone()))
        }
        InvariantStatus::NotCheckable(why) => (InvariantCheck::NotCheckable, Some(why.clone())),
        InvariantStatus::NotApplicable(why) => (InvariantCheck::NotApplicable, Some(why.clone())),
        // A status this report does not know yet: say so rather than claim it was checked.
        other => (InvariantCheck::NotCheckable, Some(format!("{other:?}"))),
    };
    InvariantReport {
        invariant: id,
        status,
        why,
    }
}
