//! The `tools/result` notification: before the recorded `tool/result`, synchronous in rev2 and
//! awaited in rev1, and the frozen outcome is what gets recorded.

use serde_json::{Value, json};
use tep_model::graph::NodeId as N;
use tep_model::result::ContentBlock;
use tep_model::session::{EventBody, ToolResultData};
use tep_model::trace::{MarkKind, TraceRecord};

use super::plant::{call_of, event_type, find, find_after, is_stage, move_record, result_data_mut};
use super::{Cx, Rule, Visit};
use crate::facts::recorded_content;
use crate::invariants::{
    CheckKind::{Stage, Step},
    InvariantId as I,
    Level::Must,
    Read,
    Source::{Doc, Edge, Semantics},
    entry,
};
use crate::observation::ObservationLevel::Hooks;

pub(crate) const NOTIFICATION_BEFORE_RESULT: Rule = Rule::new(entry(
    I::NotificationBeforeResult,
    Must,
    "The `tools/result` notification precedes the call's `tool/result` session event.",
    &[Edge(N::Final, N::ToolResult), Semantics(&[8])],
    Step,
    Hooks,
    &[Read::Node(N::ToolResult)],
))
.claims(|r| {
    (r.node == N::ToolResult && r.call.commit.notified.is_none()).then_some(())?;
    // The early record is the intrusion: the walk goes on to the notification.
    r.claim(
        format!(
            "{} after {}: tools/result was not notified before the outcome was recorded",
            r.here(),
            r.call.at_position()
        ),
        true,
    )
})
.plants(|r| {
    let f = find(r, |x| is_stage(x, N::Final))?;
    let call = call_of(&r[f])?.clone();
    let tr = find_after(r, f, &call, |x| event_type(x) == Some("tool/result"))?;
    move_record(r, tr, f);
    Some(())
});

pub(crate) const NOTIFICATION_SYNCHRONOUS: Rule = Rule::new(
    entry(
        I::NotificationSynchronous,
        Must,
        "`tools/result` is a synchronous notification: recording `tool/result` does not wait for an observer's asynchronous work.",
        &[Doc("synchronous notification"), Semantics(&[39])],
        Stage,
        Hooks,
        &[Read::Node(N::ToolResult), Read::ObserverMark],
    )
    .rev2(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    if v.node != Some(N::ToolResult) {
        return;
    }
    let call = cx.call(v.call);
    // Messages are built only for the marks that waited: a valid record builds nothing.
    let waited: Vec<(Vec<usize>, String)> = call
        .presented
        .observer_marks
        .iter()
        .filter(|(_, after, _)| *after > 0)
        .map(|(ml, after, by)| {
            (
                vec![v.line, *ml],
                format!(
                    "{} waited for observer {by}'s {after} ms of work (settled at line {ml})",
                    v.here(&call.id)
                ),
            )
        })
        .collect();
    for (lines, message) in waited {
        cx.report(I::NotificationSynchronous, Some(v.call), lines, message);
    }
})
.plants(|r| {
    let m = find(
        r,
        |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::ObserverSettled && m.after_ms > 0),
    )?;
    let call = call_of(&r[m])?.clone();
    let tr = find(r, |x| {
        event_type(x) == Some("tool/result") && call_of(x) == Some(&call)
    })?;
    if m < tr {
        return None;
    }
    move_record(r, m, tr);
    Some(())
});

pub(crate) const NOTIFICATION_AWAITED: Rule = Rule::new(
    entry(
        I::NotificationAwaited,
        Must,
        "`tools/result` is a parallel notification: the observers' work is awaited before `tool/result` is recorded.",
        &[
            Doc("parallel notification"),
            Doc("The awaited `tools/result` notification"),
        ],
        Stage,
        Hooks,
        &[Read::ObserverMark],
    )
    .rev1_only(),
)
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(mark) = v.mark() else { return };
    let call = cx.call(v.call);
    if let Some(result_line) = call.commit.result {
        let id = call.id.clone();
        cx.report(
            I::NotificationAwaited,
            Some(v.call),
            vec![v.line, result_line],
            format!(
                "line {} (observer {} settled, call {id}) after line {result_line} (tool/result): the notification was not awaited",
                v.line, mark.by
            ),
        );
    }
})
.plants(|r| {
    let m = find(
        r,
        |x| matches!(x, TraceRecord::Mark(m) if m.mark == MarkKind::ObserverSettled),
    )?;
    let call = call_of(&r[m])?.clone();
    let tr = find(r, |x| {
        event_type(x) == Some("tool/result") && call_of(x) == Some(&call)
    })?;
    if m > tr {
        return None;
    }
    move_record(r, m, tr + 1);
    Some(())
});

