//! Expected-failures baselines, owned by the implementer.
//!
//! A baseline lists known failures, each with a reason: a whole scenario (`"id":
//! "deny-skips-body"`) or one invariant of one scenario (`"id":
//! "deny-skips-body:denial-reaches-post"`). An unexpected failure fails the run, and so does an
//! entry that no longer fails (stale), so the baseline only ever shrinks honestly. An entry
//! naming no scenario of the corpus (a typo, or a scenario since removed) is an *unknown id*,
//! which fails the run as well, with the closest scenario id when there is one. [`write()`] makes a baseline from a
//! run's failures, keeping the reasons of the entries that still apply.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::outcome::{RunReport, ScenarioResult, Status};
use crate::scenario::Scenario;
use tep_check::invariants::InvariantId;

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
    /// Where it was read from.
    pub path: String,
    /// Whole scenarios expected to fail.
    scenarios: BTreeMap<String, BaselineEntry>,
    /// Single invariants of scenarios expected to be violated.
    checks: BTreeMap<(String, InvariantId), BaselineEntry>,
    /// Entries naming a scenario the corpus does not have (unknown ids), each with why: they
    /// fail the run whatever it finds.
    missing: Vec<StaleEntry>,
}

/// Why a baseline file is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("baseline {path}: {message}")]
pub struct BaselineError {
    pub path: String,
    pub message: String,
}

/// An entry that no longer describes a failure: remove it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaleEntry {
    /// The entry's `id`.
    pub id: String,
    /// Why it is stale: the scenario passes now, or no longer breaks that invariant, or the
    /// corpus has no such scenario.
    pub why: String,
}

/// How one scenario compares with the baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScenarioComparison {
    /// Entries that match a failure of the scenario.
    pub expected: Vec<String>,
    /// Failures no entry lists: `scenario:invariant`, or `scenario (errored)`.
    pub unexpected: Vec<String>,
    /// Entries for the scenario that no longer fail.
    pub stale: Vec<StaleEntry>,
    /// The reasons of the matching entries.
    pub reasons: Vec<String>,
}

impl ScenarioComparison {
    /// Every way the scenario fails is listed, and no entry for it is stale.
    pub fn expected_failure(&self) -> bool {
        !self.expected.is_empty() && self.unexpected.is_empty() && self.stale.is_empty()
    }
}

