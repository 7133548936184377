//! After shrinking: dropping the parts of a failing scenario it does not need, one at a time,
//! while the same check still fails. proptest's shrinking simplifies values inside the shape
//! it generated, so a `timeout` wrapper or a file the failure never needed can survive it; this
//! pass removes whole parts (a wrapper, a file, a listener, a guard, an observer, the approval,
//! a tool no call names, a call) until none can go.

use super::{CONFIRM_RUNS, Check, Failing, Judge, Verdict, fails_with, replays_failing, run_one};
use crate::runner::Implementation;
use crate::scenario::Scenario;
use crate::scenario::versions::versions;

/// At most this many runs for the pass.
pub(super) const MAX_MINIMISE_RUNS: usize = 200;

/// What the pass needs: the implementation and how to judge it, the adapter's protocol, the
/// run's stop and its request numbers.
pub(super) struct Minimising<'a> {
    pub(super) implementation: &'a mut dyn Implementation,
    pub(super) judge: &'a Judge,
    pub(super) protocol: u32,
    pub(super) stopped: &'a dyn Fn() -> bool,
    pub(super) seq: &'a mut u64,
}

/// What the pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Minimised {
    /// The parts dropped, as `wrapper timeout`, `file notes.txt`.
    pub dropped: Vec<String>,
    pub runs: usize,
    /// It stopped before trying every part (its budget, or a stop).
    pub cut_short: bool,
}

impl Minimising<'_> {
    /// Drops from `scenario` every part whose absence still fails `check`, to a fixed point.
    pub(super) fn minimise(
        &mut self,
        scenario: Scenario,
        failing: Vec<Failing>,
        check: Check,
    ) -> (Scenario, Vec<Failing>, Minimised) {
        let mut best = (scenario, failing);
        let mut done = Minimised::default();
        'again: loop {
            for (part, candidate) in without_one_part(&best.0) {
                if done.runs >= MAX_MINIMISE_RUNS || (self.stopped)() {
                    done.cut_short = true;
                    break 'again;
                }
                let sendable = candidate.validate().is_ok()
                    && versions().newer_than(&candidate, self.protocol).is_empty();
                if !sendable {
                    continue;
                }
                done.runs += 1;
                *self.seq += 1;
                // Kept only if it fails on every replay too, as the shrinker keeps its
                // reductions: a flaky failure must not choose what is dropped.
                if let Verdict::Fails(f) =
                    run_one(&mut *self.implementation, self.judge, *self.seq, &candidate)
                    && fails_with(&f, check)
                    && replays_failing(
                        &mut *self.implementation,
                        self.judge,
                        self.seq,
                        &candidate,
                        check,
                        self.stopped,
                    ) == Some(CONFIRM_RUNS - 1)
                {
                    done.dropped.push(part);
                    best = (candidate, f);
                    continue 'again;
                }
            }
            break;
        }
        (best.0, best.1, done)
    }
}

