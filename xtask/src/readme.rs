//! The counts README.md quotes (scenarios, invariants, mutants, what a run prints), kept true by `cargo xtask docs`:
//! each number sits between `<!-- count:NAME -->` and `<!-- /count -->` and is rewritten from the
//! corpus, the invariant catalog and the mutant list. The rest of the README is hand-written.

use tep_check::CATALOG;
use tep_conformance::scenario::Scenario;
use tep_model::graph::Revision;
use tep_model::trace::Capability;
use tep_reference::mutant::Mutant;

const END: &str = "<!-- /count -->";

/// The counts, by marker name.
pub fn counts(corpus: &[Scenario]) -> Vec<(&'static str, usize)> {
    vec![
        ("scenarios", corpus.len()),
        (
            "invariants",
            CATALOG
                .iter()
                .filter(|i| i.applies_to(Revision::Rev2))
                .count(),
        ),
        ("mutants", Mutant::ALL.len()),
        // What `cargo tep run` (rev2) prints: the rev2 scenarios pass, the others are skipped.
        (
            "rev2-scenarios",
            corpus
                .iter()
                .filter(|s| s.applies_to(Revision::Rev2))
                .count(),
        ),
        (
            "not-rev2-scenarios",
            corpus
                .iter()
                .filter(|s| !s.applies_to(Revision::Rev2))
                .count(),
        ),
    ]
}

/// The adapter kits' READMEs, with the capabilities their quick start declares: each quotes what
/// its quick start's `tep run --strict` prints (the kits' quick-start tests check the run says so).
pub const KIT_READMES: [(&str, &[Capability]); 2] = [
    (
        "conformance/adapters/python/README.md",
        &[Capability::Approval],
    ),
    (
        "conformance/adapters/typescript/README.md",
        &[Capability::Approval, Capability::Ui],
    ),
];

/// What a kit's quick start prints under `tep run --strict` (rev2): the scenarios its declared
/// capabilities allow pass, the others (and the rev1-only ones) are skipped as N/A.
pub fn quick_start_counts(
    corpus: &[Scenario],
    capabilities: &[Capability],
) -> Vec<(&'static str, usize)> {
    let passed = corpus
        .iter()
        .filter(|s| s.applies_to(Revision::Rev2))
        .filter(|s| s.requires.iter().all(|c| capabilities.contains(c)))
        .count();
    vec![
        ("quickstart-passed", passed),
        ("quickstart-skipped", corpus.len() - passed),
    ]
}

/// `text` with every marked count rewritten; an error names a count with no marker (each must
/// appear at least once, so a README edit cannot drop one silently) or a marker left open.
pub fn rewrite(text: &str, counts: &[(&str, usize)]) -> Result<String, String> {
    rewrite_file("README.md", text, counts)
}

/// `rewrite` for the file `file` (named in its errors).
pub fn rewrite_file(file: &str, text: &str, counts: &[(&str, usize)]) -> Result<String, String> {
    let mut out = text.to_owned();
    for (name, value) in counts {
        let start = format!("<!-- count:{name} -->");
        let mut from = 0;
        let mut seen = false;
        while let Some(at) = out[from..].find(&start) {
            let body = from + at + start.len();
            let Some(len) = out[body..].find(END) else {
                return Err(format!("{file}: `{start}` has no `{END}` after it"));
            };
            out.replace_range(body..body + len, &value.to_string());
            from = body;
            seen = true;
        }
        if !seen {
            return Err(format!(
                "{file} has no `{start}…{END}` marker for the {name} count"
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_counts_are_rewritten_and_the_rest_is_kept() {
        let text = "a corpus of <!-- count:scenarios -->54<!-- /count --> scenarios, \
                    <!-- count:mutants -->1<!-- /count --> mutants; 54 elsewhere";
        assert_eq!(
            rewrite(text, &[("scenarios", 58), ("mutants", 30)]).unwrap(),
            "a corpus of <!-- count:scenarios -->58<!-- /count --> scenarios, \
             <!-- count:mutants -->30<!-- /count --> mutants; 54 elsewhere"
        );
    }

    #[test]
    fn a_missing_or_open_marker_is_an_error() {
        assert!(
            rewrite("no markers", &[("scenarios", 58)])
                .unwrap_err()
                .contains("count:scenarios")
        );
        assert!(
            rewrite("<!-- count:scenarios -->54", &[("scenarios", 58)])
                .unwrap_err()
                .contains("has no")
        );
    }
}
