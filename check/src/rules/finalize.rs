//! `finalizeContent` (rev2): the definition's callback, when it has one, runs exactly once,
//! before `tools/result`, and changes content only.

use serde_json::json;
use tep_model::graph::{NodeId as N, Outcome};

use super::plant::{call_of, find, find_after, is_stage, move_record, outcome_of, stage_mut};
use super::{Claim, Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::{Stage, Step},
    InvariantId as I,
    Level::Must,
    Read,
    Source::{Doc, Edge, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const FINALIZE_ONCE: Rule = Rule::new(
    entry(
        I::FinalizeOnce,
        Must,
        "When the call's definition has `finalizeContent`, it is called exactly once per call, after post-execute or normalization, whatever the outcome; a definition without one has no finalize stage.",
        &[
            Doc("Definition-owned `finalizeContent`"),
            Doc("the visible definition's snapshotted `finalizeContent` callback"),
            Semantics(&[37]),
        ],
        Step,
        Hooks,
        &[Read::Node(N::Finalize), Read::Node(N::Final)],
    )
    .rev2(),
)
.claims(|r| match r.node {
    N::Finalize => {
        let earlier = r.call.decisions.finalized?;
        Some(Claim {
            message: format!("{}: finalizeContent was already called at line {earlier}", r.here()),
            lines: vec![r.visit.line, earlier],
            keep_position: true,
        })
    }
    N::Final if r.call.facts.finalizer == Some(true) && r.call.decisions.finalized.is_none() => r.claim(
        format!(
            "{} after {}: the definition's finalizeContent was never called",
            r.here(),
            r.call.at_position()
        ),
        false,
    ),
    _ => None,
})
.plants(|r| {
    let f = find(r, |x| is_stage(x, N::Finalize))?;
    let dup = r[f].clone();
    r.insert(f + 1, dup);
    Some(())
});

pub(crate) const FINALIZE_BEFORE_NOTIFICATION: Rule = Rule::new(
    entry(
        I::FinalizeBeforeNotification,
        Must,
        "`finalizeContent` runs before the `tools/result` notification.",
        &[
            Doc("Definition-owned `finalizeContent` and `tools/result` run afterward"),
            Edge(N::Finalize, N::Final),
        ],
        Step,
        Hooks,
        &[Read::Node(N::Finalize)],
    )
    .rev2(),
)
.claims(|r| {
    let (_, announced) = r
        .call
        .commit
        .notified
        .as_ref()
        .filter(|_| r.node == N::Finalize)?;
    Some(Claim {
        message: format!(
            "{}: finalizeContent ran after tools/result announced the outcome at line {announced}",
            r.here()
        ),
        lines: vec![r.visit.line, *announced],
        keep_position: true,
    })
})
.plants(|r| {
    // finalizeContent runs after the notification.
    let f = find(r, |x| is_stage(x, N::Finalize))?;
    let call = call_of(&r[f])?.clone();
    let fin = find_after(r, f, &call, |x| is_stage(x, N::Final))?;
    move_record(r, f, fin + 1);
    Some(())
});

pub(crate) const FINALIZE_CONTENT_ONLY: Rule = Rule::new(
    entry(
        I::FinalizeContentOnly,
        Must,
        "`finalizeContent` changes content only: the announced outcome equals its candidate in everything but content, unless the callback itself failed.",
        &[
            Doc("enforces its synchronous content-only invariant"),
            Semantics(&[37]),
        ],
        Stage,
        Hooks,
        &[Read::Node(N::Finalize), Read::Node(N::Final)],
    )
    .rev2(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    if v.node != Some(N::Final) {
        return;
    }
    let Some(result) = v.observation().and_then(|o| o.result.as_ref()) else {
        return;
    };
    let call = cx.call(v.call);
    let Some((candidate, threw, fl)) = &call.decisions.candidate else {
        return;
    };
    let same = candidate.is_error == result.is_error
        && candidate.error == result.error
        && candidate.meta == result.meta
        && candidate.additional_contexts == result.additional_contexts;
    if !threw && !same {
        let message = format!(
            "{} differs from the finalizeContent candidate at line {fl} in more than content",
            v.here(&call.id)
        );
        cx.report(I::FinalizeContentOnly, Some(v.call), vec![v.line, *fl], message);
    }
})
.plants(|r| {
    let f = find(r, |x| {
        is_stage(x, N::Finalize) && outcome_of(x) != Some(Outcome::Throw)
    })?;
    let call = call_of(&r[f])?.clone();
    let fin = find_after(r, f, &call, |x| is_stage(x, N::Final))?;
    stage_mut(&mut r[fin])?.result_mut()?.meta =
        Some(json!({"changed": "by finalizeContent"}));
    Some(())
});
