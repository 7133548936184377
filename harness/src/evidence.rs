//! What tep's own records of a run show beyond the trace: the bodies' intervals and the hook
//! invocations, judged against four invariants of the catalog whose records level `boundary`
//! lacks (the study's list; `docs/harness-profiles.md`, "Beyond the trace").
//!
//! A body's record is made by the server side (the MCP server's `tools/call`, the search
//! backend's request), so its interval lies inside the harness's own body: the harness started
//! its body before the request arrived and ends it after the reply. What the server saw overlap
//! overlapped; a reply recorded after a log line was sent after it. That holds for the end only
//! when the harness took the reply: its recorded result is the body's own (a success for a
//! body that returns, an error carrying the message of one that throws). A body the harness
//! gave up on (a timeout, a cancelled request) or whose result a listener replaced has no sure
//! end: only its start counts. Every record is on one machine's wall clock; the log's `time` is
//! `Date.now()`, whole milliseconds cut down, so a log line at `t` happened in `[t, t + 1)`: an
//! order is judged only where the two times are farther apart than that.
//!
//! | invariant | breached when |
//! |---|---|
//! | `only-safe-bodies-overlap` | two bodies overlap and one is not concurrency-safe (MCP tools never are) |
//! | `pool-cap` | more safe bodies run at once than the cap the harness was configured with |
//! | `deny-skips-body` | a denied call's body starts (denied: approval decided other than `allowed-once`, or our pre-execute hook denied with a reason its error result carries) |
//! | `body-settles-before-commit` | the call's `tool/result` is logged, or its post-execute hook invoked, before its body ended |
//!
//! A body is judged for its call only when the record names the call beyond doubt: the search
//! backend found it by its query, or the MCP server got the call's own arguments, which no
//! other call of the tool shares (or the tool has one call).
//!
//! Not judged here: `denial-reaches-post` (a post-execute listener outside the bridge may answer
//! without calling it, so a missing hook invocation is no evidence), `ordered-stages-serial`
//! (the hook command records an instant, not the stage's span) and `approval-only-after-ask`
//! (the harness's own permission listener may ask; our hook is one listener of the waterfall).

use std::collections::BTreeMap;

use serde_json::Value;
use tep_check::invariants::InvariantId;
use tep_check::{InvariantStatus, Violation};
use tep_conformance::scenario::BodyStep;
use tep_model::graph::{NodeId, Outcome};
use tep_model::identity::CallId;
use tep_model::result::content_text;
use tep_model::session::EventBody;
use tep_model::trace::TraceRecord;

use crate::hook::HookRecord;
use crate::mcp::BodyRecord;
use crate::script::RunScript;

/// The invariants judged here beyond the trace, and from what.
pub const JUDGED: [(InvariantId, &str); 4] = [
    (
        InvariantId::OnlySafeBodiesOverlap,
        "from the bodies' intervals the MCP server and the search backend recorded",
    ),
    (
        InvariantId::PoolCap,
        "from the search backend's body intervals, when the cap is configured",
    ),
    (
        InvariantId::DenySkipsBody,
        "from the bodies the servers ran for calls the log or our hook shows denied",
    ),
    (
        InvariantId::BodySettlesBeforeCommit,
        "from each body's end against its `tool/result` and post-execute hook, when the harness took the reply",
    ),
];

/// A harness run's invariant statuses, with what [`JUDGED`] names marked partly checkable
/// where the trace's level alone would not check it.
/// So are those the session log's reader checks beyond its records
/// (`deepseek_harness::partly_checkable`), whose breaches the driver reports too.
pub fn mark_judged(statuses: &mut [(InvariantId, InvariantStatus)]) {
    let from_the_log = tep_check::deepseek_harness::partly_checkable();
    let judged = JUDGED
        .iter()
        .map(|(id, how)| (*id, (*how).to_owned()))
        .chain(from_the_log);
    for (id, how) in judged {
        if let Some((_, status)) = statuses.iter_mut().find(|(judged, _)| *judged == id)
            && matches!(status, InvariantStatus::NotCheckable(_))
        {
            *status = InvariantStatus::PartlyCheckable(how);
        }
    }
}

