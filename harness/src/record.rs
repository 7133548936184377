//! The record of one run: the harness's session log, found and decompressed in process, read as
//! a trace by the profile's reader, with the MCP names put back to the scenario's; the model's
//! next request after each batch added to it (level `boundary`); and a timeline that merges it
//! with tep's own records (model requests, bodies, hooks) on one clock.

use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use tep_check::Violation;
use tep_check::deepseek_harness::{self, Options};
use tep_model::graph::NodeId;
use tep_model::identity::CallId;
use tep_model::trace::{NextRequest, ObservationLevel, RequestMessage, RequestRole, TraceRecord};

use crate::hook::HookRecord;
use crate::mcp::BodyRecord;
use crate::model_server::{ModelRequest, RequestKind};
use crate::profile::{Compression, LogSpec, ToolsSpec};
use crate::script::RunScript;
use crate::zstd_log::ZstdFrames;

/// Why the log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the harness wrote no session log (looked for {glob} under {home})")]
    NoLog { glob: String, home: String },
    #[error("cannot read the session log {path}: {message}")]
    Read { path: String, message: String },
    #[error("the session log {path} is not a trace tep can read: {message}")]
    Convert { path: String, message: String },
}

/// The first file under `root` that matches `glob` (`*` stands for one path component).
pub fn find(root: &Path, glob: &str) -> Option<PathBuf> {
    let mut found = vec![root.to_path_buf()];
    for part in glob.split('/').filter(|p| !p.is_empty()) {
        let mut next = Vec::new();
        for dir in found {
            if part.contains('*') {
                let Ok(entries) = std::fs::read_dir(&dir) else {
                    continue;
                };
                let mut names: Vec<PathBuf> = entries
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| matches(part, n))
                    })
                    .collect();
                names.sort();
                next.extend(names);
            } else {
                let p = dir.join(part);
                if p.exists() {
                    next.push(p);
                }
            }
        }
        found = next;
    }
    found.into_iter().find(|p| p.is_file())
}

/// A glob of one path component: `*` matches any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let mut rest = name;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            match rest.strip_prefix(part) {
                Some(r) => rest = r,
                None => return false,
            }
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    rest.is_empty()
}

/// The log's lines, decompressed.
pub fn read_log(path: &Path, compression: Compression) -> Result<Vec<u8>, RecordError> {
    let error = |message: String| RecordError::Read {
        path: path.display().to_string(),
        message,
    };
    let file = std::fs::File::open(path).map_err(|e| error(e.to_string()))?;
    let mut out = Vec::new();
    match compression {
        Compression::None => {
            BufReader::new(file)
                .read_to_end(&mut out)
                .map_err(|e| error(e.to_string()))?;
        }
        Compression::Zstd => {
            // A last frame broken off (the harness was killed) ends the text where it stopped.
            ZstdFrames::new(BufReader::new(file))
                .read_to_end(&mut out)
                .map_err(|e| error(format!("zstd: {e}")))?;
        }
    }
    Ok(out)
}

/// The trace a session log makes, read with the harness's concurrency-safe tools, with the
/// names the harness gave the scenario's tools put back to the scenario's: the MCP names
/// (`<prefix><tool>`), and the shipped safe tool's name in the records of each call it played.
pub fn trace_of_log(
    path: &Path,
    log: &[u8],
    tools: &ToolsSpec,
    script: &RunScript,
) -> Result<Vec<TraceRecord>, RecordError> {
    let lined = lined_trace_of_log(path, log, tools, script)?;
    Ok(lined
        .records
        .into_iter()
        .map(|(_, record)| record)
        .collect())
}

/// A session log read as a trace, each record with the log line it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct LogTrace {
    pub records: Vec<(usize, TraceRecord)>,
    /// What the log shows broken beyond its records (`deepseek_harness::Summary::breaches`),
    /// its witness lines the log's.
    pub breaches: Vec<Violation>,
}

