//! Drive mode: does a trace end the way the scenario's scripts determine?
//!
//! The two catalog entries live here, with the other rules; the check itself needs the
//! scenario, so it is drive mode's (`tep_conformance::expectations`). Everything is read from
//! the trace itself (dispatches, post-execute visits, the recorded
//! outcomes, the injected contexts), so an adapter reports nothing but its trace. Only what the
//! scripts and the spec (or the reference semantics) fix is checked: the outcome's `isError`,
//! how often bodies ran, whether post-execute ran and the injected contexts are MUST; texts the
//! reference semantics fix (`Error: <reason>`, a timeout's message) and error codes are SHOULD.
//! The reference's own wording where nothing fixes it (`referenceContent`) is only shown, as a
//! note, when an implementation words it differently.

use tep_model::graph::NodeId as N;
use tep_model::result::ContentBlock;
use tep_model::session::ToolResultData;
use tep_model::trace::TraceRecord;

use super::Rule;
use super::plant::{
    call_of, event_type, find, find_after, is_stage, is_top_level, result_data_mut,
};
use crate::invariants::{
    CheckKind::Expectation,
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Scenario as Scripts, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Events;

pub(crate) const EXPECTED_OUTCOME: Rule = Rule::new(entry(
    I::ExpectedOutcome,
    Must,
    "The run ends as the scenario's scripts determine: each call's `isError` and the injected contexts (at every level), which bodies ran and how often, and whether post-execute ran (from level `hooks`).",
    &[Scripts],
    Expectation,
    Events,
    &[Read::Scenario],
))
.plants(|r| {
    // The first call's outcome flips, as a pipeline that lost track of it would record.
    let f = find(r, |x| is_stage(x, N::Final) && is_top_level(x))?;
    let call = call_of(&r[f])?.clone();
    let tr = find_after(r, f, &call, |x| event_type(x) == Some("tool/result"))?;
    for i in [f, tr] {
        match &mut r[i] {
            TraceRecord::Stage(o) => {
                let res = o.result_mut()?;
                res.is_error = !res.is_error;
            }
            other => match result_data_mut(other)? {
                ToolResultData::Message(m) => {
                    let b = m.message.content.first_mut()?;
                    b.is_error = !b.is_error;
                }
                ToolResultData::Flat(fl) => fl.is_error = !fl.is_error,
            },
        }
    }
    Some(())
});

pub(crate) const EXPECTED_CONTENT: Rule = Rule::new(entry(
    I::ExpectedContent,
    Should,
    "The model-facing content and error codes are those the scripts and the reference semantics fix (`Error: <reason>` for a denial or a throw, the timeout's message, content kept verbatim); other wording is only shown for information.",
    &[Scripts, Semantics(&[22, 31, 42])],
    Expectation,
    Events,
    &[Read::Scenario],
))
.plants(|r| {
    let f = find(r, |x| is_stage(x, N::Final) && is_top_level(x))?;
    let call = call_of(&r[f])?.clone();
    let tr = find_after(r, f, &call, |x| event_type(x) == Some("tool/result"))?;
    let replace = |content: &mut Vec<ContentBlock>| {
        *content = vec![ContentBlock::text("something else")]
    };
    match &mut r[f] {
        TraceRecord::Stage(o) => replace(&mut o.result_mut()?.content),
        _ => return None,
    }
    match result_data_mut(&mut r[tr])? {
        ToolResultData::Message(m) => replace(&mut m.message.content.first_mut()?.content),
        ToolResultData::Flat(fl) => replace(&mut fl.content),
    }
    Some(())
});
