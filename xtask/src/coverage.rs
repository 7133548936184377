//! The spec's clauses (`spec/clauses.toml`) against the invariant catalog: which invariants
//! hold each clause, and which guarantees none does.
//!
//! The clause list is hand-written data: the audit of `spec/rev2.txt` sentence by sentence,
//! node by node and edge by edge, and of `spec/reference-semantics.md` item by item. Which
//! invariants *cite* a clause is read from the catalog's `sources` (never restated in the data);
//! the data only adds invariants that check a clause without citing it. [`Coverage::build`]
//! joins the two and lists every [`Problem`]: a quote the spec does not hold, an invariant id
//! the catalog does not know, a source no clause matches, a guarantee with no invariant that
//! the allowlist (`[gaps]`) does not name. `cargo xtask docs` fails on any of them.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::Deserialize;
use tep_check::CATALOG;
use tep_check::invariants::{Invariant, InvariantId, Source};
use tep_model::graph::{NodeId, Revision, StageGraph};

pub mod check;
pub mod page;

/// Where the clause list lives, relative to the repository root.
pub const CLAUSES_FILE: &str = "spec/clauses.toml";

/// The invariants that check every clause in general (a walk of the graph, a scenario's
/// expected outcome) rather than what one clause says. A guarantee held only by these is
/// listed apart: drive mode catches its breach, replay mode and fuzzing may not.
pub const GENERIC: &[InvariantId] = &[
    InvariantId::StageGraphWalk,
    InvariantId::ExpectedOutcome,
    InvariantId::ExpectedContent,
];

/// The numbered items of `spec/reference-semantics.md`.
pub const SEMANTICS_ITEMS: std::ops::RangeInclusive<u32> = 1..=51;

/// The clause file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClauseFile {
    #[serde(rename = "clause")]
    pub clauses: Vec<Clause>,
    /// The allowlist: clause id → why it has no invariant.
    #[serde(default)]
    pub gaps: BTreeMap<String, Gap>,
}

/// One clause of the spec.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Clause {
    pub id: String,
    pub part: Part,
    #[serde(rename = "where")]
    pub place: String,
    pub quote: String,
    /// The flowchart node (part `node`).
    pub node: Option<String>,
    /// The flowchart edge, `from -> to` (part `edge`).
    pub edge: Option<String>,
    /// The item number (part `semantics`).
    pub item: Option<u32>,
    pub kind: Kind,
    /// Invariants that check the clause although their sources do not cite it.
    #[serde(default)]
    pub invariants: Vec<String>,
    /// For a semantics item: the doc clauses that state it (`must`) or that it contradicts
    /// (`overridden`).
    #[serde(default)]
    pub doc: Vec<String>,
    pub note: Option<String>,
}

/// Where in the spec a clause is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Part {
    Prose,
    Node,
    Edge,
    Semantics,
}

impl Part {
    pub const ALL: [Part; 4] = [Part::Prose, Part::Node, Part::Edge, Part::Semantics];

    pub fn is_doc(self) -> bool {
        self != Part::Semantics
    }
}

/// What a clause states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Must,
    Should,
    Free,
    Overridden,
}

impl Kind {
    pub fn is_guarantee(self) -> bool {
        matches!(self, Kind::Must | Kind::Should)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Must => "MUST",
            Kind::Should => "SHOULD",
            Kind::Free => "free",
            Kind::Overridden => "overridden",
        })
    }
}

/// An allowlisted guarantee with no invariant.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gap {
    pub reason: String,
    /// The id of the invariant that will close the gap, once it exists.
    pub awaits: Option<String>,
}

/// Something wrong with the clause list, or a guarantee the suite misses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem(pub String);

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The texts the quotes are checked against.
#[derive(Debug, Clone)]
pub struct SpecTexts {
    /// `spec/rev2.txt`.
    pub rev2: String,
    /// `spec/reference-semantics.md`.
    pub semantics: String,
}

impl SpecTexts {
    pub fn read(root: &Path) -> std::io::Result<SpecTexts> {
        Ok(SpecTexts {
            rev2: std::fs::read_to_string(root.join("spec/rev2.txt"))?,
            semantics: std::fs::read_to_string(root.join("spec/reference-semantics.md"))?,
        })
    }
}

/// One clause with the invariants that hold it.
#[derive(Debug, Clone)]
pub struct Covered<'a> {
    pub clause: &'a Clause,
    /// Invariants whose sources cite the clause, in catalog order.
    pub cited: Vec<&'static Invariant>,
    /// Invariants the data links (they check it without citing it).
    pub linked: Vec<&'static Invariant>,
}

