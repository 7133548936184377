//! The clause list against the spec's text: each quote is where it says, each clause is well
//! formed, and nothing of the doc is left unaudited (every word of its prose and of its node
//! labels is in some quote, every edge and every numbered item has its clause).

use std::collections::BTreeSet;

use tep_model::graph::NodeId;

use super::{
    CLAUSES_FILE, Clause, ClauseFile, Kind, Part, Problem, SEMANTICS_ITEMS, SpecTexts, normalize,
    rev2_graph, rev2_node,
};

/// The rev2 doc split into what clauses quote.
#[derive(Debug, Clone, Default)]
pub struct Rev2Text {
    /// The title and the prose paragraphs, normalized.
    pub prose: Vec<String>,
    /// Each node's id and label, normalized.
    pub labels: Vec<(String, String)>,
    /// The lines of the Mermaid block, trimmed.
    pub mermaid: Vec<String>,
}

impl Rev2Text {
    /// Reads the doc: the first line (its file name) and the generated-file comment are not
    /// the doc's words.
    pub fn parse(text: &str) -> Rev2Text {
        let mut out = Rev2Text::default();
        let (mut comment, mut fence) = (false, false);
        for line in text.lines().skip(1) {
            let trimmed = line.trim();
            if fence {
                if trimmed.starts_with("```") {
                    fence = false;
                } else if let Some((id, rest)) = trimmed.split_once("[\"") {
                    let label = rest.strip_suffix("\"]").unwrap_or(rest);
                    out.labels.push((id.to_owned(), normalize(label)));
                } else {
                    out.mermaid.push(trimmed.to_owned());
                }
                continue;
            }
            if comment || trimmed.starts_with("<!--") {
                comment = !trimmed.contains("-->");
                continue;
            }
            if trimmed.starts_with("```") {
                fence = true;
            } else if !trimmed.is_empty() {
                out.prose
                    .push(normalize(trimmed.trim_start_matches('#').trim()));
            }
        }
        out
    }
}

