//! What a check says of a trace, decided here once: every caller (`tep check`, `tep run`,
//! `tep fuzz`, the reports) asks this module, none writes the policy again.
//!
//! The policy: a MUST violation fails; a SHOULD violation fails only when strict, and otherwise
//! warns; a trace that holds no batch checked nothing, which is not a pass.

use std::fmt;

use crate::checker::{CheckReport, Violation};
use crate::facts::InvariantStatus;
use crate::invariants::{InvariantId, Level};

/// The verdict on a checked trace (nextest's `FinalRunStats`, porcupine's `CheckResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// Something was checked and no violation was found.
    Conformant,
    /// Only SHOULD-level violations, and the check is not strict: a pass with warnings.
    Warned,
    /// A violation that fails: any MUST, or any SHOULD when strict.
    Violated,
    /// The trace holds no batch (no `model` record): nothing was checked, which is no pass.
    NothingChecked,
}

impl Verdict {
    /// The verdict on the violations found in a trace that checked something.
    pub fn of(violations: &[Violation], strict: bool) -> Verdict {
        if violations.iter().any(|v| v.fails(strict)) {
            Verdict::Violated
        } else if violations.is_empty() {
            Verdict::Conformant
        } else {
            Verdict::Warned
        }
    }

    /// Whether the check passes (a conformant trace, or one with warnings only).
    pub fn passes(self) -> bool {
        matches!(self, Verdict::Conformant | Verdict::Warned)
    }

    /// The verdict as one lowercase word, for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Conformant => "conformant",
            Verdict::Warned => "warned",
            Verdict::Violated => "violated",
            Verdict::NothingChecked => "nothing-checked",
        }
    }
}

/// How many of the invariants that apply to a trace its check could judge: a clean trace at a
/// level that sees little proves little, and its verdict says so ([`Verdict::describe`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Checkable {
    /// Checked in full at the trace's level.
    pub checked: usize,
    /// Checked, but some of their breaches are not recorded at this level.
    pub partly: usize,
    /// Applicable to the trace (its revision, the implementation's parts): the rest are not
    /// checkable at its level.
    pub applicable: usize,
}

impl Checkable {
    /// The counts as a report recorded them: `checked` and `partly` of `applicable`.
    pub fn new(checked: usize, partly: usize, applicable: usize) -> Checkable {
        Checkable {
            checked,
            partly,
            applicable,
        }
    }

    /// The counts of a check's statuses ([`crate::CheckOptions::statuses`]).
    pub fn of(statuses: &[(InvariantId, InvariantStatus)]) -> Checkable {
        let count = |f: fn(&InvariantStatus) -> bool| statuses.iter().filter(|(_, s)| f(s)).count();
        Checkable {
            checked: count(|s| matches!(s, InvariantStatus::Checked)),
            partly: count(|s| matches!(s, InvariantStatus::PartlyCheckable(_))),
            applicable: count(|s| !matches!(s, InvariantStatus::NotApplicable(_))),
        }
    }

    /// Whether at least half of the applicable invariants could be judged.
    pub fn most(&self) -> bool {
        2 * (self.checked + self.partly) >= self.applicable
    }
}

impl Verdict {
    /// The verdict in words. A pass where most invariants were not checkable says how few
    /// were ("13 of 61 invariants checkable, no violation"), never a plain "conformant".
    pub fn describe(self, checkable: Checkable) -> String {
        let judged = checkable.checked + checkable.partly;
        let few = !checkable.most();
        match self {
            Verdict::Conformant if few => format!(
                "{judged} of {} invariants checkable, no violation",
                checkable.applicable
            ),
            Verdict::Conformant => format!(
                "conformant ({judged} of {} invariants checkable)",
                checkable.applicable
            ),
            Verdict::Warned if few => format!(
                "{judged} of {} invariants checkable, SHOULD violations only",
                checkable.applicable
            ),
            Verdict::Warned => "conformant with warnings (SHOULD violations only)".to_owned(),
            Verdict::Violated => "not conformant".to_owned(),
            Verdict::NothingChecked => "nothing checked: the trace holds no batch".to_owned(),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Level {
    /// Whether a violation at this level fails a check: a MUST always, a SHOULD only when
    /// `strict`.
    pub fn fails(self, strict: bool) -> bool {
        strict || self == Level::Must
    }
}

impl Violation {
    /// Whether this violation fails a check ([`Level::fails`]).
    pub fn fails(&self, strict: bool) -> bool {
        self.level.fails(strict)
    }
}

impl CheckReport {
    /// The verdict on the whole trace ([`Verdict`]).
    pub fn verdict(&self, strict: bool) -> Verdict {
        if self.batches == 0 {
            Verdict::NothingChecked
        } else {
            Verdict::of(&self.violations, strict)
        }
    }

    /// How many violations (of those kept) are at `level`.
    pub fn count_at(&self, level: Level) -> usize {
        self.violations.iter().filter(|v| v.level == level).count()
    }

    /// The violations that fail the check ([`Violation::fails`]).
    pub fn failing(&self, strict: bool) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| v.fails(strict))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::CheckOptions;
    use tep_model::graph::Revision;
    use tep_model::trace::ObservationLevel;

    #[test]
    fn a_pass_that_could_check_little_says_how_little() {
        let events = CheckOptions::new(Revision::Rev2).observed(ObservationLevel::Events);
        let few = Checkable::of(&events.statuses());
        assert!(!few.most(), "{few:?}");
        let said = Verdict::Conformant.describe(few);
        assert!(
            said.ends_with("invariants checkable, no violation") && !said.contains("conformant"),
            "{said}"
        );
        let full = Checkable::of(&CheckOptions::new(Revision::Rev2).statuses());
        assert!(full.most());
        assert!(
            Verdict::Conformant
                .describe(full)
                .starts_with("conformant (")
        );
        assert_eq!(full.applicable, few.applicable);
        assert!(full.checked > few.checked);
    }

    fn violation(level: Level) -> Violation {
        Violation::new(InvariantId::DenySkipsBody, vec![1], None, "x").at_level(level)
    }

    fn report(batches: usize, violations: Vec<Violation>) -> CheckReport {
        CheckReport {
            batches,
            violations,
            ..CheckReport::default()
        }
    }

    #[test]
    fn a_must_fails_a_should_warns_unless_strict() {
        let must = report(1, vec![violation(Level::Must)]);
        let should = report(1, vec![violation(Level::Should)]);
        let clean = report(1, vec![]);
        assert_eq!(must.verdict(false), Verdict::Violated);
        assert_eq!(must.verdict(true), Verdict::Violated);
        assert_eq!(should.verdict(false), Verdict::Warned);
        assert_eq!(should.verdict(true), Verdict::Violated);
        assert_eq!(clean.verdict(false), Verdict::Conformant);
        assert_eq!(clean.verdict(true), Verdict::Conformant);
        assert_eq!(should.failing(false).count(), 0);
        assert_eq!(should.failing(true).count(), 1);
    }

    #[test]
    fn a_trace_without_a_batch_checked_nothing_and_does_not_pass() {
        let empty = report(0, vec![]);
        assert_eq!(empty.verdict(false), Verdict::NothingChecked);
        assert!(!empty.verdict(false).passes());
        assert!(Verdict::Warned.passes() && Verdict::Conformant.passes());
        assert!(!Verdict::Violated.passes());
    }
}
