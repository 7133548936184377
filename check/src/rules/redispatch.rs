//! A retry's re-dispatch passes through the `tools/execute` wrappers inside the retry.
//!
//! The doc draws one box, "timeout, retry, metrics (around dispatch)", and says "Around-dispatch
//! concerns such as timeouts wrap `tools/execute`": each dispatch of the body is wrapped by every
//! wrapper registered inside the one that dispatches it. A waterfall that keeps one index per
//! run (deepseek-harness 0.1.0-rc.8's) sends a retry's second `next()` straight to the body:
//! the second attempt runs with no deadline and no inner wrapper. The doc says so only by the
//! box it draws, so the level is SHOULD.
//!
//! The check needs the scenario (which wrappers sit inside the retry), so it is drive mode's
//! (`tep_conformance::redispatch`); its evidence is in the trace: the result handed to
//! post-execute of a call whose body was dispatched again carries the context of each context
//! wrapper inside the retry (and above every timeout, whose own result carries none).

use tep_model::graph::NodeId as N;
use tep_model::result::ContextOrigin;

use super::Rule;
use super::plant::{call_of, find, find_after, is_stage, stage_mut};
use crate::invariants::{
    CheckKind::Expectation,
    InvariantId as I,
    Level::Should,
    Read,
    Source::{Doc, Scenario as Scripts, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const REDISPATCH_THROUGH_WRAPPERS: Rule = Rule::new(entry(
    I::RedispatchThroughWrappers,
    Should,
    "A retry's re-dispatch passes through the `tools/execute` wrappers registered inside the retry, as the first dispatch does: every dispatch of the body is wrapped alike (a timeout inside the retry times each attempt).",
    &[
        Doc("timeout, retry, metrics (around dispatch)"),
        Doc("Around-dispatch concerns such as timeouts wrap `tools/execute`"),
        Semantics(&[25, 31]),
        Scripts,
    ],
    Expectation,
    Hooks,
    &[Read::Scenario],
))
.plants(|r| {
    // The retry's second `next()` goes straight to the body: the result it hands up lacks the
    // contexts of the wrappers it skipped, from post-execute on.
    let first = find(r, |x| is_stage(x, N::ToolBody))?;
    let call = call_of(&r[first])?.clone();
    let second = find_after(r, first, &call, |x| is_stage(x, N::ToolBody))?;
    let post = find_after(r, second, &call, |x| is_stage(x, N::Post))?;
    let mut dropped = false;
    for record in r.iter_mut().skip(post) {
        if call_of(record) != Some(&call) {
            continue;
        }
        if let Some(result) = stage_mut(record).and_then(|o| o.result_mut()) {
            let before = result.additional_contexts.len();
            result
                .additional_contexts
                .retain(|c| c.origin != ContextOrigin::Wrapper);
            dropped |= result.additional_contexts.len() < before;
        }
    }
    dropped.then_some(())
});