impl Covered<'_> {
    /// The invariants that hold the clause for rev2 (cited, then linked).
    pub fn rev2(&self) -> impl Iterator<Item = &'static Invariant> + '_ {
        self.cited
            .iter()
            .chain(&self.linked)
            .copied()
            .filter(|i| i.applies_to(Revision::Rev2))
    }

    /// Held by at least one rev2 invariant.
    pub fn has_invariant(&self) -> bool {
        self.rev2().next().is_some()
    }

    /// Held only by generic invariants.
    pub fn generic_only(&self) -> bool {
        self.has_invariant() && self.rev2().all(|i| GENERIC.contains(&i.id))
    }
}

/// The clause list joined with the catalog.
#[derive(Debug, Clone)]
pub struct Coverage<'a> {
    pub file: &'a ClauseFile,
    pub clauses: Vec<Covered<'a>>,
    pub problems: Vec<Problem>,
}

/// Parses the clause file.
pub fn parse(text: &str) -> Result<ClauseFile, String> {
    toml::from_str(text).map_err(|e| format!("{CLAUSES_FILE}: {e}"))
}

/// Doc words as the catalog and the clauses write them: `<code>` as a backtick, `<br/>` as a
/// space.
pub fn normalize(text: &str) -> String {
    text.replace("<code>", "`")
        .replace("</code>", "`")
        .replace("<br/>", " ")
}

fn without_ticks(text: &str) -> String {
    text.replace('`', "")
}

/// Whether a clause's quote holds the words a catalog entry cites.
fn quote_holds(quote: &str, words: &str) -> bool {
    quote.contains(words) || without_ticks(quote).contains(&without_ticks(words))
}

/// The clauses an invariant's source names, or why it names none. `None`: the source is
/// outside this audit (a rev1-only invariant's doc words, or the scenario's scripts).
fn resolve<'c>(
    inv: &Invariant,
    source: &Source,
    clauses: &'c [Clause],
) -> Option<Result<&'c Clause, String>> {
    let found = |matches: Vec<&'c Clause>, what: String| match matches.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!("{what}: no clause of {CLAUSES_FILE} holds it")),
        many => Err(format!(
            "{what}: several clauses hold it ({}); quote it in one",
            many.iter()
                .map(|c| c.id.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    };
    match source {
        Source::Scenario => None,
        Source::Doc(_) if !inv.applies_to(Revision::Rev2) => None,
        Source::Doc(words) => Some(found(
            clauses
                .iter()
                .filter(|c| {
                    matches!(c.part, Part::Prose | Part::Node) && quote_holds(&c.quote, words)
                })
                .collect(),
            format!("{} cites the doc's \u{201c}{words}\u{201d}", inv.id),
        )),
        Source::Edge(from, to) => Some(found(
            clauses
                .iter()
                .filter(|c| c.edge.as_deref() == Some(&format!("{from} -> {to}")))
                .collect(),
            format!("{} cites the edge {from} -> {to}", inv.id),
        )),
        Source::Semantics(_) => None,
    }
}

/// The semantics clauses an invariant's source names: `sem-N` for each item N.
fn resolve_items<'c>(
    inv: &Invariant,
    items: &[u32],
    clauses: &'c [Clause],
) -> Vec<Result<&'c Clause, String>> {
    items
        .iter()
        .map(|n| {
            let id = format!("sem-{n}");
            clauses.iter().find(|c| c.id == id).ok_or_else(|| {
                format!(
                    "{} cites reference semantics {n}: {CLAUSES_FILE} has no clause `{id}`",
                    inv.id
                )
            })
        })
        .collect()
}

/// The clauses an invariant cites (each once, in clause order), with the problems met.
pub fn cited_clauses<'c>(
    inv: &Invariant,
    clauses: &'c [Clause],
) -> (BTreeSet<&'c str>, Vec<Problem>) {
    let mut ids = BTreeSet::new();
    let mut problems = Vec::new();
    for source in inv.sources {
        let results: Vec<Result<&Clause, String>> = match source {
            Source::Semantics(items) => resolve_items(inv, items, clauses),
            other => resolve(inv, other, clauses).into_iter().collect(),
        };
        for result in results {
            match result {
                Ok(clause) => {
                    ids.insert(clause.id.as_str());
                }
                Err(message) => problems.push(Problem(message)),
            }
        }
    }
    (ids, problems)
}

/// Why an invariant may cite no clause of this audit, if it may.
pub fn exempt(inv: &Invariant) -> Option<&'static str> {
    if inv.sources.iter().all(|s| matches!(s, Source::Scenario)) {
        return Some("drive mode only: it checks the scenario's own expectations");
    }
    if !inv.applies_to(Revision::Rev2)
        && inv
            .sources
            .iter()
            .all(|s| matches!(s, Source::Doc(_) | Source::Scenario))
    {
        return Some("rev1 only: it quotes rev1, which this audit does not cover");
    }
    None
}