/// A run's records, as the driver holds them after the run.
#[derive(Debug)]
pub struct RunRecords<'a> {
    /// The trace as judged (the log's records and the next requests), for witness lines.
    pub trace: &'a [TraceRecord],
    /// When each call's `tool/result` was logged (the log's `time`).
    pub results_at: &'a BTreeMap<CallId, f64>,
    /// The width of the log's clock tick, in ms: 1 for `Date.now()`, 0 for fractional times.
    pub log_tick_ms: f64,
    pub bodies: &'a [BodyRecord],
    pub hooks: &'a [HookRecord],
    pub script: &'a RunScript,
}

/// One body, as the server side saw it.
#[derive(Debug, Clone, PartialEq)]
struct Interval {
    call: String,
    safe: bool,
    start: f64,
    /// When the reply left: `None` for a body the harness dropped.
    end: Option<f64>,
}

impl Interval {
    /// The last instant the harness's body surely ran.
    fn surely_until(&self) -> f64 {
        self.end.unwrap_or(self.start)
    }
}

/// What the run's own records showed: the breaches, and how many cases of each invariant
/// they could judge (bodies, denied calls, bodies with a sure end), so that a silent run says
/// whether anything was looked at.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Judgement {
    pub breaches: Vec<Violation>,
    pub judged: BTreeMap<InvariantId, usize>,
}

/// The breaches the run's own records show, in the order of the table above.
pub fn breaches(run: &RunRecords<'_>) -> Vec<Violation> {
    judge(run).breaches
}

/// [`breaches`], with the number of cases judged per invariant.
pub fn judge(run: &RunRecords<'_>) -> Judgement {
    let results = results(run.trace);
    let intervals = intervals(run, &results);
    let denied = denied(run, &results);
    let (settled, commits) = unsettled_commits(run, &intervals);
    let mut breaches = overlaps(run, &intervals);
    breaches.extend(pool_cap(run, &intervals));
    breaches.extend(denied_bodies(run, &denied, &intervals));
    breaches.extend(settled);
    let capped = match run.script.max_parallel {
        Some(_) => intervals.iter().filter(|i| i.safe).count(),
        None => 0,
    };
    let judged = BTreeMap::from([
        (InvariantId::OnlySafeBodiesOverlap, intervals.len()),
        (InvariantId::PoolCap, capped),
        (InvariantId::DenySkipsBody, denied.len()),
        (InvariantId::BodySettlesBeforeCommit, commits),
    ]);
    Judgement { breaches, judged }
}

/// The call a record is about: the trace's attribution, or the one its event's data names (a
/// log's `tool/call` and `tool/result` name their call only in their data).
fn call_of(record: &TraceRecord) -> Option<&CallId> {
    match record {
        TraceRecord::Event(e) => e.call.as_ref().or(e.event.body.named_call()),
        other => other.call(),
    }
}

/// Each call's recorded result: whether it is an error, and its text.
type Results<'a> = BTreeMap<&'a str, (bool, String)>;

