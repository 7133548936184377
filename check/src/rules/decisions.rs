//! The decisions before dispatch: pre-execute, the approval prompt, the guards, and what a
//! denial means (no body, post-execute still runs, an error outcome).

use tep_model::graph::{NodeId as N, Outcome};
use tep_model::session::EventBody;
use tep_model::trace::{Capability, GuardVerdictKind, MarkKind, Observation, TraceRecord};

use super::plant::{
    call_of, event_type, find, find_after, is_stage, observation, outcome_of, stage, stage_mut,
};
use super::{Claim, Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::{Stage, Step},
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Doc, Edge, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const APPROVAL_ONLY_AFTER_ASK: Rule = Rule::new(entry(
    I::ApprovalOnlyAfterAsk,
    Must,
    "`ctx.approval` is consulted only when pre-execute decided `ask`.",
    &[Edge(N::Pre, N::Approval), Semantics(&[17])],
    Step,
    Hooks,
    &[Read::Node(N::Approval), Read::Audit],
))
.claims(|r| {
    (r.node == N::Approval).then_some(())?;
    r.claim(
        format!(
            "{} after {}: the prompt is only asked after pre-execute decided ask",
            r.here(),
            r.call.at_position()
        ),
        false,
    )
})
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(event) = v.event() else { return };
    let call = cx.call(v.call);
    // A second ask of one call is `approval-once`'s.
    if matches!(event.body, EventBody::ApprovalAsked(_))
        && call.approval.asked.is_none()
        && (call.walk.position != N::Pre || call.walk.outcome != Some(Outcome::Ask))
    {
        let message = format!(
            "line {} (approval/asked, call {}) but pre-execute did not ask (the call was at {})",
            v.line,
            call.id,
            call.at_position()
        );
        cx.report_once(
            I::ApprovalOnlyAfterAsk,
            v.call,
            vec![v.line, call.walk.position_line],
            message,
        );
    }
})
.plants(|r| {
    let pre = find(r, |x| {
        is_stage(x, N::Pre) && outcome_of(x) == Some(Outcome::Allow)
    })?;
    let call = call_of(&r[pre])?.clone();
    let mut approval = Observation::at(N::Approval).call(&call);
    approval.outcome = Some(Outcome::AllowedOnce);
    r.insert(pre + 1, TraceRecord::Stage(Box::new(approval)));
    Some(())
});

pub(crate) const APPROVAL_ABSENT_DENIES: Rule = Rule::new(entry(
    I::ApprovalAbsentDenies,
    Must,
    "With no approval prompt mounted, an ask is denied: the prompt's absence is never an allow.",
    &[Doc("absent or unanswerable: deny"), Semantics(&[17])],
    Stage,
    Hooks,
    &[Read::Node(N::Approval), Read::Scenario],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    if call.facts.prompt == Some(false) && v.outcome == Some(Outcome::AllowedOnce) {
        let message = format!(
            "{}: no approval prompt is mounted, so the ask must be denied",
            v.here(&call.id)
        );
        cx.report(I::ApprovalAbsentDenies, Some(v.call), vec![v.line], message);
    }
})
.plants(|r| {
    // No prompt is mounted, yet the ask is allowed: the call goes on to the guards and
    // its body instead of the denial.
    let a = find(r, |x| {
        is_stage(x, N::Approval) && outcome_of(x) == Some(Outcome::Unavailable)
    })?;
    let call = call_of(&r[a])?.clone();
    let post = find_after(r, a, &call, |x| is_stage(x, N::Post))?;
    let identity = stage(&r[post])?.identity.clone();
    {
        let o = stage_mut(&mut r[a])?;
        o.outcome = Some(Outcome::AllowedOnce);
        o.reason = None;
    }
    let denied: Vec<usize> = (a + 1..post)
        .filter(|&i| call_of(&r[i]) == Some(&call))
        .collect();
    for i in denied.into_iter().rev() {
        r.remove(i);
    }
    let visit = |node: N, outcome: Option<Outcome>| {
        let mut o = Observation::at(node).call(&call);
        o.outcome = outcome;
        o.identity = identity.clone();
        TraceRecord::Stage(Box::new(o))
    };
    let settled = TraceRecord::Mark(Box::new(tep_model::trace::Mark {
        call: call.clone(),
        mark: MarkKind::BodySettled,
        by: "body".to_owned(),
        after_ms: 0,
        rejection: None,
    }));
    let ran = [
        visit(N::Guards, Some(Outcome::Allow)),
        visit(N::Around, None),
        visit(N::ToolBody, None),
        settled,
        visit(N::Around, None),
    ];
    for (k, record) in ran.into_iter().enumerate() {
        r.insert(a + 1 + k, record);
    }
    Some(())
});

