//! `spec/clauses.toml` against the spec and the catalog: the real list holds, and each way it
//! can drift is reported (a guarantee with no invariant, an unknown invariant id, a catalog
//! source no clause matches, a quote the spec does not hold, words of the doc no clause quotes).

use crate::{root, scratch};
use std::process::Command;

use tep_check::CATALOG;
use tep_check::invariants::InvariantId;
use xtask::coverage::{self, ClauseFile, Coverage, SpecTexts, cited_clauses, exempt};

fn clauses_text() -> String {
    std::fs::read_to_string(root().join(coverage::CLAUSES_FILE)).unwrap()
}

fn spec() -> SpecTexts {
    SpecTexts::read(&root()).unwrap()
}

/// The problems of the clause file `text`.
fn problems(text: &str) -> Vec<String> {
    let file: ClauseFile = coverage::parse(text).unwrap();
    Coverage::build(&file, &spec())
        .problems
        .into_iter()
        .map(|p| p.0)
        .collect()
}

fn has(problems: &[String], needle: &str) -> bool {
    problems.iter().any(|p| p.contains(needle))
}

/// The clause file with one edit that must apply.
fn edited(from: &str, to: &str) -> String {
    let text = clauses_text();
    assert!(
        text.contains(from),
        "the clause file no longer says {from:?}"
    );
    text.replacen(from, to, 1)
}

#[test]
fn the_clause_list_holds() {
    assert_eq!(problems(&clauses_text()), Vec::<String>::new());
}

#[test]
fn every_invariant_cites_a_clause_unless_exempt() {
    let file = coverage::parse(&clauses_text()).unwrap();
    let mut exempted = Vec::new();
    for inv in CATALOG {
        let (ids, problems) = cited_clauses(inv, &file.clauses);
        assert_eq!(problems, vec![], "{}", inv.id);
        match exempt(inv) {
            Some(_) => exempted.push(inv.id),
            None => assert!(!ids.is_empty(), "{} cites no clause", inv.id),
        }
    }
    // Drive mode's own check, and two rev1-only invariants that quote rev1's words alone.
    assert_eq!(
        exempted,
        [
            InvariantId::NotificationAwaited,
            InvariantId::ContextsAsContextMessages,
            InvariantId::ExpectedOutcome,
        ]
    );
}

#[test]
fn an_invariant_appears_under_each_clause_its_sources_name() {
    let file = coverage::parse(&clauses_text()).unwrap();
    let coverage = Coverage::build(&file, &spec());
    let under = |clause: &str| -> Vec<&str> {
        let c = coverage
            .clauses
            .iter()
            .find(|c| c.clause.id == clause)
            .unwrap();
        c.cited.iter().map(|i| i.id.as_str()).collect()
    };
    // Doc("tool body skipped"), Doc("denied or approval refused"): the `denied` node.
    assert_eq!(under("node-denied"), ["deny-skips-body", "denial-is-error"]);
    // Edge(Denied, Post) and Semantics(&[22]).
    assert!(under("edge-denied-post").contains(&"denial-reaches-post"));
    assert!(under("sem-22").contains(&"denial-reaches-post"));
}

#[test]
fn a_new_guarantee_without_an_invariant_fails() {
    let text = edited(
        "sem-10 = { reason = \"out of scope: aborting a batch is left out of the reference (docs/divergences.md)\" }\n",
        "",
    );
    let found = problems(&text);
    assert!(
        has(&found, "sem-10: a guarantee (SHOULD) with no invariant"),
        "{found:?}"
    );
    // A free clause made a guarantee, with no invariant, fails the same way.
    let text = edited(
        "quote = \"Registered tool execute() body\"\nkind = \"free\"",
        "quote = \"Registered tool execute() body\"\nkind = \"must\"",
    );
    assert!(has(
        &problems(&text),
        "node-tool-body: a guarantee (MUST) with no invariant"
    ));
}

#[test]
fn a_gap_that_no_longer_fits_fails() {
    // An allowlisted clause that an invariant holds.
    let text = edited("[gaps]\n", "[gaps]\nnode-denied = { reason = \"stale\" }\n");
    assert!(has(
        &problems(&text),
        "node-denied: listed under [gaps] but held by"
    ));
    // The awaited invariant exists: wire it.
    let text = edited(
        "sem-38 = { reason",
        "sem-38 = { awaits = \"deny-skips-body\", reason",
    );
    assert!(has(
        &problems(&text),
        "awaits `deny-skips-body`, which is in the catalog now"
    ));
    // A gap for no clause.
    let text = edited("[gaps]\n", "[gaps]\nno-such-clause = { reason = \"x\" }\n");
    assert!(has(
        &problems(&text),
        "`no-such-clause`, which is no clause"
    ));
}

