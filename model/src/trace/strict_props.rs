//! [`super::session_event_strict`] against the strict reader, on generated session event lines:
//! whatever the one strict typed pass reads, [`crate::strict_json::value_from_str`] accepts,
//! and the lenient typed pass reads the same event. The lines put keys named twice where the
//! pass reads by hand, where it hands a value to serde, and inside such values.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use super::{
    EventRecord, event_record_strict, event_record_type_first, session_event_strict,
    session_event_type_first,
};
use crate::strict_json::value_from_str;

/// A JSON value whose objects draw their keys from two, so that some name one twice.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(vec![
        "1",
        "-2",
        "2.5",
        "1e400",
        "\"s\"",
        "\"\\u00e9\"",
        "\"\\ud800\"",
        "null",
        "true",
    ])
    .prop_map(str::to_owned);
    leaf.prop_recursive(3, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("[{}]", v.join(","))),
            prop::collection::vec((prop::sample::select(vec!["a", "b"]), inner), 0..3).prop_map(
                |m| {
                    let members: Vec<String> =
                        m.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", members.join(","))
                }
            ),
        ]
    })
}

/// Members drawn from `pool` (each `"key":value`), some more than once, in any order.
fn members(pool: Vec<&'static str>) -> impl Strategy<Value = String> {
    let n = pool.len();
    prop::collection::vec(prop::sample::select(pool), n - 1..n + 2)
        .prop_shuffle()
        .prop_map(|m| m.join(","))
}

const RESULT_MESSAGE: &str = r#""message":{"source":{"kind":"tool","callId":"a"},"content":[{"type":"tool-result","toolCallId":"a","content":[{"type":"text","text":"ok"}],"isError":false}],"role":"user","id":"m"}"#;

fn line() -> impl Strategy<Value = String> {
    let event =
        |kind: &str, data: String| format!(r#"{{"type":"{kind}","seq":1,"time":2,"data":{data}}}"#);
    let hook_result = members(vec![
        r#""turn":1"#,
        r#""point":"PreToolUse""#,
        r#""handlerId":"h""#,
        r#""decision":"deny""#,
        r#""exitCode":-1"#,
        r#""durationMs":89.61006599999928"#,
        r#""stderrSummary":null"#,
    ])
    .prop_map(move |m| event("hook/result", format!("{{{m}}}")));
    let hook_invoked = members(vec![
        r#""turn":1"#,
        r#""point":"PostToolUse""#,
        r#""dialect":"claude-code""#,
        r#""matcher":"x.*""#,
        r#""handlerId":"h""#,
    ])
    .prop_map(move |m| event("hook/invoked", format!("{{{m}}}")));
    let result = value().prop_map(move |meta| {
        event(
            "tool/result",
            format!(r#"{{"turn":1,"step":1,{RESULT_MESSAGE},"meta":{meta}}}"#),
        )
    });
    let dispatch = value().prop_map(move |arguments| {
        event(
            "tool/code-dispatch-start",
            format!(
                r#"{{"rootCallId":"a","parentCallId":"a","subCallId":"a:1","name":"x","arguments":{arguments}}}"#
            ),
        )
    });
    let asked = members(vec![
        r#""id":"p""#,
        r#""toolName":"x""#,
        r#""callId":"a""#,
        r#""reason":null"#,
    ])
    .prop_map(move |m| event("approval/asked", format!("{{{m}}}")));
    let edit = prop_oneof![
        3 => Just(None),
        1 => (
            any::<prop::sample::Index>(),
            prop::sample::select(vec!["", "{", "}", ",", ":", "\"", "\\", " "]),
        )
            .prop_map(Some),
    ];
    (
        prop_oneof![hook_result, hook_invoked, result, dispatch, asked],
        edit,
    )
        .prop_map(|(text, edit)| match edit {
            None => text,
            Some((at, with)) => {
                let i = at.index(text.len());
                // Only at a character boundary (the lines are ASCII but for escapes' output).
                if !text.is_char_boundary(i) {
                    return text;
                }
                let rest = if with.is_empty() {
                    (i + 1).min(text.len())
                } else {
                    i
                };
                format!("{}{with}{}", &text[..i], &text[rest..])
            }
        })
}

proptest! {
    /// Whatever the strict typed pass reads, the strict reader accepts, and the lenient pass
    /// reads the same event.
    #[test]
    fn strict_means_the_strict_reader_accepts_the_line(text in line()) {
        if let Some(event) = session_event_strict(&text) {
            let read = value_from_str(&text);
            prop_assert!(read.is_ok(), "read {text:?}, refused: {read:?}");
            prop_assert_eq!(session_event_type_first(&text), Some(event), "{:?}", text);
        }
    }

    /// The readers into a box read what the others read, line for line, and name no call.
    #[test]
    fn a_boxed_record_holds_the_event_the_pass_reads(text in line()) {
        let boxed = |event| Box::new(EventRecord { call: None, event });
        prop_assert_eq!(event_record_strict(&text), session_event_strict(&text).map(boxed));
        prop_assert_eq!(
            event_record_type_first(&text),
            session_event_type_first(&text).map(boxed)
        );
    }
}

/// The property is not empty: the usual lines of each kind are read.
#[test]
fn the_usual_lines_are_read_strictly() {
    let lines = [
        r#"{"type":"hook/result","seq":1,"time":2,"data":{"turn":1,"point":"PreToolUse","handlerId":"h","decision":"deny","exitCode":0,"durationMs":89.61006599999928}}"#.to_owned(),
        r#"{"type":"hook/invoked","seq":1,"time":2,"data":{"turn":1,"point":"PreToolUse","dialect":"claude-code","handlerId":"h","matcher":null}}"#.to_owned(),
        format!(r#"{{"type":"tool/result","seq":1,"time":2,"data":{{"turn":1,"step":1,{RESULT_MESSAGE},"meta":{{"a":[1,2.5,{{"b":null}}]}}}}}}"#),
        r#"{"type":"tool/code-dispatch-start","seq":1,"time":2,"data":{"rootCallId":"a","parentCallId":"a","subCallId":"a:1","name":"x","arguments":{"a":{"b":-2},"b":"s"}}}"#.to_owned(),
        r#"{"type":"approval/asked","seq":1,"time":2,"data":{"id":"p","toolName":"x","callId":"a"}}"#.to_owned(),
    ];
    for line in &lines {
        let strict = session_event_strict(line);
        assert!(strict.is_some(), "{line}");
        assert_eq!(strict, session_event_type_first(line), "{line}");
        assert_eq!(
            event_record_strict(line).map(|r| (r.call, r.event)),
            strict.clone().map(|e| (None, e)),
            "{line}"
        );
        // Whatever follows the event is not part of it: every reader declines the line.
        let more = format!("{line} {line}");
        assert_eq!(session_event_type_first(&more), None, "{more}");
        assert_eq!(event_record_type_first(&more), None, "{more}");
        assert_eq!(event_record_strict(&more), None, "{more}");
        let general: super::SessionEvent =
            serde_json::from_value(value_from_str(line).unwrap()).unwrap();
        assert_eq!(strict, Some(general), "{line}");
    }
}
