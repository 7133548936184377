//! Checkable means catchable: every invariant's breaches, planted in the reference's traces of
//! the corpus and thinned to each observation level, against the table the checker's statuses,
//! the reports' counts and `docs/invariants.md` read (`tep_check::checkability`).
//!
//! The table is generated: `TEP_UPDATE_CHECKABILITY=1 cargo test -p tep-conformance --test
//! checkability` rewrites `check/src/checkability/table.rs` from the measurement (never with
//! `CI` set), then `cargo xtask docs` prints it into the catalog.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use tep_check::checkability::{Checkability, at, render};
use tep_conformance::checkability::{Planted, cells, plant_everywhere, rows};
use tep_conformance::scenario::corpus;

fn planted() -> &'static [Planted] {
    static PLANTED: OnceLock<Vec<Planted>> = OnceLock::new();
    PLANTED.get_or_init(|| plant_everywhere(&corpus().unwrap()).unwrap())
}

#[test]
fn every_invariant_listed_as_checkable_at_a_level_catches_its_breaches_there() {
    let missed: Vec<String> = planted()
        .iter()
        .filter(|p| !p.caught && at(p.invariant, p.level) == Checkability::Checked)
        .map(|p| {
            format!(
                "{} is listed as checked at {}, but its breach in {} ({}) thinned to {} was not caught",
                p.invariant, p.level, p.scenario, p.revision, p.level
            )
        })
        .collect();
    assert!(missed.is_empty(), "{}", missed.join("\n"));
    assert!(planted().len() > 600, "only {} breaches", planted().len());
}

#[test]
fn the_checkability_table_is_what_the_planted_breaches_show() {
    let measured = render(&rows(&cells(planted())));
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../check/src/checkability/table.rs"
    );
    let checked_in = std::fs::read_to_string(path).unwrap();
    if measured == checked_in {
        return;
    }
    if std::env::var_os("TEP_UPDATE_CHECKABILITY").is_some() && std::env::var_os("CI").is_none() {
        std::fs::write(path, &measured).unwrap();
        return;
    }
    let old: Vec<&str> = checked_in.lines().collect();
    let diff: Vec<String> = measured
        .lines()
        .filter(|l| !old.contains(l))
        .map(|l| format!("measured: {l}"))
        .collect();
    panic!(
        "check/src/checkability/table.rs is stale: rerun with TEP_UPDATE_CHECKABILITY=1, then `cargo xtask docs`\n{}",
        diff.join("\n")
    );
}
