//! invariants.md: the invariant catalog.

use std::fmt::Write as _;

use tep_check::CATALOG;
use tep_check::checkability::{self, Checkability};
use tep_conformance::scenario::Scenario;
use tep_model::trace::ObservationLevel;

use super::{cell, header, revisions};

/// The levels at which the invariant's breaches are caught, in words.
fn checkable_line(id: tep_check::invariants::InvariantId) -> String {
    let with = |c: Checkability| -> Vec<String> {
        ObservationLevel::ALL
            .iter()
            .filter(|&&l| checkability::at(id, l) == c)
            .map(|l| format!("`{l}`"))
            .collect()
    };
    let (checked, not) = (
        with(Checkability::Checked),
        with(Checkability::NotCheckable),
    );
    let mut line = format!(
        "- Checked at: {}.",
        if checked.is_empty() {
            "no level".to_owned()
        } else {
            checked.join(", ")
        }
    );
    if !not.is_empty() {
        let _ = write!(line, " Not checkable at: {}.", not.join(", "));
    }
    line
}

pub fn invariants_page(corpus: &[Scenario]) -> String {
    let mut out = header("the rules in check/src/rules/");
    let _ = writeln!(out, "# Invariant catalog\n");
    let _ = writeln!(
        out,
        "{} invariants. **MUST** invariants come from the doc (its words or its flowchart) and fail \
         conformance; **SHOULD** invariants come from the reference semantics where the doc is \
         silent and are reported as warnings unless `tep run --strict`. Invariants that need an \
         optional part apply only to implementations that declare it. The columns `events`, \
         `boundary`, `hooks` and `full` say what each observation level lets the checker catch \
         ([conformance.md](conformance.md#observation-levels)), as measured: every invariant's \
         breaches are planted in the reference's traces of the scenarios that exercise it, \
         thinned to the level and checked (`conformance/tests/checkability.rs`, which generates \
         `check/src/checkability/table.rs`). ✓: every breach was caught; *partly*: some were \
         (the entry says which); —: none, and reports list it as not checkable at that level. \
         Each entry is printed from its rule in \
         `check/src/rules/`; `tep invariants explain ID` prints the same entry.\n",
        CATALOG.len()
    );
    let columns: Vec<&str> = ObservationLevel::ALL.iter().map(|l| l.as_str()).collect();
    let _ = writeln!(
        out,
        "| invariant | level | revisions | needs | {} | statement |\n|---|---|---|---|{}---|",
        columns.join(" | "),
        "---|".repeat(columns.len())
    );
    for inv in CATALOG {
        let levels: Vec<&str> = ObservationLevel::ALL
            .iter()
            .map(|&l| match checkability::at(inv.id, l) {
                Checkability::Checked => "✓",
                Checkability::Partly => "*partly*",
                Checkability::NotCheckable => "—",
            })
            .collect();
        let _ = writeln!(
            out,
            "| [`{id}`](#{id}) | {} | {} | {} | {} | {} |",
            inv.level,
            revisions(&inv.revisions()),
            inv.requires.map_or("—".to_owned(), |c| format!("`{c}`")),
            levels.join(" | "),
            cell(inv.statement),
            id = inv.id
        );
    }
    out.push('\n');
    for inv in CATALOG {
        let _ = writeln!(out, "### {}\n", inv.id);
        let _ = writeln!(
            out,
            "**{}** · {} · its rule runs from level `{}` · checked {}\n",
            inv.level,
            revisions(&inv.revisions()),
            inv.observed,
            inv.check.describe()
        );
        let _ = writeln!(out, "{}\n", inv.statement);
        let _ = writeln!(out, "{}", checkable_line(inv.id));
        for level in ObservationLevel::ALL {
            if let Some(what) = checkability::partly(inv.id, level) {
                let _ = writeln!(out, "- Partly checkable at `{level}`: catches {what}.");
            }
        }
        if let Some(cap) = inv.requires {
            let _ = writeln!(out, "- Applies when the implementation declares `{cap}`.");
        }
        let reads: Vec<String> = inv.reads.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "- Reads: {}.", reads.join(", "));
        for source in inv.sources {
            let _ = writeln!(out, "- Source: {source}");
        }
        let scenarios: Vec<String> = corpus
            .iter()
            .filter(|s| s.exercises.contains(&inv.id))
            .map(|s| format!("[`{id}`](scenarios.md#{id})", id = s.id))
            .collect();
        let _ = writeln!(out, "- Scenarios: {}\n", scenarios.join(", "));
    }
    out
}