pub(crate) const APPROVAL_ONCE: Rule = Rule::new(entry(
    I::ApprovalOnce,
    Must,
    "`ctx.approval` is a one-shot prompt: an ask is put to it once (one `approval/asked`, one answer), and the answer decides only the call it was asked for; an asked call never goes on to the guards or its body without its own answer.",
    &[Doc("`ctx.approval` one-shot prompt"), Edge(N::Pre, N::Approval), Semantics(&[17, 18])],
    Stage,
    Hooks,
    &[Read::Node(N::Approval), Read::Audit, Read::Scenario],
))
.claims(|r| {
    // A second approval stage for one call: the prompt was asked again.
    (r.node == N::Approval && r.call.approval.outcome.is_some()).then_some(())?;
    r.claim(
        format!(
            "{} after {}: the call's ask was already answered; the prompt is asked once",
            r.here(),
            r.call.at_position()
        ),
        true,
    )
})
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    if v.node == Some(N::Approval) {
        // Drive mode knows what the scripted prompt answers this call: another answer is one
        // given for some other call (or none at all).
        let name = cx.scripted_name(v.call);
        let (Some(got), Some(scripted)) = (v.outcome, cx.options.scripted_answer(&name)) else {
            return;
        };
        // `cancelled` can come from the call's signal rather than the prompt (reference
        // semantics 18): not a sign of another call's answer.
        if got != scripted && got != Outcome::Cancelled && call.approval.outcome.is_none() {
            let message = format!(
                "{}: the prompt answers this call {scripted}, so the approval's outcome must be {scripted}; an answer given for another call was used",
                v.here(&call.id)
            );
            cx.report_once(I::ApprovalOnce, v.call, vec![v.line], message);
        }
        return;
    }
    let Some(event) = v.event() else { return };
    let earlier = match event.body {
        EventBody::ApprovalAsked(_) => call.approval.asked.map(|l| (l, "approval/asked")),
        EventBody::ApprovalDecided(_) => call.approval.decided.map(|(_, l)| (l, "approval/decided")),
        _ => None,
    };
    if let Some((first, kind)) = earlier {
        let message = format!(
            "line {} ({kind}, call {}) after line {first} recorded {kind} for the same call: one ask is put to the prompt once",
            v.line, call.id
        );
        cx.report_once(I::ApprovalOnce, v.call, vec![v.line, first], message);
    }
})
.at_batch_end(|cx: &mut Cx<'_>| {
    let mut found = Vec::new();
    for (i, call) in cx.batch.top_level().chain(cx.batch.sub_calls()) {
        // Pre-execute asked, a prompt is mounted, and the call was allowed without an answer.
        let Some(asked) = call.decisions.pre_asked else { continue };
        if call.facts.prompt != Some(true) || call.approval.outcome.is_some() {
            continue;
        }
        if let Some(node) = [N::Guards, N::Around, N::ToolBody]
            .into_iter()
            .find(|&n| call.has_visited(n))
        {
            found.push((
                i,
                asked,
                format!(
                    "call {}: pre-execute asked at line {asked} and the call reached {node} without the mounted prompt answering it",
                    call.id
                ),
            ));
        }
    }
    for (i, line, message) in found {
        cx.report_once(I::ApprovalOnce, i, vec![line], message);
    }
})
.plants(|r| {
    // The prompt asked a second time for the same ask.
    let a = find(r, |x| is_stage(x, N::Approval))?;
    let dup = r[a].clone();
    r.insert(a + 1, dup);
    Some(())
});

