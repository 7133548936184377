//! The version table of `docs/adapter-protocol.md`: which protocol introduced each construct of
//! the scenario language, printed from `tep_conformance::scenario::versions::CONSTRUCTS`.

use std::fmt::Write;

use tep_conformance::scenario::versions::{CONSTRUCTS, PARTS, newest};

/// One row per part of the language, one column per protocol version.
pub fn version_table() -> String {
    let newest = newest();
    let mut out = String::from("| part |");
    for v in 1..=newest {
        let _ = write!(out, " protocol {v} |");
    }
    out.push_str("\n|---|");
    out.push_str(&"---|".repeat(newest as usize));
    out.push('\n');
    for (part, label) in PARTS {
        let _ = write!(out, "| {label} |");
        for v in 1..=newest {
            let names: Vec<String> = CONSTRUCTS
                .iter()
                .filter(|c| c.part == *part && c.since == v)
                .map(|c| format!("`{}`", c.name))
                .collect();
            let _ = write!(out, " {} |", names.join(", "));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_construct_has_a_row_and_protocol_3_names_the_new_ones() {
        let table = version_table();
        let row = |label: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("| {label} |")))
                .unwrap_or_else(|| panic!("no row {label}"))
                .to_owned()
        };
        assert!(
            row("body step").ends_with("| `slowStop` |"),
            "{}",
            row("body step")
        );
        assert!(row("pre-execute action").ends_with("| `rewrite` |"));
        for c in CONSTRUCTS {
            assert!(
                PARTS.iter().any(|(p, _)| *p == c.part),
                "{} has no row",
                c.part
            );
        }
    }
}
