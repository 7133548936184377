//! `tep check --from deepseek-harness`: the harness's own session log checked at `events`, with
//! the lines of the original file in every message, and what the log cannot show said plainly.
//! The logs are in `tests/data/deepseek-harness/` (README.md there says how each was made).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::util::tep_command;

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Output, Stdio};

use serde_json::Value;

fn log(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/deepseek-harness")
        .join(name)
}

/// Line `n` (from 1) of a log.
fn line_of(name: &str, n: usize) -> String {
    let text = std::fs::read_to_string(log(name)).unwrap();
    text.lines().nth(n - 1).unwrap().to_owned()
}

fn check(name: &str, args: &[&str]) -> Output {
    tep_command()
        .arg("check")
        .arg(log(name))
        .args(["--from", "deepseek-harness"])
        .args(args)
        .output()
        .unwrap()
}

fn check_stdin(bytes: &[u8], args: &[&str]) -> Output {
    let mut child = tep_command()
        .args(["check", "-", "--from", "deepseek-harness"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader may stop early (at a refused first line): a broken pipe is fine.
    let _ = child.stdin.take().unwrap().write_all(bytes);
    child.wait_with_output().unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

/// Checks `bytes` read from stdin with `args`: exit `code`, and the output says `says`.
fn stdin_says(bytes: &[u8], args: &[&str], code: i32, says: &str) -> String {
    let o = check_stdin(bytes, args);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(code), "{text}");
    assert!(text.contains(says), "{text}");
    text
}

fn json(name: &str, args: &[&str]) -> Value {
    let o = check(name, &[args, &["--format", "json"]].concat());
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", out(&o)))
}

fn ids(report: &Value, field: &str) -> Vec<String> {
    report[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            v.as_str()
                .map_or_else(|| v["invariant"].to_string(), str::to_owned)
        })
        .map(|s| s.trim_matches('"').to_owned())
        .collect()
}

/// (invariant, lines) of each violation.
fn violations(report: &Value) -> Vec<(String, Vec<u64>)> {
    report["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let lines = v["lines"].as_array().unwrap();
            (
                v["invariant"].as_str().unwrap().to_owned(),
                lines.iter().map(|l| l.as_u64().unwrap()).collect(),
            )
        })
        .collect()
}

const REAL: &str = "rc8-session.jsonl";

