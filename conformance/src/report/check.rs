//! `tep check`'s outcome: one checked trace, for the reports every run has.

use tep_model::trace::Capability;

use crate::outcome::{Coverage, RunReport, ScenarioResult, Status, Subject};
use tep_check::{CheckOptions, CheckReport};

/// One checked trace (`tep check`) as the outcome of one scenario, the trace itself, so that a
/// check has the reports of a run (the HTML report): the trace passes, warns (SHOULD violations
/// only) or fails like a scenario, and one that holds no batch tested nothing. Its subject is the
/// trace, not a handshake: the implementation its header names (`implementation`), checked at the
/// options' revision, capabilities and level.
pub fn outcome_of_check(
    name: &str,
    implementation: Option<&str>,
    options: &CheckOptions,
    check: CheckReport,
    strict: bool,
) -> RunReport {
    let status = Status::of(check.verdict(false));
    let edges = Coverage::of(&check);
    let steps = check.steps;
    let result = ScenarioResult {
        violations: check.violations,
        reason: (status == Status::Skipped).then(|| {
            "nothing was checked: the trace holds no batch (no `model` record)".to_owned()
        }),
        edges: edges.clone(),
        steps,
        ..ScenarioResult::new(name, status)
    };
    RunReport {
        subject: Subject::Trace {
            implementation: implementation.map(str::to_owned),
            capabilities: match &options.capabilities {
                Some(caps) => caps.iter().copied().collect(),
                None => Capability::ALL.to_vec(),
            },
        },
        spec: options.revision,
        level: options.level,
        strict,
        scenarios: vec![result],
        coverage: edges,
        invariants: options.statuses(),
        interrupted: false,
        not_run: Vec::new(),
        duration: std::time::Duration::ZERO,
        protocol_gap: Default::default(),
    }
}
