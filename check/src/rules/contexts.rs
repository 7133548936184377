//! The batch settles, then its contexts are injected: after every result, FIFO by call, in each
//! call's order (tool-deferred, wrapper, post-execute), a block keeping only its own.

use tep_model::graph::{NodeId as N, Outcome};
use tep_model::result::{AdditionalContext, ContextOrigin};

use super::plant::{
    call_of, event_type, find, find_after, is_stage, move_record, outcome_of, stage, stage_mut,
};
use super::{Cx, Rule, Visit};
use crate::facts::context_text;
use crate::facts::state::ContextMatch;
use crate::invariants::{
    CheckKind::{BatchEnd, Stage, Step},
    InvariantId as I,
    Level::{Must, Should},
    Read,
    Source::{Doc, Edge, Semantics},
    entry,
};
use crate::observation::ObservationLevel::{Events, Full, Hooks};

/// The first call of the batch without its `tool/result`, for messages.
fn first_pending(cx: &Cx<'_>) -> Option<(usize, String, usize)> {
    let first = cx.batch.first_unresulted;
    (first < cx.batch.top).then(|| {
        let c = cx.call(first);
        (first, c.id.to_string(), c.walk.last_line)
    })
}

pub(crate) const BATCH_SETTLES: Rule = Rule::new(entry(
    I::BatchSettles,
    Must,
    "The batch settles (`allResults`) once, after every call's `tool/result` and before any context is injected. At level `full` the record is required; below, it may be absent.",
    &[
        Doc("Tool batch settled"),
        Edge(N::ToolResult, N::AllResults),
    ],
    BatchEnd,
    Events,
    &[Read::Node(N::AllResults)],
))
.on_settle(|cx: &mut Cx<'_>, line: usize| {
    if let Some(earlier) = cx.batch.settled {
        cx.report(
            I::BatchSettles,
            None,
            vec![line, earlier],
            format!("line {line} settles the batch again after line {earlier}"),
        );
    } else if let Some((i, id, last)) = first_pending(cx) {
        cx.report(
            I::BatchSettles,
            Some(i),
            vec![line, last],
            format!(
                "line {line} (allResults) before call {id}'s tool/result (last seen at line {last})"
            ),
        );
    } else if let Some(first) = cx
        .batch
        .first_context
        // A context before the batch completed, or at `full` before `allResults`, is
        // contexts-after-all-results already.
        .filter(|&f| cx.options.level < Full && cx.batch.completed.is_some_and(|c| f > c))
    {
        cx.report(
            I::BatchSettles,
            None,
            vec![line, first],
            format!("line {line} (allResults) after contexts were injected (line {first})"),
        );
    }
})
.at_batch_end(|cx: &mut Cx<'_>| {
    if cx.options.level >= Full && cx.batch.settled.is_none() {
        let model = cx.batch.model_line;
        cx.report(
            I::BatchSettles,
            None,
            vec![model],
            format!("the batch declared at line {model} never settled (no allResults)"),
        );
    }
})
.plants(|r| {
    let a = find(r, |x| is_stage(x, N::AllResults))?;
    r.remove(a);
    Some(())
});

