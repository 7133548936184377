//! Generative conformance: random scenarios driven through any implementation, judged by the
//! invariants, each failure shrunk to a small scenario.
//!
//! A fixed corpus finds the bugs its authors thought of; random scenarios find the others (Jepsen's
//! lesson). [`strategy`] generates scenarios from the scenario language (batches, listeners,
//! approval answers, guards, wrappers, bodies, post-execute decisions, finalizers, observers,
//! Code Mode programs), weighted toward the mixes where pipelines go wrong (parallel pools with
//! exclusive calls, throws at every stage, contexts from several origins), using only the
//! capabilities the implementation declares. [`fuzz`] runs them, drawing again (from the same
//! case's RNG) while a scenario uses a construct newer than the implementation's protocol; a failing scenario is shrunk with proptest's value
//! trees (fewer calls, fewer listeners, simpler steps) while the same invariant still fails.
//!
//! A failure is a verdict only if it reproduces: the failing scenario is replayed until it has
//! run [`CONFIRM_RUNS`] times, and one that does not fail every time is reported apart as
//! [`Flaky`] (failed k of n), never as the run's failure; fuzzing goes on. Shrinking keeps only
//! the simplifications that fail every time too. What decides such a failure is time nobody
//! scripted (a machine under load), which is the implementation's to spend, not the suite's to
//! judge.
//!
//! The invariants judge every trace, and so does the built-in reference (the differential
//! oracle, [`crate::oracle`]): each scenario runs on it first, in process, and its outcome, where
//! the spec determines it, is the scenario's expected outcome. `--oracle none` leaves the
//! invariants alone. The printed minimal scenario carries those expectations, so it can join a
//! corpus as it is and `tep run --scenario-file` replays the same verdict.
//!
//! Runs are reproducible: case `n` of seed `s` is generated from its own RNG, seeded from `s`
//! and `n` alone.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use tep_model::graph::Revision;

use crate::expectations::{self, OracleCheck, Source};
use crate::protocol::Ready;
use crate::runner::{Answer, Implementation};
use crate::scenario::Scenario;
use crate::{fuzz_stats, oracle};
use tep_check::invariants::InvariantId;
use tep_check::{CheckOptions, Checker, ScenarioFacts, Violation};

mod generation;
mod minimise;
mod shrinking;

pub use generation::{Profile, Restriction, generate, size, strategy};
use generation::{case_rng, draw};
pub use minimise::Minimised;
use minimise::Minimising;
use shrinking::Shrinking;

/// How to fuzz.
#[derive(Debug, Clone)]
pub struct FuzzOptions {
    pub spec: Revision,
    /// Generate at most this many scenarios.
    pub cases: usize,
    pub seed: u64,
    /// Stop generating after this long (shrinking a failure still finishes).
    pub time: Option<Duration>,
    /// At most this many runs while shrinking a failure.
    pub max_shrink_runs: usize,
    /// SHOULD-level violations are failures too.
    pub strict: bool,
    /// Judge by the reference's outcome too (the differential oracle), not the invariants alone.
    pub oracle: bool,
    /// Count the constructs of the generated scenarios ([`FuzzReport::constructs`]).
    pub stats: bool,
    /// Set (by a signal handler) to stop: no new case starts, shrinking ends with what it has.
    pub stop: Option<Arc<AtomicBool>>,
    /// The constructs the implementation can be driven through (a shipped harness: those with
    /// a public interface); the oracle's reference runs the same restricted scenarios.
    pub restriction: Restriction,
}

/// How many times a failure runs before it is a verdict: the run that failed and the replays
/// that confirm it. A scenario that fails fewer times is [`Flaky`].
pub const CONFIRM_RUNS: usize = 5;

/// The longest a shrink may take, whatever `time` is: five minutes.
pub const MAX_SHRINK_TIME: Duration = Duration::from_secs(300);
/// Shrinking gives up after this many errored runs in a row (an adapter that hangs or crashes
/// makes every run cost a timeout and tells nothing).
pub const MAX_SHRINK_ERRORS_IN_A_ROW: usize = 3;

