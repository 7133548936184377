//! A harness may record its own Code Mode sub-call ids (docs/adapter-protocol.md): the suite
//! finds a sub-call by its parent and its place in the dispatch order, never by the literal
//! `<parent>:code:<n>`. Renaming every sub-call of a trace changes no verdict.

use crate::common::{drive_options, scenario};

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use tep_check::invariants::InvariantId;
use tep_conformance::fuzz::{Profile, generate};
use tep_conformance::oracle;
use tep_conformance::outcome::Coverage;
use tep_conformance::runner::judge;
use tep_conformance::scenario::{Scenario, corpus};
use tep_conformance::scripted::run_reference;
use tep_model::graph::Revision;
use tep_model::identity::CallId;
use tep_model::session::EventBody;
use tep_model::trace::{Capability, ObservationLevel, TraceRecord};

/// Every sub-call id of `records` replaced by `name(old)`.
fn rename(records: &[TraceRecord], name: &dyn Fn(&CallId) -> Option<CallId>) -> Vec<TraceRecord> {
    let swap = |id: &mut CallId| {
        if let Some(new) = name(id) {
            *id = new;
        }
    };
    let mut out = records.to_vec();
    for r in &mut out {
        match r {
            TraceRecord::Stage(o) => {
                if let Some(c) = o.call.as_mut() {
                    swap(c);
                }
                if let Some(identity) = o.identity.as_mut() {
                    swap(&mut Arc::make_mut(identity).call_id);
                }
            }
            TraceRecord::Event(e) => {
                if let Some(c) = e.call.as_mut() {
                    swap(c);
                }
                match &mut e.event.body {
                    EventBody::CodeDispatchStart(d) => swap(&mut d.sub_call_id),
                    EventBody::CodeDispatch(d) => swap(&mut d.sub_call_id),
                    EventBody::ApprovalAsked(d) => {
                        if let Some(c) = d.call_id.as_mut() {
                            swap(c);
                        }
                    }
                    _ => {}
                }
            }
            TraceRecord::Mark(m) => swap(&mut m.call),
            TraceRecord::Request(q) => {
                for c in q.messages.iter_mut().filter_map(|m| m.call_id.as_mut()) {
                    swap(c);
                }
            }
            TraceRecord::Header(_) => {}
        }
    }
    out
}

/// Numbers that continue across the runs of a retried program (a new `toolBody` of the
/// `run_code` call starts a run): the reference's `<parent>:code:<n>` of each run becomes
/// `<parent>:code:<m>`, `m` counting every sub-call of the call so far.
fn continued(records: &[TraceRecord]) -> Vec<TraceRecord> {
    let mut total: HashMap<CallId, usize> = HashMap::new();
    let mut current: HashMap<CallId, CallId> = HashMap::new();
    let mut last: HashMap<CallId, CallId> = HashMap::new();
    let mut names: Vec<HashMap<CallId, CallId>> = Vec::new();
    for r in records {
        if let TraceRecord::Stage(o) = r
            && o.node == tep_model::graph::NodeId::ToolBody
            && o.parent.is_none()
            && let Some(call) = &o.call
        {
            // A new run of the program: its ids start over in the reference.
            current.retain(|sub, _| !sub.as_str().starts_with(&format!("{call}:code:")));
        }
        // Only a record of the sub-call's own stages starts one; a later mark of an earlier
        // run's sub-call (its binding settling) still names that one.
        let starts = match r {
            TraceRecord::Stage(o) => o.parent.is_some(),
            TraceRecord::Event(e) => matches!(
                e.event.body,
                EventBody::CodeDispatchStart(_) | EventBody::CodeDispatch(_)
            ),
            _ => false,
        };
        let sub = r.call().filter(|c| arbitrary(c).is_some()).cloned();
        if let Some(sub) = sub
            && starts
            && !current.contains_key(&sub)
        {
            let (parent, _) = sub.as_str().rsplit_once(":code:").unwrap();
            let parent = CallId::from(parent);
            let n = total.entry(parent.clone()).or_default();
            *n += 1;
            current.insert(sub.clone(), parent.code_sub_call(*n));
            last.insert(sub.clone(), parent.code_sub_call(*n));
        }
        let mut known = last.clone();
        known.extend(current.clone());
        names.push(known);
    }
    records
        .iter()
        .zip(names)
        .flat_map(|(r, names)| rename(std::slice::from_ref(r), &|id| names.get(id).cloned()))
        .collect()
}

/// Arbitrary ids: `<parent>:code:<n>` becomes `sub-<n>-of-<parent>`.
fn arbitrary(id: &CallId) -> Option<CallId> {
    let (parent, n) = id.as_str().rsplit_once(":code:")?;
    Some(CallId::from(format!("sub-{n}-of-{parent}").as_str()))
}