pub(crate) const FROZEN_OUTCOME: Rule = Rule::new(entry(
    I::FrozenOutcome,
    Must,
    "The `tool/result` event (a sub-call's `tool/code-dispatch`) records exactly the outcome `tools/result` announced: content, `isError` and error code.",
    &[Doc("frozen authoritative outcome"), Semantics(&[39])],
    Stage,
    Hooks,
    &[Read::Node(N::ToolResult), Read::Node(N::Dispatched)],
))
.visits(|cx: &mut Cx<'_>, v: &Visit<'_>| {
    let Some(event) = v.event() else { return };
    let call = cx.call(v.call);
    let Some((announced, nl)) = &call.commit.notified else {
        return;
    };
    let announced_code = announced.error_code();
    // Equal outcomes (every valid record) are told apart on the typed values, without building
    // anything: this runs on every `tool/result`.
    let same = match &event.body {
        EventBody::ToolResult(data) => {
            data.is_error() == announced.is_error
                && data.error().map(|e| e.code.as_str()) == announced_code
                && recorded_content(data).eq(announced.content.iter())
        }
        EventBody::CodeDispatch(data) => {
            data.is_error == announced.is_error
                && data.content.as_ref().is_none_or(|c| *c == announced.content)
        }
        _ => return,
    };
    if same {
        return;
    }
    // The outcome's fields, as JSON, to name the first that differs.
    let (recorded, expected) = match &event.body {
        EventBody::ToolResult(data) => (
            json!({"content": data.content(), "isError": data.is_error(),
                   "error code": data.error().map(|e| e.code.as_str())}),
            json!({"content": announced.content, "isError": announced.is_error,
                   "error code": announced_code}),
        ),
        // A sub-call's record has no error code, and may leave the content out.
        EventBody::CodeDispatch(data) => match &data.content {
            Some(content) => (
                json!({"content": content, "isError": data.is_error}),
                json!({"content": announced.content, "isError": announced.is_error}),
            ),
            None => (
                json!({"isError": data.is_error}),
                json!({"isError": announced.is_error}),
            ),
        },
        _ => return,
    };
    if let Some(difference) = first_difference(&recorded, &expected, String::new()) {
        let message = format!(
            "line {} ({}, call {}) differs from the outcome tools/result announced at line {nl}: {difference}",
            v.line,
            event.body.type_name(),
            call.id
        );
        cx.report(I::FrozenOutcome, Some(v.call), vec![v.line, *nl], message);
    }
})
.plants(|r| {
    let tr = find(r, |x| event_type(x) == Some("tool/result"))?;
    match result_data_mut(&mut r[tr])? {
        ToolResultData::Message(m) => m
            .message
            .content
            .first_mut()?
            .content
            .push(ContentBlock::text("tampered")),
        ToolResultData::Flat(f) => f.content.push(ContentBlock::text("tampered")),
    }
    Some(())
});

/// The longest a value is quoted in a difference (then cut, with `…`).
const QUOTE: usize = 120;

/// The first place two JSON values differ, as `path recorded, announced expected` (the path in
/// `content[0].text` form), or `None` when they are equal: a small diff that names the field.
fn first_difference(recorded: &Value, announced: &Value, path: String) -> Option<String> {
    match (recorded, announced) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            keys.into_iter().find_map(|k| {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                first_difference(
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                    child,
                )
            })
        }
        (Value::Array(a), Value::Array(b)) => (0..a.len().max(b.len())).find_map(|i| {
            let at = format!("{path}[{i}]");
            match (a.get(i), b.get(i)) {
                (Some(x), Some(y)) => first_difference(x, y, at),
                (Some(x), None) => Some(format!(
                    "{at} {} is extra (announced {} item(s))",
                    quote(x),
                    b.len()
                )),
                (None, y) => Some(format!(
                    "{at} is missing, announced {}",
                    y.map_or_else(String::new, quote)
                )),
            }
        }),
        _ if recorded == announced => None,
        _ => Some(format!(
            "{path} {}, announced {}",
            quote(recorded),
            quote(announced)
        )),
    }
}

/// A JSON value as compact JSON, cut at [`QUOTE`] characters.
fn quote(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(QUOTE) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_difference_names_the_field_and_both_values() {
        let recorded =
            json!({"content": [{"type": "text", "text": "hello\n(edited)"}], "isError": false});
        let announced = json!({"content": [{"type": "text", "text": "hello"}], "isError": false});
        assert_eq!(
            first_difference(&recorded, &announced, String::new()).as_deref(),
            Some(r#"content[0].text "hello\n(edited)", announced "hello""#)
        );
        let flipped = json!({"content": [], "isError": true});
        assert_eq!(
            first_difference(
                &flipped,
                &json!({"content": [], "isError": false}),
                String::new()
            )
            .as_deref(),
            Some("isError true, announced false")
        );
        assert_eq!(first_difference(&recorded, &recorded, String::new()), None);
    }

    #[test]
    fn arrays_of_other_lengths_and_long_values_are_quoted_short() {
        let long = "x".repeat(500);
        let d = first_difference(
            &json!({"content": [long]}),
            &json!({"content": []}),
            String::new(),
        )
        .unwrap_or_default();
        assert!(d.starts_with("content[0] \"xxx"), "{d}");
        assert!(d.ends_with("… is extra (announced 0 item(s))"), "{d}");
        assert!(d.chars().count() < 200, "{d}");
        // A block appended after the announced ones: the first extra one is named.
        let hello = json!({"type": "text", "text": "hello"});
        let edited = json!({"type": "text", "text": "(edited)"});
        assert_eq!(
            first_difference(
                &json!({"content": [hello, edited]}),
                &json!({"content": [hello]}),
                String::new()
            )
            .as_deref(),
            Some(r#"content[1] {"text":"(edited)","type":"text"} is extra (announced 1 item(s))"#)
        );
        assert_eq!(
            first_difference(
                &json!({"content": []}),
                &json!({"content": [hello]}),
                String::new()
            )
            .as_deref(),
            Some(r#"content[0] is missing, announced {"text":"hello","type":"text"}"#)
        );
    }
}
