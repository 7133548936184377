//! What the checker's tests share: the corpus traces and drive mode's options for them, and
//! ways to find and move a trace's records.
//!
//! The traces are the reference's, as the conformance crate snapshots them
//! (`conformance/tests/snapshots/trace@<scenario>.<rev>.snap`, held fresh by
//! `conformance/tests/it/traces.rs`), and so are each scenario's facts (`facts@<scenario>.snap`):
//! read in place, they are one copy that one review (`cargo insta review`) keeps current, and
//! these tests need neither the reference nor a runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::OnceLock;

use tep_check::{
    Capability, CheckOptions, InvariantId, NodeId, ObservationLevel, Revision, ScenarioFacts,
    TraceHeader, TraceRecord, Violation, check_records,
};
use tep_model::identity::CallId;
use tep_model::trace::MarkKind;

const SNAPSHOTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../conformance/tests/snapshots"
);

/// A corpus scenario as these tests know it: its id, the revisions it has a trace in, and
/// what its scripts say that its traces do not.
#[derive(Debug)]
pub struct Scenario {
    pub id: String,
    pub revisions: Vec<Revision>,
    pub facts: ScenarioFacts,
}

impl Scenario {
    pub fn applies_to(&self, revision: Revision) -> bool {
        self.revisions.contains(&revision)
    }
}

/// The text of a snapshot after insta's front matter (`---` … `---`).
fn snapshot_body(path: &Path) -> String {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let rest = text
        .strip_prefix("---\n")
        .and_then(|t| t.split_once("\n---\n"))
        .unwrap_or_else(|| panic!("{} has no front matter", path.display()))
        .1;
    rest.to_owned()
}

/// Every scenario with a facts snapshot, by id.
pub fn corpus() -> &'static [Scenario] {
    static CORPUS: OnceLock<Vec<Scenario>> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut scenarios = Vec::new();
        let entries = std::fs::read_dir(SNAPSHOTS).unwrap_or_else(|e| panic!("{SNAPSHOTS}: {e}"));
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let Some(id) = name
                .strip_prefix("facts@")
                .and_then(|n| n.strip_suffix(".snap"))
            else {
                continue;
            };
            let facts = serde_json::from_str(&snapshot_body(&path))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            let revisions = Revision::ALL
                .into_iter()
                .filter(|r| Path::new(SNAPSHOTS).join(trace_file(id, *r)).exists())
                .collect();
            scenarios.push(Scenario {
                id: id.to_owned(),
                revisions,
                facts,
            });
        }
        scenarios.sort_by(|a, b| a.id.cmp(&b.id));
        assert!(scenarios.len() > 50, "{} scenarios", scenarios.len());
        scenarios
    })
}

fn trace_file(id: &str, revision: Revision) -> String {
    format!("trace@{id}.{revision}.snap")
}

pub fn scenario(id: &str) -> &'static Scenario {
    corpus()
        .iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("no scenario {id}"))
}

/// The reference's trace of scenario `id` in `revision`, after the header the reference
/// writes (the snapshot leaves it out: it names the crate's version).
pub fn trace_in(id: &str, revision: Revision) -> Vec<TraceRecord> {
    type Traces = BTreeMap<(String, Revision), Vec<TraceRecord>>;
    static TRACES: OnceLock<std::sync::Mutex<Traces>> = OnceLock::new();
    let traces = TRACES.get_or_init(Default::default);
    let key = (id.to_owned(), revision);
    if let Some(records) = traces.lock().unwrap().get(&key) {
        return records.clone();
    }
    let path = Path::new(SNAPSHOTS).join(trace_file(id, revision));
    let mut records = vec![TraceRecord::Header(TraceHeader {
        spec: revision,
        implementation: Some("tep-reference".to_owned()),
        capabilities: Some(Capability::ALL.to_vec()),
        observation: Some(ObservationLevel::Full),
    })];
    for (i, line) in snapshot_body(&path).lines().enumerate() {
        let record = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), i + 1));
        records.push(record);
    }
    traces.lock().unwrap().insert(key, records.clone());
    records
}

