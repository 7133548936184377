//! Throws (rev2): a throw skips post-execute, is caught by the registry's outer normalization,
//! and ends as an error outcome.

use tep_model::graph::NodeId as N;

use super::plant::{call_of, find, find_after, is_stage, observation, stage, stage_mut};
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
    stage_mut(&mut r[f])?.result.as_mut()?.is_error = false;
    Some(())
});
