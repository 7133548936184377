//! Trace mutations: the bugs the checker must catch, planted in valid traces.
//!
//! [`plant`] breaks one named invariant in a trace (when the trace has the stages needed), the
//! way a faulty implementation would: a body after a deny, a context before a result, a result
//! that differs from the announced outcome. Each fault is written beside its invariant's rule
//! (`crate::rules`, `Rule::plants`); [`plant`] looks it up. The corpus tests plant every
//! invariant each scenario claims to exercise and require the checker to report exactly that
//! id; the property tests use the structural mutations ([`Structural`]) at random.

use tep_model::trace::TraceRecord;

use crate::invariants::InvariantId;
use crate::rules::RULES;

/// Plants a breach of `id` in `records`; `None` when the trace has nothing to break it with
/// (a scenario that claims to exercise `id` must always allow it).
pub fn plant(id: InvariantId, records: &[TraceRecord]) -> Option<Vec<TraceRecord>> {
    // Every rule plants its breach (`rules::tests::every_rule_plants_its_breach`).
    let fault = RULES.iter().find(|r| r.entry.id == id)?.plant?;
    let mut r = records.to_vec();
    fault(&mut r)?;
    Some(r)
}

/// Structural mutations for property tests: what goes wrong when records are lost, repeated or
/// reordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Structural {
    /// Drop record `i`.
    Drop(usize),
    /// Repeat record `i` right after itself.
    Duplicate(usize),
    /// Swap records `i` and `i + 1`.
    SwapWithNext(usize),
}

impl Structural {
    /// The records with this mutation applied.
    pub fn apply(self, records: &[TraceRecord]) -> Vec<TraceRecord> {
        let mut r = records.to_vec();
        match self {
            Structural::Drop(i) if i < r.len() => {
                r.remove(i);
            }
            Structural::Duplicate(i) if i < r.len() => {
                let dup = r[i].clone();
                r.insert(i + 1, dup);
            }
            Structural::SwapWithNext(i) if i + 1 < r.len() => r.swap(i, i + 1),
            _ => {}
        }
        r
    }
}
