//! What each observation level lets the checker catch, measured: every invariant's breach (the
//! teeth, [`tep_check::mutation::plant`]) planted in the reference's trace of every scenario that
//! exercises it, thinned to each level ([`tep_check::observation::thin`]) and checked.
//!
//! [`measure`] is the measurement; `cargo xtask docs` writes its result as
//! `check/src/checkability/table.rs`, which the checker's statuses read
//! ([`tep_check::checkability`]), and a test recomputes it and fails when the two differ.

pub use tep_check::checkability::*;
use tep_check::invariants::{InvariantId, Read};
use tep_check::{CheckOptions, ScenarioFacts, check_records};
use tep_model::graph::Revision;
use tep_model::trace::{NextRequest, ObservationLevel, TraceRecord};

use crate::outcome::Coverage;
use crate::runner::judge;
use crate::scenario::Scenario;
use crate::scripted::run_reference;
use tep_check::observation::thin;
use tep_check::teeth::breaches;
use tep_check::{CATALOG, invariant};

/// One planted breach, thinned to one level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planted {
    pub invariant: InvariantId,
    pub scenario: String,
    pub revision: Revision,
    pub level: ObservationLevel,
    /// Whether the checker named the invariant.
    pub caught: bool,
}

/// What one invariant's planted breaches showed at one level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub invariant: InvariantId,
    pub level: ObservationLevel,
    pub planted: usize,
    pub caught: usize,
}

impl Cell {
    /// The verdict the measurement supports: checked only when every breach was caught.
    pub fn checkability(&self) -> Checkability {
        match (self.caught, self.planted) {
            (_, 0) | (0, _) => Checkability::NotCheckable,
            (c, p) if c == p => Checkability::Checked,
            _ => Checkability::Partly,
        }
    }
}

/// Whether the checker names `id` in `records` of `scenario` at `level`: in drive mode (with the
/// scenario's facts) and, for an invariant that does not read the scenario, in replay mode too
/// (`tep check`, which knows no scenario).
fn caught(
    id: InvariantId,
    scenario: &Scenario,
    revision: Revision,
    level: ObservationLevel,
    records: Vec<TraceRecord>,
) -> bool {
    let options = CheckOptions::new(revision).observed(level);
    let replay = invariant(id).reads.contains(&Read::Scenario)
        || check_records(&options, &records)
            .map(|r| r.violations.iter().any(|v| v.invariant == id))
            .unwrap_or(false);
    let drive = options.with_facts(ScenarioFacts::from(scenario));
    let mut coverage = Coverage::default();
    let judged = judge(scenario, &drive, records, None, &mut coverage);
    replay && judged.violations.iter().any(|v| v.invariant == id)
}

/// Plants every breach each scenario claims to exercise, in every revision it applies to, and
/// checks it thinned to every level. A scenario whose reference run fails is an error.
pub fn plant_everywhere(corpus: &[Scenario]) -> Result<Vec<Planted>, String> {
    let mut out = Vec::new();
    for scenario in corpus {
        for revision in Revision::ALL
            .into_iter()
            .filter(|&r| scenario.applies_to(r))
        {
            let trace = run_reference(scenario, revision, &[])
                .map_err(|e| format!("{} ({revision}): {e}", scenario.id))?;
            // The reference has no model boundary: its trace gets the request a harness
            // replaying its log would send the model next (level `boundary`).
            let trace = NextRequest::add_to(&trace);
            for &id in &scenario.exercises {
                if !invariant(id).applies_to(revision) {
                    continue;
                }
                for (broken, level) in breaches(id, &trace)
                    .into_iter()
                    .flat_map(|b| ObservationLevel::ALL.map(|level| (b.clone(), level)))
                {
                    out.push(Planted {
                        invariant: id,
                        scenario: scenario.id.clone(),
                        revision,
                        level,
                        caught: caught(id, scenario, revision, level, thin(&broken, level)),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// The cells of the table: every invariant at every level, in catalog order.
pub fn cells(planted: &[Planted]) -> Vec<Cell> {
    let mut out = Vec::new();
    for inv in CATALOG {
        for level in ObservationLevel::ALL {
            let of = || {
                planted
                    .iter()
                    .filter(|p| p.invariant == inv.id && p.level == level)
            };
            out.push(Cell {
                invariant: inv.id,
                level,
                planted: of().count(),
                caught: of().filter(|p| p.caught).count(),
            });
        }
    }
    out
}

/// The measurement: [`plant_everywhere`], gathered into [`cells`].
pub fn measure(corpus: &[Scenario]) -> Result<Vec<Cell>, String> {
    plant_everywhere(corpus).map(|p| cells(&p))
}

/// The table's rows: every invariant's checkability at `events`, `boundary`, `hooks`, `full`.
pub fn rows(cells: &[Cell]) -> Vec<(InvariantId, [Checkability; LEVELS])> {
    CATALOG
        .iter()
        .map(|inv| {
            let at = |level| {
                cells
                    .iter()
                    .find(|c| c.invariant == inv.id && c.level == level)
                    .map_or(Checkability::NotCheckable, Cell::checkability)
            };
            (inv.id, ObservationLevel::ALL.map(at))
        })
        .collect()
}