/// [`trace_of_log`], each record with its log line, and the log's own breaches.
pub fn lined_trace_of_log(
    path: &Path,
    log: &[u8],
    tools: &ToolsSpec,
    script: &RunScript,
) -> Result<LogTrace, RecordError> {
    let mut records = Vec::new();
    let options = Options {
        safe: Some(tools.concurrency_safe.iter().cloned().collect()),
    };
    // A driven harness runs each scenario to its end in one process: a turn its log shows
    // interrupted (a crash, then the session reloaded) is the harness's failure, still judged,
    // so a cut is not handed on.
    let summary = deepseek_harness::convert(log, options, |line, made| {
        records.extend(made.record().map(|r| (line, r.clone())));
        Ok(())
    })
    .map_err(|e| RecordError::Convert {
        path: path.display().to_string(),
        message: e.to_string(),
    })?;
    let names = Names {
        mcp: script
            .tools
            .iter()
            .map(|t| (format!("{}{t}", tools.prefix), t.clone()))
            .collect(),
        per_call: script.played_by_safe_tool(),
    };
    Ok(LogTrace {
        records: records
            .into_iter()
            .map(|(line, r)| (line, names.put_back(r)))
            .collect(),
        breaches: summary.breaches,
    })
}

/// `breaches` witnessed by log lines, witnessed by the lines of `trace` instead: the trace made
/// of `lined`'s records with records of the model's next requests put among them. A log line
/// that made no record points at the last record made before it.
pub fn on_trace_lines(
    breaches: Vec<Violation>,
    lined: &[(usize, TraceRecord)],
    trace: &[TraceRecord],
) -> Vec<Violation> {
    let mut at: Vec<(usize, usize)> = Vec::with_capacity(lined.len());
    let mut from_log = lined.iter();
    for (i, record) in trace.iter().enumerate() {
        if matches!(record, TraceRecord::Request(_)) {
            continue;
        }
        if let Some((line, _)) = from_log.next() {
            at.push((*line, i + 1));
        }
    }
    let on_trace = |log_line: usize| {
        let k = at.partition_point(|(line, _)| *line <= log_line);
        k.checked_sub(1).map_or(1, |k| at[k].1)
    };
    breaches
        .into_iter()
        .map(|mut v| {
            v.lines = v.lines.iter().map(|l| on_trace(*l)).collect();
            v
        })
        .collect()
}

/// The scenario's names of the tools the harness calls by others.
struct Names {
    /// (MCP name, scenario name).
    mcp: Vec<(String, String)>,
    /// (call id, the shipped tool's name, scenario name).
    per_call: Vec<(String, String, String)>,
}

impl Names {
    /// `record` with every string that is exactly an MCP name replaced by the scenario's name,
    /// and the shipped safe tool's name in an object of a call it played (by `callId`, or the
    /// record's `call`) replaced by that call's scenario tool.
    fn put_back(&self, record: TraceRecord) -> TraceRecord {
        let Ok(mut value) = serde_json::to_value(&record) else {
            return record;
        };
        if !self.walk(&mut value, None) {
            return record;
        }
        serde_json::from_value(value).unwrap_or(record)
    }

    fn walk(&self, v: &mut Value, call: Option<&(String, String, String)>) -> bool {
        match v {
            Value::String(s) => {
                let name = self
                    .mcp
                    .iter()
                    .find(|(mcp, _)| mcp == s)
                    .map(|(_, tool)| tool)
                    .or(call.filter(|(_, shipped, _)| shipped == s).map(|c| &c.2));
                match name {
                    Some(tool) => {
                        *s = tool.clone();
                        true
                    }
                    None => false,
                }
            }
            Value::Array(a) => a.iter_mut().fold(false, |c, v| self.walk(v, call) | c),
            Value::Object(m) => {
                let id = ["callId", "call", "toolCallId"]
                    .iter()
                    .find_map(|k| m.get(*k).and_then(Value::as_str));
                // An object that names a call speaks of that call; others, of the enclosing one.
                let call = match id {
                    Some(id) => self.per_call.iter().find(|(c, _, _)| c == id),
                    None => call,
                };
                m.values_mut().fold(false, |c, v| self.walk(v, call) | c)
            }
            _ => false,
        }
    }
}