/// The text of numbered item `n` of the reference semantics, its lines joined by spaces.
pub fn semantics_item(text: &str, n: u32) -> Option<String> {
    let head = format!("{n}. ");
    let starts_item = |line: &str| {
        line.split_once(". ")
            .is_some_and(|(k, _)| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut lines = text.lines().skip_while(|l| !l.starts_with(&head));
    let first = lines.next()?;
    let mut out = vec![first.trim()];
    out.extend(
        lines
            .take_while(|l| !starts_item(l) && !l.starts_with('#'))
            .map(str::trim)
            .filter(|l| !l.is_empty()),
    );
    Some(out.join(" "))
}

/// Every problem of the clause list's shape.
pub fn shape(file: &ClauseFile, spec: &SpecTexts) -> Vec<Problem> {
    let rev2 = Rev2Text::parse(&spec.rev2);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for clause in &file.clauses {
        if !seen.insert(clause.id.as_str()) {
            problems.push(Problem(format!("clause `{}` is listed twice", clause.id)));
        }
        problems.extend(
            clause_shape(clause, &rev2, spec)
                .into_iter()
                .map(|p| Problem(format!("{}: {p}", clause.id))),
        );
        problems.extend(
            doc_refs(clause, file)
                .into_iter()
                .map(|p| Problem(format!("{}: {p}", clause.id))),
        );
    }
    problems.extend(completeness(file, &rev2));
    problems
}

/// What is wrong with one clause on its own.
fn clause_shape(clause: &Clause, rev2: &Rev2Text, spec: &SpecTexts) -> Vec<String> {
    let mut out = Vec::new();
    let fields = (
        clause.node.is_some(),
        clause.edge.is_some(),
        clause.item.is_some(),
    );
    let expected = match clause.part {
        Part::Prose => (false, false, false),
        Part::Node => (true, false, false),
        Part::Edge => (false, true, false),
        Part::Semantics => (false, false, true),
    };
    if fields != expected {
        out.push(format!(
            "a {:?} clause has `node` {}, `edge` {}, `item` {}",
            clause.part,
            if expected.0 {
                "required"
            } else {
                "not allowed"
            },
            if expected.1 {
                "required"
            } else {
                "not allowed"
            },
            if expected.2 {
                "required"
            } else {
                "not allowed"
            },
        ));
    }
    let quote = clause.quote.as_str();
    match clause.part {
        Part::Prose => {
            if !rev2.prose.iter().any(|p| p.contains(quote)) {
                out.push(format!(
                    "the doc's prose does not say \u{201c}{quote}\u{201d}"
                ));
            }
        }
        Part::Node => {
            let name = clause.node.as_deref().unwrap_or_default();
            match rev2.labels.iter().find(|(id, _)| id == name) {
                None => out.push(format!("the flowchart has no node `{name}`")),
                Some((_, label)) if !label.contains(quote) => out.push(format!(
                    "the label of `{name}` (\u{201c}{label}\u{201d}) does not say \u{201c}{quote}\u{201d}"
                )),
                Some(_) => {}
            }
        }
        Part::Edge => out.extend(edge_shape(clause, rev2)),
        Part::Semantics => {
            let n = clause.item.unwrap_or_default();
            match semantics_item(&spec.semantics, n) {
                Some(text) if SEMANTICS_ITEMS.contains(&n) => {
                    if !text.contains(quote) {
                        out.push(format!("item {n} does not say \u{201c}{quote}\u{201d}"));
                    }
                }
                _ => out.push(format!("reference-semantics.md has no item {n}")),
            }
        }
    }
    out
}

fn edge_shape(clause: &Clause, rev2: &Rev2Text) -> Vec<String> {
    let mut out = Vec::new();
    let edge = clause.edge.as_deref().unwrap_or_default();
    let Some((from, to)) = edge.split_once(" -> ") else {
        return vec![format!("`edge` is written `from -> to`, not `{edge}`")];
    };
    match (rev2_node(from), rev2_node(to)) {
        (Some(a), Some(b)) if rev2_graph().edge(a, b).is_some() => {}
        _ => out.push(format!("the rev2 stage graph has no edge {edge}")),
    }
    let words: Vec<&str> = clause.quote.split_whitespace().collect();
    if !rev2.mermaid.contains(&clause.quote)
        || words.first() != Some(&from)
        || words.last() != Some(&to)
    {
        out.push(format!(
            "\u{201c}{}\u{201d} is not the flowchart's line for {edge}",
            clause.quote
        ));
    }
    out
}

/// A semantics clause's `doc` names doc clauses; only a semantics clause has one, and a `must`
/// or `overridden` item must have one (the doc states it, or contradicts it).
fn doc_refs(clause: &Clause, file: &ClauseFile) -> Vec<String> {
    let mut out = Vec::new();
    if clause.part != Part::Semantics {
        if !clause.doc.is_empty() {
            out.push("only a semantics clause names doc clauses in `doc`".to_owned());
        }
        if clause.kind == Kind::Overridden {
            out.push("only a semantics item can be overridden by the doc".to_owned());
        }
        return out;
    }
    let needs_doc = matches!(clause.kind, Kind::Must | Kind::Overridden);
    if needs_doc && clause.doc.is_empty() {
        out.push(format!(
            "a {} item names the doc clauses that {} it in `doc`",
            clause.kind,
            if clause.kind == Kind::Must {
                "state"
            } else {
                "contradict"
            }
        ));
    }
    if !needs_doc && !clause.doc.is_empty() {
        out.push(format!(
            "the doc states it ({}): make it `must`",
            clause.doc.join(", ")
        ));
    }
    for id in &clause.doc {
        if !file.clauses.iter().any(|c| &c.id == id && c.part.is_doc()) {
            out.push(format!("`doc` names `{id}`, which is no clause of the doc"));
        }
    }
    out
}

/// Nothing of the doc is left out: every word of the prose and of each node's label lies in a
/// quote, every rev2 node and edge has a clause, and every numbered item has `sem-N`.
fn completeness(file: &ClauseFile, rev2: &Rev2Text) -> Vec<Problem> {
    let mut problems = Vec::new();
    let quotes = |part: Part, node: Option<&str>| -> Vec<&str> {
        file.clauses
            .iter()
            .filter(|c| c.part == part && (node.is_none() || c.node.as_deref() == node))
            .map(|c| c.quote.as_str())
            .collect()
    };
    for paragraph in &rev2.prose {
        if let Some(left) = unquoted(paragraph, &quotes(Part::Prose, None)) {
            problems.push(Problem(format!(
                "the doc's prose says \u{201c}{left}\u{201d}, which no clause of {CLAUSES_FILE} quotes"
            )));
        }
    }
    for (id, label) in &rev2.labels {
        if let Some(left) = unquoted(label, &quotes(Part::Node, Some(id))) {
            problems.push(Problem(format!(
                "the label of node `{id}` says \u{201c}{left}\u{201d}, which no clause quotes"
            )));
        }
    }
    for edge in rev2_graph().edges() {
        let name = format!("{} -> {}", edge.from, edge.to);
        let n = file
            .clauses
            .iter()
            .filter(|c| c.edge.as_deref() == Some(&name))
            .count();
        if n != 1 {
            problems.push(Problem(format!(
                "the flowchart's edge {name} has {n} clauses; it needs exactly one"
            )));
        }
    }
    for node in rev2_graph().nodes() {
        let name = NodeId::as_str(node.id);
        if !file.clauses.iter().any(|c| c.node.as_deref() == Some(name)) {
            problems.push(Problem(format!(
                "the flowchart's node `{name}` has no clause"
            )));
        }
    }
    for n in SEMANTICS_ITEMS {
        let id = format!("sem-{n}");
        if !file.clauses.iter().any(|c| c.id == id && c.item == Some(n)) {
            problems.push(Problem(format!(
                "reference semantics item {n} has no clause `{id}`"
            )));
        }
    }
    problems
}

/// The first run of words of `text` that none of `quotes` covers, if any.
pub fn unquoted(text: &str, quotes: &[&str]) -> Option<String> {
    let mut covered = vec![false; text.len()];
    for quote in quotes.iter().filter(|q| !q.is_empty()) {
        for (at, _) in text.match_indices(quote) {
            covered[at..at + quote.len()]
                .iter_mut()
                .for_each(|c| *c = true);
        }
    }
    let mut left = String::new();
    for (i, ch) in text.char_indices() {
        if covered[i] {
            if !left.trim().is_empty() && left.chars().any(char::is_alphanumeric) {
                break;
            }
            left.clear();
        } else {
            left.push(ch);
        }
    }
    let left = left.trim();
    left.chars()
        .any(char::is_alphanumeric)
        .then(|| left.to_owned())
}
