//! What each observation level lets the checker catch, as measured: for every invariant and
//! every level, whether the invariant's breach (the teeth, `mutation::plant`), planted
//! in the reference's traces of the scenarios that exercise it and thinned to that level, is
//! caught.
//!
//! The table ([`TABLE`], `table.rs`) is generated — `cargo xtask docs` writes it from
//! `tep_conformance::checkability::measure`, and a test recomputes it and fails when it is stale
//! — and never written by hand. The checker's statuses (`CheckOptions::status`), the reports'
//! counts and the catalog's columns in `docs/invariants.md` all read it.

mod table;

use std::fmt;

use tep_model::trace::ObservationLevel;

use crate::invariants::InvariantId;

pub use table::TABLE;

/// Whether a level's traces let the checker catch an invariant's breach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
// Exhaustive on purpose: the generated catalog draws every value.
pub enum Checkability {
    /// Every planted breach, thinned to the level, was caught.
    Checked,
    /// Some were caught, some were not: the level records the breach only in some runs.
    Partly,
    /// None was caught (or none could be planted): the level does not record the breach.
    NotCheckable,
}

impl Checkability {
    /// As the generated table writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Checkability::Checked => "checked",
            Checkability::Partly => "partly",
            Checkability::NotCheckable => "not checkable",
        }
    }
}

impl fmt::Display for Checkability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One invariant's row: its checkability at `events`, `boundary`, `hooks` and `full`
/// ([`ObservationLevel::ALL`]'s order).
pub type Row = (&'static str, [Checkability; LEVELS]);

/// How many observation levels a row has a cell for.
pub const LEVELS: usize = ObservationLevel::ALL.len();

fn column(level: ObservationLevel) -> usize {
    match level {
        ObservationLevel::Events => 0,
        ObservationLevel::Boundary => 1,
        ObservationLevel::Hooks => 2,
        ObservationLevel::Full => 3,
    }
}

/// The measured checkability of `id` at `level`; an invariant the table has no row for (one
/// added since it was generated) is not checkable until it is measured.
pub fn at(id: InvariantId, level: ObservationLevel) -> Checkability {
    TABLE
        .iter()
        .find(|(name, _)| *name == id.as_str())
        .map_or(Checkability::NotCheckable, |(_, cells)| {
            cells[column(level)]
        })
}

/// What a *partly checkable* invariant still catches at a level, in one line: the measurement
/// says which cells are partly checkable, these words say what the caught breaches have in
/// common (a test holds the two together).
pub const PARTLY: &[(InvariantId, ObservationLevel, &str)] = &[
    (
        InvariantId::DenySkipsBody,
        ObservationLevel::Hooks,
        "a tool body after a recorded deny (pre-execute, a refused approval, a guard); not after an ask no prompt answered, which this level does not record",
    ),
    (
        InvariantId::DenialReachesPost,
        ObservationLevel::Hooks,
        "a recorded deny that skips post-execute; not after an ask no prompt answered, which this level does not record",
    ),
    (
        InvariantId::DenialIsError,
        ObservationLevel::Hooks,
        "a recorded deny whose outcome is no error; not after an ask no prompt answered, which this level does not record",
    ),
    (
        InvariantId::ContextsFifo,
        ObservationLevel::Events,
        "contexts injected out of the order of their calls' `tool/result` events; a lost or invented context needs the announced outcomes (`final`, level `hooks`)",
    ),
    (
        InvariantId::ContextsFifo,
        ObservationLevel::Boundary,
        "contexts injected out of the order of their calls' `tool/result` events; a lost or invented context needs the announced outcomes (`final`, level `hooks`)",
    ),
    (
        InvariantId::SubCallLogsDispatch,
        ObservationLevel::Events,
        "a sub-call that logged `tool/code-dispatch-start` (rev2) but no `tool/code-dispatch`; a rev1 sub-call that logs neither leaves no record at this level",
    ),
    (
        InvariantId::SubCallLogsDispatch,
        ObservationLevel::Boundary,
        "a sub-call that logged `tool/code-dispatch-start` (rev2) but no `tool/code-dispatch`; a rev1 sub-call that logs neither leaves no record at this level",
    ),
    (
        InvariantId::SubCallContextsOmitted,
        ObservationLevel::Events,
        "a context injected under a sub-call's id; one forwarded to the `run_code` call's outcome needs `final` (level `hooks`)",
    ),
    (
        InvariantId::SubCallContextsOmitted,
        ObservationLevel::Boundary,
        "a context injected under a sub-call's id; one forwarded to the `run_code` call's outcome needs `final` (level `hooks`)",
    ),
];

/// The one line [`PARTLY`] has for `id` at `level`.
pub fn partly(id: InvariantId, level: ObservationLevel) -> Option<&'static str> {
    PARTLY
        .iter()
        .find(|(i, l, _)| *i == id && *l == level)
        .map(|(_, _, what)| *what)
}