#[test]
fn the_real_log_passes_at_events_and_the_report_says_how_it_was_read() {
    let o = check(REAL, &["--safe", "read_file,list_dir"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("at level events, 30 records, 2 batch(es)"),
        "{text}"
    );
    assert!(
        text.contains("read as a deepseek-harness session log (session native-demo): 73 line(s), 30 trace record(s), 43 line(s) passed over"),
        "{text}"
    );
    assert!(text.contains("0 violation(s)"), "{text}");
    let report = json(REAL, &["--safe", "read_file,list_dir"]);
    assert_eq!(report["conformant"], true);
    // A log sees few invariants: a pass says how few, never a plain "conformant".
    let of = |k: &str| report[k].as_array().unwrap().len();
    let judged = of("checked") + of("partlyCheckable");
    let applicable = judged + of("notCheckable");
    let summary = format!("{judged} of {applicable} invariants checkable, no violation");
    assert!(2 * judged < applicable, "{report}");
    assert_eq!(report["verdict"], "conformant");
    assert_eq!(report["summary"], summary.as_str());
    assert!(text.contains(&format!("verdict: {summary}\n")), "{text}");
    assert_eq!(report["observation"], "events");
    assert_eq!(report["sessionLog"]["lines"], 73);
    assert_eq!(report["sessionLog"]["unknownTypes"], serde_json::json!([]));
    assert_eq!(
        report["sessionLog"]["safe"],
        serde_json::json!(["list_dir", "read_file"])
    );
    let checked = ids(&report, "checked");
    for id in [
        "exclusive-barrier",
        "contexts-after-all-results",
        "model-order-commit",
    ] {
        assert!(checked.contains(&id.to_owned()), "{id}: {checked:?}");
    }
}

/// The real log injects the contexts of sub-calls c7:code:1 and c7:code:3 (lines 65 and 66,
/// the harness's known divergence). The log attributes them to the `run_code` call: `events`
/// cannot see the breach, and the report says so rather than listing it as checked.
#[test]
fn injected_sub_call_contexts_are_reported_as_not_checkable_from_the_log() {
    assert!(line_of(REAL, 65).contains("hook: c7:code:1 read a file"));
    assert!(line_of(REAL, 66).contains("hook: c7:code:3 read a file"));
    let o = check(REAL, &["--safe", "read_file,list_dir"]);
    let text = out(&o);
    assert!(
        text.contains("not checkable from this log: sub-call-contexts-omitted: the harness defers a Code Mode sub-call's contexts onto its `run_code` result"),
        "{text}"
    );
    let report = json(REAL, &["--safe", "read_file,list_dir"]);
    assert!(!ids(&report, "checked").contains(&"sub-call-contexts-omitted".to_owned()));
    let why = report["notCheckable"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["invariant"] == "sub-call-contexts-omitted")
        .map(|v| v["why"].as_str().unwrap().to_owned())
        .unwrap();
    assert!(
        why.contains("cannot be told from the `run_code` call's own"),
        "{why}"
    );
}

#[test]
fn without_safe_the_barrier_is_not_checkable_and_the_report_says_why() {
    let o = check(REAL, &[]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains("not checkable from this log: exclusive-barrier: the log does not say which calls are concurrency-safe"),
        "{text}"
    );
    let report = json(REAL, &[]);
    assert!(!ids(&report, "checked").contains(&"exclusive-barrier".to_owned()));
    assert_eq!(report["sessionLog"]["safe"], Value::Null);
}

/// c3 (write_file, exclusive) is logged at line 29, before the result of c2 (list_dir) at
/// line 30: only `--safe` lets the checker see the breach, at the log's own lines.
#[test]
fn a_barrier_breach_is_found_with_safe_at_the_lines_of_the_log() {
    let name = "barrier-breach.jsonl";
    assert!(line_of(name, 29).contains(r#""callId":"c3""#));
    assert!(line_of(name, 30).contains(r#""callId":"c2""#));
    let without = json(name, &[]);
    assert_eq!(violations(&without), []);
    let with = json(name, &["--safe", "read_file,list_dir"]);
    assert_eq!(
        violations(&with),
        [
            ("exclusive-barrier".to_owned(), vec![29, 26]),
            ("exclusive-barrier".to_owned(), vec![30, 29]),
        ]
    );
    let o = check(name, &["--safe", "read_file,list_dir"]);
    assert_eq!(o.status.code(), Some(0), "a SHOULD: {}", out(&o));
    assert!(
        out(&o).contains("exclusive-barrier [SHOULD]: line 29 (toolCall, call c3)"),
        "{}",
        out(&o)
    );
    let strict = check(name, &["--safe", "read_file,list_dir", "--strict"]);
    assert_eq!(strict.status.code(), Some(1), "{}", out(&strict));
}

/// c1's context injected (line 29) right after it was staged, before c2's result.
#[test]
fn a_context_injected_before_the_batch_settles_fails_at_the_lines_of_the_log() {
    let name = "context-before-results.jsonl";
    assert!(line_of(name, 29).contains("hook: c1 read a file"));
    assert!(line_of(name, 29).contains(r#""type":"user/message""#));
    let o = check(name, &["--safe", "read_file,list_dir"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("contexts-after-all-results [MUST]: line 29 (context, call c1) injects a context before call c2's tool/result (last seen at line 26)"),
        "{text}"
    );
    let report = json(name, &["--safe", "read_file,list_dir"]);
    assert_eq!(
        violations(&report),
        [("contexts-after-all-results".to_owned(), vec![29, 26])]
    );
    assert_eq!(report["conformant"], false);
}

#[test]
fn an_unknown_event_type_is_passed_over_and_counted() {
    let name = "unknown-type.jsonl";
    assert!(line_of(name, 27).contains("tool/frobnicated"));
    let o = check(name, &["--safe", "read_file,list_dir"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains(
            "passed over 1 event(s) of unknown type `tool/frobnicated` (first at line 27)"
        ),
        "{text}"
    );
    let report = json(name, &[]);
    assert_eq!(
        report["sessionLog"]["unknownTypes"],
        serde_json::json!([{"type": "tool/frobnicated", "count": 1, "firstLine": 27}])
    );
    // The packed chunk row (a storage row, not an event type) is not unknown.
    assert_eq!(report["sessionLog"]["passedOver"], 44);
}

/// A newer harness adds fields to its events: tep passes over those its types do not declare,
/// says which, and checks the log as it checks the same log without them.
#[test]
fn fields_the_harness_adds_to_its_events_are_passed_over_and_counted() {
    let name = "cli-s2-added-fields.jsonl";
    assert!(line_of(name, 49).contains(r#""sessionKey":"dsh-s2""#));
    assert!(line_of(name, 54).contains(r#""createdAt":"#));
    let o = check(name, &["--safe", "web_search"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    for line in [
        "passed over `data.sessionKey` in 20 `hook/invoked` event(s), a field tep does not read (first at line 49)",
        "passed over `data.sessionKey` in 20 `hook/result` event(s), a field tep does not read (first at line 51)",
        "passed over `data.message.createdAt` in 10 `tool/result` event(s), a field tep does not read (first at line 54)",
    ] {
        assert!(text.contains(line), "{text}");
    }
    let report = json(name, &["--safe", "web_search", "--strict"]);
    assert_eq!(
        report["sessionLog"]["unknownFields"][2],
        serde_json::json!({"type": "tool/result", "field": "data.message.createdAt",
                           "count": 10, "firstLine": 54})
    );
    // Everything else is the report of the log without them.
    let mut original = json("rc8-cli-s2.jsonl", &["--safe", "web_search", "--strict"]);
    let mut added = report;
    for report in [&mut original, &mut added] {
        // The file's path is the one thing else that differs.
        report.as_object_mut().unwrap().remove("trace");
        report["sessionLog"]
            .as_object_mut()
            .unwrap()
            .remove("unknownFields");
    }
    assert_eq!(added, original);
}

/// The shipped harness's `read_image` answers with an `image` block, a user may attach one, and
/// Code Mode defers a sub-call's image as a plugin message: the log checks as it does without
/// them (tep reads no text from such a block). Before, the whole log was refused at line 33.
#[test]
fn content_blocks_of_other_types_than_text_are_kept_and_the_log_checks_as_without_them() {
    let name = "cli-s3-image-content.jsonl";
    for (line, what) in [
        (9, "run the probe scenario"),
        (33, r#""subCallId":"rc1:code:1""#),
        (66, r#""callId":"c7""#),
        (70, "ctx_from_k1"),
    ] {
        let text = line_of(name, line);
        assert!(
            text.contains(what) && text.contains(r#"{"type":"image","attachment":"#),
            "{text}"
        );
    }
    checks_as_the_real_log(name, "rc8-cli-s3.jsonl");
}

/// A message source of a plugin's own kind (the harness's sources are merge-extensible) is
/// kept whole: the log checks as it does with the source the harness wrote. Before, the whole
/// log was refused at line 70 ("unknown variant `goal`").
#[test]
fn a_message_source_of_a_plugins_own_kind_is_kept_and_the_log_checks_as_without_it() {
    let name = "cli-s3-plugin-source.jsonl";
    let text = line_of(name, 70);
    assert!(
        text.contains(r#""source":{"kind":"goal","#) && text.contains("ctx_from_k1"),
        "{text}"
    );
    checks_as_the_real_log(name, "rc8-cli-s3.jsonl");
}

/// A log cut short inside its turn (a session still running, or killed) is not judged for
/// what its last batch's end would owe: the five calls without a result yet are no violation,
/// and the report says why. With the turn ended, the same five calls break
/// `one-result-per-call`.
#[test]
fn a_log_cut_short_inside_its_turn_is_not_judged_for_what_its_batch_still_owes() {
    let name = "cli-s2-cut-in-batch.jsonl";
    let o = check(name, &["--safe", "web_search", "--strict"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("the log ends inside the turn begun at line 6 (no `turn/end`): cut short, so what its last batch's end would owe (a result per call, contexts, dispatch events) is not judged"), "{text}");
    assert!(text.contains("0 violation(s)"), "{text}");
    let report = json(name, &["--safe", "web_search"]);
    assert_eq!(report["sessionLog"]["endsInsideTurn"], 6);
    assert_eq!(
        json("rc8-cli-s2.jsonl", &[])["sessionLog"]["endsInsideTurn"],
        Value::Null
    );
    let mut ended = std::fs::read(log(name)).unwrap();
    ended.extend_from_slice(
        br#"{"type":"turn/end","seq":79,"time":1796448866266,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    );
    let o = check_stdin(&ended, &["--safe", "web_search"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    for call in ["s1", "s2", "s3", "s4", "c6"] {
        assert!(text.contains(&format!("one-result-per-call [MUST]: call {call} (declared at line 47) never got a tool/result")), "{text}");
    }
    assert!(!text.contains("the log ends inside"), "{text}");
}

/// A session a crash interrupted while c5's body ran, then reloaded: the harness closed the
/// turn with results of its own (c5's outcome unknown; s1-s4 and c6 never started, with no
/// `tool/call`), `step/end` and a `turn/end` of reason `interrupted`, and the session went on
/// with a second turn. Those results are no pipeline event and the first batch is cut short
/// there; the second batch is judged whole. Before, the five results of calls that never
/// started each broke `tool-call-first` (MUST).
#[test]
fn a_turn_a_crash_interrupted_and_the_harness_closed_on_reload_is_cut_short_there() {
    let name = "cli-s2-crash-reloaded.jsonl";
    for line in 78..=83 {
        let text = line_of(name, line);
        assert!(
            text.contains(r#""type":"tool/result""#) && text.contains(r#""code":"TOOL_"#),
            "{text}"
        );
    }
    assert!(line_of(name, 85).contains(r#""reason":{"kind":"interrupted"}"#));
    let o = check(name, &["--safe", "web_search", "--strict"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("the turn begun at line 6 was interrupted (a crash): the harness closed it when it reloaded the session, with result(s) for calls that never finished at line(s) 78, 79, 80, 81, 82, 83 (not pipeline events); its batch is cut short at line 78, so what that batch's end would owe (a result per call, contexts, dispatch events) is not judged"), "{text}");
    assert!(
        text.contains("2 batch(es)") && text.contains("0 violation(s)"),
        "{text}"
    );
    let report = json(name, &["--safe", "web_search"]);
    assert_eq!(
        report["sessionLog"]["interruptedTurns"],
        serde_json::json!([{"turnLine": 6, "cutLine": 78, "recoveredResults": [78, 79, 80, 81, 82, 83]}])
    );
    assert_eq!(report["sessionLog"]["endsInsideTurn"], Value::Null);
    assert_eq!(
        json("rc8-cli-s2.jsonl", &[])["sessionLog"]["interruptedTurns"],
        serde_json::json!([])
    );

    // The cut ends with its batch: the second turn's p5 without its result still breaks
    // `one-result-per-call`.
    let text = std::fs::read_to_string(log(name)).unwrap();
    let p5_result = r#""type":"tool/result","seq":153,"#;
    assert!(text.contains(p5_result) && text.contains(r#""callId":"p5""#));
    let without: String = text
        .lines()
        .filter(|l| !l.contains(p5_result))
        .map(|l| format!("{l}\n"))
        .collect();
    stdin_says(
        without.as_bytes(),
        &["--safe", "web_search"],
        1,
        "one-result-per-call [MUST]: call p5 (declared at line 119) never got a tool/result",
    );

    // Results of other error codes are the pipeline's, and judged: s1 has no `tool/call`.
    let recoded = text
        .replace("TOOL_NOT_STARTED", "ABORTED_BEFORE_DISPATCH")
        .replace("TOOL_OUTCOME_UNKNOWN", "ABORTED");
    let out_text = stdin_says(
        recoded.as_bytes(),
        &["--safe", "web_search"],
        1,
        "tool-call-first [MUST]: line 79 (toolResult, call s1) before the call's tool/call",
    );
    assert!(!out_text.contains("was interrupted"), "{out_text}");
}

/// A turn left open when the next one begins (a crash, and nothing closed the turn before the
/// session went on) is cut short at the next `turn/start`: its calls without a result are no
/// violation, and the next batch is judged whole.
#[test]
fn a_turn_left_open_when_the_next_begins_is_cut_short_there() {
    let text = std::fs::read_to_string(log("cli-s2-crash-reloaded.jsonl")).unwrap();
    // Without the harness's closers (lines 78 to 85), the second turn begins at line 79.
    let unclosed: String = text
        .lines()
        .enumerate()
        .filter(|(i, _)| !(77..85).contains(i))
        .map(|(_, l)| format!("{l}\n"))
        .collect();
    assert!(
        unclosed
            .lines()
            .nth(78)
            .unwrap()
            .contains(r#""type":"turn/start""#)
    );
    let out_text = stdin_says(
        unclosed.as_bytes(),
        &["--safe", "web_search", "--strict"],
        0,
        "the turn begun at line 6 was interrupted (a crash): the next turn begins at line 79 without its `turn/end`; its batch is cut short at line 79",
    );
    assert!(out_text.contains("0 violation(s)"), "{out_text}");
}

/// The shipped harness's compaction rewrites a long result where the model sees it: a
/// `tool/result` of `surfaceOp` `replace` that cites the original (line 125), no second outcome
/// of c4. It is passed over and counted, and the log checks as the real one does. Before, the
/// whole log was refused ("invalid value: map, expected map with a single key"). Appended
/// instead, the same event is a second result for c4, and a violation.
#[test]
fn a_result_the_harness_compaction_rewrites_is_passed_over_and_counted() {
    let name = "cli-s2-compacted.jsonl";
    let rewrite = line_of(name, 125);
    assert!(
        rewrite.contains(r#""type":"tool/result""#)
            && rewrite.contains(r#""surfaceOp":{"op":"replace","start":72,"end":72}"#),
        "{rewrite}"
    );
    let o = check(name, &["--strict"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("passed over 1 `tool/result` event(s) that rewrite a result the model already sees (`surfaceOp` `replace`: the harness's compaction pruning it), no call's outcome (first at line 125)"), "{text}");
    let mut compacted = json(name, &["--strict"]);
    assert_eq!(
        compacted["sessionLog"]["rewrittenResults"],
        serde_json::json!({"count": 1, "firstLine": 125})
    );
    let mut real = json("rc8-cli-s2.jsonl", &["--strict"]);
    assert_eq!(real["sessionLog"]["rewrittenResults"], Value::Null);
    for report in [&mut compacted, &mut real] {
        let report = report.as_object_mut().unwrap();
        report.remove("trace");
        report.remove("sessionLog");
    }
    assert_eq!(compacted, real);

    let text = std::fs::read_to_string(log(name)).unwrap();
    let appended = text.replace(
        r#""surfaceOp":{"op":"replace","start":72,"end":72}"#,
        r#""surfaceOp":"append""#,
    );
    assert_ne!(appended, text);
    stdin_says(
        appended.as_bytes(),
        &[],
        1,
        "line 125 (toolResult, call c4)",
    );
}

/// A session killed while the harness wrote line 80 leaves it broken off, with no newline:
/// the harness drops that tail when it reloads the session, and so does tep, reading the log
/// as cut short inside its turn. Before, the whole log was refused ("line 80: ... invalid
/// JSON (EOF while parsing ...)"). The same bytes followed by a newline are no tail but a
/// broken line, still an error.
#[test]
fn a_last_line_a_killed_session_broke_off_is_passed_over() {
    let name = "cli-s2-torn-tail.jsonl";
    let bytes = std::fs::read(log(name)).unwrap();
    assert_ne!(bytes.last(), Some(&b'\n'));
    for args in [&["--strict"][..], &["--strict", "-j", "2"]] {
        let o = check(name, args);
        let text = out(&o);
        assert_eq!(o.status.code(), Some(0), "{text}");
        assert!(text.contains("the last line (80) breaks off, with no newline (a session killed while writing it): passed over, as the harness drops it when it reloads the session"), "{text}");
        assert!(
            text.contains("the log ends inside the turn begun at line 6"),
            "{text}"
        );
        assert!(text.contains("0 violation(s)"), "{text}");
    }
    let report = json(name, &[]);
    assert_eq!(report["sessionLog"]["tornTail"], 80);
    assert_eq!(
        json("rc8-cli-s2.jsonl", &[])["sessionLog"]["tornTail"],
        Value::Null
    );

    let mut ended = bytes.clone();
    ended.push(b'\n');
    stdin_says(&ended, &[], 2, "line 80: not a session event: invalid JSON");
}

/// `name` checks (`--strict`) with exit 0 and the JSON report of `real`, but for the path.
fn checks_as_the_real_log(name: &str, real: &str) {
    let o = check(name, &["--strict"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let mut original = json(real, &["--strict"]);
    let mut changed = json(name, &["--strict"]);
    for report in [&mut original, &mut changed] {
        report.as_object_mut().unwrap().remove("trace");
    }
    assert_eq!(changed, original);
}

#[test]
fn a_line_that_is_not_a_session_event_is_an_error_with_its_line() {
    let o = check("not-an-event.jsonl", &[]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains("not-an-event.jsonl is not a valid deepseek-harness session log: line 30: not a session event: it has no `type`"),
        "{}",
        out(&o)
    );
    let real = std::fs::read_to_string(log(REAL)).unwrap();
    let broken = real.replacen("{\"type\":\"step/end\"", "{\"type\":\"step/end\",oops", 1);
    let line = broken.lines().position(|l| l.contains("oops")).unwrap() + 1;
    let o = check_stdin(broken.as_bytes(), &[]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(
        out(&o).contains(&format!("line {line}: not a session event: invalid JSON")),
        "{}",
        out(&o)
    );
}

/// `report` without what names the file read and how it was unpacked.
fn without_source(mut report: Value) -> Value {
    let object = report.as_object_mut().unwrap();
    object.remove("trace");
    object["sessionLog"].as_object_mut().unwrap().remove("zstd");
    report
}

/// The harness's default log, `session.jsonl.zstd` (the header alone in a first Zstandard
/// frame, then a frame per flush), is read frame after frame, from a file or a pipe, on one
/// thread or more: the report is the one of the decompressed log, whose lines it names.
#[test]
fn a_compressed_log_is_read_frame_after_frame() {
    let name = "rc8-cli-s2.jsonl.zstd";
    let bytes = std::fs::read(log(name)).unwrap();
    assert!(bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]));
    let o = check(name, &["--strict"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(
        text.contains(
            "decompressed from 14 Zstandard frame(s); lines are those of the decompressed log"
        ),
        "{text}"
    );
    assert!(!text.contains("breaks off"), "{text}");
    // docs/conformance.md's command as written, and on one thread or two.
    for args in [
        &["--safe", "read_file,list_dir"][..],
        &["-j", "1"],
        &["-j", "2"],
    ] {
        let report = json(name, args);
        assert_eq!(
            report["sessionLog"]["zstd"],
            serde_json::json!({"frames": 14, "brokenOff": false})
        );
        let plain = json("rc8-cli-s2.jsonl", args);
        assert_eq!(without_source(report), without_source(plain), "{args:?}");
    }
    let plain = json("rc8-cli-s2.jsonl", &[]);
    let piped = check_stdin(&bytes, &["--format", "json"]);
    let report: Value = serde_json::from_slice(&piped.stdout).unwrap();
    assert_eq!(without_source(report), without_source(plain));

    // A log as the shipped harness compressed it (Node's Zstandard encoder), one frame per
    // flush.
    let real = json("rc8-driven-batch-of-ten.jsonl.zstd", &["--strict"]);
    assert_eq!(
        real["sessionLog"]["zstd"],
        serde_json::json!({"frames": 16, "brokenOff": false})
    );
    assert_eq!(
        (&real["sessionLog"]["lines"], &real["sessionLog"]["records"]),
        (&serde_json::json!(85), &serde_json::json!(22))
    );
    assert_eq!(real["violations"], serde_json::json!([]));
}

/// A session killed while the harness wrote a frame leaves the last frame broken off: the log
/// is what the frames decode to, up to where that one stops, and it is checked as the same
/// lines uncompressed are (cut short inside its turn). A damaged frame with frames after it
/// is an error.
#[test]
fn a_last_frame_broken_off_ends_the_log_and_a_damaged_one_is_an_error() {
    let name = "cli-s2-killed-in-frame.jsonl.zstd";
    let o = check(name, &["--strict"]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    assert!(text.contains("its last frame breaks off (a session killed while writing it): the log ends where that frame stopped decoding"), "{text}");
    assert!(
        text.contains("the log ends inside the turn begun at line 6"),
        "{text}"
    );
    let report = json(name, &[]);
    assert_eq!(
        report["sessionLog"]["zstd"],
        serde_json::json!({"frames": 10, "brokenOff": true})
    );
    let lines = report["sessionLog"]["lines"].as_u64().unwrap() as usize;
    assert!((79..89).contains(&lines), "{lines} lines");
    let plain = std::fs::read_to_string(log("rc8-cli-s2.jsonl")).unwrap();
    let first: String = plain
        .lines()
        .take(lines)
        .map(|l| format!("{l}\n"))
        .collect();
    let o = check_stdin(first.as_bytes(), &["--format", "json"]);
    let same: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(without_source(report), without_source(same));

    // The second of three frames damaged (a reserved block type in its first block).
    let frame = |text: &str| {
        ruzstd::encoding::compress_to_vec(
            text.as_bytes(),
            ruzstd::encoding::CompressionLevel::Fastest,
        )
    };
    let lines: Vec<&str> = plain.lines().collect();
    let (one, two) = (lines[0].to_owned() + "\n", lines[1..10].join("\n") + "\n");
    let mut damaged = [
        frame(&one),
        frame(&two),
        frame(&(lines[10..].join("\n") + "\n")),
    ]
    .concat();
    let at = frame(&one).len() + 6;
    damaged[at..at + 3].copy_from_slice(&[0xff; 3]);
    stdin_says(&damaged, &[], 2, "Zstandard frame 2 cannot be decoded");
}

#[test]
fn the_log_is_read_from_stdin_as_from_a_file() {
    let bytes = std::fs::read(log("context-before-results.jsonl")).unwrap();
    let piped = check_stdin(&bytes, &["--format", "json"]);
    let report: Value = serde_json::from_slice(&piped.stdout).unwrap();
    let from_file = json("context-before-results.jsonl", &[]);
    assert_eq!(report["violations"], from_file["violations"]);
}

#[test]
fn safe_needs_from_and_from_reads_at_events_only() {
    let o = tep_command()
        .args(["check", "-", "--safe", "read_file"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("--from"), "{}", out(&o));
    let o = check(REAL, &["--observed", "hooks"]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("holds level `events`"), "{}", out(&o));
    let o = check(REAL, &["--observed", "events"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
}

#[test]
fn the_html_report_of_a_log_quotes_its_witness_lines() {
    let dir = std::env::temp_dir().join(format!("tep-from-log-html-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let page = dir.join("report.html");
    let o = check(
        "context-before-results.jsonl",
        &["--html", page.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("hook: c1 read a file"));
    // The same log compressed: the page quotes the decompressed lines.
    let packed = dir.join("context-before-results.jsonl.zstd");
    let plain = std::fs::read(log("context-before-results.jsonl")).unwrap();
    std::fs::write(
        &packed,
        ruzstd::encoding::compress_to_vec(&plain[..], ruzstd::encoding::CompressionLevel::Fastest),
    )
    .unwrap();
    let packed_page = dir.join("packed.html");
    let o = tep_command()
        .args(["check", "--from", "deepseek-harness", "--html"])
        .arg(&packed_page)
        .arg(&packed)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let packed_html = std::fs::read_to_string(&packed_page).unwrap();
    assert!(packed_html.contains("hook: c1 read a file"));
    // The page counts what the log could check as the JSON report does (its own limits
    // included).
    let checked = ids(&json("context-before-results.jsonl", &[]), "checked").len();
    assert!(
        html.contains(&format!("<dd>{checked} checked,")),
        "the page does not count {checked} checked"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The three real CLI logs (`rc8-cli-s2`, `-s3`, `-s4`: hooks on every call, denied ones and
/// those of a parallel pool included, Code Mode sub-calls, a pool cap) check with no violation
/// as recorded: `hook/result.durationMs` is a float (`89.61006599999928` at line 51 of s2),
/// and every hook event is read as its
/// call's pre- or post-execute stage, none left unattributed.
#[test]
fn the_real_cli_logs_with_hooks_check_with_no_violation() {
    assert!(line_of("rc8-cli-s2.jsonl", 51).contains(r#""durationMs":89.61006599999928"#));
    for (name, hooks) in [
        ("rc8-cli-s2.jsonl", 40),
        ("rc8-cli-s3.jsonl", 24),
        ("rc8-cli-s4.jsonl", 24),
    ] {
        assert!(line_of(name, 2).contains(r#""seq":0"#));
        let o = check(name, &["--safe", "web_search"]);
        let text = out(&o);
        assert_eq!(o.status.code(), Some(0), "{name}: {text}");
        assert!(text.contains("0 violation(s)"), "{name}: {text}");
        assert!(
            text.contains(&format!(
                "{hooks} hook event(s) read as their call's pre- or post-execute stage"
            )),
            "{name}: {text}"
        );
        assert!(!text.contains("attributed to no call"), "{name}: {text}");
        let report = json(name, &["--safe", "web_search", "--strict"]);
        assert_eq!(report["conformant"], true, "{name}");
        assert_eq!(report["sessionLog"]["unattributed"], serde_json::json!([]));
        let partly = ids(&report, "partlyCheckable");
        for id in [
            "stage-graph-walk",
            "no-stage-after-result",
            "code-dispatch-inside-body",
        ] {
            assert!(partly.contains(&id.to_owned()), "{name}: {id}: {partly:?}");
        }
    }
}

/// c4's PostToolUse hook moved right after c5's `tool/call` (`make_fixtures.py`): it is read
/// as c5's post-execute stage, and c5's own PreToolUse hook (line 76) then comes after it.
#[test]
fn a_hook_moved_into_another_calls_stage_is_caught() {
    let name = "cli-s2-post-hook-in-next-call.jsonl";
    assert!(line_of(name, 73).contains(r#""callId":"c5""#));
    assert!(line_of(name, 74).contains("claude-code:PostToolUse:8"));
    assert!(line_of(name, 76).contains("claude-code:PreToolUse:9"));
    let report = json(name, &["--safe", "web_search"]);
    assert_eq!(
        violations(&report),
        [("stage-graph-walk".to_owned(), vec![76, 74])]
    );
    let o = check(name, &["--safe", "web_search"]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    assert!(
        out(&o).contains("stage-graph-walk [MUST]: line 76: a PreToolUse hook of call c5 after its post-execute stage began (PostToolUse at line 74)"),
        "{}",
        out(&o)
    );
    // Only the answer moved: c4's hook answers after c4's tool/result.
    let name = "cli-s2-hook-answer-after-result.jsonl";
    assert_eq!(
        violations(&json(name, &["--safe", "web_search"])),
        [("no-stage-after-result".to_owned(), vec![75, 72, 73])]
    );
}

/// rc1's `tool/result` moved before its last sub-call's `tool/code-dispatch`: the log alone
/// shows the program's run settled before its dispatch log was drained.
#[test]
fn a_run_code_result_before_its_last_dispatch_event_is_caught() {
    let name = "cli-s3-result-before-dispatch.jsonl";
    assert!(line_of(name, 57).contains(r#""toolCallId":"rc1""#));
    assert!(line_of(name, 58).contains(r#""subCallId":"rc1:code:5""#));
    let report = json(name, &["--safe", "web_search"]);
    assert_eq!(
        violations(&report),
        [("code-dispatch-inside-body".to_owned(), vec![58, 57])]
    );
    assert_eq!(report["conformant"], false);
}

/// `-j` parses a log's lines on that many threads: the report is the one a single thread
/// gives, violations and errors at the same lines, from a file and from stdin.
#[test]
fn a_logs_report_does_not_depend_on_how_many_threads_parse() {
    let text = std::fs::read_to_string(log("barrier-breach.jsonl")).unwrap();
    let (header, body) = text.split_once('\n').unwrap();
    // Long enough that each thread parses several chunks; every copy breaches the barrier.
    let long = format!("{header}\n{}", body.repeat(40));
    assert!(long.len() > 8 * 64 * 1024, "{} bytes", long.len());
    let lines = long.lines().count();
    let broken = format!("{long}not json\n{body}");
    // The barrier's breach is a SHOULD: `--strict` fails it.
    let safe = [
        "--safe",
        "read_file,list_dir",
        "--strict",
        "--format",
        "json",
    ];
    for (what, text, code) in [("breaches", &long, 1), ("a broken line", &broken, 2)] {
        let one = check_stdin(text.as_bytes(), &[&safe[..], &["-j", "1"]].concat());
        assert_eq!(one.status.code(), Some(code), "{what}: {}", out(&one));
        if code == 1 {
            let report: Value = serde_json::from_slice(&one.stdout).unwrap();
            assert!(violations(&report).len() >= 80, "{}", out(&one));
        } else {
            let at = format!("line {}: not a session event: invalid JSON", lines + 1);
            assert!(out(&one).contains(&at), "{}", out(&one));
        }
        for jobs in ["2", "3"] {
            let many = check_stdin(text.as_bytes(), &[&safe[..], &["-j", jobs]].concat());
            assert_eq!(many.status.code(), one.status.code(), "{what}, -j {jobs}");
            assert_eq!(out(&many), out(&one), "{what}, -j {jobs}");
        }
    }
}

/// Session hooks (a hook of no tool call) come once a turn, however long the session: the
/// report counts them all and lists the lines of the first 20, in the text and in JSON.
#[test]
fn events_of_no_call_are_counted_and_the_first_listed() {
    let real = std::fs::read_to_string(log("rc8-session.jsonl")).unwrap();
    let mut text = real.lines().next().unwrap().to_owned() + "\n";
    for k in 0..25 {
        text += &format!(
            r#"{{"type":"hook/invoked","seq":{k},"time":1,"data":{{"turn":1,"point":"SessionStart","dialect":"claude-code","handlerId":"h{k}","matcher":null}}}}"#
        );
        text.push('\n');
    }
    let listed: Vec<String> = (2..22).map(|n| n.to_string()).collect();
    let said = out(&check_stdin(text.as_bytes(), &[]));
    assert!(
        said.contains(&format!(
            "25 owned or hook event(s) logged while no single call was running (or no call was open), at line(s) {} (the first 20): attributed to no call",
            listed.join(", ")
        )),
        "{said}"
    );
    let o = check_stdin(text.as_bytes(), &["--format", "json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(report["sessionLog"]["unattributedCount"], 25);
    assert_eq!(
        report["sessionLog"]["unattributed"],
        serde_json::json!((2..22).collect::<Vec<u64>>())
    );
}