impl<'a> Coverage<'a> {
    /// Joins the clause list with the catalog and checks both against the spec.
    pub fn build(file: &'a ClauseFile, spec: &SpecTexts) -> Coverage<'a> {
        let mut problems = Vec::new();
        let mut cited: BTreeMap<&str, Vec<&'static Invariant>> = BTreeMap::new();
        for inv in CATALOG {
            let (ids, found) = cited_clauses(inv, &file.clauses);
            problems.extend(found);
            if ids.is_empty() && exempt(inv).is_none() {
                problems.push(Problem(format!(
                    "{} cites no clause of {CLAUSES_FILE}: give it a source, or a reason to be exempt",
                    inv.id
                )));
            }
            for id in ids {
                cited.entry(id).or_default().push(inv);
            }
        }
        let mut clauses = Vec::new();
        for clause in &file.clauses {
            let cited = cited.remove(clause.id.as_str()).unwrap_or_default();
            let mut linked = Vec::new();
            for name in &clause.invariants {
                match InvariantId::from_str(name) {
                    Ok(id) => {
                        let inv = tep_check::invariant(id);
                        if cited.iter().any(|c| c.id == id) {
                            problems.push(Problem(format!(
                                "{}: `{name}` already cites this clause; list only invariants that do not",
                                clause.id
                            )));
                        } else if linked.iter().any(|l: &&Invariant| l.id == id) {
                            problems
                                .push(Problem(format!("{}: `{name}` is listed twice", clause.id)));
                        } else {
                            linked.push(inv);
                        }
                    }
                    Err(_) => problems.push(Problem(format!(
                        "{}: invariant `{name}` is not in the catalog (`tep invariants list`)",
                        clause.id
                    ))),
                }
            }
            clauses.push(Covered {
                clause,
                cited,
                linked,
            });
        }
        problems.extend(check::shape(file, spec));
        problems.extend(gaps(file, &clauses));
        Coverage {
            file,
            clauses,
            problems,
        }
    }

    /// The clauses of one part, in file order.
    pub fn part(&self, part: Part) -> impl Iterator<Item = &Covered<'a>> {
        self.clauses.iter().filter(move |c| c.clause.part == part)
    }

    /// The guarantees no rev2 invariant holds.
    pub fn uncovered(&self) -> impl Iterator<Item = &Covered<'a>> {
        self.clauses
            .iter()
            .filter(|c| c.clause.kind.is_guarantee() && !c.has_invariant())
    }
}

/// The problems of the allowlist against the coverage: a guarantee with no invariant that it
/// does not name, and entries that no longer fit.
fn gaps(file: &ClauseFile, clauses: &[Covered<'_>]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for c in clauses {
        let listed = file.gaps.get(&c.clause.id);
        match (c.clause.kind.is_guarantee(), c.has_invariant(), listed) {
            (true, false, None) => problems.push(Problem(format!(
                "{}: a guarantee ({}) with no invariant: add one, or list it under [gaps] in {CLAUSES_FILE} with the reason",
                c.clause.id, c.clause.kind
            ))),
            (true, true, Some(_)) => problems.push(Problem(format!(
                "{}: listed under [gaps] but held by {}: remove it from the allowlist",
                c.clause.id,
                c.rev2().map(|i| i.id.as_str()).collect::<Vec<_>>().join(", ")
            ))),
            (false, _, Some(_)) => problems.push(Problem(format!(
                "{}: listed under [gaps] but it is {}, not a guarantee",
                c.clause.id, c.clause.kind
            ))),
            _ => {}
        }
    }
    for (id, gap) in &file.gaps {
        if !clauses.iter().any(|c| &c.clause.id == id) {
            problems.push(Problem(format!("[gaps] names `{id}`, which is no clause")));
        }
        if gap.reason.trim().is_empty() {
            problems.push(Problem(format!("[gaps] `{id}` has no reason")));
        }
        if let Some(awaited) = gap
            .awaits
            .as_deref()
            .filter(|a| InvariantId::from_str(a).is_ok())
        {
            problems.push(Problem(format!(
                "[gaps] `{id}` awaits `{awaited}`, which is in the catalog now: cite or list it under clause `{id}` and remove the gap"
            )));
        }
    }
    problems
}

/// The stage graph the clauses' nodes and edges are checked against.
pub fn rev2_graph() -> &'static StageGraph {
    StageGraph::of(Revision::Rev2)
}

/// A node id of the rev2 flowchart.
pub fn rev2_node(name: &str) -> Option<NodeId> {
    NodeId::from_str(name)
        .ok()
        .filter(|n| rev2_graph().nodes().iter().any(|x| x.id == *n))
}