impl FuzzOptions {
    pub fn new(seed: u64) -> Self {
        FuzzOptions {
            spec: Revision::CURRENT,
            cases: 200,
            seed,
            time: None,
            max_shrink_runs: 500,
            strict: false,
            oracle: true,
            stats: false,
            stop: None,
            restriction: Restriction::NONE,
        }
    }
}

/// A failing scenario, shrunk.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The case that failed first, and the seed of the run.
    pub case: usize,
    pub seed: u64,
    /// The invariant the shrinking kept failing.
    pub invariant: InvariantId,
    /// The check within it: the invariant, and for the oracle's comparisons the named one
    /// (`expected-outcome: body-runs` and the like).
    pub check: Check,
    /// The smallest scenario found that still fails with it.
    pub scenario: Scenario,
    pub violations: Vec<Violation>,
    pub original_size: usize,
    /// Its size when shrinking stopped, before the parts it does not need were dropped.
    pub shrunk_size: usize,
    pub shrink_runs: usize,
    /// Why shrinking stopped where it did.
    pub shrink_stop: ShrinkStop,
    /// The parts dropped after shrinking, which the failure did not need.
    pub minimised: Minimised,
}

/// A failure that did not reproduce every time: not a verdict on the implementation.
#[derive(Debug, Clone)]
pub struct Flaky {
    /// The case and the seed of the run.
    pub case: usize,
    pub seed: u64,
    pub invariant: InvariantId,
    /// The check that failed, as [`Failure::check`].
    pub check: Check,
    /// How many of its runs failed with that check, and how many ran.
    pub failed: usize,
    pub runs: usize,
    /// The scenario as generated (not shrunk), ready to replay.
    pub scenario: Scenario,
    /// The violations of the run that failed first.
    pub violations: Vec<Violation>,
}

impl Flaky {
    /// Only the run that found it failed: the failure could not be reproduced at all.
    pub fn never_reproduced(&self) -> bool {
        self.failed <= 1
    }
}

/// Why shrinking stopped: at the smallest scenario it could reach, or at one of its budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShrinkStop {
    /// No simpler scenario fails with the same check.
    Smallest,
    /// After [`FuzzOptions::max_shrink_runs`] runs.
    Runs,
    /// After its time (`--time`, at most [`MAX_SHRINK_TIME`]).
    Time(Duration),
    /// After [`MAX_SHRINK_ERRORS_IN_A_ROW`] runs in a row errored (an adapter that hangs).
    Errors,
    /// Interrupted (Ctrl-C).
    Interrupted,
}

impl std::fmt::Display for ShrinkStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ShrinkStop::Smallest => f.write_str("no simpler scenario fails the same way"),
            ShrinkStop::Runs => write!(f, "stopped at its budget of runs"),
            ShrinkStop::Time(t) => write!(f, "stopped after its {} s", t.as_secs_f64()),
            ShrinkStop::Errors => write!(
                f,
                "stopped: {MAX_SHRINK_ERRORS_IN_A_ROW} runs in a row errored (see `errored`)"
            ),
            ShrinkStop::Interrupted => f.write_str("stopped: interrupted"),
        }
    }
}

/// What a fuzzing run did.
#[derive(Debug, Clone, Default)]
pub struct FuzzReport {
    pub cases: usize,
    pub skipped: usize,
    pub errored: usize,
    /// The first errored answer's message, for the report.
    pub first_error: Option<String>,
    pub elapsed: Duration,
    pub failure: Option<Failure>,
    /// Failures that did not reproduce every time, in case order: reported apart, never a
    /// failure of the run.
    pub flaky: Vec<Flaky>,
    /// With [`FuzzOptions::stats`]: how many generated scenarios used each construct.
    pub constructs: BTreeMap<String, usize>,
    /// Stopped by [`FuzzOptions::stop`]: the counts cover the cases judged before.
    pub interrupted: bool,
}

