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
    // A stage handed the identity an earlier stage of the call was (shared by the reader)
    // matches as that one did: every valid record ends here.
    if call.start.handed_before(identity) {
        return;
    }
    let diff = call.identity_diff(identity);
    let mut differs = Vec::new();
    if diff.call_id {
        differs.push(format!("call id {}", identity.call_id));
    }
    if diff.name {
        differs.push(format!("tool name {:?}", identity.name));
    }
    if diff.arguments {
        differs.push(format!("arguments {}", identity.arguments));
    }
    let mut token_line = None;
    if let Some((first, first_line)) = diff.token {
        differs.push(format!(
            "token {} (line {first_line} saw {first})",
            identity.token
        ));
        token_line = Some(first_line);
    }
    if differs.is_empty() {
        return;
    }
    let lines = std::iter::once(v.line).chain(token_line).collect();
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use tep_model::graph::Revision;

    use crate::facts::CheckOptions;
    use crate::invariants::InvariantId;

    /// A call's first stages; `guards` is handed `token` and `path`.
    fn trace(token: &str, path: &str) -> String {
        let identity = |token: &str, path: &str| {
            format!(
                r#"{{"token":"{token}","callId":"c1","name":"read","arguments":{{"path":"{path}"}}}}"#
            )
        };
        [
            r#"{"kind":"stage","node":"model","calls":[{"callId":"c1","name":"read","concurrencySafe":false}]}"#.to_owned(),
            r#"{"kind":"event","call":"c1","event":{"seq":1,"time":0,"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{\"path\":\"a.txt\"}"}}}"#.to_owned(),
            format!(
                r#"{{"kind":"stage","node":"pre","call":"c1","outcome":"allow","identity":{}}}"#,
                identity("tok-1", "a.txt")
            ),
            format!(
                r#"{{"kind":"stage","node":"guards","call":"c1","outcome":"allow","identity":{}}}"#,
                identity(token, path)
            ),
        ]
        .join("\n")
    }

    #[test]
    fn a_stage_handed_the_identity_an_earlier_one_matched_is_compared_again_when_the_call_changed()
    {
        // `pre` comes before the call's `tool/call` (out of order): its identity matched what
        // was known then. `guards` repeats it byte for byte (the reader shares it), but the
        // `tool/call` in between sent other arguments.
        let identity =
            r#"{"token":"tok-1","callId":"c1","name":"read","arguments":{"path":"a.txt"}}"#;
        let text = [
            r#"{"kind":"stage","node":"model","calls":[{"callId":"c1","name":"read","concurrencySafe":false}]}"#.to_owned(),
            format!(r#"{{"kind":"stage","node":"pre","call":"c1","outcome":"allow","identity":{identity}}}"#),
            r#"{"kind":"event","call":"c1","event":{"seq":1,"time":0,"type":"tool/call","data":{"turn":1,"step":1,"callId":"c1","name":"read","arguments":"{\"path\":\"b.txt\"}"}}}"#.to_owned(),
            format!(r#"{{"kind":"stage","node":"guards","call":"c1","outcome":"allow","identity":{identity}}}"#),
            format!(r#"{{"kind":"stage","node":"around","call":"c1","identity":{identity}}}"#),
        ]
        .join("\n");
        let changed = found(&text);
        let lines: Vec<&[usize]> = changed.iter().map(|(l, _)| l.as_slice()).collect();
        assert_eq!(lines, [[4], [5]], "{changed:?}");
        assert!(
            changed[0].1.contains(r#"arguments {"path":"a.txt"}"#),
            "{changed:?}"
        );
    }

    fn found(text: &str) -> Vec<(Vec<usize>, String)> {
        let options = CheckOptions::new(Revision::Rev2);
        crate::trace_io::check_reader(&options, text.as_bytes())
            .unwrap()
            .violations
            .into_iter()
            .filter(|v| v.invariant == InvariantId::IdentityUnchanged)
            .map(|v| (v.lines, v.message))
            .collect()
    }

    #[test]
    fn a_changed_token_names_the_line_that_saw_the_first_one() {
        assert_eq!(found(&trace("tok-1", "a.txt")), []);
        let changed = found(&trace("tok-2", "a.txt"));
        assert_eq!(changed.len(), 1, "{changed:?}");
        assert_eq!(changed[0].0, [4, 3]);
        assert!(
            changed[0].1.contains("token tok-2 (line 3 saw tok-1)"),
            "{changed:?}"
        );
        // Other arguments: the offending line alone.
        let rewritten = found(&trace("tok-1", "b.txt"));
        assert_eq!(rewritten.len(), 1, "{rewritten:?}");
        assert_eq!(rewritten[0].0, [4]);
        assert!(
            rewritten[0].1.contains(r#"arguments {"path":"b.txt"}"#),
            "{rewritten:?}"
        );
    }
}