pub(crate) const GUARDS_ONLY_AFTER_ALLOW: Rule = Rule::new(entry(
    I::GuardsOnlyAfterAllow,
    Must,
    "Guards run only after a final allow: pre-execute `allow`, or approval `allowed-once`; approval resolves an ask before the guards.",
    &[
        Doc("`ctx.approval` resolves asks before monotonic guards"),
        Edge(N::Pre, N::Guards),
        Edge(N::Approval, N::Guards),
        Semantics(&[19]),
    ],
    Step,
    Hooks,
    &[Read::Node(N::Guards)],
))
.claims(|r| {
    (r.node == N::Guards).then_some(())?;
    r.claim(
        format!(
            "{} after {}: guards run only after an allow",
            r.here(),
            r.call.at_position()
        ),
        false,
    )
})
.plants(|r| {
    let pre = find(r, |x| {
        is_stage(x, N::Pre)
            && matches!(outcome_of(x), Some(Outcome::Deny | Outcome::Ask))
    })?;
    let call = call_of(&r[pre])?.clone();
    let mut guards = Observation::at(N::Guards).call(&call);
    guards.outcome = Some(Outcome::Allow);
    r.insert(pre + 1, TraceRecord::Stage(Box::new(guards)));
    Some(())
});

pub(crate) const ALLOW_REACHES_GUARDS: Rule = Rule::new(entry(
    I::AllowReachesGuards,
    Must,
    "After a final allow (pre-execute `allow`, or approval `allowed-once`) the guards run: nothing goes on past the guards without them.",
    &[
        Edge(N::Pre, N::Guards),
        Edge(N::Approval, N::Guards),
        Semantics(&[19]),
    ],
    Step,
    Hooks,
    &[Read::Node(N::Guards)],
))
.claims(|r| {
    let allowed = matches!(
        (r.call.walk.position, r.call.walk.outcome),
        (N::Pre, Some(Outcome::Allow)) | (N::Approval, Some(Outcome::AllowedOnce))
    );
    (allowed && r.node != N::Guards && r.missing.contains(&N::Guards)).then_some(())?;
    r.claim(
        format!(
            "{} after {}: after an allow the guards run, and the call went on without them",
            r.here(),
            r.call.at_position()
        ),
        false,
    )
})
.plants(|r| {
    // The guards skipped after an allow: the call goes straight on to what they decided.
    let g = find(r, |x| is_stage(x, N::Guards))?;
    r.remove(g);
    Some(())
});