/// Why fuzzing could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FuzzError {
    #[error(
        "the implementation implements {declared}, not {requested}; fuzz with --spec {declared}"
    )]
    SpecNotImplemented {
        requested: Revision,
        declared: String,
    },
    #[error("cannot generate a scenario: {0}")]
    Generate(String),
}

/// The check a violation fails: its invariant, and for the oracle's, the named comparison
/// (`expected-outcome: body-runs`), so that shrinking keeps the same cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    pub invariant: InvariantId,
    /// The oracle's comparison, for a violation of the reference's expectations.
    pub oracle: Option<OracleCheck>,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.oracle {
            Some(oracle) => write!(f, "{}: {oracle}", self.invariant),
            None => write!(f, "{}", self.invariant),
        }
    }
}

/// A violation that fails a generated scenario, and the check it fails.
#[derive(Debug, Clone)]
struct Failing {
    violation: Violation,
    check: Check,
}

impl Failing {
    fn new(violation: Violation, oracle: Option<OracleCheck>) -> Failing {
        let check = Check {
            invariant: violation.invariant,
            oracle,
        };
        Failing { violation, check }
    }
}

/// Whether one of `failing` fails `check`.
fn fails_with(failing: &[Failing], check: Check) -> bool {
    failing.iter().any(|f| f.check == check)
}

/// The violations of `failing` that fail `check`.
fn violations_of(failing: Vec<Failing>, check: Check) -> Vec<Violation> {
    failing
        .into_iter()
        .filter(|f| f.check == check)
        .map(|f| f.violation)
        .collect()
}

/// How one generated scenario fared.
enum Verdict {
    Clean,
    Fails(Vec<Failing>),
    Skipped,
    Errored(String),
}

/// What judges a generated scenario: the check options, the strictness, and whether the
/// reference's outcome is an oracle.
struct Judge {
    check: CheckOptions,
    strict: bool,
    oracle: bool,
}

impl Judge {
    /// How a run of `options` judges an implementation with this handshake and `profile`.
    fn new(options: &FuzzOptions, ready: &Ready, profile: &Profile) -> Judge {
        Judge {
            check: CheckOptions::new(options.spec)
                .with_capabilities(profile.capabilities.iter().copied())
                .observed(ready.level())
                .with_body_marks(ready.protocol >= 2),
            strict: options.strict,
            oracle: options.oracle,
        }
    }
}

/// Runs and judges one scenario: the invariants, and with the oracle on, the reference's
/// outcome where the spec determines it.
fn run_one(
    implementation: &mut dyn Implementation,
    judge: &Judge,
    seq: u64,
    scenario: &Scenario,
) -> Verdict {
    let revision = judge.check.revision;
    let is_the_reference = implementation.is_the_reference();
    let (records, escaped) = match implementation.run(seq, revision, scenario) {
        Answer::Ran(records) => (records, None),
        Answer::Escaped { message, records } => (records, Some(message)),
        Answer::Skipped(_) => return Verdict::Skipped,
        Answer::Errored { message, .. } => return Verdict::Errored(message),
    };
    let beyond = implementation.breaches_beyond_the_trace();
    let options = judge
        .check
        .clone()
        .with_facts(ScenarioFacts::from(scenario));
    let mut violations =
        match Checker::new(options.clone()).check_escaped(&records, escaped.as_deref()) {
            Err(e) => return Verdict::Errored(format!("the trace is malformed: {e}")),
            Ok(report) => report.violations,
        };
    violations.extend(crate::redispatch::check(scenario, &records, options.level));
    violations.extend(beyond);
    let mut found: Vec<Failing> = violations
        .into_iter()
        .map(|v| Failing::new(v, None))
        .collect();
    if judge.oracle
        && escaped.is_none()
        && let Some(expect) = oracle::expectations_given(
            scenario,
            revision,
            is_the_reference.then_some(records.as_slice()),
        )
    {
        let expected = Scenario {
            expect,
            ..scenario.clone()
        };
        // Content the implementation formats its own way is not compared, as in `tep run`;
        // it is told what the oracle expects (a generated case has no `expect` of its own).
        let unchecked = implementation.unchecked_content(&expected);
        let (expected, _) = crate::runner::without_content(&expected, &unchecked);
        let (unmet, _) = expectations::judge(&expected, &records, options.level, Source::Reference);
        found.extend(
            unmet
                .into_iter()
                .map(|u| Failing::new(u.violation, u.oracle)),
        );
    }
    let failing: Vec<Failing> = found
        .into_iter()
        .filter(|f| f.violation.fails(judge.strict))
        .collect();
    if failing.is_empty() {
        Verdict::Clean
    } else {
        Verdict::Fails(failing)
    }
}

