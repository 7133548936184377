//! Identity protected: one token, the call id, the tool name and the arguments the model sent,
//! handed to every stage.

use std::sync::Arc;

use serde_json::json;
use tep_model::graph::NodeId as N;

use super::plant::{find, stage, stage_mut};
use super::{Cx, Rule, Visit};
use crate::invariants::{
    CheckKind::Stage,
    InvariantId as I,
    Level::Must,
    Read,
    Source::{Doc, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const IDENTITY_UNCHANGED: Rule = Rule::new(entry(
    I::IdentityUnchanged,
    Must,
    "Every stage of a call is handed the same identity: one token, the call id, the tool name and the arguments the model sent.",
    &[Doc("identity protected"), Semantics(&[21])],
    Stage,
    Hooks,
    &[
        Read::Node(N::ToolCall),
        Read::Node(N::Pre),
        Read::Node(N::Guards),
        Read::Node(N::Around),
        Read::Node(N::ToolBody),
        Read::Node(N::Post),
        Read::Node(N::Finalize),
        Read::Node(N::Final),
    ],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(identity) = v.observation().and_then(|o| o.identity.as_ref()) else {
        return;
    };
    let call = cx.call(v.call);
    let mut differs = Vec::new();
    if identity.call_id != call.id {
        differs.push(format!("call id {}", identity.call_id));
    }
    if !call.name.is_empty() && identity.name != call.name {
        differs.push(format!("tool name {:?}", identity.name));
    }
    if let Some(args) = &call.start.args
        && &identity.arguments != args
    {
        differs.push(format!("arguments {}", identity.arguments));
    }
    let mut lines = vec![v.line];
    if let Some((first, first_line)) = &call.start.first_token
        && *first != identity.token
    {
        differs.push(format!(
            "token {} (line {first_line} saw {first})",
            identity.token
        ));
        lines.push(*first_line);
    }
    if differs.is_empty() {
        return;
    }
    let message = format!(
        "{}: the stage was handed {}",
        v.here(&call.id),
        differs.join(", ")
    );
    cx.report(I::IdentityUnchanged, Some(v.call), lines, message);
})
.plants(|r| {
    let g = find(r, |x| {
        stage(x).is_some_and(|o| o.node == N::Post && o.identity.is_some())
    })?;
    Arc::make_mut(stage_mut(&mut r[g])?.identity.as_mut()?).arguments =
        json!({"rewritten": true});
    Some(())
});