/// How the run compares with the baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BaselineOutcome {
    pub path: String,
    /// Entries that matched a failure.
    pub expected: Vec<String>,
    /// Failures no entry lists.
    pub unexpected: Vec<String>,
    /// Entries that no longer fail, or name no scenario of the corpus.
    pub stale: Vec<StaleEntry>,
    /// Each scenario of the run, compared.
    pub comparisons: BTreeMap<String, ScenarioComparison>,
    /// The scenarios named by entries that the corpus does not have (their entries, in `stale`,
    /// are unknown ids).
    pub missing_scenarios: BTreeSet<String>,
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
        let text = crate::input::read_bounded(path, "baseline", crate::input::MAX_BASELINE_BYTES)
            .map_err(|e| err(e.to_string()))?;
        let file: BaselineFile =
            serde_json::from_str(&text).map_err(|e| err(format!("invalid: {e}")))?;
        let mut baseline = Self::from_file(file, corpus).map_err(err)?;
        baseline.path = path.display().to_string();
        Ok(baseline)
    }

    pub fn from_file(file: BaselineFile, corpus: &[Scenario]) -> Result<Baseline, String> {
        let mut baseline = Baseline::default();
        let mut ids = BTreeSet::new();
        for entry in file.expected_failures {
            if entry.reason.trim().is_empty() {
                return Err(format!("entry {} has no reason", entry.id));
            }
            if !ids.insert(entry.id.clone()) {
                return Err(format!("entry {} is listed twice", entry.id));
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
                let hint =
                    tep_model::suggest::hint(&scenario, corpus.iter().map(|s| s.id.as_str()));
                baseline.missing.push(StaleEntry {
                    why: format!("the corpus has no scenario {scenario}{hint}"),
                    id: entry.id,
                });
                continue;
            }
            match check {
                Some(inv) => baseline.checks.insert((scenario, inv), entry),
                None => baseline.scenarios.insert(scenario, entry),
            };
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

    /// Compares one scenario's result with the baseline. Skipped scenarios compare with
    /// nothing: they say nothing about the entries.
    pub fn compare(&self, result: &ScenarioResult, strict: bool) -> ScenarioComparison {
        let mut comparison = ScenarioComparison::default();
        if result.status == Status::Skipped {
            return comparison;
        }
        let fails = result.fails(strict);
        if let Some(entry) = self.scenarios.get(&result.id) {
            if fails {
                comparison.expected.push(entry.id.clone());
                comparison.reasons.push(entry.reason.clone());
            } else {
                comparison.stale.push(StaleEntry {
                    id: entry.id.clone(),
                    why: format!("{} {} now", result.id, result.status.as_str()),
                });
            }
            return comparison;
        }
        let failing = if fails {
            result.failing_invariants(strict)
        } else {
            BTreeSet::new()
        };
        if fails && failing.is_empty() {
            // Errored (or a malformed trace): only a whole-scenario entry covers it.
            comparison
                .unexpected
                .push(format!("{} ({})", result.id, result.status.as_str()));
        }
        for inv in &failing {
            match self.checks.get(&(result.id.clone(), *inv)) {
                Some(entry) => {
                    comparison.expected.push(entry.id.clone());
                    comparison.reasons.push(entry.reason.clone());
                }
                None => comparison.unexpected.push(format!("{}:{inv}", result.id)),
            }
        }
        for ((scenario, inv), entry) in &self.checks {
            if scenario == &result.id && !failing.contains(inv) {
                comparison.stale.push(StaleEntry {
                    id: entry.id.clone(),
                    why: format!("{} no longer breaks {inv}", result.id),
                });
            }
        }
        comparison
    }

    /// Compares a run with the baseline and marks the expected failures in the report.
    pub fn apply(&self, report: &mut RunReport) -> BaselineOutcome {
        let strict = report.strict;
        let mut outcome = BaselineOutcome {
            path: self.path.clone(),
            ..BaselineOutcome::default()
        };
        for result in &mut report.scenarios {
            let comparison = self.compare(result, strict);
            result.expected_failure = comparison.expected_failure();
            outcome.expected.extend(comparison.expected.iter().cloned());
            outcome
                .unexpected
                .extend(comparison.unexpected.iter().cloned());
            outcome.stale.extend(comparison.stale.iter().cloned());
            outcome.comparisons.insert(result.id.clone(), comparison);
        }
        for entry in &self.missing {
            let scenario = entry.id.split(':').next().unwrap_or_default();
            outcome.missing_scenarios.insert(scenario.to_owned());
            outcome.stale.push(entry.clone());
        }
        outcome
    }
}

/// A baseline listing every failure of `report`: one entry per failing `scenario:invariant`
/// (a whole-scenario entry for an errored scenario), its reason the first message. Entries of
/// `previous` that still match keep their reason and issue; those for scenarios the run did not
/// judge (not selected, skipped, interrupted) are kept; stale ones are dropped.
pub fn write(report: &RunReport, previous: Option<&Baseline>) -> BaselineFile {
    let strict = report.strict;
    let mut entries: BTreeMap<String, BaselineEntry> = BTreeMap::new();
    let judged: BTreeSet<&str> = report
        .scenarios
        .iter()
        .filter(|s| s.status != Status::Skipped)
        .map(|s| s.id.as_str())
        .collect();
    if let Some(previous) = previous {
        let kept = previous
            .scenarios
            .iter()
            .map(|(scenario, entry)| (scenario.as_str(), entry))
            .chain(
                previous
                    .checks
                    .iter()
                    .map(|((scenario, _), entry)| (scenario.as_str(), entry)),
            )
            .filter(|(scenario, _)| !judged.contains(scenario));
        for (_, entry) in kept {
            entries.insert(entry.id.clone(), entry.clone());
        }
    }
    for result in report.scenarios.iter().filter(|s| s.fails(strict)) {
        if let Some(entry) = previous.and_then(|p| p.scenarios.get(&result.id)) {
            entries.insert(entry.id.clone(), entry.clone());
            continue;
        }
        let failing = result.failing_invariants(strict);
        if failing.is_empty() {
            let reason = result
                .reason
                .clone()
                .unwrap_or_else(|| format!("{} {}", result.id, result.status.as_str()));
            entries.insert(
                result.id.clone(),
                BaselineEntry {
                    id: result.id.clone(),
                    reason,
                    issue: None,
                },
            );
            continue;
        }
        for inv in failing {
            let key = (result.id.clone(), inv);
            let entry = match previous.and_then(|p| p.checks.get(&key)) {
                Some(entry) => entry.clone(),
                None => BaselineEntry {
                    id: format!("{}:{inv}", result.id),
                    reason: result
                        .violations
                        .iter()
                        .find(|v| v.invariant == inv)
                        .map(|v| v.message.clone())
                        .unwrap_or_else(|| format!("breaks {inv}")),
                    issue: None,
                },
            };
            entries.insert(entry.id.clone(), entry);
        }
    }
    BaselineFile {
        expected_failures: entries.into_values().collect(),
    }
}
