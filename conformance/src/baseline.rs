//! Expected-failures baselines, owned by the implementer.
//!
//! A baseline lists known failures, each with a reason: a whole scenario (`"id":
//! "deny-skips-body"`) or one invariant of one scenario (`"id":
//! "deny-skips-body:denial-reaches-post"`). An unexpected failure fails the run, and so does an
//! entry that no longer fails (stale), so the baseline only ever shrinks honestly.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::invariants::InvariantId;
use crate::runner::RunReport;
use crate::scenario::Scenario;

/// The file format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BaselineFile {
    pub expected_failures: Vec<BaselineEntry>,
}

/// One known failure.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BaselineEntry {
    /// `scenario` or `scenario:invariant`.
    pub id: String,
    /// Why it fails; required.
    pub reason: String,
    /// Where it is tracked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue: Option<String>,
}

/// A validated baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    /// Whole scenarios expected to fail.
    scenarios: BTreeMap<String, BaselineEntry>,
    /// Single invariants of scenarios expected to be violated.
    checks: BTreeMap<(String, InvariantId), BaselineEntry>,
}

/// Why a baseline file is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("baseline {path}: {message}")]
pub struct BaselineError {
    pub path: String,
    pub message: String,
}

/// How the run compares with the baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BaselineOutcome {
    /// Failures the baseline expected: `scenario` or `scenario:invariant`.
    pub expected: Vec<String>,
    /// Failures it did not expect.
    pub unexpected: Vec<String>,
    /// Entries that no longer fail.
    pub stale: Vec<String>,
}

impl BaselineOutcome {
    pub fn is_clean(&self) -> bool {
        self.unexpected.is_empty() && self.stale.is_empty()
    }
}

impl Baseline {
    /// Reads and validates a baseline against the corpus.
    pub fn load(path: &Path, corpus: &[Scenario]) -> Result<Baseline, BaselineError> {
        let err = |message: String| BaselineError {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
        let file: BaselineFile =
            serde_json::from_str(&text).map_err(|e| err(format!("invalid: {e}")))?;
        Self::from_file(file, corpus).map_err(err)
    }

    pub fn from_file(file: BaselineFile, corpus: &[Scenario]) -> Result<Baseline, String> {
        let mut baseline = Baseline::default();
        for entry in file.expected_failures {
            if entry.reason.trim().is_empty() {
                return Err(format!("entry {} has no reason", entry.id));
            }
            let (scenario, check) = match entry.id.split_once(':') {
                Some((s, i)) => (
                    s.to_owned(),
                    Some(
                        i.parse::<InvariantId>()
                            .map_err(|e| format!("entry {}: {e}", entry.id))?,
                    ),
                ),
                None => (entry.id.clone(), None),
            };
            if !corpus.iter().any(|s| s.id == scenario) {
                return Err(format!(
                    "entry {}: no scenario is called {scenario}",
                    entry.id
                ));
            }
            let duplicate = match check {
                Some(inv) => baseline
                    .checks
                    .insert((scenario, inv), entry.clone())
                    .is_some(),
                None => baseline.scenarios.insert(scenario, entry.clone()).is_some(),
            };
            if duplicate {
                return Err(format!("entry {} is listed twice", entry.id));
            }
        }
        if let Some((s, _)) = baseline
            .checks
            .keys()
            .find(|(s, _)| baseline.scenarios.contains_key(s))
        {
            return Err(format!(
                "scenario {s} is listed both as a whole and per invariant; keep one"
            ));
        }
        Ok(baseline)
    }

    /// Compares a run with the baseline and marks the expected failures in the report.
    pub fn apply(&self, report: &mut RunReport) -> BaselineOutcome {
        let strict = report.strict;
        let mut outcome = BaselineOutcome::default();
        let mut seen_checks: BTreeSet<(String, InvariantId)> = BTreeSet::new();
        for result in &mut report.scenarios {
            if result.status == crate::runner::Status::Skipped {
                continue;
            }
            let fails = result.fails(strict);
            if let Some(entry) = self.scenarios.get(&result.id) {
                if fails {
                    result.expected_failure = true;
                    outcome.expected.push(entry.id.clone());
                } else {
                    outcome.stale.push(entry.id.clone());
                }
                continue;
            }
            if !fails {
                continue;
            }
            let failing = result.failing_invariants(strict);
            if failing.is_empty() {
                // Errored (or a malformed trace): only a whole-scenario entry covers it.
                outcome
                    .unexpected
                    .push(format!("{} ({})", result.id, result.status.as_str()));
                continue;
            }
            let mut all_expected = true;
            for inv in failing {
                let key = (result.id.clone(), inv);
                if self.checks.contains_key(&key) {
                    outcome.expected.push(format!("{}:{inv}", result.id));
                    seen_checks.insert(key);
                } else {
                    all_expected = false;
                    outcome.unexpected.push(format!("{}:{inv}", result.id));
                }
            }
            result.expected_failure = all_expected;
        }
        let ran: BTreeSet<&str> = report
            .scenarios
            .iter()
            .filter(|r| r.status != crate::runner::Status::Skipped)
            .map(|r| r.id.as_str())
            .collect();
        for (key, entry) in &self.checks {
            if ran.contains(key.0.as_str()) && !seen_checks.contains(key) {
                outcome.stale.push(entry.id.clone());
            }
        }
        outcome
    }
}
