//! `docs/spec-coverage.md`: each clause of the spec with the invariants that hold it, the
//! scenarios that exercise them and the reference mutants that break them.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use tep_check::invariants::Invariant;
use tep_conformance::mutants::breaks;
use tep_conformance::scenario::Scenario;
use tep_reference::mutant::Mutant;

use super::{CLAUSES_FILE, Coverage, Covered, GENERIC, Kind, Part, exempt};
use crate::pages::header;

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn clause_link(id: &str) -> String {
    format!("[`{id}`](#{id})")
}

fn invariant_link(inv: &Invariant) -> String {
    let rev = if inv.applies_to(tep_model::graph::Revision::Rev2) {
        ""
    } else {
        ", rev1 only"
    };
    format!(
        "[`{id}`](invariants.md#{id}) ({}{rev})",
        inv.level,
        id = inv.id
    )
}

fn mutants_of(inv: &Invariant) -> Vec<Mutant> {
    Mutant::ALL
        .iter()
        .copied()
        .filter(|&m| breaks(m).contains(&inv.id))
        .collect()
}

/// The page.
pub fn page(coverage: &Coverage<'_>, corpus: &[Scenario]) -> String {
    let mut out = header(&format!(
        "{CLAUSES_FILE} and the invariant catalog (check/src/rules/)"
    ));
    out.push_str("# Spec coverage\n\n");
    intro(&mut out, coverage);
    gap_sections(&mut out, coverage);
    let parts = [
        (
            Part::Prose,
            "The doc: its prose",
            "spec/rev2.txt, sentence by sentence (title, intro, the paragraph after the flowchart, footer).",
        ),
        (
            Part::Node,
            "The doc: the flowchart's nodes",
            "Each node's label, in the flowchart's order.",
        ),
        (
            Part::Edge,
            "The doc: the flowchart's edges",
            "Each edge, in the flowchart's order. `stage-graph-walk` checks every one (a walk takes only edges of the graph); the invariants beside it check what the edge means.",
        ),
        (
            Part::Semantics,
            "The reference semantics",
            "spec/reference-semantics.md, section 2, item by item. SHOULD unless the doc states the item too (then MUST, and the doc's clauses are named).",
        ),
    ];
    for (part, title, what) in parts {
        let _ = writeln!(out, "## {title}\n\n{what}\n");
        for c in coverage.part(part) {
            clause_section(&mut out, c, corpus);
        }
    }
    exempt_section(&mut out);
    out
}

fn intro(out: &mut String, coverage: &Coverage<'_>) {
    let count = |f: &dyn Fn(&Covered<'_>) -> bool| coverage.clauses.iter().filter(|c| f(c)).count();
    let guarantees = count(&|c| c.clause.kind.is_guarantee());
    let _ = writeln!(
        out,
        "Every clause of the spec: the rev2 doc sentence by sentence, node by node and edge by edge, \
         and the reference semantics item by item. The list is written by hand in \
         [`{CLAUSES_FILE}`](../{CLAUSES_FILE}) (a clause's id, where it is, its words, whether it \
         states a guarantee); which invariants cite a clause is read from each invariant's sources \
         in the catalog ([invariants.md](invariants.md)). A clause is **MUST** when the doc states \
         it (its words or its flowchart), **SHOULD** when only the reference semantics do, \
         **free** when it describes or leaves a choice to the implementation, **overridden** \
         when the doc contradicts the reference and wins ([divergences.md](divergences.md)).\n"
    );
    out.push_str("| | clauses | MUST | SHOULD | free | overridden | guarantees with no invariant |\n|---|---|---|---|---|---|---|\n");
    for part in Part::ALL {
        let of = |k: Kind| count(&|c| c.clause.part == part && c.clause.kind == k);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            match part {
                Part::Prose => "doc prose",
                Part::Node => "flowchart nodes",
                Part::Edge => "flowchart edges",
                Part::Semantics => "reference semantics",
            },
            count(&|c| c.clause.part == part),
            of(Kind::Must),
            of(Kind::Should),
            of(Kind::Free),
            of(Kind::Overridden),
            coverage
                .uncovered()
                .filter(|c| c.clause.part == part)
                .count()
        );
    }
    let _ = writeln!(
        out,
        "| **all** | {} | {} | {} | {} | {} | {} |\n",
        coverage.clauses.len(),
        count(&|c| c.clause.kind == Kind::Must),
        count(&|c| c.clause.kind == Kind::Should),
        count(&|c| c.clause.kind == Kind::Free),
        count(&|c| c.clause.kind == Kind::Overridden),
        coverage.uncovered().count()
    );
    let _ = writeln!(
        out,
        "{guarantees} clauses state a guarantee. `cargo xtask docs` (and so CI's \
         `cargo xtask docs --check`) fails on a guarantee with no invariant that the allowlist \
         (`[gaps]` in the clause file) does not name, on a quote the spec does not hold, on an \
         invariant id the catalog does not know, and on a catalog source no clause matches. \
         An invariant marked *checks it* below holds the clause without citing it (the clause \
         file names it). Sections 1, 3, 4 and 5 of the reference semantics hold no numbered item: \
         where the original's files are, the shapes of its events (the trace format fixes this \
         project's own: [events.md](events.md)), its doc generator, and the history of the doc.\n"
    );
}

