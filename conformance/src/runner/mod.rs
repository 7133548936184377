//! Drive mode: run the corpus through an implementation, check every trace, score the run
//! (its outcome is [`crate::outcome`]'s).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tep_model::graph::Revision;
use tep_model::identity::CallId;
use tep_model::trace::{Capability, ObservationLevel, TraceRecord};
use tep_reference::mutant::Mutant;

use crate::expectations::{Note, check_expectations};
use crate::outcome::{Coverage, ProtocolGap, RunReport, ScenarioResult, Status, Subject};
use crate::protocol::{ImplementationInfo, PROTOCOL_VERSION, Ready, RunOutcome};
use crate::scenario::{Scenario, versions};
use crate::scripted::{ReferenceRun, implementation_name, run_reference_to_the_end};
use tep_check::Verdict;
use tep_check::observation::thin;
use tep_check::{CheckOptions, Checker, ScenarioFacts, StepRecord, Violation, cut_message};

mod parallel;

pub use parallel::{Interrupter, RunControl, RunEvent};

/// An implementation under test, however it is reached.
pub trait Implementation {
    /// The handshake: who it is, what it has, which revisions it implements.
    fn ready(&self) -> &Ready;
    /// Runs one scenario. Never panics; problems come back as `Errored`.
    fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer;
    /// Whether this is the built-in reference itself, unbroken: its trace of a scenario is the
    /// one the differential oracle's own run of it would give, so the oracle need not run it again.
    fn is_the_reference(&self) -> bool {
        false
    }
    /// The calls of `scenario` whose expected content this implementation's trace cannot be
    /// compared with, and why (e.g. a harness that plays a scripted tool through a shipped one
    /// which formats the answer its own way). Those comparisons are reported as not checked,
    /// never as passed; the calls' outcomes stay judged.
    fn unchecked_content(&self, _scenario: &Scenario) -> Vec<(CallId, String)> {
        Vec::new()
    }
    /// Breaches of the catalog's invariants that the implementation's own records of the run
    /// it last answered show beyond the trace it returned (a harness driver sees each body's
    /// interval, which its trace's level does not hold). Judged with the trace's violations;
    /// asked once, right after `run`.
    fn breaches_beyond_the_trace(&mut self) -> Vec<Violation> {
        Vec::new()
    }
}

/// `scenario` with no content expected of the `unchecked` calls, and a note per call saying
/// that its content was not checked and why.
pub(crate) fn without_content(
    scenario: &Scenario,
    unchecked: &[(CallId, String)],
) -> (Scenario, Vec<Note>) {
    let mut judged = scenario.clone();
    let mut notes = Vec::new();
    for (call, why) in unchecked {
        let Some(expected) = judged.expect.calls.get_mut(call.as_str()) else {
            continue;
        };
        let had = expected.content.take().is_some()
            | expected.content_includes.take().is_some()
            | expected.reference_content.take().is_some();
        if had {
            notes.push(Note {
                call: Some(call.clone()),
                lines: Vec::new(),
                message: format!("call {call}: expected content not checked: {why}"),
            });
        }
    }
    (judged, notes)
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
                // A kit that sends the same text as message and context gets it printed once.
                message: match context {
                    Some(context)
                        if !context.trim().is_empty() && context.trim() != message.trim() =>
                    {
                        format!("{message} ({context})")
                    }
                    _ => message,
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
                observation: Some(tep_model::trace::ObservationLevel::Full),
            },
            mutants,
        }
    }
}

impl BuiltinReference {
    /// The same reference declaring an older protocol version (`tep reference-adapter
    /// --protocol N`), for testing that a runner sends such an adapter nothing newer. Protocol 1
    /// had no `observation`: it is left out, as a protocol 1 adapter leaves it out.
    pub fn with_protocol(mut self, protocol: u32) -> Self {
        self.ready.protocol = protocol;
        if protocol < 2 {
            self.ready.observation = None;
        }
        self
    }
}

impl Implementation for BuiltinReference {
    fn ready(&self) -> &Ready {
        &self.ready
    }

    fn is_the_reference(&self) -> bool {
        self.mutants.is_empty()
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

/// Options of a run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub spec: Revision,
    /// SHOULD violations fail the run too.
    pub strict: bool,
    /// Check the traces at this observation level (at most the implementation's): the records
    /// it does not hold are dropped first. Default: the implementation's level.
    pub observed: Option<ObservationLevel>,
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
    #[error(
        "the implementation records its traces at level {declared}; they cannot be checked at {requested}"
    )]
    ObservedAboveDeclared {
        requested: ObservationLevel,
        declared: ObservationLevel,
    },
}

