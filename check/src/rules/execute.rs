//! Dispatch: the body runs inside `tools/execute`, the fs gate inside the body, read-before-edit,
//! and tool-owned events while the body runs.

use tep_model::graph::{NodeId as N, Outcome};
use tep_model::session::EventBody;
use tep_model::trace::{Capability, MarkKind, Observation, TraceRecord};

use super::plant::{
    call_of, event_type, find, find_after, is_stage, move_record, stage, stage_mut,
};
use super::{Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::{Stage, Step},
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Doc, Edge, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const BODY_INSIDE_EXECUTE: Rule = Rule::new(entry(
    I::BodyInsideExecute,
    Must,
    "The tool body runs only when dispatched by the `tools/execute` waterfall, and returns to it.",
    &[
        Doc("Around-dispatch concerns such as timeouts wrap `tools/execute`"),
        Edge(N::Around, N::ToolBody),
        Edge(N::ToolBody, N::Around),
        Semantics(&[25]),
    ],
    Step,
    Hooks,
    &[Read::Node(N::ToolBody), Read::Node(N::Around), Read::BodyMark],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    // A body that settles must have been dispatched (when bodies record their end).
    if v.mark().is_some() && cx.options.body_marks && call.body.steps.is_none() {
        let message = format!(
            "line {} (body-settled, call {}): a body settled that no `around` dispatched (no toolBody since the last one settled)",
            v.line, call.id
        );
        cx.report(I::BodyInsideExecute, Some(v.call), vec![v.line], message);
    }
})
.claims(|r| {
    let what = match (r.node, r.call.walk.position) {
        (N::ToolBody, _) => "the body ran without an `around` dispatching it",
        (_, N::ToolBody) => "the body did not return to `around`",
        _ => return None,
    };
    r.claim(
        format!("{} after {}: {what}", r.here(), r.call.at_position()),
        false,
    )
})
.plants(|r| {
    let b = find(r, |x| is_stage(x, N::ToolBody))?;
    if !is_stage(&r[b - 1], N::Around) || call_of(&r[b - 1]) != call_of(&r[b]) {
        return None;
    }
    r.remove(b - 1);
    Some(())
});

pub(crate) const BODY_SETTLES_BEFORE_COMMIT: Rule = Rule::new(entry(
    I::BodySettlesBeforeCommit,
    Must,
    "The pipeline waits for the tool body to stop: no commit stage of a call (post-execute, `finalizeContent`, `tools/result`) runs while its body still runs, even after a timeout fired (the body is cancelled cooperatively, never abandoned).",
    &[
        Edge(N::ToolBody, N::Around),
        Edge(N::Around, N::Post),
        Semantics(&[26, 31]),
    ],
    Stage,
    Hooks,
    &[
        Read::Node(N::ToolBody),
        Read::BodyMark,
        Read::Node(N::Post),
        Read::Node(N::Finalize),
        Read::Node(N::Final),
    ],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    if !matches!(v.node, Some(N::Post | N::Finalize | N::Final)) {
        return;
    }
    let call = cx.call(v.call);
    if let Some(dispatched) = call.body.steps {
        let message = format!(
            "{} while the body dispatched at line {dispatched} still runs (it has not recorded body-settled)",
            v.here(&call.id)
        );
        cx.report_once(I::BodySettlesBeforeCommit, v.call, vec![v.line, dispatched], message);
    }
})
.at_batch_end(|cx: &mut Cx<'_>| {
    let running: Vec<(usize, String, usize)> = cx
        .batch
        .calls
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.body.steps.map(|l| (i, c.id.to_string(), l)))
        .collect();
    for (i, id, line) in running {
        cx.report_once(
            I::BodySettlesBeforeCommit,
            i,
            vec![line],
            format!("the body of call {id} dispatched at line {line} never recorded body-settled"),
        );
    }
})
.plants(|r| {
    // The pipeline moves on to post-execute before the body stopped.
    let m = find(
        r,
        |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::BodySettled),
    )?;
    let call = call_of(&r[m])?.clone();
    let post = find_after(r, m, &call, |x| is_stage(x, N::Post))?;
    move_record(r, m, post + 1);
    Some(())
});

pub(crate) const BODY_THROW_IS_A_RESULT: Rule = Rule::new(entry(
    I::BodyThrowIsAResult,
    Should,
    "A tool body's throw reaches the `tools/execute` wrappers as an `isError` result, never as a throw: the innermost `next()` never throws, so post-execute still runs after a failing body.",
    &[Semantics(&[25])],
    Stage,
    Hooks,
    &[Read::BodyMark, Read::Node(N::Around)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    if v.node == Some(N::Around) && call.body.just_settled && v.outcome == Some(Outcome::Throw) {
        let message = format!(
            "{}: the body's failure reached the innermost wrapper as a throw, not as an isError result",
            v.here(&call.id)
        );
        cx.report(I::BodyThrowIsAResult, Some(v.call), vec![v.line], message);
    }
})
.plants(|r| {
    // A failing body's throw reaches the wrappers as a throw: the waterfall throws,
    // post-execute is skipped and the throw is normalized.
    let m = find(
        r,
        |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::BodySettled),
    )?;
    let call = call_of(&r[m])?.clone();
    let around = find_after(r, m, &call, |x| is_stage(x, N::Around))?;
    let post = find_after(r, around, &call, |x| is_stage(x, N::Post))?;
    let handed = stage(&r[post])?.result.clone()?;
    if !handed.is_error {
        return None;
    }
    let message = handed.error.as_ref()?.message.clone();
    let o = stage_mut(&mut r[around])?;
    o.outcome = Some(Outcome::Throw);
    o.reason = Some(message.clone());
    o.result = None;
    // Drop the later records of the waterfall and post-execute; normalize instead.
    let later: Vec<usize> = (around + 1..=post)
        .filter(|&i| {
            call_of(&r[i]) == Some(&call)
                && (is_stage(&r[i], N::Around) || is_stage(&r[i], N::Post))
        })
        .collect();
    for i in later.into_iter().rev() {
        r.remove(i);
    }
    let mut normalized = Observation::at(N::Normalized).call(&call);
    normalized.reason = Some(message);
    r.insert(around + 1, TraceRecord::Stage(Box::new(normalized)));
    Some(())
});