/// Each scenario `scenario` is without one of its parts, named.
pub(super) fn without_one_part(scenario: &Scenario) -> Vec<(String, Scenario)> {
    let mut out = Vec::new();
    let mut with = |part: String, change: &dyn Fn(&mut Scenario)| {
        let mut s = scenario.clone();
        change(&mut s);
        out.push((part, s));
    };
    for (i, w) in scenario.wrappers.iter().enumerate() {
        let name = serde_json::to_value(w)
            .ok()
            .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(str::to_owned))
            .unwrap_or_else(|| format!("#{}", i + 1));
        with(format!("wrapper {name}"), &|s| {
            s.wrappers.remove(i);
        });
    }
    for path in scenario.files.keys() {
        with(format!("file {path}"), &|s| {
            s.files.remove(path);
        });
    }
    if scenario.approval.is_some() {
        with("the approval".to_owned(), &|s| s.approval = None);
    }
    for i in 0..scenario.pre.len() {
        with(format!("pre-execute listener {}", i + 1), &|s| {
            s.pre.remove(i);
        });
    }
    for i in 0..scenario.guards.len() {
        with(format!("guard {}", i + 1), &|s| {
            s.guards.remove(i);
        });
    }
    for i in 0..scenario.post.len() {
        with(format!("post-execute listener {}", i + 1), &|s| {
            s.post.remove(i);
        });
    }
    for i in 0..scenario.observers.len() {
        with(format!("observer {}", i + 1), &|s| {
            s.observers.remove(i);
        });
    }
    for (i, tool) in scenario.tools.iter().enumerate() {
        if !scenario.calls.iter().any(|c| c.tool == tool.name) {
            with(format!("tool {}", tool.name), &|s| {
                s.tools.remove(i);
            });
        }
    }
    if scenario.calls.len() > 1 {
        for (i, call) in scenario.calls.iter().enumerate() {
            with(format!("call {}", call.call_id), &|s| {
                s.calls.remove(i);
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::runner::BuiltinReference;
    use crate::scenario::{WrapperSpec, corpus};
    use tep_check::CheckOptions;
    use tep_check::invariants::InvariantId;
    use tep_model::graph::Revision;

    use tep_reference::mutant::Mutant;

    #[test]
    fn a_wrapper_and_a_file_the_failure_does_not_need_are_dropped() {
        let corpus = corpus().unwrap();
        let mut scenario = corpus
            .iter()
            .find(|s| s.id == "pre-deny-skips-body")
            .unwrap()
            .clone();
        scenario.wrappers.push(WrapperSpec::Metrics);
        scenario
            .files
            .insert("unused.txt".to_owned(), "nobody reads me".to_owned());
        let mut reference = BuiltinReference::new(vec![Mutant::RunBodyAfterDeny]);
        let judge = Judge {
            check: CheckOptions::new(Revision::Rev2),
            strict: false,
            oracle: false,
        };
        let mut seq = 0;
        let Verdict::Fails(failing) = run_one(&mut reference, &judge, 0, &scenario) else {
            panic!("the mutant fails it");
        };
        let check = Check {
            invariant: InvariantId::DenySkipsBody,
            oracle: None,
        };
        let (smaller, still, done) = Minimising {
            implementation: &mut reference,
            judge: &judge,
            protocol: 3,
            stopped: &|| false,
            seq: &mut seq,
        }
        .minimise(scenario.clone(), failing, check);
        assert!(
            done.dropped.contains(&"wrapper metrics".to_owned()),
            "{done:?}"
        );
        assert!(
            done.dropped.contains(&"file unused.txt".to_owned()),
            "{done:?}"
        );
        assert!(!done.cut_short);
        assert!(smaller.wrappers.is_empty() && smaller.files.is_empty());
        assert!(fails_with(&still, check));
        // What the failure needs stays: the denial and the call.
        assert_eq!(smaller.calls.len(), 1);
        assert!(!smaller.pre.is_empty());
        // Each candidate ran once; each one kept was replayed until it had run CONFIRM_RUNS times.
        let replays = done.dropped.len() * (CONFIRM_RUNS - 1);
        assert_eq!(seq, (done.runs + replays) as u64);
    }

    #[test]
    fn each_candidate_lacks_exactly_the_part_it_names() {
        let corpus = corpus().unwrap();
        let mut rich = corpus
            .iter()
            .find(|s| !s.wrappers.is_empty())
            .unwrap()
            .clone();
        rich.wrappers.push(WrapperSpec::Metrics);
        rich.files.insert("a.txt".to_owned(), "a".to_owned());
        rich.files.insert("b.txt".to_owned(), "b".to_owned());
        let rich = &rich;
        let candidates = without_one_part(rich);
        let wrappers = candidates
            .iter()
            .filter(|(part, _)| part.starts_with("wrapper "))
            .count();
        assert_eq!(wrappers, rich.wrappers.len());
        for (part, s) in &candidates {
            if let Some(path) = part.strip_prefix("file ") {
                assert!(!s.files.contains_key(path) && rich.files.contains_key(path));
                assert_eq!(s.files.len() + 1, rich.files.len());
            }
            if part.starts_with("wrapper ") {
                assert_eq!(s.wrappers.len() + 1, rich.wrappers.len());
                assert_eq!(s.files, rich.files);
            }
        }
    }
}