fn gap_sections(out: &mut String, coverage: &Coverage<'_>) {
    out.push_str("## Guarantees with no invariant\n\nWhat the suite misses: no invariant checks these, in drive mode or replay. Each is allowlisted with its reason.\n\n| clause | level | says | why |\n|---|---|---|---|\n");
    for c in coverage.uncovered() {
        let reason = coverage
            .file
            .gaps
            .get(&c.clause.id)
            .map_or("**not allowlisted**", |g| g.reason.as_str());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            clause_link(&c.clause.id),
            c.clause.kind,
            cell(&c.clause.quote),
            cell(reason)
        );
    }
    out.push_str("\n## Guarantees held only by a generic invariant\n\nOnly `stage-graph-walk` (a walk off the graph) or a scenario's expected outcome (`expected-outcome`, `expected-content`: drive mode only) holds these. A breach is caught when it changes the walk or the outcome of a corpus scenario, and not at all in replay mode. **A failure of `expected-outcome` alone leaves these clauses unnamed**: the report says that a call's outcome differs from the one the scripts determine (or that a walk left the graph), not which of these guarantees broke. Every other guarantee has an invariant of its own that names its breach.\n\n| clause | level | says | held by |\n|---|---|---|---|\n");
    for c in coverage
        .clauses
        .iter()
        .filter(|c| c.clause.kind.is_guarantee() && c.generic_only())
    {
        let held: Vec<String> = c.rev2().map(|i| format!("`{}`", i.id)).collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            clause_link(&c.clause.id),
            c.clause.kind,
            cell(&c.clause.quote),
            held.join(", ")
        );
    }
    out.push_str("\n## MUST clauses held only at SHOULD\n\nThe doc states these, but every specific invariant that holds them is SHOULD (a warning unless `--strict`).\n\n| clause | says | held by |\n|---|---|---|\n");
    for c in coverage.clauses.iter().filter(|c| {
        c.clause.kind == Kind::Must
            && !c.generic_only()
            && c.has_invariant()
            && c.rev2()
                .filter(|i| !GENERIC.contains(&i.id))
                .all(|i| !i.level.fails(false))
    }) {
        let held: Vec<String> = c
            .rev2()
            .filter(|i| !GENERIC.contains(&i.id))
            .map(|i| format!("`{}`", i.id))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            clause_link(&c.clause.id),
            cell(&c.clause.quote),
            held.join(", ")
        );
    }
    out.push('\n');
}