/// The violation a failure is about: a named invariant before the oracle's comparisons, a
/// MUST-level one before a SHOULD-level one, a named guarantee before the generic
/// `stage-graph-walk`, then catalog order.
fn primary(failing: &[Failing]) -> Option<&Failing> {
    failing.iter().min_by_key(|f| {
        let v = &f.violation;
        (
            matches!(
                v.invariant,
                InvariantId::ExpectedOutcome | InvariantId::ExpectedContent
            ),
            // Among failures, those that fail without --strict (MUST) first.
            !v.fails(false),
            v.invariant == InvariantId::StageGraphWalk,
            v.invariant,
        )
    })
}

/// Generates scenarios and runs them through `implementation` until one fails (then shrinks it)
/// or the cases or the time run out. `progress` is told each case's number as it finishes.
pub fn fuzz(
    implementation: &mut dyn Implementation,
    options: &FuzzOptions,
    mut progress: impl FnMut(usize),
) -> Result<FuzzReport, FuzzError> {
    let ready = implementation.ready().clone();
    if !ready.specs.contains(&options.spec) {
        return Err(FuzzError::SpecNotImplemented {
            requested: options.spec,
            declared: ready.specs_list(),
        });
    }
    let profile = Profile {
        restriction: options.restriction.clone(),
        ..Profile::new(options.spec, ready.capabilities.iter().copied())
    };
    let judge = Judge::new(options, &ready, &profile);
    let started = Instant::now();
    let mut report = FuzzReport::default();
    let mut seq = 0u64;
    let strategy = strategy(&profile);
    let stopped = || {
        options
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::SeqCst))
    };
    for case in 0..options.cases {
        if options.time.is_some_and(|t| started.elapsed() >= t) {
            break;
        }
        if stopped() {
            report.interrupted = true;
            break;
        }
        let mut runner = TestRunner::new_with_rng(Config::default(), case_rng(options.seed, case));
        let Some(mut tree) = draw(&strategy, &mut runner, ready.protocol)? else {
            report.cases += 1;
            report.skipped += 1;
            progress(case);
            continue;
        };
        seq += 1;
        if options.stats {
            for c in fuzz_stats::constructs(&tree.current()) {
                *report.constructs.entry(c).or_default() += 1;
            }
        }
        let verdict = run_one(implementation, &judge, seq, &tree.current());
        // A case cut short by a stop is not judged.
        if stopped() {
            report.interrupted = true;
            break;
        }
        report.cases += 1;
        progress(case);
        let failing = match verdict {
            Verdict::Clean => continue,
            Verdict::Skipped => {
                report.skipped += 1;
                continue;
            }
            Verdict::Errored(message) => {
                report.errored += 1;
                report.first_error.get_or_insert(message);
                continue;
            }
            Verdict::Fails(failing) => failing,
        };
        let Some(first) = primary(&failing) else {
            continue;
        };
        let (invariant, check) = (first.check.invariant, first.check);
        let scenario = tree.current();
        let Some(failed) = replays_failing(
            &mut *implementation,
            &judge,
            &mut seq,
            &scenario,
            check,
            &stopped,
        ) else {
            report.interrupted = true;
            break;
        };
        if failed + 1 < CONFIRM_RUNS {
            let scenario = for_the_corpus(scenario, options, case, invariant, check);
            report.flaky.push(Flaky {
                case,
                seed: options.seed,
                invariant,
                check,
                failed: failed + 1,
                runs: CONFIRM_RUNS,
                scenario,
                violations: violations_of(failing, check),
            });
            continue;
        }
        let shrinking = Shrinking {
            implementation: &mut *implementation,
            judge: &judge,
            options,
            protocol: ready.protocol,
            stopped: &stopped,
            seq: &mut seq,
            report: &mut report,
        };
        let failure = shrinking.failure(&mut *tree, failing, case, invariant, check);
        report.failure = Some(failure);
        break;
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

impl Shrinking<'_> {
    /// Case `case`'s confirmed failure of `check`, ready to report: shrunk while it fails
    /// every time, then without the parts it does not need, written as a corpus scenario.
    fn failure(
        mut self,
        tree: &mut dyn ValueTree<Value = Scenario>,
        failing: Vec<Failing>,
        case: usize,
        invariant: InvariantId,
        check: Check,
    ) -> Failure {
        let original_size = size(&tree.current());
        let (best, runs, shrink_stop) = self.shrink(tree, failing, check);
        let (scenario, failing) = best;
        let shrunk_size = size(&scenario);
        // Then the parts the failure does not need, which shrinking inside its shape keeps.
        let (scenario, failing, minimised) = Minimising {
            implementation: &mut *self.implementation,
            judge: self.judge,
            protocol: self.protocol,
            stopped: self.stopped,
            seq: &mut *self.seq,
        }
        .minimise(scenario, failing, check);
        let options = self.options;
        Failure {
            case,
            seed: options.seed,
            invariant,
            scenario: for_the_corpus(scenario, options, case, invariant, check),
            violations: violations_of(failing, check),
            check,
            original_size,
            shrunk_size,
            shrink_runs: runs,
            shrink_stop,
            minimised,
        }
    }
}