/// What a run says of a trace: whether it fails (MUST only), the invariants it names with
/// `--strict` (but `sub-call-id-scheme` for arbitrary ids: the SHOULD that the ids follow the
/// reference's scheme, which they do not; numbers continued across runs do), and why it errored.
type Verdict = (bool, BTreeSet<InvariantId>, Option<String>);

fn verdict(id: &str, level: ObservationLevel, records: Vec<TraceRecord>, ids: Ids) -> Verdict {
    verdict_of(&scenario(id), level, records, ids)
}

#[derive(Clone, Copy, PartialEq)]
enum Ids {
    Reference,
    Arbitrary,
    Continued,
}

fn verdict_of(
    s: &Scenario,
    level: ObservationLevel,
    records: Vec<TraceRecord>,
    ids: Ids,
) -> Verdict {
    let s = s.clone();
    let options = drive_options(&s, Revision::Rev2, level);
    let result = judge(&s, &options, records, None, &mut Coverage::default());
    let mut named: BTreeSet<InvariantId> = result.failing_invariants(true);
    if ids == Ids::Arbitrary {
        named.remove(&InvariantId::SubCallIdScheme);
    }
    (result.fails(false), named, result.reason)
}

fn code_mode_scenarios() -> Vec<String> {
    corpus()
        .unwrap()
        .into_iter()
        .filter(|s| s.requires.contains(&Capability::CodeMode))
        .filter(|s| s.applies_to(Revision::Rev2))
        .map(|s| s.id)
        .collect()
}

#[test]
fn renaming_the_sub_calls_of_every_corpus_trace_changes_no_verdict() {
    let ids = code_mode_scenarios();
    assert!(ids.len() >= 5, "{ids:?}");
    let mut differ = HashMap::new();
    for id in &ids {
        let records = run_reference(&scenario(id), Revision::Rev2, &[]).unwrap();
        for level in ObservationLevel::ALL {
            let thin = tep_check::observation::thin(&records, level);
            let before = verdict(id, level, thin.clone(), Ids::Reference);
            let after = verdict(id, level, rename(&thin, &arbitrary), Ids::Arbitrary);
            if before != after {
                differ.insert(
                    format!("{id} at {level}, arbitrary ids"),
                    (before.clone(), after),
                );
            }
            let renumbered = tep_check::observation::thin(&continued(&records), level);
            let after = verdict(id, level, renumbered, Ids::Continued);
            if before != after {
                differ.insert(
                    format!("{id} at {level}, continued numbers"),
                    (before, after),
                );
            }
        }
    }
    assert!(differ.is_empty(), "{differ:#?}");
}

/// Generated scenarios (`tep fuzz`'s generator, every capability): each with a `run_code` call,
/// its expectations from the oracle, run on the reference, judged as recorded and with its
/// sub-calls renamed both ways. Some programs are retried (a retry wrapper around a program
/// that throws): there the continued numbers differ from the reference's.
#[test]
fn renaming_the_sub_calls_of_generated_traces_changes_no_verdict() {
    let profile = Profile::new(Revision::Rev2, Capability::ALL);
    let (mut programs, mut retried) = (0, 0);
    for case in 0..400 {
        let s = generate(&profile, 38, case).unwrap();
        if !s.calls.iter().any(|c| c.program.is_some()) {
            continue;
        }
        let Some(expect) = oracle::expectations(&s, Revision::Rev2) else {
            continue;
        };
        let s = Scenario { expect, ..s };
        let Ok(records) = run_reference(&s, Revision::Rev2, &[]) else {
            continue;
        };
        programs += 1;
        let renumbered = continued(&records);
        if renumbered != records {
            retried += 1;
        }
        for level in ObservationLevel::ALL {
            let thin = |r: &[TraceRecord]| tep_check::observation::thin(r, level);
            let before = verdict_of(&s, level, thin(&records), Ids::Reference);
            for (scheme, renamed) in [
                (Ids::Arbitrary, rename(&thin(&records), &arbitrary)),
                (Ids::Continued, thin(&renumbered)),
            ] {
                let after = verdict_of(&s, level, renamed, scheme);
                let scheme = if scheme == Ids::Arbitrary {
                    "arbitrary ids"
                } else {
                    "continued numbers"
                };
                assert_eq!(
                    before,
                    after,
                    "case {case} of seed 38 at {level}, {scheme}:\n{}",
                    tep_conformance::fuzz::to_corpus_json(&s)
                );
            }
        }
    }
    assert!(programs >= 50, "{programs} generated programs");
    assert!(retried >= 1, "no retried program among {programs}");
}