pub(crate) const CONTEXTS_AFTER_ALL_RESULTS: Rule = Rule::new(entry(
    I::ContextsAfterAllResults,
    Must,
    "Additional contexts are injected only after every result of the batch is recorded.",
    &[
        Doc("after recorded tool results"),
        Edge(N::AllResults, N::Context),
        Semantics(&[9]),
    ],
    Step,
    Events,
    &[Read::Node(N::Context)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    // Words only for a finding: a valid record builds nothing.
    let here = |cx: &Cx<'_>| v.here(&cx.call(v.call).id);
    if let Some((_, id, last)) = first_pending(cx) {
        let message = format!(
            "{} injects a context before call {id}'s tool/result (last seen at line {last})",
            here(cx)
        );
        cx.report(
            I::ContextsAfterAllResults,
            Some(v.call),
            vec![v.line, last],
            message,
        );
    } else if cx.options.level >= Full && cx.batch.settled.is_none() {
        // At `full` the batch's settlement is recorded: contexts come after it.
        let message = format!(
            "{} injects a context before the batch settled (allResults)",
            here(cx)
        );
        cx.report(
            I::ContextsAfterAllResults,
            Some(v.call),
            vec![v.line],
            message,
        );
    }
})
.plants(|r| {
    let c = find(r, |x| {
        matches!(event_type(x), Some("user/message" | "context/message"))
    })?;
    let tr = find(r, |x| event_type(x) == Some("tool/result"))?;
    move_record(r, c, tr);
    Some(())
});

pub(crate) const CONTEXTS_FIFO: Rule = Rule::new(entry(
    I::ContextsFifo,
    Must,
    "The injected contexts are exactly the announced outcomes' `additionalContexts`, in the order the outcomes were announced and in each call's order: none lost, none invented. (At level `events` the announced outcomes are not in the trace: contexts follow the order of the calls' `tool/result` events.)",
    &[
        Doc("Active-batch additionalContexts FIFO"),
        Semantics(&[8, 9]),
    ],
    BatchEnd,
    Events,
    &[Read::Node(N::Context), Read::Node(N::Final)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    if v.node != Some(N::Context) || cx.call(v.call).is_sub_call() || !cx.batch.is_complete() {
        return;
    }
    let Some(text) = v.event().and_then(|e| context_text(&e.body)) else {
        return;
    };
    let id = cx.call(v.call).id.clone();
    if cx.options.level < Hooks {
        // FIFO of the recorded outcomes: a call whose tool/result came later injects later.
        let recorded = |k: usize| cx.call(k).commit.result;
        if let Some(last) = cx
            .batch
            .last_injected
            .filter(|&l| recorded(l) > recorded(v.call))
        {
            let message = format!(
                "line {} injects a context of call {id} after one of call {}, whose tool/result was recorded later",
                v.line,
                cx.call(last).id
            );
            cx.report(I::ContextsFifo, Some(v.call), vec![v.line], message);
        }
        return;
    }
    let expected = cx.batch.fifo.get(cx.batch.fifo_next).cloned();
    match (cx.batch.match_context(v.call, &text), expected) {
        // A context passed over was reported when the one after it came first.
        (ContextMatch::Next | ContextMatch::Skipped(_), _) => {}
        (ContextMatch::Later(_), Some((j, want, l))) => {
            let owner = cx.call(j).id.clone();
            cx.report(
                I::ContextsFifo,
                Some(v.call),
                vec![v.line, l],
                format!(
                    "line {} injects {text:?} for call {id}, but the next context in FIFO order is {want:?} of call {owner} (announced at line {l})",
                    v.line
                ),
            );
        }
        (ContextMatch::Unannounced | ContextMatch::Later(_), _) => cx.report(
            I::ContextsFifo,
            Some(v.call),
            vec![v.line],
            format!(
                "line {} injects {text:?} for call {id}, which no announced outcome carried",
                v.line
            ),
        ),
    }
})
.at_batch_end(|cx: &mut Cx<'_>| {
    if cx.options.level < Hooks {
        return;
    }
    let left: Vec<(usize, String, usize)> = cx.batch.owed_contexts().cloned().collect();
    for (i, text, l) in left {
        let id = cx.call(i).id.clone();
        cx.report(
            I::ContextsFifo,
            Some(i),
            vec![l],
            format!("context {text:?} of call {id} (announced at line {l}) was never injected"),
        );
    }
})
.plants(|r| {
    let c = find(r, |x| {
        matches!(event_type(x), Some("user/message" | "context/message"))
    })?;
    r.remove(c);
    Some(())
});

pub(crate) const CONTEXT_ORIGIN_ORDER: Rule = Rule::new(entry(
    I::ContextOriginOrder,
    Should,
    "Within a call, contexts are ordered tool-deferred, then wrapper, then post-execute.",
    &[Semantics(&[30, 34])],
    Stage,
    Hooks,
    &[Read::Node(N::Final)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(result) = v.observation().and_then(|o| o.result.as_ref()) else {
        return;
    };
    let origins: Vec<ContextOrigin> = result
        .additional_contexts
        .iter()
        .map(|c| c.origin)
        .collect();
    if origins.windows(2).any(|w| w[0] > w[1]) {
        let names: Vec<&str> = origins.iter().map(|o| o.as_str()).collect();
        let message = format!(
            "{} orders its contexts {}; expected tool, then wrapper, then post",
            v.here(&cx.call(v.call).id),
            names.join(", ")
        );
        cx.report(I::ContextOriginOrder, Some(v.call), vec![v.line], message);
    }
})
.plants(|r| {
    let f = find(r, |x| {
        stage(x).is_some_and(|o| {
            o.node == N::Final
                && o.result.as_ref().is_some_and(|res| {
                    res.additional_contexts
                        .windows(2)
                        .any(|w| w[0].origin != w[1].origin)
                })
        })
    })?;
    stage_mut(&mut r[f])?
        .result_mut()?
        .additional_contexts
        .reverse();
    Some(())
});

pub(crate) const BLOCK_DROPS_CONTEXTS: Rule = Rule::new(entry(
    I::BlockDropsContexts,
    Should,
    "A post-execute block keeps only the block decision's own contexts; tool-deferred and wrapper contexts are dropped.",
    &[Semantics(&[33])],
    Stage,
    Hooks,
    &[Read::Node(N::Post), Read::Node(N::Final)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    if v.node != Some(N::Final) {
        return;
    }
    let Some(result) = v.observation().and_then(|o| o.result.as_ref()) else {
        return;
    };
    let call = cx.call(v.call);
    if let Some((tep_model::graph::Outcome::Block, pl)) = call.decisions.post
        && result
            .additional_contexts
            .iter()
            .any(|c| c.origin != ContextOrigin::Post)
    {
        let message = format!(
            "{} keeps contexts from before the block at line {pl}",
            v.here(&call.id)
        );
        cx.report(I::BlockDropsContexts, Some(v.call), vec![v.line, pl], message);
    }
})
.plants(|r| {
    let p = find(r, |x| {
        is_stage(x, N::Post) && outcome_of(x) == Some(Outcome::Block)
    })?;
    let call = call_of(&r[p])?.clone();
    let f = find_after(r, p, &call, |x| is_stage(x, N::Final))?;
    stage_mut(&mut r[f])?
        .result_mut()?
        .additional_contexts
        .insert(
            0,
            AdditionalContext {
                origin: ContextOrigin::Tool,
                text: "kept despite the block".to_owned(),
            },
        );
    Some(())
});

pub(crate) const DEFERRED_CONTEXTS_SURVIVE_A_THROW: Rule = Rule::new(entry(
    I::DeferredContextsSurviveAThrow,
    Should,
    "Contexts a tool body deferred survive its failure: the failed result `tools/post-execute` is handed still carries them (origin `tool`).",
    &[Semantics(&[30])],
    Stage,
    Hooks,
    &[Read::Node(N::ToolBody), Read::Node(N::Post), Read::Scenario],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    if v.node != Some(N::Post) {
        return;
    }
    let Some(result) = v.observation().and_then(|o| o.result.as_ref()) else {
        return;
    };
    let call = cx.call(v.call);
    // A failed result from a body that ran: what it deferred before anything could end it
    // (the scenario's scripts say which) was deferred.
    if !result.is_error || !call.has_visited(N::ToolBody) {
        return;
    }
    let name = cx.scripted_name(v.call);
    let Some(deferred) = cx
        .options
        .facts
        .as_ref()
        .and_then(|f| f.deferred.get(name.as_str()))
    else {
        return;
    };
    let lost: Vec<&str> = deferred
        .iter()
        .filter(|text| {
            !result
                .additional_contexts
                .iter()
                .any(|c| c.origin == ContextOrigin::Tool && &c.text == *text)
        })
        .map(String::as_str)
        .collect();
    if lost.is_empty() {
        return;
    }
    let message = format!(
        "{} is handed the body's failure without the context(s) the body deferred before it failed ({}): deferred contexts survive a throw",
        v.here(&call.id),
        lost.iter().map(|t| format!("{t:?}")).collect::<Vec<_>>().join(", ")
    );
    cx.report(I::DeferredContextsSurviveAThrow, Some(v.call), vec![v.line], message);
})
.plants(|r| {
    // The failure reaches post-execute without what the body deferred, and so does every
    // later stage of the call.
    let deferred = |o: &tep_model::trace::Observation| {
        o.result.as_ref().is_some_and(|res| {
            res.is_error
                && res
                    .additional_contexts
                    .iter()
                    .any(|c| c.origin == ContextOrigin::Tool)
        })
    };
    let p = find(r, |x| is_stage(x, N::Post) && stage(x).is_some_and(deferred))?;
    let call = call_of(&r[p])?.clone();
    for record in r.iter_mut().skip(p) {
        if call_of(record) != Some(&call) {
            continue;
        }
        if let Some(res) = stage_mut(record).and_then(|o| o.result_mut()) {
            res.additional_contexts
                .retain(|c| c.origin != ContextOrigin::Tool);
        }
    }
    Some(())
});