/// The model's next request after each batch of `records`, from the requests the model server
/// recorded, placed after the batch's last record (before the next `model` record).
///
/// Batch k (its k-th `model` record) is answered by the first step request whose messages hold
/// k + 1 assistant messages with tool calls; its record is the messages after the k-th one, up
/// to the next assistant message. A batch whose assistant message does not declare exactly the
/// batch's call ids, in order, gets no record: the evidence would not be about this batch.
///
/// The position asserts no order in time: the record is read when its batch is complete, and
/// the rules that read it compare contents and orders inside the request, never its place among
/// the log's records.
pub fn with_next_requests(
    records: Vec<TraceRecord>,
    requests: &[ModelRequest],
) -> Vec<TraceRecord> {
    let batches: Vec<(usize, Vec<CallId>)> = records
        .iter()
        .enumerate()
        .filter_map(|(i, r)| match r {
            TraceRecord::Stage(o) if o.node == NodeId::Model => {
                let calls = o.calls.iter().flatten().map(|d| d.call_id.clone());
                Some((i, calls.collect()))
            }
            _ => None,
        })
        .collect();
    let mut out = records;
    let mut added = false;
    // From the last batch back, so that earlier positions hold.
    for (k, (at, calls)) in batches.iter().enumerate().rev() {
        let Some(request) = next_request(requests, k, calls) else {
            continue;
        };
        let end = batches.get(k + 1).map_or(out.len(), |(next, _)| *next);
        debug_assert!(end > *at);
        out.insert(end, TraceRecord::Request(Box::new(request)));
        added = true;
    }
    // The log's reader says `events`; the trace now holds the boundary's records too.
    if let Some(TraceRecord::Header(header)) = out.first_mut().filter(|_| added) {
        header.observation = Some(ObservationLevel::Boundary);
    }
    out
}

/// The messages the harness sent after batch `k`'s assistant message, when a recorded step
/// request holds it and it declares exactly `calls`.
pub fn next_request(requests: &[ModelRequest], k: usize, calls: &[CallId]) -> Option<NextRequest> {
    requests
        .iter()
        .filter(|r| r.kind == RequestKind::Step)
        .find_map(|r| {
            let messages = r.body.get("messages")?.as_array()?;
            let (assistant, _) = messages
                .iter()
                .enumerate()
                .filter(|(_, m)| role(m) == Some("assistant") && !tool_call_ids(m).is_empty())
                .nth(k)?;
            let declared = tool_call_ids(&messages[assistant]);
            if declared
                .iter()
                .map(String::as_str)
                .ne(calls.iter().map(CallId::as_str))
            {
                return None;
            }
            let after = messages[assistant + 1..]
                .iter()
                .take_while(|m| role(m) != Some("assistant"))
                .filter_map(request_message)
                .collect();
            Some(NextRequest { messages: after })
        })
}

fn role(message: &Value) -> Option<&str> {
    message.get("role").and_then(Value::as_str)
}

fn tool_call_ids(message: &Value) -> Vec<String> {
    message
        .get("tool_calls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// One chat-completions message: its role, a tool message's `tool_call_id`, and its text (a
/// string, or a list of text parts joined without a separator).
fn request_message(message: &Value) -> Option<RequestMessage> {
    let role = match role(message)? {
        "tool" => RequestRole::Tool,
        "user" => RequestRole::User,
        "system" | "developer" => RequestRole::System,
        _ => return None,
    };
    let content = match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => String::new(),
    };
    let call_id = message
        .get("tool_call_id")
        .and_then(Value::as_str)
        .map(|id| CallId::new(id.to_owned()));
    Some(RequestMessage {
        role,
        call_id: call_id.filter(|_| role == RequestRole::Tool),
        content,
    })
}

/// One line of the merged timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimelineEntry {
    pub wall_ms: f64,
    /// `log`, `model`, `body` or `hook`.
    pub source: &'static str,
    /// The log's line, for a log entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    pub what: Value,
}