/// A run decided against the implementation's handshake: which of the selected scenarios run,
/// and which are not applicable (outside the revision, needing a capability it lacks, or using a
/// construct of the scenario language newer than its protocol).
#[derive(Debug, Clone)]
pub struct Plan {
    ready: Ready,
    options: RunOptions,
    check: CheckOptions,
    level: ObservationLevel,
    declared: ObservationLevel,
    /// The selected scenarios, in corpus order.
    slots: Vec<Slot>,
    protocol_gap: ProtocolGap,
}

#[derive(Debug, Clone)]
enum Slot {
    Run(Arc<Scenario>),
    NotApplicable(Box<ScenarioResult>),
}

impl Plan {
    /// Checks that the implementation can run `options.spec` at the requested level, and decides
    /// which of `selected` apply to it.
    pub fn new(
        ready: &Ready,
        selected: &[Scenario],
        options: &RunOptions,
    ) -> Result<Plan, RunError> {
        if !ready.specs.contains(&options.spec) {
            return Err(RunError::SpecNotImplemented {
                requested: options.spec,
                declared: ready.specs_list(),
            });
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
        let mut protocol_gap = ProtocolGap {
            declared: ready.protocol,
            ..ProtocolGap::default()
        };
        let check = CheckOptions::new(options.spec)
            .with_capabilities(capabilities.iter().copied())
            .observed(level)
            // Protocol 1 bodies did not record `body-settled`.
            .with_body_marks(ready.protocol >= 2);
        let slots = selected
            .iter()
            .map(|scenario| {
                if !scenario.applies_to(options.spec) {
                    return Slot::NotApplicable(Box::new(ScenarioResult::skipped(
                        &scenario.id,
                        format!("N/A: not part of {}", options.spec),
                    )));
                }
                let missing: Vec<&str> = scenario
                    .requires
                    .iter()
                    .filter(|c| !capabilities.contains(c))
                    .map(|c| c.as_str())
                    .collect();
                if !missing.is_empty() {
                    return Slot::NotApplicable(Box::new(ScenarioResult::skipped(
                        &scenario.id,
                        format!(
                            "N/A: the implementation does not declare {}",
                            missing.join(", ")
                        ),
                    )));
                }
                // Never send a construct newer than the adapter's protocol.
                match versions::not_applicable(scenario, ready.protocol) {
                    Some(reason) => {
                        protocol_gap.scenarios.push(scenario.id.clone());
                        protocol_gap.invariants.extend(&scenario.exercises);
                        Slot::NotApplicable(Box::new(ScenarioResult::skipped(&scenario.id, reason)))
                    }
                    None => Slot::Run(Arc::new(scenario.clone())),
                }
            })
            .collect();
        Ok(Plan {
            ready: ready.clone(),
            options: options.clone(),
            check,
            level,
            declared,
            slots,
            protocol_gap,
        })
    }

    /// How many selected scenarios will be sent to the implementation.
    pub fn runnable(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Run(_)))
            .count()
    }

    /// How many scenarios were selected.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Runs one scenario and judges the answer.
    fn run_one(
        &self,
        implementation: &mut dyn Implementation,
        seq: u64,
        scenario: &Scenario,
    ) -> (ScenarioResult, Coverage) {
        let started = Instant::now();
        let mut coverage = Coverage::default();
        let answer = implementation.run(seq, self.options.spec, scenario);
        let beyond = implementation.breaches_beyond_the_trace();
        let unchecked = implementation.unchecked_content(scenario);
        let (judged, not_checked) = without_content(scenario, &unchecked);
        let scenario = &judged;
        let mut result = match answer {
            Answer::Skipped(reason) => ScenarioResult::skipped(&scenario.id, reason),
            Answer::Errored { message, stderr } => ScenarioResult {
                reason: Some(message),
                stderr,
                ..ScenarioResult::new(&scenario.id, Status::Errored)
            },
            Answer::Ran(records) => self.judge(scenario, records, None, beyond, &mut coverage),
            Answer::Escaped { message, records } => {
                self.judge(scenario, records, Some(&message), beyond, &mut coverage)
            }
        };
        if result.trace.is_some() {
            result.notes.extend(not_checked);
        }
        result.duration = started.elapsed();
        (result, coverage)
    }

    fn judge(
        &self,
        scenario: &Scenario,
        records: Vec<TraceRecord>,
        escaped: Option<&str>,
        beyond: Vec<Violation>,
        coverage: &mut Coverage,
    ) -> ScenarioResult {
        let records = if self.level < self.declared {
            thin(&records, self.level)
        } else {
            records
        };
        let mut result = judge(scenario, &self.check, records, escaped, coverage);
        if result.status != Status::Errored && !beyond.is_empty() {
            result.violations.extend(beyond.into_iter().map(|mut v| {
                v.message = cut_message(v.message);
                v
            }));
            result.status = Status::of(Verdict::of(&result.violations, false));
        }
        result
    }

    /// Runs the plan on one implementation, in corpus order, on this thread.
    pub fn run(&self, implementation: &mut dyn Implementation) -> RunReport {
        let started = Instant::now();
        let mut coverage = Coverage::default();
        let mut seq = 0;
        let results = self
            .slots
            .iter()
            .map(|slot| match slot {
                Slot::NotApplicable(result) => Some((**result).clone()),
                Slot::Run(scenario) => {
                    seq += 1;
                    let (result, taken) = self.run_one(implementation, seq, scenario);
                    coverage.extend(&taken);
                    Some(result)
                }
            })
            .collect();
        self.report(results, coverage, false, started.elapsed())
    }

    fn report(
        &self,
        results: Vec<Option<ScenarioResult>>,
        coverage: Coverage,
        interrupted: bool,
        duration: Duration,
    ) -> RunReport {
        let mut scenarios = Vec::new();
        let mut not_run = Vec::new();
        for (slot, result) in self.slots.iter().zip(results) {
            match (result, slot) {
                (Some(result), _) => scenarios.push(result),
                (None, Slot::Run(scenario)) => not_run.push(scenario.id.clone()),
                (None, Slot::NotApplicable(result)) => scenarios.push((**result).clone()),
            }
        }
        RunReport {
            subject: Subject::Driven(self.ready.clone()),
            spec: self.options.spec,
            level: self.level,
            strict: self.options.strict,
            scenarios,
            coverage,
            invariants: self
                .check
                .clone()
                .with_facts(ScenarioFacts::default())
                .statuses(),
            interrupted: interrupted || !not_run.is_empty(),
            not_run,
            duration,
            protocol_gap: self.protocol_gap.clone(),
        }
    }
}