pub(crate) const GUARD_DENY_BINDS: Rule = Rule::new(entry(
    I::GuardDenyBinds,
    Must,
    "Guards are monotonic: when a guard denies, no later guard is consulted and the call is denied with that guard's reason, whatever any listener or later guard decided.",
    &[
        Doc("deny or abstain; identity protected"),
        Doc("owner policy that must not be reordered remains a registered guard"),
        Semantics(&[20]),
    ],
    Stage,
    Hooks,
    &[Read::Node(N::Guards)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(obs) = v.observation() else { return };
    let verdicts = obs.verdicts.as_deref().unwrap_or_default();
    let Some(k) = verdicts
        .iter()
        .position(|g| matches!(g.verdict, GuardVerdictKind::Deny | GuardVerdictKind::Throw))
    else {
        return;
    };
    let first = &verdicts[k];
    if first.verdict != GuardVerdictKind::Deny {
        return;
    }
    let id = cx.call(v.call).id.clone();
    let mut problems = Vec::new();
    if let Some(later) = verdicts.get(k + 1) {
        problems.push(format!(
            "guard {} was consulted after guard {} denied",
            later.guard, first.guard
        ));
    }
    if obs.outcome != Some(Outcome::Deny) {
        problems.push(format!(
            "the guards ended with {}",
            obs.outcome.map_or("no outcome", |o| o.as_str())
        ));
    } else if obs.reason.is_some() && obs.reason != first.reason {
        problems.push(format!(
            "the denial's reason is {:?}",
            obs.reason.as_deref().unwrap_or_default()
        ));
    }
    if !problems.is_empty() {
        cx.report(
            I::GuardDenyBinds,
            Some(v.call),
            vec![v.line],
            format!(
                "{}: guard {} denied ({:?}), so the call is denied with that reason and no later guard runs; but {}",
                v.here(&id),
                first.guard,
                first.reason.as_deref().unwrap_or_default(),
                problems.join(", and ")
            ),
        );
    }
})
.plants(|r| {
    let g = find(r, |x| {
        is_stage(x, N::Guards) && outcome_of(x) == Some(Outcome::Deny)
    })?;
    stage_mut(&mut r[g])?.outcome = Some(Outcome::Allow);
    Some(())
});

pub(crate) const DENY_SKIPS_BODY: Rule = Rule::new(entry(
    I::DenySkipsBody,
    Must,
    "After a denial (pre-execute `deny`, an approval refused or absent, a guard's deny) neither `tools/execute` nor the tool body runs for that call.",
    &[Doc("tool body skipped"), Semantics(&[22])],
    Step,
    Hooks,
    &[Read::Node(N::Around), Read::Node(N::ToolBody), Read::Node(N::FsGate), Read::Node(N::Owned)],
))
.claims(|r| {
    let d = r.call.decisions.denied?;
    matches!(r.node, N::Around | N::ToolBody | N::FsGate).then_some(())?;
    Some(Claim {
        message: format!("{} after line {d} denied the call", r.here()),
        lines: vec![r.visit.line, d],
        keep_position: true,
    })
})
.plants(|r| {
    let d = find(r, |x| is_stage(x, N::Denied))?;
    let call = call_of(&r[d])?.clone();
    r.insert(d + 1, observation(N::ToolBody, &call));
    Some(())
});

pub(crate) const DENIAL_REACHES_POST: Rule = Rule::new(entry(
    I::DenialReachesPost,
    Must,
    "A denied call still runs `tools/post-execute`, which is handed the denial.",
    &[Edge(N::Denied, N::Post), Semantics(&[22])],
    Step,
    Hooks,
    &[Read::Node(N::Post)],
))
.claims(|r| {
    let d = r.call.decisions.denied?;
    (r.call.decisions.post.is_none() && r.node != N::Post).then_some(())?;
    Some(Claim {
        message: format!(
            "{} after line {d} denied the call, without post-execute: a denied call goes to post-execute",
            r.here()
        ),
        lines: vec![r.visit.line, d],
        keep_position: false,
    })
})
.plants(|r| {
    let d = find(r, |x| is_stage(x, N::Denied))?;
    let call = call_of(&r[d])?.clone();
    let post = find_after(r, d, &call, |x| is_stage(x, N::Post))?;
    r.remove(post);
    Some(())
});

pub(crate) const DENIAL_IS_ERROR: Rule = Rule::new(entry(
    I::DenialIsError,
    Must,
    "The outcome of a denied call is an error (`isError: true`).",
    &[Doc("denied or approval refused"), Semantics(&[22])],
    Stage,
    Hooks,
    &[Read::Node(N::Final)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(result) = v.observation().and_then(|o| o.result.as_ref()) else {
        return;
    };
    let call = cx.call(v.call);
    if let Some(d) = call.decisions.denied
        && !result.is_error
    {
        let message = format!(
            "{} announces a success for the call denied at line {d}",
            v.here(&call.id)
        );
        cx.report(I::DenialIsError, Some(v.call), vec![v.line, d], message);
    }
})
.plants(|r| {
    let d = find(r, |x| is_stage(x, N::Denied))?;
    let call = call_of(&r[d])?.clone();
    let f = find_after(r, d, &call, |x| is_stage(x, N::Final))?;
    stage_mut(&mut r[f])?.result_mut()?.is_error = false;
    Some(())
});

pub(crate) const APPROVAL_AUDITED: Rule = Rule::new(
    entry(
        I::ApprovalAudited,
        Should,
        "An answered approval is audited: `approval/asked` precedes `approval/decided`, whose outcome is the approval stage's outcome.",
        &[Semantics(&[18])],
        Stage,
        Hooks,
        &[Read::Node(N::Approval), Read::Audit],
    )
    .needs(Capability::Approval),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    let id = call.id.clone();
    if v.node == Some(N::Approval) {
        if let (Some((decided, dl)), Some(outcome)) = (call.approval.decided, v.outcome)
            && decided != outcome
        {
            cx.report(
                I::ApprovalAudited,
                Some(v.call),
                vec![v.line, dl],
                format!(
                    "{} but line {dl} recorded approval/decided {decided}",
                    v.here(&id)
                ),
            );
        }
        return;
    }
    let Some(event) = v.event() else { return };
    let EventBody::ApprovalDecided(decided) = &event.body else {
        return;
    };
    if call.approval.asked.is_none() {
        cx.report(
            I::ApprovalAudited,
            Some(v.call),
            vec![v.line],
            format!("line {} (approval/decided, call {id}) without approval/asked", v.line),
        );
    } else if call.walk.position == N::Approval {
        // The harness logs the decision once its prompt returned, and the adapter may record the
        // approval stage at that return: the audit then follows the stage, before anything else.
        if let Some(outcome) = call.approval.outcome
            && outcome != decided.outcome
        {
            let message = format!(
                "line {} (approval/decided {}, call {id}) but {} recorded {}",
                v.line,
                decided.outcome,
                call.at_position(),
                outcome
            );
            cx.report(I::ApprovalAudited, Some(v.call), vec![v.line, call.walk.position_line], message);
        }
    } else if call.walk.position != N::Pre {
        // The decision is audited within the approval stage: at the latest right after its
        // record, before guards or the denial.
        let message = format!(
            "line {} (approval/decided, call {id}) after {} ended the approval stage",
            v.line,
            call.at_position()
        );
        cx.report(I::ApprovalAudited, Some(v.call), vec![v.line, call.walk.position_line], message);
    }
})
.at_batch_end(|cx: &mut Cx<'_>| {
    let mut found = Vec::new();
    for (i, call) in cx.batch.top_level().chain(cx.batch.sub_calls()) {
        // A mounted prompt answered (the scenario says a prompt is mounted, or the answer is
        // one only a prompt gives).
        let answered = call.facts.prompt != Some(false)
            && (matches!(
                call.approval.outcome,
                Some(Outcome::AllowedOnce | Outcome::Rejected | Outcome::Cancelled)
            ) || (call.approval.outcome == Some(Outcome::Unavailable)
                && call.facts.prompt == Some(true)));
        match (call.approval.asked, call.approval.decided) {
            // A prompt that threw was never answered: there is no decision to audit.
            (Some(asked), None) if call.approval.outcome != Some(Outcome::Throw) => found.push((
                i,
                vec![asked],
                format!("line {asked} (approval/asked, call {}) has no approval/decided", call.id),
            )),
            (None, None) if answered => found.push((
                i,
                vec![call.walk.last_line],
                format!(
                    "call {}'s approval was answered ({}) without approval/asked and approval/decided",
                    call.id,
                    call.approval.outcome.map_or("", |o| o.as_str())
                ),
            )),
            _ => {}
        }
    }
    for (i, lines, message) in found {
        cx.report(I::ApprovalAudited, Some(i), lines, message);
    }
})
.plants(|r| {
    let d = find(r, |x| event_type(x) == Some("approval/decided"))?;
    if let TraceRecord::Event(e) = &mut r[d]
        && let EventBody::ApprovalDecided(data) = &mut e.event.body
    {
        data.outcome = if data.outcome == Outcome::Rejected {
            Outcome::AllowedOnce
        } else {
            Outcome::Rejected
        };
    }
    Some(())
});
