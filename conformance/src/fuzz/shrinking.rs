//! Shrinking a failing scenario while the same check still fails, every time: a simpler
//! candidate is kept only if its replays (up to [`super::CONFIRM_RUNS`] runs in all) fail too.

use std::time::Instant;

use proptest::strategy::ValueTree;

use super::{
    CONFIRM_RUNS, Check, Failing, FuzzOptions, FuzzReport, Judge, MAX_SHRINK_ERRORS_IN_A_ROW,
    MAX_SHRINK_TIME, ShrinkStop, Verdict, fails_with, replays_failing, run_one,
};
use crate::runner::Implementation;
use crate::scenario::Scenario;
use crate::scenario::versions::versions;

/// What shrinking a failure needs: the implementation and how to judge it, the run's options
/// and its stop, and the counters it shares with the run.
pub(super) struct Shrinking<'a> {
    pub(super) implementation: &'a mut dyn Implementation,
    pub(super) judge: &'a Judge,
    pub(super) options: &'a FuzzOptions,
    /// The adapter's protocol: a candidate with a newer construct is not sent.
    pub(super) protocol: u32,
    pub(super) stopped: &'a dyn Fn() -> bool,
    pub(super) seq: &'a mut u64,
    pub(super) report: &'a mut FuzzReport,
}

impl Shrinking<'_> {
    /// Simplifies `tree` while the same `check` still fails, else steps back. Bounded in runs,
    /// in time (`time`, at most [`MAX_SHRINK_TIME`]) and in errors in a row. Returns the
    /// smallest failing scenario with its violations, the runs it took, and why it stopped.
    pub(super) fn shrink(
        &mut self,
        tree: &mut dyn ValueTree<Value = Scenario>,
        failing: Vec<Failing>,
        check: Check,
    ) -> ((Scenario, Vec<Failing>), usize, ShrinkStop) {
        let options = self.options;
        let stopped = self.stopped;
        let shrink_started = Instant::now();
        let budget = options.time.unwrap_or(MAX_SHRINK_TIME).min(MAX_SHRINK_TIME);
        let mut errors_in_a_row = 0;
        let spent = |runs: usize, errors: usize| {
            runs >= options.max_shrink_runs
                || errors >= MAX_SHRINK_ERRORS_IN_A_ROW
                || shrink_started.elapsed() >= budget
                || stopped()
        };
        let mut best = (tree.current(), failing);
        let mut runs = 0;
        while !spent(runs, errors_in_a_row) && tree.simplify() {
            loop {
                runs += 1;
                let candidate = tree.current();
                // A simpler candidate may pick a construct the adapter's protocol lacks: unsent.
                let sendable = versions().newer_than(&candidate, self.protocol).is_empty();
                if sendable {
                    *self.seq += 1;
                }
                let verdict = sendable
                    .then(|| run_one(&mut *self.implementation, self.judge, *self.seq, &candidate));
                if let Some(Verdict::Errored(message)) = &verdict {
                    if !stopped() {
                        self.report.errored += 1;
                        self.report
                            .first_error
                            .get_or_insert_with(|| message.clone());
                    }
                    errors_in_a_row += 1;
                } else {
                    errors_in_a_row = 0;
                }
                let kept = match verdict {
                    Some(Verdict::Fails(f))
                        if fails_with(&f, check) && self.fails_every_time(&candidate, check) =>
                    {
                        best = (candidate, f);
                        true
                    }
                    _ => false,
                };
                if kept || spent(runs, errors_in_a_row) || !tree.complicate() {
                    break;
                }
            }
        }
        self.report.interrupted |= stopped();
        let why = if stopped() {
            ShrinkStop::Interrupted
        } else if errors_in_a_row >= MAX_SHRINK_ERRORS_IN_A_ROW {
            ShrinkStop::Errors
        } else if runs >= options.max_shrink_runs {
            ShrinkStop::Runs
        } else if shrink_started.elapsed() >= budget {
            ShrinkStop::Time(budget)
        } else {
            ShrinkStop::Smallest
        };
        (best, runs, why)
    }

    /// Whether `candidate`, which just failed with `check`, fails with it on every replay.
    fn fails_every_time(&mut self, candidate: &Scenario, check: Check) -> bool {
        let replays = replays_failing(
            &mut *self.implementation,
            self.judge,
            self.seq,
            candidate,
            check,
            self.stopped,
        );
        replays == Some(CONFIRM_RUNS - 1)
    }
}