fn clause_section(out: &mut String, c: &Covered<'_>, corpus: &[Scenario]) {
    let clause = c.clause;
    let _ = writeln!(out, "### {}\n", clause.id);
    let _ = writeln!(out, "> {}\n", clause.quote);
    let _ = writeln!(out, "**{}** · {}\n", clause.kind, clause.place);
    if !clause.doc.is_empty() {
        let refs: Vec<String> = clause.doc.iter().map(|d| clause_link(d)).collect();
        let verb = if clause.kind == Kind::Overridden {
            "Overridden by the doc"
        } else {
            "Stated by the doc"
        };
        let _ = writeln!(out, "- {verb}: {}.", refs.join(", "));
    }
    let cited: Vec<String> = c.cited.iter().map(|i| invariant_link(i)).collect();
    let linked: Vec<String> = c.linked.iter().map(|i| invariant_link(i)).collect();
    match (cited.is_empty(), linked.is_empty()) {
        (true, true) if clause.kind.is_guarantee() => {
            let _ = writeln!(out, "- Invariants: **none**.");
        }
        (true, true) => {}
        _ => {
            let mut parts = Vec::new();
            if !cited.is_empty() {
                parts.push(format!("cited by {}", cited.join(", ")));
            }
            if !linked.is_empty() {
                parts.push(format!("checks it: {}", linked.join(", ")));
            }
            let _ = writeln!(out, "- Invariants: {}.", parts.join("; "));
        }
    }
    let specific: Vec<&Invariant> = c
        .cited
        .iter()
        .chain(&c.linked)
        .copied()
        .filter(|i| !GENERIC.contains(&i.id))
        .collect();
    let scenarios: BTreeSet<&str> = corpus
        .iter()
        .filter(|s| specific.iter().any(|i| s.exercises.contains(&i.id)))
        .map(|s| s.id.as_str())
        .collect();
    if !scenarios.is_empty() {
        let list: Vec<String> = corpus
            .iter()
            .filter(|s| scenarios.contains(s.id.as_str()))
            .map(|s| format!("[`{id}`](scenarios.md#{id})", id = s.id))
            .collect();
        let _ = writeln!(out, "- Scenarios: {}.", list.join(", "));
    }
    let generic: Vec<&Invariant> = c
        .cited
        .iter()
        .chain(&c.linked)
        .copied()
        .filter(|i| GENERIC.contains(&i.id))
        .collect();
    if !generic.is_empty() {
        let n = corpus
            .iter()
            .filter(|s| generic.iter().any(|i| s.exercises.contains(&i.id)))
            .count();
        let names: Vec<String> = generic.iter().map(|i| format!("`{}`", i.id)).collect();
        let _ = writeln!(
            out,
            "- Generic: {} ({n} scenario{} exercise{} {}).",
            names.join(", "),
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" },
            if generic.len() == 1 { "it" } else { "them" }
        );
    }
    // Each mutant once, with the invariants of this clause it breaks.
    let mut broken: Vec<(Mutant, Vec<&str>)> = Vec::new();
    for inv in &specific {
        for m in mutants_of(inv) {
            match broken.iter_mut().find(|(x, _)| *x == m) {
                Some((_, ids)) => ids.push(inv.id.as_str()),
                None => broken.push((m, vec![inv.id.as_str()])),
            }
        }
    }
    let mutants: Vec<String> = broken
        .iter()
        .map(|(m, ids)| format!("`{}` ({})", m.name(), ids.join(", ")))
        .collect();
    if !mutants.is_empty() {
        let _ = writeln!(out, "- Mutants that break them: {}.", mutants.join(", "));
    } else if !specific.is_empty() {
        out.push_str("- Mutants that break them: none.\n");
    }
    // What a failure of the scenario's expectations alone does not name (`stage-graph-walk`
    // alone names a walk off the flowchart, which is the `title` clause itself).
    let expectations: Vec<String> = generic
        .iter()
        .filter(|i| i.id != tep_check::invariants::InvariantId::StageGraphWalk)
        .map(|i| format!("`{}`", i.id))
        .collect();
    if clause.kind.is_guarantee() && c.generic_only() && !expectations.is_empty() {
        let _ = writeln!(
            out,
            "- Unnamed: a failure of {} alone leaves this clause unnamed (no invariant of its own names its breach).",
            expectations.join(" or ")
        );
    }
    if let Some(note) = &clause.note {
        let _ = writeln!(out, "- Note: {note}");
    }
    out.push('\n');
}

fn exempt_section(out: &mut String) {
    out.push_str("## Invariants that cite no clause\n\nEvery other invariant cites at least one clause above (a test in `xtask` fails when one does not).\n\n| invariant | why |\n|---|---|\n");
    for inv in tep_check::CATALOG {
        if let Some(why) = exempt(inv) {
            let _ = writeln!(out, "| {} | {why} |", invariant_link(inv));
        }
    }
}