/// Runs `corpus` through `implementation`, one scenario after the other.
pub fn run_suite(
    implementation: &mut dyn Implementation,
    corpus: &[Scenario],
    options: &RunOptions,
) -> Result<RunReport, RunError> {
    let plan = Plan::new(implementation.ready(), corpus, options)?;
    Ok(plan.run(implementation))
}

/// Of a trace's `steps`, those of the lines `violations` point at first (the offending records).
pub fn steps_pointed_at(violations: &[Violation], steps: Vec<StepRecord>) -> Vec<StepRecord> {
    let pointed: BTreeSet<usize> = violations
        .iter()
        .filter_map(|v| v.lines.first().copied())
        .collect();
    steps
        .into_iter()
        .filter(|s| pointed.contains(&s.line))
        .collect()
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
    let mut result = ScenarioResult::new(&scenario.id, Status::Passed);
    let options = options.clone().with_facts(ScenarioFacts::from(scenario));
    let checked = Checker::new(options.clone())
        .keep_steps()
        .check_escaped(&records, escaped);
    match checked {
        Err(e) => {
            result.status = Status::Errored;
            result.reason = Some(format!("the trace is malformed: {e}"));
        }
        Ok(check) => {
            result.edges = Coverage::of(&check);
            coverage.extend(&result.edges);
            result.violations = check.violations;
            let (mut violations, notes) = check_expectations(scenario, &records, options.level);
            violations.extend(crate::redispatch::check(scenario, &records, options.level));
            // Cut as the checker's own are: an expectation's message may quote a content.
            // (Their number is bounded by the scenario's calls.)
            result
                .violations
                .extend(violations.into_iter().map(|mut v| {
                    v.message = cut_message(v.message);
                    v
                }));
            result.notes = notes
                .into_iter()
                .map(|mut n| {
                    n.message = cut_message(n.message);
                    n
                })
                .collect();
            result.steps = check.steps;
            result.status = Status::of(Verdict::of(&result.violations, false));
        }
    }
    result.trace = Some(records);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use tep_check::invariants::InvariantId;

    fn errored(message: &str, context: Option<&str>) -> String {
        let outcome = RunOutcome::Errored {
            message: message.to_owned(),
            context: context.map(str::to_owned),
        };
        match Answer::from(outcome) {
            Answer::Errored { message, .. } => message,
            other => panic!("not errored: {other:?}"),
        }
    }

    #[test]
    fn an_errored_context_is_printed_once_and_only_when_it_adds_something() {
        let text = "this scenario needs Dialect.defer_context";
        assert_eq!(errored(text, Some(text)), text);
        assert_eq!(errored(text, Some(&format!("{text}\n"))), text);
        assert_eq!(errored(text, Some("  ")), text);
        assert_eq!(errored(text, None), text);
        assert_eq!(
            errored(text, Some("Traceback: line 3")),
            format!("{text} (Traceback: line 3)")
        );
    }

    /// The reference, with the expected content of some calls declared not comparable.
    struct Unchecking(BuiltinReference, Vec<(CallId, String)>);

    impl Implementation for Unchecking {
        fn ready(&self) -> &Ready {
            self.0.ready()
        }
        fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
            self.0.run(seq, spec, scenario)
        }
        fn unchecked_content(&self, _scenario: &Scenario) -> Vec<(CallId, String)> {
            self.1.clone()
        }
    }

    /// The reference, with a breach its own records show beyond the trace after every run.
    struct Beyond(BuiltinReference, Violation);

    impl Implementation for Beyond {
        fn ready(&self) -> &Ready {
            self.0.ready()
        }
        fn run(&mut self, seq: u64, spec: Revision, scenario: &Scenario) -> Answer {
            self.0.run(seq, spec, scenario)
        }
        fn breaches_beyond_the_trace(&mut self) -> Vec<Violation> {
            vec![self.1.clone()]
        }
    }

    #[test]
    fn a_breach_beyond_the_trace_is_judged_with_the_traces_own() {
        let corpus = crate::scenario::corpus().unwrap();
        let scenario = corpus
            .iter()
            .find(|s| s.id == "parallel-results-commit-in-model-order")
            .unwrap();
        let run = |breach: Violation, strict: bool| {
            let mut implementation = Beyond(BuiltinReference::new(vec![]), breach);
            let options = RunOptions {
                strict,
                ..RunOptions::default()
            };
            run_suite(
                &mut implementation,
                std::slice::from_ref(scenario),
                &options,
            )
            .unwrap()
            .scenarios[0]
                .clone()
        };
        let must = Violation::new(
            InvariantId::DenySkipsBody,
            vec![2],
            Some(CallId::from("c1")),
            "c1 was denied, yet its body started",
        );
        let failed = run(must.clone(), false);
        assert_eq!(failed.status, Status::Failed);
        assert_eq!(failed.violations, [must]);
        // A SHOULD breach warns, as the trace's own would.
        let should = Violation::new(InvariantId::PoolCap, vec![2], None, "over the cap");
        let warned = run(should.clone(), false);
        assert_eq!(warned.status, Status::Warned);
        assert_eq!(warned.violations, [should]);
    }

    #[test]
    fn content_declared_not_comparable_is_noted_not_judged_and_outcomes_stay_judged() {
        let corpus = crate::scenario::corpus().unwrap();
        let mut scenario = corpus
            .iter()
            .find(|s| s.id == "parallel-results-commit-in-model-order")
            .unwrap()
            .clone();
        let c1 = scenario.expect.calls.get_mut("c1").unwrap();
        c1.content = Some("not what c1 returns".to_owned());
        let options = RunOptions {
            strict: true,
            ..RunOptions::default()
        };
        let run = |scenario: &Scenario, unchecked: Vec<(CallId, String)>| {
            let mut implementation = Unchecking(BuiltinReference::new(vec![]), unchecked);
            let report = run_suite(
                &mut implementation,
                std::slice::from_ref(scenario),
                &options,
            )
            .unwrap();
            report.scenarios[0].clone()
        };
        let judged = run(&scenario, vec![]);
        assert!(
            judged
                .violations
                .iter()
                .any(|v| v.invariant == InvariantId::ExpectedContent),
            "the wrong content is a violation when compared: {:?}",
            judged.violations
        );
        let unchecked = run(
            &scenario,
            vec![(CallId::from("c1"), "formatted".to_owned())],
        );
        assert!(
            unchecked.violations.is_empty(),
            "{:?}",
            unchecked.violations
        );
        assert_eq!(unchecked.status, Status::Passed);
        assert!(
            unchecked
                .notes
                .iter()
                .any(|n| n.message == "call c1: expected content not checked: formatted"),
            "{:?}",
            unchecked.notes
        );
        // The outcome is still judged: c1 expected to fail now fails the run.
        scenario.expect.calls.get_mut("c1").unwrap().is_error = true;
        let outcome = run(
            &scenario,
            vec![(CallId::from("c1"), "formatted".to_owned())],
        );
        assert!(
            outcome
                .violations
                .iter()
                .any(|v| v.invariant == InvariantId::ExpectedOutcome),
            "{:?}",
            outcome.violations
        );
    }
}