pub(crate) const FS_GATE_INSIDE_BODY: Rule = Rule::new(
    entry(
        I::FsGateInsideBody,
        Must,
        "`fs/write-intent` and `fs/edit-intent` are gated only while a tool body runs, and the body resumes after the gate.",
        &[
            Doc("tool-fs mutations only"),
            Edge(N::ToolBody, N::FsGate),
            Edge(N::FsGate, N::ToolBody),
        ],
        Step,
        Hooks,
        &[Read::Node(N::FsGate)],
    )
    .needs(Capability::FsGate),
)
.claims(|r| {
    (r.node == N::FsGate || r.call.walk.position == N::FsGate).then_some(())?;
    let what = if r.node == N::FsGate {
        "the fs gate is only reached from a running body"
    } else {
        "the body resumes after the fs gate"
    };
    r.claim(
        format!("{} after {}: {what}", r.here(), r.call.at_position()),
        false,
    )
})
.plants(|r| {
    let g = find(r, |x| is_stage(x, N::FsGate))?;
    let call = call_of(&r[g])?.clone();
    let first_around = find(r, |x| {
        is_stage(x, N::Around) && call_of(x) == Some(&call)
    })?;
    let dup = r[g].clone();
    r.insert(first_around, dup);
    Some(())
});

pub(crate) const READ_BEFORE_EDIT: Rule = Rule::new(
    entry(
        I::ReadBeforeEdit,
        Must,
        "The fs gate lets a mutation of an existing file through only if the agent observed the file (`fs/observed`) at its current version.",
        &[Doc(
            "Filesystem read-before-edit checks stay below `tool-fs` on `fs/*` events",
        )],
        Stage,
        Hooks,
        &[Read::Node(N::FsGate), Read::Node(N::Owned)],
    )
    .needs(Capability::FsGate),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(obs) = v.observation() else { return };
    let (Some(intent), Some(Outcome::Allow)) = (&obs.intent, obs.outcome) else {
        return;
    };
    let Some(version) = intent.version else { return };
    let seen = cx.fs.files.get(&intent.target).copied();
    if seen.map(|(v, _)| v) == Some(version) {
        return;
    }
    let mut lines = vec![v.line];
    let why = match seen {
        Some((seen, l)) => {
            lines.push(l);
            format!("the agent last observed version {seen} at line {l}")
        }
        None => "the agent never observed it".to_owned(),
    };
    let message = format!(
        "line {} ({} allowed, call {}) for {} at version {version}, but {why}",
        v.line,
        intent.intent.event_name(),
        cx.call(v.call).id,
        intent.target
    );
    cx.report(I::ReadBeforeEdit, Some(v.call), lines, message);
})
.plants(|r| {
    let g = find(r, |x| {
        stage(x).is_some_and(|o| {
            o.node == N::FsGate
                && o.outcome == Some(Outcome::Allow)
                && o.intent.as_ref().is_some_and(|i| i.version.is_some())
        })
    })?;
    let target = stage(&r[g])?.intent.as_ref()?.target.clone();
    let observed = |x: &TraceRecord| matches!(x, TraceRecord::Event(e) if matches!(&e.event.body, EventBody::FsObserved(o) if o.target == target));
    let before: Vec<usize> = (0..g).filter(|&i| observed(&r[i])).collect();
    if before.is_empty() {
        return None;
    }
    for i in before.into_iter().rev() {
        r.remove(i);
    }
    Some(())
});

pub(crate) const OWNED_EVENTS_INSIDE_BODY: Rule = Rule::new(
    entry(
        I::OwnedEventsInsideBody,
        Must,
        "Tool-owned session events (`todo/write`, `fs/observed`, `hook/invoked`, `hook/result`) are recorded only while the tool body runs.",
        &[
            Doc("Tool-owned session events"),
            Edge(N::ToolBody, N::Owned),
        ],
        Stage,
        Hooks,
        &[Read::Node(N::Owned)],
    )
    .needs(Capability::OwnedEvents),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let call = cx.call(v.call);
    // While the body runs, and not while it waits at the fs gate (it resumes with `toolBody`).
    if call.body.since.is_some() && call.walk.position != N::FsGate {
        return;
    }
    let kind = v.event().map_or("event", |e| e.body.type_name());
    let (id, lines, message) = match call.decisions.denied {
        Some(d) => (
            I::DenySkipsBody,
            vec![v.line, d],
            format!(
                "line {} ({kind}, call {}) after line {d} denied the call",
                v.line, call.id
            ),
        ),
        None => (
            I::OwnedEventsInsideBody,
            vec![v.line, call.walk.position_line],
            format!(
                "line {} ({kind}, call {}) while the body does not run (the call is at {})",
                v.line,
                call.id,
                call.at_position()
            ),
        ),
    };
    cx.report_once(id, v.call, lines, message);
})
.plants(|r| {
    let o = find(r, |x| {
        matches!(
            event_type(x),
            Some("todo/write" | "hook/invoked" | "fs/observed")
        )
    })?;
    let call = call_of(&r[o])?.clone();
    let first_around = find(r, |x| {
        is_stage(x, N::Around) && call_of(x) == Some(&call)
    })?;
    let moved = r.remove(o);
    r.insert(first_around.min(r.len()), moved);
    Some(())
});