/// The reference's trace of scenario `id` (rev2).
pub fn trace(id: &str) -> Vec<TraceRecord> {
    trace_in(id, Revision::Rev2)
}

/// Every corpus trace of `revision`, one batch after the other, headers dropped and session
/// seqs renumbered so the log stays increasing: the mix of records real runs produce.
pub fn corpus_mix(revision: Revision) -> Vec<TraceRecord> {
    let mut out = Vec::new();
    let mut last_seq = 0;
    for s in corpus().iter().filter(|s| s.applies_to(revision)) {
        let base = last_seq;
        for mut record in trace_in(&s.id, revision) {
            match &mut record {
                TraceRecord::Header(_) => continue,
                TraceRecord::Event(e) => {
                    e.event.seq += base;
                    if let Some(sources) = e.event.source_event_seqs.as_mut() {
                        sources.iter_mut().for_each(|s| *s += base);
                    }
                    last_seq = e.event.seq;
                }
                _ => {}
            }
            out.push(record);
        }
    }
    out
}

/// Drive mode's options for scenario `id` at `level` (rev2).
pub fn options(id: &str, level: ObservationLevel) -> CheckOptions {
    drive_options(scenario(id), Revision::Rev2, level)
}

/// Drive mode's options for a scenario in `revision` at `level`.
pub fn drive_options(s: &Scenario, revision: Revision, level: ObservationLevel) -> CheckOptions {
    CheckOptions::new(revision)
        .observed(level)
        .with_facts(s.facts.clone())
}

/// Every violation the checker reports, in its order.
pub fn findings(options: &CheckOptions, records: &[TraceRecord]) -> Vec<Violation> {
    check_records(options, records)
        .unwrap_or_else(|e| panic!("{e}"))
        .violations
}

pub fn violations(options: &CheckOptions, records: &[TraceRecord]) -> BTreeSet<InvariantId> {
    check_records(options, records)
        .unwrap_or_else(|e| panic!("{e}"))
        .invariants()
}

pub fn position(records: &[TraceRecord], pred: impl Fn(&TraceRecord) -> bool) -> usize {
    records.iter().position(pred).expect("the record is there")
}

pub fn is_stage(node: NodeId, call: &str) -> impl Fn(&TraceRecord) -> bool + '_ {
    move |r| matches!(r, TraceRecord::Stage(o) if o.node == node && o.call.as_ref().map(CallId::as_str) == Some(call))
}

pub fn is_event<'a>(ty: &'a str, call: &'a str) -> impl Fn(&TraceRecord) -> bool + 'a {
    move |r| matches!(r, TraceRecord::Event(e) if e.event.body.type_name() == ty && r.call().map(CallId::as_str) == Some(call))
}

/// The mark of a sub-call's binding settling in the program (resolved or rejected).
pub fn is_binding_settled(call: &str) -> impl Fn(&TraceRecord) -> bool + '_ {
    move |r| {
        matches!(r, TraceRecord::Mark(m) if m.call.as_str() == call
            && matches!(m.mark, MarkKind::BindingResolved | MarkKind::BindingRejected))
    }
}

/// Moves the record at `from` to stand before the record now at `to`.
pub fn move_record(records: &mut Vec<TraceRecord>, from: usize, to: usize) {
    let r = records.remove(from);
    records.insert(if to > from { to - 1 } else { to }, r);
}

#[test]
fn the_snapshots_hold_every_scenario_in_a_revision_with_its_facts() {
    let corpus = corpus();
    assert!(corpus.iter().all(|s| !s.revisions.is_empty()));
    let traces = corpus.iter().map(|s| s.revisions.len()).sum::<usize>();
    let files = std::fs::read_dir(SNAPSHOTS)
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with("trace@")
        })
        .count();
    assert_eq!(traces, files, "a trace snapshot without a facts snapshot");
    // Every trace reads back whole and settles its batch.
    for s in corpus {
        for &revision in &s.revisions {
            let records = trace_in(&s.id, revision);
            assert!(
                records.iter().any(|r| r.node() == Some(NodeId::AllResults)),
                "{} {revision}",
                s.id
            );
        }
    }
}