fn results(trace: &[TraceRecord]) -> Results<'_> {
    trace
        .iter()
        .filter_map(|record| match record {
            TraceRecord::Event(e) => match &e.event.body {
                EventBody::ToolResult(d) => Some((
                    call_of(record)?.as_str(),
                    (d.is_error(), content_text(&d.content())),
                )),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Whether the harness took `call`'s reply: its result is what the scripted body answers.
fn took_the_reply(run: &RunRecords<'_>, results: &Results<'_>, call: &str) -> bool {
    let Some(scripted) = run.script.calls.iter().find(|c| c.call_id == call) else {
        return false;
    };
    let thrown = scripted.body.iter().find_map(|step| match step {
        BodyStep::Throw(message) => Some(message),
        _ => None,
    });
    match (results.get(call), thrown) {
        (Some((false, _)), None) => true,
        (Some((true, text)), Some(message)) => {
            !message.is_empty() && text.contains(message.as_str())
        }
        _ => false,
    }
}

/// The judged bodies: start and end records paired per call, in file order.
fn intervals(run: &RunRecords<'_>, results: &Results<'_>) -> Vec<Interval> {
    let mut open: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    let mut out: Vec<Interval> = Vec::new();
    for record in run.bodies {
        let Some(call) = record
            .call
            .as_deref()
            .filter(|c| attributed(run, record, c))
        else {
            continue;
        };
        let safe = run
            .script
            .calls
            .iter()
            .any(|c| c.call_id == call && c.query.is_some());
        match record.event.as_str() {
            "start" => {
                open.entry(call).or_default().push(out.len());
                out.push(Interval {
                    call: call.to_owned(),
                    safe,
                    start: record.wall_ms,
                    end: None,
                });
            }
            "end" => {
                let pending = open.entry(call).or_default();
                if !pending.is_empty() {
                    let i = pending.remove(0);
                    // A dropped body's end is when the server noticed, not when it ended.
                    let sure = record.is_error.is_some() && took_the_reply(run, results, call);
                    out[i].end = sure.then_some(record.wall_ms);
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether `record` is surely `call`'s body.
fn attributed(run: &RunRecords<'_>, record: &BodyRecord, call: &str) -> bool {
    let Some(scripted) = run.script.calls.iter().find(|c| c.call_id == call) else {
        return false;
    };
    if scripted.query.is_some() {
        // Found by its query, which names the call alone.
        return true;
    }
    let same_tool: Vec<_> = run
        .script
        .calls
        .iter()
        .filter(|c| c.tool == scripted.tool && c.query.is_none())
        .collect();
    match &record.arguments {
        _ if same_tool.len() == 1 => true,
        Some(arguments) => {
            arguments == &scripted.arguments
                && same_tool
                    .iter()
                    .filter(|c| &c.arguments == arguments)
                    .count()
                    == 1
        }
        None => false,
    }
}

/// The 1-based line of `call`'s record of `node` in the trace (else its `tool/call`'s, else 1).
fn line_of(run: &RunRecords<'_>, call: &str, node: NodeId) -> usize {
    let of = |node: NodeId| {
        run.trace
            .iter()
            .position(|r| r.node() == Some(node) && call_of(r).is_some_and(|c| c.as_str() == call))
    };
    of(node).or_else(|| of(NodeId::ToolCall)).unwrap_or(0) + 1
}

fn violation(
    run: &RunRecords<'_>,
    invariant: InvariantId,
    call: &str,
    node: NodeId,
    message: String,
) -> Violation {
    Violation::new(
        invariant,
        vec![line_of(run, call, node)],
        Some(CallId::from(call)),
        message,
    )
}

fn kind(safe: bool) -> &'static str {
    if safe {
        "concurrency-safe"
    } else {
        "exclusive"
    }
}

fn overlaps(run: &RunRecords<'_>, intervals: &[Interval]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (i, a) in intervals.iter().enumerate() {
        for b in &intervals[i + 1..] {
            let (first, second) = if a.start <= b.start { (a, b) } else { (b, a) };
            if first.call == second.call || second.start >= first.surely_until() {
                continue;
            }
            if first.safe && second.safe {
                continue;
            }
            let (exclusive, other) = if first.safe {
                (second, first)
            } else {
                (first, second)
            };
            out.push(violation(
                run,
                InvariantId::OnlySafeBodiesOverlap,
                &exclusive.call,
                NodeId::ToolCall,
                format!(
                    "the body of {} ({}) overlapped the body of {} ({}): the server saw {} run \
                     from {:.1} to {:.1} ms and {} start at {:.1} ms",
                    exclusive.call,
                    kind(exclusive.safe),
                    other.call,
                    kind(other.safe),
                    first.call,
                    first.start,
                    first.surely_until(),
                    second.call,
                    second.start,
                ),
            ));
        }
    }
    out
}

fn pool_cap(run: &RunRecords<'_>, intervals: &[Interval]) -> Vec<Violation> {
    let Some(cap) = run.script.max_parallel else {
        return Vec::new();
    };
    let safe: Vec<&Interval> = intervals.iter().filter(|i| i.safe).collect();
    for (k, body) in safe.iter().enumerate() {
        // The bodies surely running at the instant `body` started.
        let running: Vec<&str> = safe
            .iter()
            .enumerate()
            .filter(|(j, other)| {
                *j == k || (other.start <= body.start && body.start < other.surely_until())
            })
            .map(|(_, other)| other.call.as_str())
            .collect();
        if running.len() > cap {
            return vec![violation(
                run,
                InvariantId::PoolCap,
                &body.call,
                NodeId::ToolCall,
                format!(
                    "{} bodies ran at once when {} started ({}), over the pool cap {cap}",
                    running.len(),
                    body.call,
                    running.join(", "),
                ),
            )];
        }
    }
    Vec::new()
}

/// The calls the run shows denied, each with how.
fn denied(run: &RunRecords<'_>, results: &Results<'_>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for record in run.trace {
        let TraceRecord::Event(e) = record else {
            continue;
        };
        let Some(call) = call_of(record) else {
            continue;
        };
        if let EventBody::ApprovalDecided(d) = &e.event.body
            && d.outcome != Outcome::AllowedOnce
        {
            out.insert(
                call.as_str().to_owned(),
                format!("its approval was decided `{}`", d.outcome),
            );
        }
    }
    for hook in run.hooks.iter().filter(|h| h.event == "PreToolUse") {
        let Some(call) = hook.call.as_deref() else {
            continue;
        };
        let Some(reason) = denial_reason(&hook.stdout) else {
            continue;
        };
        if let Some((true, text)) = results.get(call)
            && !reason.is_empty()
            && text.contains(&reason)
        {
            out.entry(call.to_owned()).or_insert_with(|| {
                format!("our pre-execute hook denied it and its error result carries the reason `{reason}`")
            });
        }
    }
    out
}

/// The reason of a pre-execute hook's `deny` answer.
fn denial_reason(stdout: &str) -> Option<String> {
    let answer: Value = serde_json::from_str(stdout).ok()?;
    let out = answer.get("hookSpecificOutput")?;
    (out.get("permissionDecision")?.as_str()? == "deny").then(|| {
        out.get("permissionDecisionReason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    })
}

fn denied_bodies(
    run: &RunRecords<'_>,
    denied: &BTreeMap<String, String>,
    intervals: &[Interval],
) -> Vec<Violation> {
    intervals
        .iter()
        .filter_map(|body| {
            let how = denied.get(&body.call)?;
            Some(violation(
                run,
                InvariantId::DenySkipsBody,
                &body.call,
                NodeId::ToolResult,
                format!(
                    "{} was denied ({how}), yet its body started at {:.1} ms",
                    body.call, body.start
                ),
            ))
        })
        .collect()
}

/// The breaches of `body-settles-before-commit`, and how many bodies with a sure end had a
/// commit to compare with: a logged `tool/result`, or a post-execute hook invocation.
fn unsettled_commits(run: &RunRecords<'_>, intervals: &[Interval]) -> (Vec<Violation>, usize) {
    let mut out = Vec::new();
    let mut judged = 0;
    for body in intervals {
        let Some(end) = body.end else {
            continue;
        };
        let logged = run.results_at.get(&CallId::from(body.call.as_str()));
        let posts: Vec<&HookRecord> = run
            .hooks
            .iter()
            .filter(|h| h.event == "PostToolUse" && h.call.as_deref() == Some(&body.call))
            .collect();
        if logged.is_none() && posts.is_empty() {
            continue;
        }
        judged += 1;
        let early = if let Some(at) = logged.filter(|at| *at + run.log_tick_ms <= end) {
            Some(format!(
                "the `tool/result` of {} was logged at {at} ms",
                body.call
            ))
        } else {
            posts.iter().find(|h| h.wall_ms < end).map(|post| {
                format!(
                    "the post-execute hook of {} was invoked at {:.1} ms",
                    body.call, post.wall_ms
                )
            })
        };
        if let Some(early) = early {
            out.push(violation(
                run,
                InvariantId::BodySettlesBeforeCommit,
                &body.call,
                NodeId::ToolResult,
                format!("{early}, before its body ended at {end:.1} ms"),
            ));
        }
    }
    (out, judged)
}

/// When each call's `tool/result` was logged: the log's `time` of the line each record came
/// from. `lines` pairs each record of the trace with its log line.
pub fn results_at(log: &[u8], lines: &[(usize, TraceRecord)]) -> (BTreeMap<CallId, f64>, f64) {
    let times: BTreeMap<usize, f64> = log
        .split(|&b| b == b'\n')
        .enumerate()
        .filter_map(|(i, line)| {
            let value: Value = serde_json::from_slice(line).ok()?;
            Some((i + 1, value.get("time")?.as_f64()?))
        })
        .collect();
    let whole = times.values().all(|t| t.fract() == 0.0);
    let at = lines
        .iter()
        .filter(|(_, r)| r.node() == Some(NodeId::ToolResult))
        .filter_map(|(line, r)| Some((call_of(r)?.clone(), *times.get(line)?)))
        .collect();
    (at, if whole { 1.0 } else { 0.0 })
}
