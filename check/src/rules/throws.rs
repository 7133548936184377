//! Throws (rev2): a throw skips post-execute, is caught by the registry's outer normalization,
//! and ends as an error outcome.

use tep_model::graph::{NodeId as N, Outcome};
use tep_model::trace::{GuardVerdictKind, Observation, TraceRecord};

use super::plant::{
    call_of, find, find_after, is_stage, observation, outcome_of, stage, stage_mut,
};
use super::{Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::{Stage, Step},
    InvariantId as I,
    Level::Must,
    Read,
    Source::{Doc, Edge, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const THROW_SKIPS_POST: Rule = Rule::new(
    entry(
        I::ThrowSkipsPost,
        Must,
        "After a throw (pre-execute, approval, a guard, a wrapper or post-execute itself) `tools/post-execute` does not run.",
        &[
            Edge(N::Pre, N::Normalized),
            Edge(N::Around, N::Normalized),
            Semantics(&[23, 28, 35]),
        ],
        Step,
        Hooks,
        &[Read::Node(N::Post)],
    )
    .rev2(),
)
.claims(|r| {
    let (stage, line) = r.call.decisions.threw?;
    (r.node == N::Post).then_some(())?;
    let mut claim = r.claim(
        format!("{} after line {line} ({stage} threw): a throw skips post-execute", r.here()),
        false,
    )?;
    claim.lines = vec![r.visit.line, line];
    Some(claim)
})
.plants(|r| {
    let n = find(r, |x| is_stage(x, N::Normalized))?;
    let call = call_of(&r[n])?.clone();
    // Only where post-execute did not itself throw.
    let before = (0..n)
        .rev()
        .find(|&i| call_of(&r[i]) == Some(&call) && stage(&r[i]).is_some())?;
    if is_stage(&r[before], N::Post) {
        return None;
    }
    r.insert(n, observation(N::Post, &call));
    Some(())
});

pub(crate) const THROW_IS_NORMALIZED: Rule = Rule::new(
    entry(
        I::ThrowIsNormalized,
        Must,
        "A throw is caught by the registry's outer normalization before finalization: nothing escapes the pipeline.",
        &[
            Doc("pipeline/result snapshot throws become isError"),
            Edge(N::Normalized, N::Finalize),
            Semantics(&[23, 42]),
        ],
        Step,
        Hooks,
        &[Read::Node(N::Normalized), Read::Node(N::Finalize), Read::Node(N::Final)],
    )
    .rev2(),
)
.claims(|r| {
    let (stage, line) = r.call.decisions.threw?;
    // From the stage that threw: past the normalization stage without it, or to a stage no
    // throw leads to.
    (r.call.walk.position == stage
        && (r.missing.contains(&N::Normalized)
            || !matches!(r.node, N::Normalized | N::Finalize | N::Final)))
    .then_some(())?;
    let mut claim = r.claim(
        format!(
            "{} after line {line} ({stage} threw), instead of outer normalization",
            r.here()
        ),
        false,
    )?;
    claim.lines = vec![r.visit.line, line];
    Some(claim)
})
.plants(|r| {
    let n = find(r, |x| is_stage(x, N::Normalized))?;
    r.remove(n);
    Some(())
});

pub(crate) const GUARD_THROW_IS_NORMALIZED: Rule = Rule::new(
    entry(
        I::GuardThrowIsNormalized,
        Must,
        "A guard's throw ends the guards with `throw`, for the outer normalization: it is never turned into a deny (nor an allow).",
        &[Edge(N::Guards, N::Normalized), Semantics(&[23])],
        Stage,
        Hooks,
        &[Read::Node(N::Guards)],
    )
    .rev2(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(obs) = v.observation() else { return };
    let Some(thrower) = obs
        .verdicts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|g| g.verdict == GuardVerdictKind::Throw)
    else {
        return;
    };
    let Some(outcome) = obs.outcome.filter(|&o| o != Outcome::Throw) else {
        return;
    };
    let id = cx.call(v.call).id.clone();
    let message = format!(
        "{}: guard {} threw ({:?}), so the guards end with throw and the call goes to the outer normalization; but they ended with {outcome}",
        v.here(&id),
        thrower.guard,
        thrower.reason.as_deref().unwrap_or_default(),
    );
    cx.report(I::GuardThrowIsNormalized, Some(v.call), vec![v.line], message);
})
.plants(|r| {
    // The throw taken for a deny: the guards deny with its message, and the call goes on to
    // the denial and post-execute instead of the normalization.
    let g = find(r, |x| {
        is_stage(x, N::Guards) && outcome_of(x) == Some(Outcome::Throw)
    })?;
    let call = call_of(&r[g])?.clone();
    let reason = {
        let o = stage_mut(&mut r[g])?;
        o.outcome = Some(Outcome::Deny);
        o.reason.clone()
    };
    let n = find_after(r, g, &call, |x| is_stage(x, N::Normalized))?;
    let mut denied = Observation::at(N::Denied).call(&call);
    denied.reason = reason;
    let mut post = Observation::at(N::Post).call(&call);
    post.outcome = Some(Outcome::Accept);
    r[n] = TraceRecord::Stage(Box::new(denied));
    r.insert(n + 1, TraceRecord::Stage(Box::new(post)));
    Some(())
});

pub(crate) const THROW_IS_ERROR: Rule = Rule::new(
    entry(
        I::ThrowIsError,
        Must,
        "A normalized throw ends as an error outcome (`isError: true`).",
        &[Doc("throws become isError"), Semantics(&[42])],
        Stage,
        Hooks,
        &[Read::Node(N::Final)],
    )
    .rev2(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(result) = v.observation().and_then(|o| o.result.as_ref()) else {
        return;
    };
    let call = cx.call(v.call);
    if let Some((stage, line)) = call.decisions.threw
        && !result.is_error
    {
        let message = format!(
            "{} announces a success after line {line} ({stage} threw)",
            v.here(&call.id)
        );
        cx.report(I::ThrowIsError, Some(v.call), vec![v.line, line], message);
    }
})
.plants(|r| {
    let n = find(r, |x| is_stage(x, N::Normalized))?;
    let call = call_of(&r[n])?.clone();
    let f = find_after(r, n, &call, |x| is_stage(x, N::Final))?;
    stage_mut(&mut r[f])?.result_mut()?.is_error = false;
    Some(())
});