/// The generated `table.rs` for these rows (every invariant's checkability at `events`,
/// `boundary`, `hooks`, `full`).
pub fn render(rows: &[(InvariantId, [Checkability; LEVELS])]) -> String {
    let mut out = String::from(
        "// generated — do not edit: `TEP_UPDATE_CHECKABILITY=1 cargo test -p tep-conformance --test checkability`\n\
         // writes it from the planted breaches (`tep_conformance::checkability::measure`).\n\n\
         use super::Checkability::{Checked as C, NotCheckable as N, Partly as P};\n\n\
         /// Every invariant's checkability at `events`, `boundary`, `hooks` and `full`, as measured.\n\
         pub const TABLE: &[super::Row] = &[\n",
    );
    for (id, cells) in rows {
        let short: Vec<&str> = cells
            .iter()
            .map(|c| match c {
                Checkability::Checked => "C",
                Checkability::Partly => "P",
                Checkability::NotCheckable => "N",
            })
            .collect();
        out.push_str(&format!("    (\"{id}\", [{}]),\n", short.join(", ")));
    }
    out.push_str("];\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partly_checkable_cell_says_what_it_still_catches_and_only_those() {
        for &id in InvariantId::ALL {
            for level in ObservationLevel::ALL {
                let partly_measured = at(id, level) == Checkability::Partly;
                assert_eq!(
                    partly_measured,
                    partly(id, level).is_some(),
                    "{id} at {level}: the table says {}",
                    at(id, level)
                );
            }
        }
    }

    #[test]
    fn statuses_come_from_the_table_and_rules_still_run_where_a_breach_can_go_unseen() {
        use crate::facts::{CheckOptions, InvariantStatus};
        use tep_model::graph::Revision;
        let at = |level| CheckOptions::new(Revision::Rev2).observed(level);
        let events = at(ObservationLevel::Events);
        assert!(matches!(
            events.status(InvariantId::SubCallContextsOmitted),
            InvariantStatus::PartlyCheckable(what) if what.contains("sub-call's id")
        ));
        // `normalized` is a `full` record: at `hooks` a lost normalization is not seen, but the
        // rule still runs on what the level records.
        let hooks = at(ObservationLevel::Hooks);
        assert!(matches!(
            hooks.status(InvariantId::ThrowIsNormalized),
            InvariantStatus::NotCheckable(_)
        ));
        assert!(hooks.checks(InvariantId::ThrowIsNormalized));
        assert!(
            !events.checks(InvariantId::DenySkipsBody),
            "reads hooks records"
        );
        for &id in InvariantId::ALL {
            let full = at(ObservationLevel::Full);
            let inv = crate::catalog::invariant(id);
            if inv.applies_to(Revision::Rev2)
                && !inv.reads.contains(&crate::invariants::Read::Scenario)
            {
                assert_eq!(full.status(id), InvariantStatus::Checked, "{id}");
            }
        }
    }

    #[test]
    fn the_table_renders_as_it_is_checked_in() {
        let rows: Vec<(InvariantId, [Checkability; LEVELS])> = TABLE
            .iter()
            .filter_map(|(name, cells)| Some((name.parse().ok()?, *cells)))
            .collect();
        assert_eq!(rows.len(), TABLE.len(), "every row names an invariant");
        assert_eq!(render(&rows), include_str!("table.rs"));
    }
}
