//! Where mutation starts: recorded reference traces (and mutant traces, which break invariants on
//! purpose), the scenario corpus, and protocol exchanges built from both.

use tep_conformance::protocol::{Request, RunAnswer, RunOutcome};
use tep_conformance::runner::{BuiltinReference, Implementation};
use tep_conformance::scenario::{Scenario, corpus, corpus_files};
use tep_conformance::scripted::run_reference;
use tep_model::graph::Revision;
use tep_model::trace::{TraceRecord, to_jsonl};
use tep_reference::mutant::Mutant;

use crate::Target;

/// How many seeds to record: a few for `cargo test`, all for a long run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeedSet {
    /// Every scenario under rev2, and every mutant on two scenarios.
    Small,
    /// Every scenario under every revision it applies to, and every mutant on every scenario.
    Full,
}

/// The scenarios whose mutant traces seed a small set: between them they reach every stage.
const SMALL_MUTANT_SCENARIOS: [&str; 2] = ["mixed-batch", "code-mode-every-path"];

/// The starting inputs of each target.
#[derive(Debug, Clone, Default)]
pub struct Seeds {
    pub traces: Vec<Vec<u8>>,
    pub scenarios: Vec<Vec<u8>>,
    pub protocol: Vec<Vec<u8>>,
}

impl Seeds {
    /// Records the seeds. Panics only if the embedded corpus is broken (a build problem).
    pub fn record(set: SeedSet) -> Seeds {
        let corpus = corpus().unwrap_or_else(|e| panic!("the embedded corpus is invalid: {e}"));
        let mut traces: Vec<(String, Vec<TraceRecord>)> = Vec::new();
        for scenario in &corpus {
            for revision in revisions(set, scenario) {
                if let Ok(records) = run_reference(scenario, revision, &[]) {
                    traces.push((scenario.id.clone(), records));
                }
            }
        }
        for scenario in corpus
            .iter()
            .filter(|s| set == SeedSet::Full || SMALL_MUTANT_SCENARIOS.contains(&s.id.as_str()))
        {
            for &mutant in Mutant::ALL {
                if let Ok(records) = run_reference(scenario, Revision::Rev2, &[mutant]) {
                    traces.push((scenario.id.clone(), records));
                }
            }
        }
        // As files (pretty) and on one line, where the JSON-aware mutations reach every value.
        let scenarios = corpus_files()
            .iter()
            .flat_map(|(_, text)| {
                let compact = serde_json::from_str::<serde_json::Value>(text)
                    .map(|v| v.to_string())
                    .unwrap_or_default();
                [text.as_bytes().to_vec(), compact.into_bytes()]
            })
            .collect();
        let protocol = protocol_seeds(&corpus, &traces);
        Seeds {
            traces: traces
                .iter()
                .map(|(_, records)| to_jsonl(records).into_bytes())
                .collect(),
            scenarios,
            protocol,
        }
    }

    pub fn of(&self, target: Target) -> &[Vec<u8>] {
        match target {
            Target::Trace => &self.traces,
            Target::Scenario => &self.scenarios,
            Target::Protocol => &self.protocol,
        }
    }
}

fn revisions(set: SeedSet, scenario: &Scenario) -> Vec<Revision> {
    match set {
        SeedSet::Small => vec![Revision::Rev2],
        SeedSet::Full => Revision::ALL
            .into_iter()
            .filter(|&r| scenario.applies_to(r))
            .collect(),
    }
}

fn line<T: serde::Serialize>(message: &T) -> String {
    serde_json::to_string(message).unwrap_or_default() + "\n"
}

/// Sessions as the reference adapter reads them (start, runs, stop), and answers as `tep run`
/// reads them (ready, then one answer per request: traces, skips, errors).
fn protocol_seeds(corpus: &[Scenario], traces: &[(String, Vec<TraceRecord>)]) -> Vec<Vec<u8>> {
    let start = line(&Request::Start { protocol: 1 });
    let ready = line(BuiltinReference::new(vec![]).ready());
    let mut seeds = Vec::new();
    for (seq, scenario) in corpus.iter().enumerate() {
        let run = line(&Request::Run {
            seq: seq as u64 + 1,
            spec: Revision::Rev2,
            scenario: Box::new(scenario.clone()),
        });
        seeds.push(format!("{start}{run}{}", line(&Request::Stop)).into_bytes());
    }
    for (seq, (_, records)) in traces.iter().enumerate() {
        let answer = line(&RunAnswer {
            seq: seq as u64 + 1,
            outcome: RunOutcome::Trace(records.clone()),
        });
        seeds.push(format!("{ready}{answer}").into_bytes());
    }
    let skipped = line(&RunAnswer {
        seq: 1,
        outcome: RunOutcome::Skipped {
            reason: "not wired yet".to_owned(),
        },
    });
    let errored = line(&RunAnswer {
        seq: 2,
        outcome: RunOutcome::Errored {
            message: "boom".to_owned(),
            context: Some("handler".to_owned()),
        },
    });
    seeds.push(format!("{ready}{skipped}{errored}").into_bytes());
    seeds
}