/// Every record of a run on one clock (wall ms), in time order (stable: a log line keeps its
/// place among lines of the same millisecond).
pub fn timeline(
    log: &[u8],
    requests: &[ModelRequest],
    bodies: &[BodyRecord],
    hooks: &[HookRecord],
) -> Vec<TimelineEntry> {
    let mut out: Vec<TimelineEntry> = Vec::new();
    for (i, line) in log.split(|&b| b == b'\n').enumerate() {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        let Some(time) = value
            .get("time")
            .or_else(|| value.get("createdAt"))
            .and_then(Value::as_f64)
        else {
            continue;
        };
        let kind = value.get("type").cloned().unwrap_or(Value::Null);
        out.push(TimelineEntry {
            wall_ms: time,
            source: "log",
            line: Some(i + 1),
            what: kind,
        });
    }
    for r in requests {
        out.push(TimelineEntry {
            wall_ms: r.wall_ms,
            source: "model",
            line: None,
            what: serde_json::json!({"kind": r.kind, "step": r.step,
                "messages": r.body.get("messages").and_then(Value::as_array).map(Vec::len)}),
        });
    }
    for b in bodies {
        out.push(TimelineEntry {
            wall_ms: b.wall_ms,
            source: "body",
            line: None,
            what: serde_json::json!({"event": b.event, "call": b.call, "isError": b.is_error}),
        });
    }
    for h in hooks {
        out.push(TimelineEntry {
            wall_ms: h.wall_ms,
            source: "hook",
            line: None,
            what: serde_json::json!({"event": h.event, "call": h.call, "answer": h.stdout, "exit": h.exit}),
        });
    }
    out.sort_by(|a, b| a.wall_ms.total_cmp(&b.wall_ms));
    out
}

/// Where the log of a run is, per the profile.
pub fn locate(home: &Path, spec: &LogSpec) -> Result<PathBuf, RecordError> {
    find(home, &spec.glob).ok_or_else(|| RecordError::NoLog {
        glob: spec.glob.clone(),
        home: home.display().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_logs_breaches_point_at_the_trace_lines_of_their_records() {
        use tep_check::invariants::InvariantId;
        let record = |text: &str| -> TraceRecord { serde_json::from_str(text).unwrap() };
        let header = record(r#"{"kind":"header","spec":"rev2"}"#);
        let model = record(r#"{"kind":"stage","node":"model","calls":[]}"#);
        let request = TraceRecord::Request(Box::default());
        // Log lines 1, 5 and 9 made records; the trace has a request between the last two.
        let lined = vec![(1, header.clone()), (5, model.clone()), (9, model.clone())];
        let trace = vec![header, model.clone(), request, model];
        let breach = Violation::new(InvariantId::StageGraphWalk, vec![9, 5, 7, 1], None, "x");
        let moved = on_trace_lines(vec![breach], &lined, &trace);
        // 9 is the trace's fourth record, 5 its second; 7 made no record: the one before it.
        assert_eq!(moved[0].lines, [4, 2, 2, 1]);
    }

    #[test]
    fn globs_match_one_component() {
        assert!(matches("*", "abc"));
        assert!(matches("session.jsonl.*", "session.jsonl.zstd"));
        assert!(matches("s*n-*", "session-1"));
        assert!(!matches("session.jsonl.*", "x.jsonl.zstd"));
        assert!(!matches("a*b", "ac"));
    }

    #[test]
    fn find_walks_the_glob() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir
            .path()
            .join("sessions/--ws--/session-1/session.jsonl.zstd");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        std::fs::write(&log, b"x").unwrap();
        assert_eq!(
            find(dir.path(), "sessions/*/*/session.jsonl.zstd"),
            Some(log)
        );
        assert_eq!(find(dir.path(), "sessions/*/*/other"), None);
    }
}
