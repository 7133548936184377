//! `tep check` as a run of one scenario, for the reports every run has.

use tep_model::trace::Capability;

use crate::protocol::{ImplementationInfo, PROTOCOL_VERSION, Ready};
use crate::runner::{Coverage, RunReport, ScenarioResult, Status};
use tep_check::{CheckOptions, CheckReport};

/// One checked trace (`tep check`) as a run of one scenario, the trace itself, so that a check
/// has the reports of a run (the HTML report): the trace passes, warns (SHOULD violations only)
/// or fails like a scenario, and one that holds no batch tested nothing. The implementation is
/// the one the trace's header names, at the options' revision, capabilities and level.
pub fn run_of_check(
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
        id: name.to_owned(),
        status,
        violations: check.violations,
        notes: Vec::new(),
        reason: (status == Status::Skipped).then(|| {
            "nothing was checked: the trace holds no batch (no `model` record)".to_owned()
        }),
        stderr: None,
        expected_failure: false,
        duration: std::time::Duration::ZERO,
        trace: None,
        edges: edges.clone(),
        steps,
    };
    RunReport {
        ready: Ready {
            ready: true,
            protocol: PROTOCOL_VERSION,
            implementation: ImplementationInfo {
                name: implementation
                    .unwrap_or("an implementation the trace does not name")
                    .to_owned(),
                version: None,
                language: None,
                homepage: None,
            },
            capabilities: match &options.capabilities {
                Some(caps) => caps.iter().copied().collect(),
                None => Capability::ALL.to_vec(),
            },
            specs: vec![options.revision],
            observation: Some(options.level),
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