#[test]
fn an_unknown_invariant_id_fails() {
    let text = edited(
        "\"pre-execute-once\", \"guards-only-after-allow\"",
        "\"pre-execute-twice\", \"guards-only-after-allow\"",
    );
    assert!(has(
        &problems(&text),
        "intro-order: invariant `pre-execute-twice` is not in the catalog"
    ));
    // Naming an invariant that already cites the clause is a duplicate of the catalog.
    let text = edited(
        "kind = \"must\"\ninvariants = [\"deny-skips-body\"]",
        "kind = \"must\"\ninvariants = [\"deny-skips-body\", \"approval-absent-denies\"]",
    );
    assert!(has(
        &problems(&text),
        "`approval-absent-denies` already cites this clause"
    ));
}

#[test]
fn a_source_no_clause_holds_fails() {
    // Without the `denied` node's clause, the invariants quoting its label cite nothing.
    let text = edited(
        "quote = \"denied or approval refused tool body skipped\"",
        "quote = \"denied or approval refused\"",
    );
    let found = problems(&text);
    assert!(
        has(
            &found,
            "deny-skips-body cites the doc's \u{201c}tool body skipped\u{201d}: no clause"
        ),
        "{found:?}"
    );
    assert!(
        has(
            &found,
            "the label of node `denied` says \u{201c}tool body skipped\u{201d}"
        ),
        "{found:?}"
    );
    // An item with no clause.
    let text = edited("id = \"sem-41\"", "id = \"sem-41-renamed\"");
    let found = problems(&text);
    assert!(
        has(&found, "pre-execute-once cites reference semantics 41"),
        "{found:?}"
    );
    assert!(has(&found, "item 41 has no clause `sem-41`"), "{found:?}");
}

#[test]
fn quotes_are_the_specs_words() {
    let text = edited(
        "quote = \"Around-dispatch concerns such as timeouts wrap `tools/execute`.\"",
        "quote = \"Around-dispatch concerns such as retries wrap `tools/execute`.\"",
    );
    let found = problems(&text);
    assert!(
        has(
            &found,
            "after-around-dispatch: the doc's prose does not say"
        ),
        "{found:?}"
    );
    let text = edited(
        "quote = \"The ordered stages never overlap.\"",
        "quote = \"The ordered stages may overlap.\"",
    );
    assert!(has(&problems(&text), "sem-5: item 5 does not say"));
    let text = edited(
        "quote = \"pre -->|allow| guards\"",
        "quote = \"pre --> guards\"",
    );
    assert!(has(
        &problems(&text),
        "is not the flowchart's line for pre -> guards"
    ));
}

#[test]
fn every_word_of_the_doc_is_in_a_clause() {
    // Drop the footer's clause: its sentence is then unaudited.
    let text = edited(
        "quote = \"Maintenance mode: curated Mermaid flow; exact tool schemas and event signatures live in generated catalogs.\"",
        "quote = \"Maintenance mode: curated Mermaid flow;\"",
    );
    let found = problems(&text);
    assert!(
        has(
            &found,
            "the doc's prose says \u{201c}exact tool schemas and event signatures live in generated catalogs.\u{201d}"
        ),
        "{found:?}"
    );
}

#[test]
fn unquoted_finds_the_first_uncovered_words() {
    use xtask::coverage::check::unquoted;
    assert_eq!(unquoted("a b, c d.", &["a b,", "c d."]), None);
    assert_eq!(
        unquoted("a b, c d. e f.", &["a b,", "e f."]),
        Some("c d.".to_owned())
    );
    assert_eq!(unquoted("a b", &[]), Some("a b".to_owned()));
}

#[test]
fn docs_check_fails_on_a_new_guarantee_without_an_invariant() {
    let dir = scratch("gap");
    let file = dir.join(coverage::CLAUSES_FILE);
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("sem-38 = {", "# sem-38 = {");
    std::fs::write(&file, text).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(["docs", "--check", "--root", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("sem-38: a guarantee (MUST) with no invariant"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
