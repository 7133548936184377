//! The waterfalls' own order: `tools/pre-execute` and `tools/post-execute` enter their listeners
//! in registration order, outermost first (reference semantics 16).
//!
//! A trace says which listeners a stage entered, in order (`listeners`), but not the order they
//! were registered in: that is the scenario's (drive mode), so the rule reads it there and is
//! silent in replay mode.

use tep_model::graph::NodeId as N;

use super::plant::{find, stage, stage_mut};
use super::{Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::Stage, InvariantId as I, Level::Should, Read, Source::Semantics, entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const WATERFALL_REGISTRATION_ORDER: Rule = Rule::new(entry(
    I::WaterfallRegistrationOrder,
    Should,
    "The `tools/pre-execute` and `tools/post-execute` waterfalls enter their listeners in registration order, outermost first: the listeners a stage entered are the first ones registered, in that order (a listener that does not call `next()` vetoes the rest, never an earlier one).",
    &[Semantics(&[16])],
    Stage,
    Hooks,
    &[Read::Node(N::Pre), Read::Node(N::Post), Read::Scenario],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let (Some(obs), Some(facts)) = (v.observation(), cx.options.facts.as_ref()) else {
        return;
    };
    let registered = match v.node {
        Some(N::Pre) => &facts.pre,
        Some(N::Post) => &facts.post,
        _ => return,
    };
    let Some(entered) = obs.listeners.as_deref() else {
        return;
    };
    // The scenario's listeners only: an implementation's own are not the scenario's to order.
    let entered: Vec<&String> = entered
        .iter()
        .filter(|id| registered.contains(id))
        .collect();
    let out_of_order = entered.len() > registered.len()
        || entered.iter().zip(registered).any(|(e, r)| *e != r);
    if !out_of_order {
        return;
    }
    let call = cx.call(v.call);
    let list = |ids: &mut dyn Iterator<Item = &String>| {
        ids.map(String::as_str).collect::<Vec<_>>().join(", ")
    };
    let message = format!(
        "{} entered the listeners [{}], but they are registered as [{}]: a waterfall enters them in registration order, outermost first, so it enters the first {} registered",
        v.here(&call.id),
        list(&mut entered.iter().copied()),
        list(&mut registered.iter()),
        entered.len().min(registered.len()),
    );
    cx.report(I::WaterfallRegistrationOrder, Some(v.call), vec![v.line], message);
})
.plants(|r| {
    // Listeners entered last registered first, as a waterfall that prepends each listener it
    // is handed would.
    let n = find(r, |x| {
        stage(x).is_some_and(|o| {
            matches!(o.node, N::Pre | N::Post)
                && o.listeners.as_ref().is_some_and(|l| l.len() >= 2)
        })
    })?;
    stage_mut(&mut r[n])?.listeners.as_mut()?.reverse();
    Some(())
});