/// Replays `scenario` (which just failed with `check`) until it has run [`CONFIRM_RUNS`] times:
/// how many of the replays failed with `check` again, or `None` if a stop cut them short. A
/// replay that errors does not fail: it confirms nothing.
fn replays_failing(
    implementation: &mut dyn Implementation,
    judge: &Judge,
    seq: &mut u64,
    scenario: &Scenario,
    check: Check,
    stopped: &dyn Fn() -> bool,
) -> Option<usize> {
    let mut failed = 0;
    for _ in 1..CONFIRM_RUNS {
        *seq += 1;
        let verdict = run_one(implementation, judge, *seq, scenario);
        if stopped() {
            return None;
        }
        if matches!(&verdict, Verdict::Fails(f) if fails_with(f, check)) {
            failed += 1;
        }
    }
    Some(failed)
}

/// The shrunk scenario of case `case`, ready to join a corpus: named for its seed and case,
/// exercising the `invariant` it breaks, and expecting the reference's outcome (where the spec
/// determines it).
fn for_the_corpus(
    mut scenario: Scenario,
    options: &FuzzOptions,
    case: usize,
    invariant: InvariantId,
    check: Check,
) -> Scenario {
    scenario.id = format!("fuzz-{}-{case}", options.seed);
    scenario.description = format!(
        "Found by tep fuzz (seed {}, case {case}) and shrunk: it breaks {check}.",
        options.seed
    );
    scenario.exercises = vec![invariant];
    if let Some(expect) = oracle::expectations(&scenario, options.spec) {
        scenario.expect = expect;
    }
    scenario
}

/// A scenario as the corpus writes it: pretty JSON, with a trailing newline.
pub fn to_corpus_json(scenario: &Scenario) -> String {
    // Straight from the struct, so the fields keep the corpus files' order (`id` first).
    serde_json::to_string_pretty(scenario).unwrap_or_default() + "\n"
}
