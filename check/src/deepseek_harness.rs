//! Reading deepseek-harness's own session log as a trace at level `events`.
//!
//! The harness (`toninfo/deepseek-harness`, package `dsh-session-persistence-jsonl`) persists a
//! session as JSON Lines: a `{"type":"session",...}` header, then one session event per line
//! (`{type, seq, time, data, surfaceOp?, sourceEventSeqs?}`, `seq` from 0), or a packed row of
//! streaming chunks (`text-chunks`, `reasoning-chunks`, `tool-call-chunks`). Most of the
//! pipeline's events are already tep's shapes; [`Converter`] adds what a trace needs and the log
//! leaves implicit:
//!
//! - a `header` (rev2, level `events`) for the session header;
//! - a `model` stage record for each `assistant/message` with tool calls (the batch, in model
//!   order; `concurrencySafe` from [`Options::safe`], else unknown);
//! - the `call` of events whose data does not name it: `approval/decided` (by its prompt id),
//!   owned events (`todo/write`: the one call, or Code Mode sub-call, then running), and
//!   injected contexts. The harness stages a result's contexts in its next-step inbox right
//!   after the call's `tool/result` (`agent/inbox/spliced`) and injects them at the next step as
//!   `user/message`s with the same ids: that `user/message` is the context event, attributed
//!   to the call whose result staged it.
//!
//! The hook events (`hook/invoked`, `hook/result`) are not a body's: the harness's Claude Code
//! bridge appends them inside the pre-execute stage (`point: PreToolUse`) and the post-execute
//! stage (`PostToolUse`) of a call or sub-call, denied ones included. Their data names no call;
//! [`Converter`] finds the stage from the harness's order of stages (a call's ordered stages run
//! one call at a time, right after its start; commits run head of line, in start order) and pairs
//! a `hook/result` with its `hook/invoked` by `handlerId`. It checks them as stages: a
//! pre-execute hook after the same call's post-execute began, a post-execute hook before its
//! pre-execute hook answered, a hook answering after its call's result, are breaches it reports
//! ([`Summary::breaches`]). So is a sub-call's dispatch event logged after its `run_code` call's
//! result (reference semantics 49: the run drains its dispatch log writes before it settles).
//! The hook events reach the checker attributed to no call: only the log's order applies to them.
//!
//! A session a crash interrupted goes on after the harness reloads it: it closes the open turn
//! with results of its own ([`RECOVERY_CODES`]), `step/end` and a `turn/end` of reason
//! `interrupted`. Those results are not the pipeline's and are passed over; the batch the crash
//! interrupted is cut short where they begin ([`Converted::CutShort`], [`Summary::interrupted`]),
//! as is a turn the next `turn/start` finds still open. A `tool/result` the harness's compaction
//! writes to rewrite a long result where the model sees it (`surfaceOp` `replace`) is no call's
//! outcome either: passed over and counted ([`Summary::rewritten_results`]).
//!
//! A last line with no newline whose JSON breaks off is the tail a session killed while
//! writing leaves: passed over ([`Summary::torn_tail`]), as the harness drops it on reload.
//!
//! Every record keeps the line it came from, so violations name lines of the original file.
//! Events the pipeline does not own (turns, steps, chunks, requests, a user's own messages) are
//! passed over; an event type the harness's catalog does not list is passed over and counted.
//! A line that is not a session event is an error naming it. This module reads lines and bytes
//! only: no files, and no Zstandard frames (the harness's default `session.jsonl.zstd` is refused
//! with how to decompress it; `tep check` decompresses it with `tep_harness::zstd_log`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufRead;

use serde::Deserialize;
use serde::de::value::MapDeserializer;
use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use tep_model::graph::{NodeId, Revision};
use tep_model::identity::CallId;
use tep_model::session::{EventBody, SessionEvent, SurfaceOp, ToolResultData};
use tep_model::strict_json::sure::{
    array_of_sure, end_of_sure_value, members_of_sure, object_members, object_of_sure,
};
use tep_model::strict_json::{self, Key, Keys, Skip, StrictValue};
use tep_model::trace::{DeclaredCall, EventRecord, Observation, ObservationLevel, TraceHeader};
use tep_model::trace::{TraceRecord, event_record_strict, event_record_type_first};

use crate::catalog::invariant;
use crate::checker::{MAX_VIOLATIONS, TraceError, Violation};
use crate::invariants::InvariantId;
use crate::trace_io::MAX_LINE_BYTES;
use units::Units;

mod parallel;
mod units;
mod unknown_fields;
pub use parallel::{convert_parallel, parsing_workers};

/// The session format version this reader knows (the harness's `SESSION_FORMAT_VERSION`).
pub const FORMAT_VERSION: u64 = 0;

/// The first four bytes of a Zstandard frame (the harness's default `session.jsonl.zstd`).
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// Declares [`KNOWN_EVENT_TYPES`] and [`is_known_type`] from one list. A `match` on the list's
/// strings is what the compiler turns into a test of the length and then of a few bytes: a
/// binary search compared whole strings and was 3.4% of a session log's check (measured: the
/// check 3–4% faster with the `match`).
macro_rules! known_event_types {
    ($(#[$doc:meta])* [$($kind:literal),* $(,)?]) => {
        $(#[$doc])*
        pub const KNOWN_EVENT_TYPES: &[&str] = &[$($kind),*];

        /// Whether `kind` is one of [`KNOWN_EVENT_TYPES`].
        fn is_known_type(kind: &str) -> bool {
            matches!(kind, $($kind)|*)
        }
    };
}

known_event_types!(
    /// Every event type deepseek-harness 0.1.0-rc.8 declares (its `KNOWN_SESSION_EVENT_TYPES`),
    /// in sorted order. A type outside this list (and the packed chunk rows) is passed over and
    /// counted.
    [
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "tool/result",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
]
);

/// The storage rows that pack a run of `assistant/chunk` events into one line.
const CHUNK_ROWS: &[&str] = &["text-chunks", "reasoning-chunks", "tool-call-chunks"];

/// How much of a line of some type the converter reads: the rest of the line is checked as
/// strictly and built into nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    /// Only the envelope, then the whole line again straight into its typed event (a type
    /// that always makes a trace record).
    Typed,
    /// The whole event: `user/message`, a trace record only when a call staged it.
    Event,
    /// Only its `data` (and the envelope's `type`, `seq` and `time`).
    Data,
    /// Only the envelope: turns, steps, chunks, requests, types it does not know.
    Envelope,
}

impl Need {
    fn of(kind: &str) -> Self {
        match kind {
            "tool/call"
            | "tool/result"
            | "approval/asked"
            | "approval/decided"
            | "tool/code-dispatch-start"
            | "tool/code-dispatch"
            | "hook/invoked"
            | "hook/result"
            | "todo/write" => Need::Typed,
            "user/message" => Need::Event,
            "assistant/message" | "agent/inbox/spliced" => Need::Data,
            _ => Need::Envelope,
        }
    }
}

/// A line after the header, read in one strict pass: the members its `type` needs, as
/// `Value`s. A line that [`strict_json::value_from_str`] refuses is refused with the same error.
enum Line {
    /// Not a JSON object.
    Other,
    /// An object: its `type`, `seq` and `time`, and those other members its type needs (every
    /// member until `type` is read).
    Object {
        members: Map<String, Value>,
        /// Whether it has a `data` member, read or not.
        data: bool,
    },
}

/// Reads a line as [`Line`]; `whole`: every member, whatever the type.
struct LineVisitor {
    whole: bool,
}

impl<'de> Visitor<'de> for LineVisitor {
    type Value = Line;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Line, E> {
        Ok(Line::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Line, E> {
        Ok(Line::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Line, E> {
        Ok(Line::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Line, E> {
        Ok(Line::Other)
    }

    fn visit_str<E>(self, _: &str) -> Result<Line, E> {
        Ok(Line::Other)
    }

    fn visit_unit<E>(self) -> Result<Line, E> {
        Ok(Line::Other)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Line, A::Error> {
        Skip(&mut Keys::default()).visit_seq(seq)?;
        Ok(Line::Other)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Line, A::Error> {
        let mut keys = Keys::default();
        let start = keys.enter();
        let mut members = Map::new();
        let mut data = false;
        // Until `type` is read, everything is.
        let mut need = Need::Event;
        while let Some(key) = map.next_key_seed(Key)? {
            keys.insert(start, key.clone())?;
            let kept = match key.as_ref() {
                "type" | "seq" | "time" => true,
                "data" => {
                    data = true;
                    matches!(need, Need::Event | Need::Data)
                }
                _ => need == Need::Event,
            };
            if !kept {
                map.next_value_seed(Skip(&mut keys))?;
                continue;
            }
            let StrictValue(value) = map.next_value()?;
            if let ("type", Value::String(kind), false) = (key.as_ref(), &value, self.whole) {
                need = Need::of(kind);
            }
            members.insert(key.into_owned(), value);
        }
        Ok(Line::Object { members, data })
    }
}

/// What the converter is told beyond the log.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The tools whose calls are concurrency-safe; every other call is exclusive. `None`: not
    /// known (the log does not record it), and the rules about barriers skip every call.
    pub safe: Option<BTreeSet<String>>,
}

/// Why a line of a session log could not be read. Always names the line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    #[error(
        "line {line}: the log is zstd-compressed (the harness's default `session.jsonl.zstd`); hand the converter its decompressed lines (`tep check --from deepseek-harness` decompresses it; `zstd -dc session.jsonl.zstd` prints them)"
    )]
    /// The file is the compressed log, not its lines.
    Compressed {
        /// The line (1-based) of the original file.
        line: usize,
    },
    /// A line that is no session event at all.
    #[error("line {line}: not a session event: {why}")]
    NotAnEvent {
        /// The line (1-based) of the original file.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    #[error(
        "line {line}: not a deepseek-harness session header (`{{\"type\":\"session\",...}}` comes first): {why}"
    )]
    /// The first line is not the session header.
    NoHeader {
        /// The line (1-based) of the original file.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
    #[error(
        "line {line}: session format version {version}; this reader knows version {FORMAT_VERSION} (deepseek-harness 0.1.0-rc.8)"
    )]
    /// A session format this reader does not know.
    Version {
        /// The line (1-based) of the original file.
        line: usize,
        /// The version the header names.
        version: String,
    },
    /// An event of a known type whose data has another shape.
    #[error("line {line}: a `{kind}` event whose data tep cannot read: {why}")]
    Shape {
        /// The line (1-based) of the original file.
        line: usize,
        /// The event's type.
        kind: String,
        /// What is wrong with it.
        why: String,
    },
    /// The log could not be read (I/O, a line too long, a key named twice).
    #[error("line {line}: {why}")]
    Read {
        /// The line (1-based) of the original file.
        line: usize,
        /// What is wrong.
        why: String,
    },
}

impl LogError {
    /// The line of the original file.
    pub fn line(&self) -> usize {
        match self {
            LogError::Compressed { line }
            | LogError::NotAnEvent { line, .. }
            | LogError::NoHeader { line, .. }
            | LogError::Version { line, .. }
            | LogError::Shape { line, .. }
            | LogError::Read { line, .. } => *line,
        }
    }
}

impl From<LogError> for TraceError {
    fn from(e: LogError) -> Self {
        let line = e.line();
        let text = e.to_string();
        let message = text
            .strip_prefix(&format!("line {line}: "))
            .unwrap_or(&text)
            .to_owned();
        TraceError::new(line, message)
    }
}

/// How many lines a [`Summary`] lists of a kind of event it counts.
pub const MAX_LISTED_LINES: usize = 20;

/// What reading a log passed over, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// The session's id, from its header.
    pub session: String,
    /// Lines read (blank ones not counted).
    pub lines: usize,
    /// Trace records made from them.
    pub records: usize,
    /// Lines of known types that are not pipeline events (turns, steps, chunks, requests, a
    /// user's own messages, the inbox).
    pub passed_over: usize,
    /// Event types the harness's catalog does not list: how many lines, and the first one.
    pub unknown: BTreeMap<String, (usize, usize)>,
    /// Members of a pipeline event's data that tep's type of it does not declare (a newer
    /// harness adds to its events), passed over: by event type and path in the event
    /// (`data.message.future`, `[]` for any element), how many events had it and the first
    /// line.
    pub unknown_fields: BTreeMap<(String, String), (usize, usize)>,
    /// Owned events (`todo/write`) logged while no single call was running, and hook events
    /// logged while no call was open: checked for their order only, attributed to no call.
    /// Their lines, the first [`MAX_LISTED_LINES`] of them ([`Summary::unattributed_count`]
    /// counts them all: a log of session hooks has one a turn, however long it runs).
    pub unattributed: Vec<usize>,
    /// How many events [`Summary::unattributed`] stands for.
    pub unattributed_count: usize,
    /// Hook events read as the pre- or post-execute stage of a call or sub-call.
    pub hook_stage_events: usize,
    /// What the log shows broken that its trace records cannot (a hook event outside its stage,
    /// a dispatch event after its program's result): violations of the invariants they break,
    /// the first [`MAX_VIOLATIONS`] of them (no report shows more).
    pub breaches: Vec<Violation>,
    /// Breaches found past the first [`MAX_VIOLATIONS`]: counted, not kept.
    pub breaches_omitted: usize,
    /// The line of the `turn/start` the log ends inside of (no `turn/end` after it): a log cut
    /// short (a session still running, or killed). What its last batch's end would owe cannot
    /// be judged: [`convert`] hands on a [`Converted::CutShort`] after the last line.
    pub ends_inside_turn: Option<usize>,
    /// Turns a crash interrupted before the log goes on: closed by the harness when it
    /// reloaded the session, or left open when the next turn began. Each cut its batch short
    /// ([`Converted::CutShort`]).
    pub interrupted: Vec<Interruption>,
    /// `tool/result` events that rewrite a result already on the surface the model sees (a
    /// `surfaceOp` of `{"op": "replace", ...}`: the harness's compaction pruning a long result),
    /// passed over as no call's outcome: how many, and the first line.
    pub rewritten_results: Option<(usize, usize)>,
    /// The log's last line when it has no newline and its JSON breaks off (a session killed
    /// while writing it): passed over, as the harness drops it when it reloads the session.
    pub torn_tail: Option<usize>,
}

/// A turn a crash interrupted, in a log that goes on after it. deepseek-harness closes such a
/// turn when it reloads the session: a `tool/result` of error code `TOOL_OUTCOME_UNKNOWN` for
/// each call that started and has no result, one of `TOOL_NOT_STARTED` for each call the model
/// asked for that never started (with no `tool/call` before it), then `step/end` and a
/// `turn/end` of reason `interrupted` ("the loop never emits this marker").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interruption {
    /// The line of the turn's `turn/start` (`None`: the log began inside it).
    pub turn: Option<usize>,
    /// Where the log shows the crash: the first result the recovery wrote, or the `turn/start`
    /// of the next turn when nothing closed this one.
    pub at: usize,
    /// The lines of the results the recovery wrote: not pipeline events, passed over.
    pub recovered: Vec<usize>,
}

/// The error codes of the results deepseek-harness writes when it reloads a session a crash
/// interrupted (`@deepseek-ai/dsh-session`, `repair.ts`): a call whose outcome was never
/// recorded, and a call that never started. The pipeline itself never writes them.
pub const RECOVERY_CODES: [&str; 2] = ["TOOL_OUTCOME_UNKNOWN", "TOOL_NOT_STARTED"];

/// What converting a log hands on, in the log's order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Converted<'r> {
    /// A trace record the line made.
    Record(&'r TraceRecord),
    /// The open batch ends here cut short: a crash interrupted its turn
    /// ([`Summary::interrupted`]), or the log ends inside it (handed on after its last line:
    /// [`Summary::ends_inside_turn`]). Its records still show what they show; what its end
    /// would owe (a result per call, contexts, dispatch events) cannot be judged
    /// ([`crate::TraceCheck::cut_short`]).
    CutShort,
}

impl<'r> Converted<'r> {
    /// The record, if this is one.
    pub fn record(self) -> Option<&'r TraceRecord> {
        match self {
            Converted::Record(record) => Some(record),
            Converted::CutShort => None,
        }
    }

    /// Hands this to `check`: a record is checked, a cut cuts the open batch short.
    pub fn feed(self, check: &mut crate::TraceCheck, line: usize) -> Result<(), TraceError> {
        match self {
            Converted::Record(record) => check.feed(line, record),
            Converted::CutShort => {
                check.cut_short();
                Ok(())
            }
        }
    }
}

impl Summary {
    /// Lines whose event type is not in the harness's catalog.
    pub fn unknown_lines(&self) -> usize {
        self.unknown.values().map(|(n, _)| n).sum()
    }

    /// Counts an event attributed to no call, at `line`.
    fn unattributed(&mut self, line: usize) {
        self.unattributed_count += 1;
        if self.unattributed.len() < MAX_LISTED_LINES {
            self.unattributed.push(line);
        }
    }
}

/// What a check of such a log cannot see, whatever it holds: each invariant with why. The
/// caller reports them as not checkable rather than checked.
pub fn not_checkable(options: &Options) -> Vec<(InvariantId, String)> {
    let mut out = Vec::new();
    if options.safe.is_none() {
        out.push((
            InvariantId::ExclusiveBarrier,
            "the log does not say which calls are concurrency-safe: name the safe tools (`--safe read_file,list_dir`)".to_owned(),
        ));
    }
    out.push((
        InvariantId::SubCallContextsOmitted,
        "the harness defers a Code Mode sub-call's contexts onto its `run_code` result, and the log does not say where a context came from: at `events` a sub-call's context cannot be told from the `run_code` call's own".to_owned(),
    ));
    out
}

/// The invariants this log shows in part beyond what its trace records show (the checker alone
/// cannot see them at level `events`): each with what the converter checks of it.
pub fn partly_checkable() -> Vec<(InvariantId, String)> {
    vec![
        (
            InvariantId::StageGraphWalk,
            "from the hook events of the log: a PreToolUse hook after the call's PostToolUse began, or a PostToolUse hook before its PreToolUse hook answered".to_owned(),
        ),
        (
            InvariantId::NoStageAfterResult,
            "from the hook events of the log: a hook answering after its call's `tool/result` (or its sub-call's `tool/code-dispatch`)".to_owned(),
        ),
        (
            InvariantId::CodeDispatchInsideBody,
            "from the dispatch events of the log: a sub-call's `tool/code-dispatch-start` or `tool/code-dispatch` after its `run_code` call's `tool/result`".to_owned(),
        ),
    ]
}

/// Which hook stage a hook event belongs to, from its `point`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HookStage {
    /// `PreToolUse`: inside the pre-execute stage.
    Pre,
    /// `PostToolUse`: inside the post-execute stage.
    Post,
}

impl HookStage {
    fn of(point: &str) -> Option<Self> {
        match point {
            "PreToolUse" => Some(HookStage::Pre),
            "PostToolUse" => Some(HookStage::Post),
            _ => None,
        }
    }

    fn point(self) -> &'static str {
        match self {
            HookStage::Pre => "PreToolUse",
            HookStage::Post => "PostToolUse",
        }
    }
}

/// Turns the lines of a log into trace records, one line at a time.
#[derive(Debug, Default)]
pub struct Converter {
    options: Options,
    summary: Summary,
    header_seen: bool,
    /// The call whose `tool/result` is the latest event, while only inbox splices follow it.
    staging: Option<CallId>,
    /// Contexts staged by a call and not yet injected: message id → call.
    staged: HashMap<String, CallId>,
    /// Approval prompts asked and not decided yet: prompt id → call.
    prompts: HashMap<String, CallId>,
    /// Prompts decided in the open batch: a second decision is still its call's (and breaks
    /// `approval-once`); the next batch forgets them.
    decided: HashMap<String, CallId>,
    /// Calls of the open batch that started and have no result yet.
    running: BTreeSet<CallId>,
    /// Code Mode sub-calls that started and are not committed yet, with their `run_code` call.
    running_subs: BTreeMap<CallId, CallId>,
    /// The calls and sub-calls of the open batch, in the order they started.
    units: Units,
    /// Hook invocations not answered yet, by `handlerId`: the unit and the stage.
    hooks: HashMap<String, (usize, HookStage, usize)>,
    /// The line converted last cut the open batch short.
    cut: bool,
    /// Every line the general way (tests compare the two ways).
    #[cfg(test)]
    general_only: bool,
}

impl Converter {
    /// A converter for one log.
    pub fn new(options: Options) -> Self {
        Converter {
            options,
            ..Converter::default()
        }
    }

    /// Converts one line (without its newline): the trace record it makes, if any.
    pub fn line(&mut self, line: usize, bytes: &[u8]) -> Result<Option<TraceRecord>, LogError> {
        #[cfg(test)]
        let sure = !self.general_only;
        #[cfg(not(test))]
        let sure = true;
        let parsed = match self.header_seen && sure {
            true => parse(&self.options, bytes),
            false => Parsed::Again,
        };
        self.apply(line, bytes, parsed)
    }

    /// Converts one line that [`parse`] read (on any thread) to `parsed`: what [`Self::line`]
    /// makes of it.
    fn apply(
        &mut self,
        line: usize,
        bytes: &[u8],
        parsed: Parsed,
    ) -> Result<Option<TraceRecord>, LogError> {
        match parsed {
            Parsed::Blank => return Ok(None),
            Parsed::Again => return self.general(line, bytes),
            // The header is read the general way, whatever it looks like.
            _ if !self.header_seen => return self.general(line, bytes),
            _ => {}
        }
        self.summary.lines += 1;
        let made = match parsed {
            Parsed::Blank | Parsed::Again => None,
            Parsed::ChunkRow => {
                self.summary.passed_over += 1;
                return Ok(None);
            }
            Parsed::Unknown(kind) => {
                let entry = self.summary.unknown.entry(kind).or_insert((0, line));
                entry.0 += 1;
                return Ok(None);
            }
            // No pipeline event: it only ends the staging of contexts, as any event does.
            Parsed::Envelope(turn) => {
                self.staging = None;
                self.turn(line, turn);
                None
            }
            Parsed::Typed(mut record) => {
                let kind = record.event.body.type_name();
                self.attribute(line, kind, &Ids::of_body(&record.event.body))
                    .map(|call| {
                        record.call = call;
                        TraceRecord::Event(record)
                    })
            }
            Parsed::Batch(calls) => {
                self.staging = None;
                self.open_batch(calls)
            }
            Parsed::Contexts(ids) => {
                if let Some(call) = &self.staging {
                    for id in ids {
                        self.staged.insert(id, call.clone());
                    }
                }
                None
            }
            Parsed::Message { id } => self.message(line, id.as_deref(), bytes)?,
        };
        Ok(self.count(made))
    }

    /// A line read the general way ([`strict_json`]'s readers), which words every error.
    fn general(&mut self, line: usize, bytes: &[u8]) -> Result<Option<TraceRecord>, LogError> {
        if bytes.starts_with(&ZSTD_MAGIC) {
            return Err(LogError::Compressed { line });
        }
        let text = std::str::from_utf8(bytes).map_err(|e| LogError::NotAnEvent {
            line,
            why: format!("not UTF-8 ({e})"),
        })?;
        if text.trim().is_empty() {
            return Ok(None);
        }
        self.summary.lines += 1;
        let invalid = |e: serde_json::Error| LogError::NotAnEvent {
            line,
            why: format!("invalid JSON ({e})"),
        };
        let not_object = || LogError::NotAnEvent {
            line,
            why: "a session event is a JSON object".to_owned(),
        };
        // Strict: a key named twice (a forged `type`, `callId`) is refused, not the last kept.
        if !self.header_seen {
            let Value::Object(map) = strict_json::value_from_str(text).map_err(invalid)? else {
                return Err(not_object());
            };
            self.header_seen = true;
            return self.header(line, &map).map(Some);
        }
        // The members its type needs; the rest is checked and dropped as it is read.
        let Line::Object { members: map, data } =
            read_line(text, Need::Envelope).map_err(invalid)?
        else {
            return Err(not_object());
        };
        let kind = match map.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(_) => return Err(not_an_event(line, "field `type` must be a string")),
            None => return Err(not_an_event(line, "it has no `type`")),
        };
        if kind == "session" {
            return Err(not_an_event(line, "a second session header"));
        }
        if CHUNK_ROWS.contains(&kind.as_str()) {
            self.summary.passed_over += 1;
            return Ok(None);
        }
        for field in ["seq", "time"] {
            if !map.get(field).is_some_and(Value::is_u64) {
                return Err(not_an_event(
                    line,
                    &format!("`{field}` must be a non-negative integer"),
                ));
            }
        }
        if !data {
            return Err(not_an_event(line, "it has no `data`"));
        }
        if !is_known_type(&kind) {
            let entry = self.summary.unknown.entry(kind).or_insert((0, line));
            entry.0 += 1;
            return Ok(None);
        }
        self.turn(line, TurnMark::of(&kind));
        let record = self.event(line, &kind, map, text)?;
        if record.is_some() {
            self.summary.records += 1;
        } else {
            self.summary.passed_over += 1;
        }
        Ok(record)
    }

    /// Follows the turns: the log is inside one from its `turn/start` to its `turn/end`. A
    /// turn that begins inside another cuts that one short: a crash ended it, and nothing
    /// closed it before the session went on.
    fn turn(&mut self, line: usize, mark: TurnMark) {
        match mark {
            TurnMark::Begins => {
                if let Some(open) = self.summary.ends_inside_turn {
                    self.interrupt(Some(open), line);
                }
                self.summary.ends_inside_turn = Some(line);
            }
            TurnMark::Ends => self.summary.ends_inside_turn = None,
            TurnMark::Neither => {}
        }
    }

    /// A result the harness's crash recovery wrote at `line` when it reloaded the session: no
    /// pipeline event. The first of a turn cuts its batch short there.
    fn recovered(&mut self, line: usize) {
        let turn = self.summary.ends_inside_turn;
        match self.summary.interrupted.last_mut() {
            Some(last) if last.turn == turn && !last.recovered.is_empty() => {
                last.recovered.push(line);
            }
            _ => {
                self.interrupt(turn, line);
                if let Some(cut) = self.summary.interrupted.last_mut() {
                    cut.recovered.push(line);
                }
            }
        }
    }

    /// The turn begun at line `turn` was interrupted, as line `at` shows: its open batch is
    /// cut short there ([`Self::take_cut`]).
    fn interrupt(&mut self, turn: Option<usize>, at: usize) {
        self.summary.interrupted.push(Interruption {
            turn,
            at,
            recovered: Vec::new(),
        });
        self.cut = true;
    }

    /// Whether the line just converted cut the open batch short (a turn a crash interrupted):
    /// once per cut. [`convert`] hands it on as [`Converted::CutShort`].
    pub fn take_cut(&mut self) -> bool {
        std::mem::take(&mut self.cut)
    }

    /// Counts a line that makes `record` (or passes over it).
    fn count(&mut self, record: Option<TraceRecord>) -> Option<TraceRecord> {
        if record.is_some() {
            self.summary.records += 1;
        } else {
            self.summary.passed_over += 1;
        }
        record
    }

    /// A `user/message` line [`parse`] was sure of, whose data's `id` is `id`: a record only
    /// when a call staged it, so the whole line is built only then.
    fn message(
        &mut self,
        line: usize,
        id: Option<&str>,
        bytes: &[u8],
    ) -> Result<Option<TraceRecord>, LogError> {
        let kind = "user/message";
        let ids = Ids {
            id,
            ..Ids::default()
        };
        let Some(call) = self.attribute(line, kind, &ids) else {
            return Ok(None);
        };
        // `parse` read it as UTF-8 already.
        let text = std::str::from_utf8(bytes).map_err(|e| not_an_event(line, &e.to_string()))?;
        // Sure of the text, the typed pass (or else serde's plain reader) builds what the
        // strict one would.
        if let Some(mut record) = event_record_type_first(text) {
            record.call = call;
            return Ok(Some(TraceRecord::Event(record)));
        }
        serde_json::from_str::<Map<String, Value>>(text)
            .map_err(|e| LogError::NotAnEvent {
                line,
                why: format!("invalid JSON ({e})"),
            })
            .and_then(|map| self.read_event(line, kind, map))
            .map(|event| Some(record(call, event)))
    }

    /// What was passed over, once the log is read.
    pub fn finish(self) -> Summary {
        self.summary
    }

    fn header(&mut self, line: usize, map: &Map<String, Value>) -> Result<TraceRecord, LogError> {
        let no_header = |why: &str| LogError::NoHeader {
            line,
            why: why.to_owned(),
        };
        if map.get("type").and_then(Value::as_str) != Some("session") {
            return Err(no_header("its `type` is not `session`"));
        }
        match map.get("version") {
            Some(v) if v.as_u64() == Some(FORMAT_VERSION) => {}
            Some(v) => {
                return Err(LogError::Version {
                    line,
                    version: v.to_string(),
                });
            }
            None => return Err(no_header("it has no `version`")),
        }
        let id = map
            .get("id")
            .and_then(Value::as_str)
            .ok_or_else(|| no_header("it has no `id`"))?;
        self.summary.session = id.to_owned();
        self.summary.records += 1;
        Ok(TraceRecord::Header(TraceHeader {
            spec: Revision::Rev2,
            implementation: Some(format!("deepseek-harness (session {id})")),
            capabilities: None,
            observation: Some(ObservationLevel::Events),
        }))
    }

    fn event(
        &mut self,
        line: usize,
        kind: &str,
        map: Map<String, Value>,
        text: &str,
    ) -> Result<Option<TraceRecord>, LogError> {
        let map = if Need::of(kind) == Need::Typed {
            // One typed pass ([`event_record_type_first`]) when the line leads with its `type`
            // and has no member the event does not know: it reads what `from_value` reads from
            // the line's members (that reader's promise); the line was checked strictly before.
            if let Some(mut record) = event_record_type_first(text) {
                let ids = Ids::of_body(&record.event.body);
                let Some(call) = self.attribute(line, kind, &ids) else {
                    return Ok(None);
                };
                record.call = call;
                return Ok(Some(TraceRecord::Event(record)));
            }
            // Declined: read as every other line is, whole.
            match read_line(text, Need::Event) {
                Ok(Line::Object { members, .. }) => members,
                _ => map,
            }
        } else {
            map
        };
        if kind == "tool/result" && rewrites_a_result(&map) {
            self.staging = None;
            let (count, _) = self.summary.rewritten_results.get_or_insert((0, line));
            *count += 1;
            return Ok(None);
        }
        let data = map.get("data").unwrap_or(&Value::Null);
        // Contexts are staged right after their call's result, before anything else happens.
        match kind {
            "assistant/message" => {
                self.staging = None;
                return Ok(self.batch(data));
            }
            "agent/inbox/spliced" => {
                let staging = self.staging.take();
                self.stage_contexts(data, staging.as_ref());
                self.staging = staging;
                return Ok(None);
            }
            _ => {}
        }
        let Some(call) = self.attribute(line, kind, &Ids::of_value(data)) else {
            return Ok(None);
        };
        let event = self.read_event(line, kind, map)?;
        Ok(Some(record(call, event)))
    }

    /// The event of a pipeline event's members, as [`direct_event`] (or else serde's
    /// `from_value`) reads them. Where the data has members tep's type of it does not declare
    /// (a newer harness adds to its events), those are passed over and counted, and the rest
    /// is read: what tep reads keeps its shape (a member it needs missing, or of another type,
    /// is still an error).
    fn read_event(
        &mut self,
        line: usize,
        kind: &str,
        map: Map<String, Value>,
    ) -> Result<SessionEvent, LogError> {
        if let Some(event) = direct_event(kind, &map) {
            return Ok(event);
        }
        let mut value = Value::Object(map);
        let declined = match SessionEvent::deserialize(&value) {
            Ok(event) => return Ok(event),
            Err(e) => e,
        };
        let passed_over = unknown_fields::pass_over(&mut value);
        if passed_over.is_empty() {
            return shape(line, kind, Err(declined));
        }
        let event = shape(line, kind, SessionEvent::deserialize(&value))?;
        for path in passed_over {
            let entry = self
                .summary
                .unknown_fields
                .entry((kind.to_owned(), path))
                .or_insert((0, line));
            entry.0 += 1;
        }
        Ok(event)
    }

    /// Follows the open batch through an event of `kind` whose data holds `ids`: the call the
    /// record is attributed to (`Some(None)`: no call, its data names it), or `None` when the
    /// event is no pipeline event and makes no record.
    fn attribute(&mut self, line: usize, kind: &str, ids: &Ids<'_>) -> Option<Option<CallId>> {
        // Contexts are staged right after their call's result, before anything else happens.
        self.staging = None;
        let call = match kind {
            "user/message" => {
                // A user's own message, or one no call staged: not a pipeline event.
                Some(self.staged.remove(ids.id.unwrap_or_default())?)
            }
            "tool/call" => {
                if let Some(id) = ids.call {
                    self.running.insert(CallId::new(id));
                    self.units.start(CallId::new(id), None);
                }
                None
            }
            "tool/result" if ids.recovered => {
                self.recovered(line);
                return None;
            }
            "tool/result" => {
                if let Some(id) = ids.result_call {
                    let id = CallId::new(id);
                    self.units.end(&id, line);
                    self.running.remove(&id);
                    self.running_subs.retain(|_, parent| *parent != id);
                    self.staging = Some(id);
                }
                None
            }
            "approval/asked" => {
                if let (Some(prompt), Some(call)) = (ids.id, ids.call) {
                    self.prompts.insert(prompt.to_owned(), CallId::new(call));
                }
                None
            }
            "approval/decided" => ids.id.and_then(|p| self.decide(p)),
            "tool/code-dispatch-start" => {
                if let (Some(sub), Some(parent)) = (ids.sub, ids.parent) {
                    self.dispatch_after_result(line, kind, parent, sub);
                    self.running_subs
                        .insert(CallId::new(sub), CallId::new(parent));
                    self.units
                        .start(CallId::new(sub), Some(CallId::new(parent)));
                }
                None
            }
            "tool/code-dispatch" => {
                if let Some(sub) = ids.sub {
                    if let Some(parent) = ids.parent {
                        self.dispatch_after_result(line, kind, parent, sub);
                    }
                    self.units.end(&CallId::new(sub), line);
                    self.running_subs.remove(&CallId::new(sub));
                }
                None
            }
            "hook/invoked" | "hook/result" => {
                self.hook_stage(line, kind, ids.point, ids.handler.unwrap_or_default());
                None
            }
            "todo/write" => {
                let call = self.running_one();
                if call.is_none() {
                    self.summary.unattributed(line);
                }
                call
            }
            _ => return None,
        };
        Some(call)
    }

    /// The `model` record of an assistant message that calls tools.
    fn batch(&mut self, data: &Value) -> Option<TraceRecord> {
        let calls = declared_calls(&self.options, data);
        self.open_batch(calls)
    }

    /// The `model` record of a batch of `calls` (none: no record), which closes the last one.
    fn open_batch(&mut self, calls: Vec<DeclaredCall>) -> Option<TraceRecord> {
        if calls.is_empty() {
            return None;
        }
        // What the last batch left open closes with it: every map stays as small as a batch.
        self.running.clear();
        self.running_subs.clear();
        self.units.clear();
        self.hooks.clear();
        self.decided.clear();
        let mut model = Observation::at(NodeId::Model);
        model.calls = Some(calls);
        Some(TraceRecord::Stage(Box::new(model)))
    }

    /// Attributes the messages an inbox splice stages for the next step to the call whose
    /// result came just before it (the harness stages a result's contexts right after it).
    fn stage_contexts(&mut self, data: &Value, staging: Option<&CallId>) {
        let Some(call) = staging else {
            return;
        };
        for id in staged_ids(data) {
            self.staged.insert(id.to_owned(), call.clone());
        }
    }

    /// The call a decision of prompt `id` is for: the prompt settles.
    fn decide(&mut self, id: &str) -> Option<CallId> {
        match self.prompts.remove_entry(id) {
            Some((id, call)) => {
                self.decided.insert(id, call.clone());
                Some(call)
            }
            None => self.decided.get(id).cloned(),
        }
    }

    fn breach(
        &mut self,
        id: InvariantId,
        lines: Vec<usize>,
        call: Option<&CallId>,
        message: String,
    ) {
        if self.summary.breaches.len() >= MAX_VIOLATIONS {
            self.summary.breaches_omitted += 1;
            return;
        }
        self.summary.breaches.push(Violation {
            invariant: id,
            level: invariant(id).level,
            lines,
            call: call.cloned(),
            message,
        });
    }

    /// A sub-call's dispatch event after its `run_code` call's result.
    fn dispatch_after_result(&mut self, line: usize, kind: &str, parent: &str, sub: &str) {
        let result = self.units.call(&CallId::new(parent)).and_then(|u| u.ended);
        if let Some(result) = result {
            let message = format!(
                "line {line}: sub-call {sub} logged {kind} after its run_code call {parent} logged its tool/result (line {result}): a program's dispatch events are drained before its run settles"
            );
            self.breach(
                InvariantId::CodeDispatchInsideBody,
                vec![line, result],
                Some(&CallId::new(sub)),
                message,
            );
        }
    }

    /// Reads a hook event as its call's pre- or post-execute stage, and checks its place.
    fn hook_stage(&mut self, line: usize, kind: &str, point: Option<&str>, handler: &str) {
        let stage = point.and_then(HookStage::of);
        let handler = handler.to_owned();
        let Some(stage) = stage else {
            // A hook of no tool call (a session or prompt hook): not a pipeline stage.
            self.summary.unattributed(line);
            return;
        };
        if kind == "hook/result" {
            let Some((unit, invoked_stage, invoked)) = self.hooks.remove(&handler) else {
                // An answer whose invocation the log does not hold: nothing to pair it with.
                self.summary.unattributed(line);
                return;
            };
            self.summary.hook_stage_events += 1;
            let u = &mut self.units[unit];
            if invoked_stage == HookStage::Pre {
                u.open_pre = u.open_pre.saturating_sub(1);
            }
            if let Some(ended) = u.ended {
                let (id, ended_by) = (
                    u.id.clone(),
                    if u.parent.is_some() {
                        "tool/code-dispatch"
                    } else {
                        "tool/result"
                    },
                );
                let message = format!(
                    "line {line}: the {} hook invoked at line {invoked} (call {id}) answered after the call's {ended_by} (line {ended})",
                    invoked_stage.point()
                );
                self.breach(
                    InvariantId::NoStageAfterResult,
                    vec![line, invoked, ended],
                    Some(&id),
                    message,
                );
            }
            return;
        }
        let found = match stage {
            HookStage::Pre => self.units.pre_stage().map(|i| (i, true)),
            HookStage::Post => self.units.post_stage(),
        };
        let Some((unit, certain)) = found else {
            self.summary.unattributed(line);
            return;
        };
        self.summary.hook_stage_events += 1;
        self.hooks.insert(handler, (unit, stage, line));
        let u = &mut self.units[unit];
        let id = u.id.clone();
        let breach = match stage {
            HookStage::Pre => {
                u.open_pre += 1;
                u.last_pre = Some(line);
                match u.post_since {
                    Some((post, true)) => Some((
                        InvariantId::StageGraphWalk,
                        vec![line, post],
                        format!(
                            "line {line}: a PreToolUse hook of call {id} after its post-execute stage began (PostToolUse at line {post})"
                        ),
                    )),
                    _ => None,
                }
            }
            HookStage::Post => {
                if u.post_since.is_none() {
                    u.post_since = Some((line, certain));
                }
                match (u.open_pre, u.last_pre, certain) {
                    (1.., Some(pre), true) => Some((
                        InvariantId::StageGraphWalk,
                        vec![line, pre],
                        format!(
                            "line {line}: a PostToolUse hook of call {id} while its PreToolUse hook (line {pre}) has not answered"
                        ),
                    )),
                    _ => None,
                }
            }
        };
        if let Some((invariant, lines, message)) = breach {
            self.breach(invariant, lines, Some(&id), message);
        }
    }

    /// The one call (or Code Mode sub-call) running now, if exactly one is.
    fn running_one(&self) -> Option<CallId> {
        let mut innermost = self.running_subs.keys().cloned().chain(
            self.running
                .iter()
                .filter(|c| !self.running_subs.values().any(|p| p == *c))
                .cloned(),
        );
        let one = innermost.next()?;
        innermost.next().is_none().then_some(one)
    }
}

/// What a line after the header is, read without the converter's state (so on any thread):
/// the usual line, which [`Converter::apply`] finishes, or [`Parsed::Again`].
#[derive(Debug)]
enum Parsed {
    /// Blank: no event.
    Blank,
    /// Not sure of it: read it the general way, which words any error.
    Again,
    /// A storage row of chunks.
    ChunkRow,
    /// A type the log format does not know.
    Unknown(String),
    /// A known type that makes no record, and whether it begins or ends a turn.
    Envelope(TurnMark),
    /// A type that always makes a record, as its record (of no call yet): read into the box
    /// the record keeps, it is not copied again on its way to the checker.
    Typed(Box<EventRecord>),
    /// An `assistant/message`, as the calls it declares.
    Batch(Vec<DeclaredCall>),
    /// An `agent/inbox/spliced`, as the ids of the contexts it stages.
    Contexts(Vec<String>),
    /// A `user/message`, as its data's `id`.
    Message { id: Option<String> },
}

/// What a line says of the turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TurnMark {
    Begins,
    Ends,
    Neither,
}

impl TurnMark {
    fn of(kind: &str) -> Self {
        match kind {
            "turn/start" => TurnMark::Begins,
            "turn/end" => TurnMark::Ends,
            _ => TurnMark::Neither,
        }
    }
}

/// Reads the usual line without serde's strict pass, building only what its type needs: one
/// strict typed pass for a type that always makes a record; else an object
/// [`object_members`] is sure the strict reader accepts, whose `type` is a string without
/// escapes and whose `seq` and `time` are plain unsigned integers. [`Parsed::Again`] for
/// anything else.
fn parse(options: &Options, bytes: &[u8]) -> Parsed {
    if bytes.starts_with(&ZSTD_MAGIC) {
        return Parsed::Again;
    }
    let Ok(text) = simdutf8::basic::from_utf8(bytes) else {
        return Parsed::Again;
    };
    if text.trim().is_empty() {
        return Parsed::Blank;
    }
    // A type that always makes a record: one strict typed pass both checks the line and reads
    // it (where it declines, the line is scanned and read as any other).
    if leading_type(text).is_some_and(|k| Need::of(k) == Need::Typed)
        && let Some(record) = event_record_strict(text)
    {
        return Parsed::Typed(record);
    }
    parse_scanned(options, text).unwrap_or(Parsed::Again)
}

/// [`parse`] through the quick scan: `None` where it is not sure.
fn parse_scanned(options: &Options, text: &str) -> Option<Parsed> {
    let (mut kind, mut seq, mut time, mut data) = (None, None, None, None);
    // No key is named twice once it is sure: each is handed over once.
    object_members(text, |key, value| match key {
        "type" => kind = Some(value),
        "seq" => seq = Some(value),
        "time" => time = Some(value),
        "data" => data = Some(value),
        _ => {}
    })?;
    let kind = kind?.strip_prefix('"')?.strip_suffix('"')?;
    if kind.contains('\\') || kind == "session" {
        return None;
    }
    if CHUNK_ROWS.contains(&kind) {
        return Some(Parsed::ChunkRow);
    }
    seq?.parse::<u64>().ok()?;
    time?.parse::<u64>().ok()?;
    let data = data?;
    // The types a record can come from are all known.
    Some(match Need::of(kind) {
        Need::Envelope if !is_known_type(kind) => Parsed::Unknown(kind.to_owned()),
        Need::Envelope => Parsed::Envelope(TurnMark::of(kind)),
        Need::Typed => Parsed::Typed(event_record_type_first(text)?),
        // Read from the text itself: the few members these types use.
        Need::Data if kind == "assistant/message" => Parsed::Batch(sure_batch(options, data)?),
        Need::Data => Parsed::Contexts(
            sure_contexts(data)?
                .into_iter()
                .map(str::to_owned)
                .collect(),
        ),
        Need::Event => Parsed::Message {
            id: sure_message_id(data)?.map(str::to_owned),
        },
    })
}

/// The calls an assistant message's `data` declares: its message's content blocks of type
/// `tool-call` with a string `id` and `name`.
fn declared_calls(options: &Options, data: &Value) -> Vec<DeclaredCall> {
    let Some(blocks) = data.pointer("/message/content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool-call"))
        .filter_map(|b| {
            let id = str_field(b, "id")?;
            let name = str_field(b, "name")?;
            Some(DeclaredCall {
                call_id: CallId::new(id),
                name: name.to_owned(),
                concurrency_safe: options.safe.as_ref().map(|s| s.contains(name)),
            })
        })
        .collect()
}

/// The calls an assistant message's data declares, read from its text as [`declared_calls`]
/// reads them from its value. `None`: not sure of a member (an escape in a string). Its
/// `message`, that message's `content` and each block are walked once, each inside the walk of
/// the one above it (a skim of each level on its own walked the blocks four times, and cost the
/// line more than its strict scan).
fn sure_batch(options: &Options, data: &str) -> Option<Vec<DeclaredCall>> {
    let mut calls = Vec::new();
    let mut sure = true;
    let mut block = |at: usize| {
        let [mut kind, mut id, mut name] = [None; 3];
        let end = object_of_sure(data, at, |key, at| {
            let end = end_of_sure_value(data, at);
            let value = data.get(at..end);
            match key {
                "type" => kind = value,
                "id" => id = value,
                "name" => name = value,
                _ => {}
            }
            Some(end)
        });
        match (sure_str(kind), sure_str(id), sure_str(name)) {
            (Some(Some("tool-call")), Some(Some(id)), Some(Some(name))) => {
                calls.push(DeclaredCall {
                    call_id: CallId::new(id),
                    name: name.to_owned(),
                    concurrency_safe: options.safe.as_ref().map(|s| s.contains(name)),
                });
            }
            (Some(_), Some(_), Some(_)) => {}
            _ => sure = false,
        }
        Some(end)
    };
    object_of_sure(data, 0, |key, at| {
        (key == "message").then(|| {
            object_of_sure(data, at, |key, at| {
                (key == "content").then(|| array_of_sure(data, at, &mut block))
            })
        })
    });
    sure.then_some(calls)
}

/// The `id` of a `user/message`'s data, as `Ids::of_value` reads it (not a string: none);
/// `None`: not sure (an escape in it).
fn sure_message_id(data: &str) -> Option<Option<&str>> {
    let [id] = sure_members(Some(data), ["id"]);
    match id.and_then(|v| v.strip_prefix('"')?.strip_suffix('"')) {
        Some(id) if id.contains('\\') => None,
        id => Some(id),
    }
}

/// The session event of a line's members, as `serde_json::from_value::<SessionEvent>` reads
/// it, without the detour through serde's buffered content that its flattened body takes: the
/// envelope's members one by one, then the body from its `type` and `data`, in that order.
/// `None` where that fails: `from_value` then says why, in its words
/// ([`Converter::read_event`]).
fn direct_event(kind: &str, map: &Map<String, Value>) -> Option<SessionEvent> {
    let number = |field| map.get(field).and_then(Value::as_u64);
    let optional = |field| map.get(field).filter(|v| !v.is_null());
    let surface_op = match optional("surfaceOp") {
        Some(v) => Some(SurfaceOp::deserialize(v).ok()?),
        None => None,
    };
    let source_event_seqs = match optional("sourceEventSeqs") {
        Some(v) => Some(Vec::<u64>::deserialize(v).ok()?),
        None => None,
    };
    let kind = Value::from(kind);
    let members = [("type", &kind), ("data", map.get("data")?)];
    let body = MapDeserializer::<_, serde_json::Error>::new(members.into_iter());
    // It reads `type` first, then `data`, and refuses a member left over.
    let event_body = EventBody::deserialize(body).ok()?;
    Some(SessionEvent {
        seq: number("seq")?,
        time: number("time")?,
        body: event_body,
        surface_op,
        source_event_seqs,
    })
}

/// Reads a line after the header as [`Line`]: one pass, what its type does not need (`need`:
/// [`Need::Event`] for everything) built into nothing.
fn read_line(text: &str, need: Need) -> Result<Line, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let visitor = LineVisitor {
        whole: need == Need::Event,
    };
    let line = (&mut deserializer).deserialize_any(visitor)?;
    deserializer.end()?;
    Ok(line)
}

/// Whether a `tool/result`'s members say it rewrites a result already on the surface the model
/// sees, rather than adding one: a `surfaceOp` other than `append` (deepseek-harness's
/// `{"op": "replace", "start", "end"}`, which its compaction writes when it prunes a long
/// result: `compaction-tool-result-pruner`). Such an event is no call's outcome.
fn rewrites_a_result(members: &Map<String, Value>) -> bool {
    matches!(members.get("surfaceOp"), Some(Value::Object(_)))
}

fn record(call: Option<CallId>, event: SessionEvent) -> TraceRecord {
    TraceRecord::Event(Box::new(EventRecord { call, event }))
}

/// The string members of an event's data that attribute it (each read only for the types
/// whose data has it).
#[derive(Debug, Default)]
struct Ids<'a> {
    /// `id`: a user message's, an approval prompt's.
    id: Option<&'a str>,
    /// `callId` (`tool/call`, `approval/asked`).
    call: Option<&'a str>,
    /// A `tool/result`'s `message.content[0].toolCallId`.
    result_call: Option<&'a str>,
    /// `subCallId`, `parentCallId` (the dispatch events).
    sub: Option<&'a str>,
    parent: Option<&'a str>,
    /// `point`, `handlerId` (the hook events).
    point: Option<&'a str>,
    handler: Option<&'a str>,
    /// A `tool/result` whose `error.code` is one of [`RECOVERY_CODES`]: written by the
    /// harness's crash recovery, not by the pipeline.
    recovered: bool,
}

impl<'a> Ids<'a> {
    fn of_value(data: &'a Value) -> Self {
        Ids {
            id: str_field(data, "id"),
            call: str_field(data, "callId"),
            result_call: data
                .pointer("/message/content/0/toolCallId")
                .and_then(Value::as_str),
            sub: str_field(data, "subCallId"),
            parent: str_field(data, "parentCallId"),
            point: str_field(data, "point"),
            handler: str_field(data, "handlerId"),
            recovered: data
                .pointer("/error/code")
                .and_then(Value::as_str)
                .is_some_and(|code| RECOVERY_CODES.contains(&code)),
        }
    }

    fn of_body(body: &'a EventBody) -> Self {
        match body {
            EventBody::ToolCall(d) => Ids {
                call: Some(d.call_id.as_str()),
                ..Ids::default()
            },
            // A flat result has no `message`: it names no call here, as in `of_value`.
            EventBody::ToolResult(ToolResultData::Message(m)) => Ids {
                result_call: m.message.content.first().map(|b| b.tool_call_id.as_str()),
                recovered: m
                    .error
                    .as_ref()
                    .is_some_and(|e| RECOVERY_CODES.contains(&e.code.as_str())),
                ..Ids::default()
            },
            EventBody::UserMessage(m) => Ids {
                id: Some(&m.id),
                ..Ids::default()
            },
            EventBody::ApprovalAsked(a) => Ids {
                id: Some(&a.id),
                call: a.call_id.as_ref().map(CallId::as_str),
                ..Ids::default()
            },
            EventBody::ApprovalDecided(d) => Ids {
                id: Some(&d.id),
                ..Ids::default()
            },
            EventBody::CodeDispatchStart(d) => Ids {
                sub: Some(d.sub_call_id.as_str()),
                parent: Some(d.parent_call_id.as_str()),
                ..Ids::default()
            },
            EventBody::CodeDispatch(d) => Ids {
                sub: Some(d.sub_call_id.as_str()),
                parent: Some(d.parent_call_id.as_str()),
                ..Ids::default()
            },
            EventBody::HookInvoked(h) => Ids {
                point: Some(&h.point),
                handler: Some(&h.handler_id),
                ..Ids::default()
            },
            EventBody::HookResult(h) => Ids {
                point: Some(&h.point),
                handler: Some(&h.handler_id),
                ..Ids::default()
            },
            _ => Ids::default(),
        }
    }
}

fn str_field<'v>(value: &'v Value, field: &str) -> Option<&'v str> {
    value.get(field).and_then(Value::as_str)
}

/// The `type` of a line that opens with it, `{"type":"...",`, written without escapes: what
/// it names before the line is read (`None`: read it to know).
fn leading_type(text: &str) -> Option<&str> {
    let rest = text.strip_prefix("{\"type\":\"")?;
    let kind = &rest[..memchr::memchr(b'"', rest.as_bytes())?];
    (!kind.contains('\\')).then_some(kind)
}

/// The texts of members `keys` of the JSON text `object`, a value within a line the scan was
/// sure of, skimmed in one pass: `None` for a key where `Value::get` gives nothing (no such
/// member, not an object, no object).
fn sure_members<'t, const N: usize>(
    object: Option<&'t str>,
    keys: [&str; N],
) -> [Option<&'t str>; N] {
    let mut found = [None; N];
    let Some(object) = object.filter(|o| o.starts_with('{')) else {
        return found;
    };
    // The line's scan was sure of it: it names no key twice, so each is handed over once.
    members_of_sure(object, |k, value| {
        if let Some(i) = keys.iter().position(|key| *key == k) {
            found[i] = Some(value);
        }
    });
    found
}

/// The string a JSON text is, as `Value::as_str` gives it: `Some(None)` for no text or another
/// value, `None` (not sure) for a string with escapes.
fn sure_str(value: Option<&str>) -> Option<Option<&str>> {
    match value.and_then(|v| v.strip_prefix('"')?.strip_suffix('"')) {
        Some(s) if s.contains('\\') => None,
        s => Some(s),
    }
}

/// The ids of the messages an inbox splice's `data` stages for the next step: those it inserts
/// at `next-step`, removing none, that are not the user's own.
fn staged_ids(data: &Value) -> Vec<&str> {
    if data.get("target").and_then(Value::as_str) != Some("next-step")
        || data
            .get("removedCount")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            != 0
    {
        return Vec::new();
    }
    let inserted = data.get("inserted").and_then(Value::as_array);
    inserted
        .into_iter()
        .flatten()
        .filter(|m| m.pointer("/source/kind").and_then(Value::as_str) != Some("user"))
        .filter_map(|m| str_field(m, "id"))
        .collect()
}

/// The ids of the messages an inbox splice's data stages, read from its text as [`staged_ids`]
/// reads them from its value, in one walk (as [`sure_batch`]). `None`: not sure of a member
/// that decides (an escape in a string).
fn sure_contexts(data: &str) -> Option<Vec<&str>> {
    let (mut target, mut removed) = (None, None);
    let (mut ids, mut sure) = (Vec::new(), true);
    let value_at = |at: usize| {
        let end = end_of_sure_value(data, at);
        (data.get(at..end), end)
    };
    let mut message = |at: usize| {
        let (mut kind, mut id) = (None, None);
        let end = object_of_sure(data, at, |key, at| match key {
            "id" => {
                let (value, end) = value_at(at);
                id = value;
                Some(end)
            }
            "source" => Some(object_of_sure(data, at, |key, at| {
                (key == "kind").then(|| {
                    let (value, end) = value_at(at);
                    kind = value;
                    end
                })
            })),
            _ => None,
        });
        match (sure_str(kind), sure_str(id)) {
            (Some(kind), Some(Some(id))) if kind != Some("user") => ids.push(id),
            (Some(_), Some(_)) => {}
            _ => sure = false,
        }
        Some(end)
    };
    object_of_sure(data, 0, |key, at| match key {
        "target" | "removedCount" => {
            let (value, end) = value_at(at);
            *(if key == "target" {
                &mut target
            } else {
                &mut removed
            }) = value;
            Some(end)
        }
        "inserted" => Some(array_of_sure(data, at, &mut message)),
        _ => None,
    });
    // `as_u64`, else 0: any other number or value counts as none removed.
    let removed = removed.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    if sure_str(target)? != Some("next-step") || removed != 0 {
        return Some(Vec::new());
    }
    sure.then_some(ids)
}

/// An event of `kind` whose data cannot be read, at `line`.
fn shape<T>(line: usize, kind: &str, read: Result<T, serde_json::Error>) -> Result<T, LogError> {
    read.map_err(|e| LogError::Shape {
        line,
        kind: kind.to_owned(),
        why: e.to_string(),
    })
}

fn not_an_event(line: usize, why: &str) -> LogError {
    LogError::NotAnEvent {
        line,
        why: why.to_owned(),
    }
}

/// Why converting and checking a log stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConvertError {
    /// The log could not be read.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The records it made could not be checked (`f` refused one).
    #[error(transparent)]
    Trace(#[from] TraceError),
}

impl From<ConvertError> for TraceError {
    fn from(e: ConvertError) -> Self {
        match e {
            ConvertError::Log(e) => e.into(),
            ConvertError::Trace(e) => e,
        }
    }
}

/// Reads a log line by line and calls `f` with what each line makes (a record, or a cut:
/// [`Converted`]) and the line it came from. Lines longer than [`MAX_LINE_BYTES`] are refused.
pub fn convert(
    mut reader: impl BufRead,
    options: Options,
    mut f: impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
) -> Result<Summary, ConvertError> {
    let mut converter = Converter::new(options);
    let mut partial = Vec::new();
    let mut line = 0;
    loop {
        line += 1;
        let converted = with_next_line(&mut reader, line, &mut partial, |bytes, ending| {
            let made = converter.last_line_torn(line, bytes, ending, |c| c.line(line, bytes))?;
            converter.hand_on(line, made, &mut f)?;
            Ok::<(), ConvertError>(())
        })?;
        match converted {
            Some(done) => done?,
            None => break,
        }
    }
    converter.end(line - 1, &mut f)
}

/// Calls `use_line` with line `line` of a log, without its newline (and a carriage return
/// before it), and how it ended; `None` at the end of the log. A line longer than
/// [`MAX_LINE_BYTES`] is an error (as [`parallel`]'s chunks refuse it). The line is read
/// where it lies in the reader's buffer ([`BufRead::fill_buf`]), so a log held in memory is
/// not copied (measured: the check is 5–11% faster for it); only a line that straddles two
/// fills is gathered into `partial`.
fn with_next_line<T>(
    reader: &mut impl BufRead,
    line: usize,
    partial: &mut Vec<u8>,
    use_line: impl FnOnce(&[u8], Ending) -> T,
) -> Result<Option<T>, LogError> {
    partial.clear();
    let too_long = || LogError::Read {
        line,
        why: format!("line longer than {MAX_LINE_BYTES} bytes"),
    };
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(LogError::Read {
                    line,
                    why: format!("cannot read: {e}"),
                });
            }
        };
        if available.is_empty() {
            if partial.is_empty() {
                return Ok(None);
            }
            return Ok(Some(use_line(without_return(partial), Ending::EndOfLog)));
        }
        let Some(end) = memchr::memchr(b'\n', available) else {
            // No newline: the line goes on at the next fill.
            if partial.len() + available.len() > MAX_LINE_BYTES {
                return Err(too_long());
            }
            partial.extend_from_slice(available);
            let n = available.len();
            reader.consume(n);
            continue;
        };
        if partial.len() + end > MAX_LINE_BYTES {
            return Err(too_long());
        }
        let used = if partial.is_empty() {
            use_line(without_return(&available[..end]), Ending::Newline)
        } else {
            partial.extend_from_slice(&available[..end]);
            use_line(without_return(partial), Ending::Newline)
        };
        reader.consume(end + 1);
        return Ok(Some(used));
    }
}

/// A line without the carriage return that may end it.
fn without_return(bytes: &[u8]) -> &[u8] {
    bytes.strip_suffix(b"\r").unwrap_or(bytes)
}

/// How a line read ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    Newline,
    /// The log's end, with no newline: the last line, maybe torn.
    EndOfLog,
}

/// Whether `bytes` are the start of a JSON text cut short: a UTF-8 sequence or a JSON value
/// the end of the bytes breaks off.
fn cut_off(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Err(e) => e.error_len().is_none(),
        Ok(text) => serde_json::from_str::<serde::de::IgnoredAny>(text).is_err_and(|e| e.is_eof()),
    }
}

impl Converter {
    /// Converts line `line` (`bytes`) with `convert`, unless it is the log's last line, with no
    /// newline, cut off in the middle of its JSON: the tail a session killed while writing
    /// leaves. The harness itself drops such a tail when it reloads the session; it is passed
    /// over ([`Summary::torn_tail`]), and the log ends where the line began.
    fn last_line_torn(
        &mut self,
        line: usize,
        bytes: &[u8],
        ending: Ending,
        convert: impl FnOnce(&mut Self) -> Result<Option<TraceRecord>, LogError>,
    ) -> Result<Option<TraceRecord>, LogError> {
        match convert(self) {
            Err(_) if ending == Ending::EndOfLog && self.header_seen && cut_off(bytes) => {
                self.summary.torn_tail = Some(line);
                Ok(None)
            }
            made => made,
        }
    }

    /// Hands on what line `line` made: a cut it made first, then its record.
    fn hand_on(
        &mut self,
        line: usize,
        made: Option<TraceRecord>,
        f: &mut impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
    ) -> Result<(), TraceError> {
        if self.take_cut() {
            f(line, Converted::CutShort)?;
        }
        match made {
            Some(record) => f(line, Converted::Record(&record)),
            None => Ok(()),
        }
    }

    /// What the log held, once every line is converted: an error if it had no header.
    /// What the log held, once its `lines` lines are converted: a log that ends inside a turn
    /// cuts its last batch short there, handed on to `f`.
    fn end(
        self,
        lines: usize,
        f: &mut impl FnMut(usize, Converted<'_>) -> Result<(), TraceError>,
    ) -> Result<Summary, ConvertError> {
        if !self.header_seen {
            return Err(LogError::NoHeader {
                line: 1,
                why: "the log is empty".to_owned(),
            }
            .into());
        }
        if self.summary.ends_inside_turn.is_some() {
            f(lines, Converted::CutShort)?;
        }
        Ok(self.finish())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const HEADER: &str =
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0}"#;

    /// Converts `lines` (after the header): each record with its line, and the summary.
    fn convert_lines(
        options: Options,
        lines: &[&str],
    ) -> Result<(Vec<(usize, TraceRecord)>, Summary), ConvertError> {
        let text = std::iter::once(HEADER)
            .chain(lines.iter().copied())
            .collect::<Vec<_>>()
            .join("\n");
        let mut records = Vec::new();
        let summary = convert(text.as_bytes(), options, |line, made| {
            records.extend(made.record().map(|r| (line, r.clone())));
            Ok(())
        })?;
        Ok((records, summary))
    }

    fn event(seq: u64, kind: &str, data: &str) -> String {
        format!(r#"{{"type":"{kind}","seq":{seq},"time":{seq},"data":{data}}}"#)
    }

    fn call(seq: u64, id: &str, name: &str) -> String {
        event(
            seq,
            "tool/call",
            &format!(r#"{{"turn":1,"step":1,"callId":"{id}","name":"{name}","arguments":"{{}}"}}"#),
        )
    }

    fn result(seq: u64, id: &str) -> String {
        event(
            seq,
            "tool/result",
            &format!(
                r#"{{"turn":1,"step":1,"message":{{"id":"r{seq}","role":"user","source":{{"kind":"tool","callId":"{id}"}},"content":[{{"type":"tool-result","toolCallId":"{id}","content":[],"isError":false}}]}}}}"#
            ),
        )
    }

    fn batch(seq: u64, calls: &[(&str, &str)]) -> String {
        let blocks: Vec<String> = calls
            .iter()
            .map(|(id, name)| {
                format!(r#"{{"type":"tool-call","id":"{id}","name":"{name}","arguments":"{{}}"}}"#)
            })
            .collect();
        event(
            seq,
            "assistant/message",
            &format!(
                r#"{{"turn":1,"step":1,"message":{{"role":"assistant","content":[{}]}}}}"#,
                blocks.join(",")
            ),
        )
    }

    fn splice(seq: u64, id: &str, source: &str) -> String {
        event(
            seq,
            "agent/inbox/spliced",
            &format!(
                r#"{{"target":"next-step","start":0,"inserted":[{{"content":[{{"type":"text","text":"t"}}],"source":{source},"role":"user","id":"{id}"}}]}}"#
            ),
        )
    }

    fn message(seq: u64, id: &str) -> String {
        event(
            seq,
            "user/message",
            &format!(
                r#"{{"content":[{{"type":"text","text":"t"}}],"source":{{"kind":"plugin","plugin":"p"}},"role":"user","id":"{id}"}}"#
            ),
        )
    }

    fn todo(seq: u64) -> String {
        event(seq, "todo/write", r#"{"todos":[]}"#)
    }

    /// The call each converted record is attributed to, by line.
    fn calls_by_line(records: &[(usize, TraceRecord)]) -> Vec<(usize, Option<String>)> {
        records
            .iter()
            .map(|(line, r)| (*line, r.call().map(|c| c.to_string())))
            .collect()
    }

    #[test]
    fn the_header_and_every_record_keep_their_lines_and_the_batch_its_safety() {
        let safe = Options {
            safe: Some(BTreeSet::from(["read".to_owned()])),
        };
        let lines = [
            event(0, "turn/start", r#"{"turn":1}"#),
            batch(1, &[("a", "read"), ("b", "write")]),
            call(2, "a", "read"),
            result(3, "a"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (records, summary) = convert_lines(safe, &lines).unwrap();
        assert_eq!(
            records.iter().map(|(l, _)| *l).collect::<Vec<_>>(),
            [1, 3, 4, 5]
        );
        let TraceRecord::Stage(model) = &records[1].1 else {
            panic!("{records:?}")
        };
        let safety: Vec<Option<bool>> = model
            .calls
            .iter()
            .flatten()
            .map(|c| c.concurrency_safe)
            .collect();
        assert_eq!(safety, [Some(true), Some(false)]);
        assert_eq!(
            (summary.lines, summary.records, summary.passed_over),
            (5, 4, 1)
        );
        let (records, _) = convert_lines(Options::default(), &lines).unwrap();
        let TraceRecord::Stage(model) = &records[1].1 else {
            panic!("{records:?}")
        };
        assert!(
            model
                .calls
                .iter()
                .flatten()
                .all(|c| c.concurrency_safe.is_none())
        );
    }

    #[test]
    fn a_context_is_the_injected_message_of_the_call_whose_result_staged_it() {
        let lines = [
            batch(0, &[("a", "x"), ("b", "x")]),
            call(1, "a", "x"),
            call(2, "b", "x"),
            result(3, "a"),
            splice(4, "m1", r#"{"kind":"plugin","plugin":"hooks"}"#),
            splice(5, "m2", r#"{"kind":"plugin","plugin":"hooks"}"#),
            result(6, "b"),
            event(7, "step/start", r#"{"turn":1,"step":1}"#),
            // Staged by no result: a steering message; and one from the user.
            splice(8, "m3", r#"{"kind":"plugin","plugin":"hooks"}"#),
            message(9, "m2"),
            message(10, "m1"),
            message(11, "m3"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (records, _) = convert_lines(Options::default(), &lines).unwrap();
        let contexts: Vec<(usize, Option<String>)> = calls_by_line(&records)
            .into_iter()
            .filter(|(l, _)| *l >= 10)
            .collect();
        // Lines 11 and 12 (m2, m1); m3 (line 13) was staged by no result.
        assert_eq!(
            contexts,
            [(11, Some("a".to_owned())), (12, Some("a".to_owned()))]
        );
        let user = [
            batch(0, &[("a", "x")]),
            call(1, "a", "x"),
            result(2, "a"),
            splice(3, "m1", r#"{"kind":"user"}"#),
            message(4, "m1"),
        ];
        let user: Vec<&str> = user.iter().map(String::as_str).collect();
        let (records, _) = convert_lines(Options::default(), &user).unwrap();
        assert_eq!(
            records.len(),
            4,
            "the user's message is not a context: {records:?}"
        );
    }

    #[test]
    fn an_owned_event_belongs_to_the_one_call_running_or_to_none() {
        let sub_start = event(
            6,
            "tool/code-dispatch-start",
            r#"{"rootCallId":"c","parentCallId":"c","subCallId":"c:code:1","name":"x","arguments":{}}"#,
        );
        let lines = [
            batch(0, &[("a", "x"), ("b", "x"), ("c", "run_code")]),
            call(1, "a", "x"),
            todo(2),
            call(3, "b", "x"),
            todo(4),
            result(5, "a"),
            todo(6),
            result(7, "b"),
            call(8, "c", "run_code"),
            todo(9),
            sub_start,
            todo(11),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (records, summary) = convert_lines(Options::default(), &lines).unwrap();
        let todos: Vec<(usize, Option<String>)> = calls_by_line(&records)
            .into_iter()
            .filter(|(l, _)| [4, 6, 8, 11, 13].contains(l))
            .collect();
        assert_eq!(
            todos,
            [
                (4, Some("a".to_owned())),
                (6, None),
                (8, Some("b".to_owned())),
                (11, Some("c".to_owned())),
                (13, Some("c:code:1".to_owned())),
            ]
        );
        assert_eq!(summary.unattributed, [6]);
    }

    fn hook(seq: u64, kind: &str, point: &str, handler: &str) -> String {
        let data = if kind == "hook/invoked" {
            format!(
                r#"{{"turn":1,"point":"{point}","dialect":"claude-code","handlerId":"{handler}"}}"#
            )
        } else {
            format!(
                r#"{{"turn":1,"point":"{point}","handlerId":"{handler}","decision":"pass","exitCode":0,"durationMs":12.5}}"#
            )
        };
        event(seq, kind, &data)
    }

    /// Both hook events of a handler.
    fn hooks(seq: u64, point: &str, handler: &str) -> [String; 2] {
        [
            hook(seq, "hook/invoked", point, handler),
            hook(seq + 1, "hook/result", point, handler),
        ]
    }

    fn breaches(lines: &[String]) -> (Vec<(InvariantId, Vec<usize>)>, Summary) {
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (records, summary) = convert_lines(Options::default(), &lines).unwrap();
        // Hook events reach the checker as events of no call: never a body's.
        for (_, r) in &records {
            if let TraceRecord::Event(e) = r
                && e.event.body.type_name().starts_with("hook/")
            {
                assert_eq!(e.call, None, "{r:?}");
            }
        }
        let found = summary
            .breaches
            .iter()
            .map(|v| (v.invariant, v.lines.clone()))
            .collect();
        (found, summary)
    }

    /// However many events a log attributes to no call or finds out of place, the summary
    /// keeps a bounded number of them, the first, and counts them all: its memory does not
    /// grow with the log.
    #[test]
    fn what_a_summary_lists_is_bounded_and_the_rest_counted() {
        let ids: Vec<String> = (0..MAX_VIOLATIONS + 5).map(|k| format!("c{k}")).collect();
        let declared: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "x")).collect();
        let mut lines = vec![batch(0, &declared)];
        let todos = MAX_LISTED_LINES + 3;
        let mut seq = 1;
        let mut next = || {
            seq += 1;
            seq - 1
        };
        for _ in 0..todos {
            lines.push(todo(next()));
        }
        // Each call's pre-execute hook answers after the call's result.
        for (k, id) in ids.iter().enumerate() {
            let handler = format!("h{k}");
            lines.push(call(next(), id, "x"));
            lines.push(hook(next(), "hook/invoked", "PreToolUse", &handler));
            lines.push(result(next(), id));
            lines.push(hook(next(), "hook/result", "PreToolUse", &handler));
        }
        let (found, summary) = breaches(&lines);
        // The header is line 1 and the batch line 2: the todos start at line 3.
        assert_eq!(summary.unattributed_count, todos);
        assert_eq!(
            summary.unattributed,
            (3..3 + MAX_LISTED_LINES).collect::<Vec<_>>()
        );
        assert_eq!(found.len(), MAX_VIOLATIONS);
        assert!(
            found
                .iter()
                .all(|(id, _)| *id == InvariantId::NoStageAfterResult)
        );
        assert_eq!(summary.breaches_omitted, 5);
    }

    /// A parallel pool as the harness runs it: each call's pre-execute right after its
    /// `tool/call` (the next call's starts while a body runs), commits head of line; a denied
    /// call's post-execute with no body. Every hook is a stage's, and none is out of place.
    #[test]
    fn hook_events_are_the_stages_of_the_call_they_run_for() {
        let mut lines = vec![batch(0, &[("a", "x"), ("b", "x"), ("c", "x")])];
        lines.push(call(1, "a", "x"));
        lines.extend(hooks(2, "PreToolUse", "h1"));
        lines.push(call(4, "b", "x"));
        lines.extend(hooks(5, "PreToolUse", "h2"));
        // The first open call is head of line: this post-execute is a's, not b's.
        lines.extend(hooks(7, "PostToolUse", "h3"));
        // The latest to start is in its ordered stages: this pre-execute is b's, not a's.
        lines.extend(hooks(9, "PreToolUse", "h3b"));
        lines.push(result(11, "a"));
        lines.extend(hooks(12, "PostToolUse", "h4"));
        lines.push(result(14, "b"));
        // A denied call: pre, then post, no body.
        lines.push(call(15, "c", "x"));
        lines.extend(hooks(16, "PreToolUse", "h5"));
        lines.extend(hooks(18, "PostToolUse", "h6"));
        lines.push(result(20, "c"));
        let (found, summary) = breaches(&lines);
        assert_eq!(found, []);
        assert_eq!(summary.hook_stage_events, 14);
        assert_eq!(summary.unattributed, Vec::<usize>::new());
    }

    #[test]
    fn a_hook_out_of_its_stage_is_a_breach_at_the_lines_of_the_log() {
        // a's PostToolUse answered, then a's PreToolUse: pre-execute after post-execute.
        let mut lines = vec![batch(0, &[("a", "x")]), call(1, "a", "x")];
        lines.extend(hooks(2, "PostToolUse", "h1"));
        lines.extend(hooks(4, "PreToolUse", "h2"));
        lines.push(result(6, "a"));
        let (found, _) = breaches(&lines);
        assert_eq!(found, [(InvariantId::StageGraphWalk, vec![6, 4])]);
        // A PostToolUse invoked while the call's PreToolUse has not answered.
        let lines = [
            batch(0, &[("a", "x")]),
            call(1, "a", "x"),
            hook(2, "hook/invoked", "PreToolUse", "h1"),
            hook(3, "hook/invoked", "PostToolUse", "h2"),
            hook(4, "hook/result", "PreToolUse", "h1"),
            hook(5, "hook/result", "PostToolUse", "h2"),
            result(6, "a"),
        ];
        let (found, _) = breaches(&lines);
        assert_eq!(found, [(InvariantId::StageGraphWalk, vec![5, 4])]);
        // A hook that answers after its call's result, paired by `handlerId`.
        let lines = [
            batch(0, &[("a", "x"), ("b", "x")]),
            call(1, "a", "x"),
            hook(2, "hook/invoked", "PostToolUse", "h1"),
            result(3, "a"),
            call(4, "b", "x"),
            hook(5, "hook/result", "PostToolUse", "h1"),
        ];
        let (found, _) = breaches(&lines);
        assert_eq!(found, [(InvariantId::NoStageAfterResult, vec![7, 4, 5])]);
    }

    /// Sub-calls: the pre-execute of the latest to start; post-execute in start order; a
    /// dispatch event after the `run_code` call's result is a breach.
    #[test]
    fn sub_call_hooks_and_late_dispatch_events() {
        let start = |seq, n: u32| {
            event(
                seq,
                "tool/code-dispatch-start",
                &format!(
                    r#"{{"rootCallId":"r","parentCallId":"r","subCallId":"s{n}","name":"x","arguments":{{}}}}"#
                ),
            )
        };
        let dispatched = |seq, n: u32| {
            event(
                seq,
                "tool/code-dispatch",
                &format!(
                    r#"{{"rootCallId":"r","parentCallId":"r","subCallId":"s{n}","name":"x","arguments":{{}},"isError":false,"content":[]}}"#
                ),
            )
        };
        let mut lines = vec![batch(0, &[("r", "run_code")]), call(1, "r", "run_code")];
        lines.push(start(2, 1));
        lines.extend(hooks(3, "PreToolUse", "h1"));
        lines.push(start(5, 2));
        lines.extend(hooks(6, "PreToolUse", "h2"));
        // s1's post-execute, then s2's, s1's dispatch logged while s2's post runs.
        lines.extend(hooks(8, "PostToolUse", "h3"));
        lines.push(hook(10, "hook/invoked", "PostToolUse", "h4"));
        lines.push(dispatched(11, 1));
        lines.push(hook(12, "hook/result", "PostToolUse", "h4"));
        lines.push(dispatched(13, 2));
        lines.push(result(14, "r"));
        let (found, summary) = breaches(&lines);
        assert_eq!(found, []);
        assert_eq!(summary.hook_stage_events, 8);
        // s2's dispatch logged after r's result.
        let late = lines.len() - 2;
        lines.swap(late, late + 1);
        let (found, _) = breaches(&lines);
        assert_eq!(found, [(InvariantId::CodeDispatchInsideBody, vec![16, 15])]);
    }

    #[test]
    fn an_approval_decision_belongs_to_the_call_its_prompt_asked_for() {
        let lines = [
            batch(0, &[("a", "rm")]),
            call(1, "a", "rm"),
            event(
                2,
                "approval/asked",
                r#"{"id":"p","toolName":"rm","callId":"a"}"#,
            ),
            event(3, "approval/decided", r#"{"id":"p","outcome":"rejected"}"#),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (records, _) = convert_lines(Options::default(), &lines).unwrap();
        assert_eq!(calls_by_line(&records)[4], (5, Some("a".to_owned())));
    }

    #[test]
    fn unknown_types_are_counted_and_chunk_rows_passed_over() {
        let lines = [
            event(0, "tool/frobnicated", "{}"),
            r#"{"type":"text-chunks","seq0":1,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}"#.to_owned(),
            event(3, "tool/frobnicated", "{}"),
            event(4, "other/new", "{}"),
        ];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (records, summary) = convert_lines(Options::default(), &lines).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(summary.unknown_lines(), 3);
        assert_eq!(summary.unknown["tool/frobnicated"], (2, 2));
        assert_eq!(summary.unknown["other/new"], (1, 5));
        assert_eq!(summary.passed_over, 1);
    }

    /// A real log with members added to the data of its pipeline events, where tep's types
    /// of them are closed and where they are open, as a newer harness might write it.
    fn with_added_fields(text: &str) -> String {
        let add = |line: &str| -> String {
            let mut event: Value = serde_json::from_str(line).unwrap();
            let kind = event["type"].as_str().unwrap().to_owned();
            let data = &mut event["data"];
            match kind.as_str() {
                "hook/invoked" | "hook/result" | "approval/asked" | "tool/call" => {
                    data["addedLater"] = Value::from(1);
                }
                "tool/result" => {
                    let message = &mut data["message"];
                    message["addedLater"] = serde_json::json!({"a": [1, 2]});
                    message["content"][0]["addedLater"] = Value::from(true);
                    message["source"]["addedLater"] = Value::from("open");
                }
                _ => {}
            }
            event.to_string()
        };
        let mut lines = text.lines();
        let header = lines.next().unwrap().to_owned();
        std::iter::once(header)
            .chain(lines.map(add))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn fields_a_newer_harness_adds_are_passed_over_and_counted() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/data/deepseek-harness/rc8-cli-s2.jsonl");
        let text = std::fs::read_to_string(path).unwrap();
        let read = |text: &str, workers: usize| {
            let mut records = Vec::new();
            let summary =
                convert_parallel(text.as_bytes(), Options::default(), workers, |l, made| {
                    records.extend(made.record().map(|r| (l, r.clone())));
                    Ok(())
                })
                .unwrap();
            (records, summary)
        };
        let (want, mut want_summary) = read(&text, 0);
        let added = with_added_fields(&text);
        for workers in [0, 2] {
            let (records, summary) = read(&added, workers);
            assert_eq!(records, want, "{workers} workers");
            let fields: Vec<(&str, &str, usize, usize)> = summary
                .unknown_fields
                .iter()
                .map(|((kind, field), (n, first))| (kind.as_str(), field.as_str(), *n, *first))
                .collect();
            // `tool/call` data and a message's `source` are open types: serde ignores what
            // they do not declare, and so does the report.
            assert_eq!(
                fields,
                [
                    ("approval/asked", "data.addedLater", 1, 58),
                    ("hook/invoked", "data.addedLater", 20, 49),
                    ("hook/result", "data.addedLater", 20, 51),
                    ("tool/result", "data.message.addedLater", 10, 54),
                    ("tool/result", "data.message.content[].addedLater", 10, 54),
                ]
            );
            want_summary.unknown_fields = summary.unknown_fields.clone();
            assert_eq!(summary, want_summary);
        }
        // tep's own trace format stays strict: the same event in a trace record is refused.
        let line = added.lines().nth(48).unwrap();
        let record = format!(r#"{{"kind":"event","event":{line}}}"#);
        let refused = crate::trace_io::parse_record(1, &record).unwrap_err();
        assert!(refused.message.contains("addedLater"), "{refused}");
    }

    #[test]
    fn a_line_that_is_not_a_session_event_is_an_error_naming_it() {
        let cases = [
            ("not json", "line 2: not a session event: invalid JSON"),
            (
                "[1]",
                "line 2: not a session event: a session event is a JSON object",
            ),
            (
                r#"{"seq":1,"time":1,"data":{}}"#,
                "line 2: not a session event: it has no `type`",
            ),
            (
                r#"{"type":"turn/start","time":1,"data":{}}"#,
                "line 2: not a session event: `seq` must be",
            ),
            (
                r#"{"type":"turn/start","seq":-1,"time":1,"data":{}}"#,
                "line 2: not a session event: `seq` must be",
            ),
            (
                r#"{"type":"turn/start","seq":1,"time":1}"#,
                "line 2: not a session event: it has no `data`",
            ),
            (
                r#"{"type":"x/y","seq":1,"time":1}"#,
                "line 2: not a session event: it has no `data`",
            ),
            (
                r#"{"type":"tool/call","seq":1,"time":1,"data":{"callId":"a"}}"#,
                "line 2: a `tool/call` event whose data tep cannot read: missing field",
            ),
            (
                HEADER,
                "line 2: not a session event: a second session header",
            ),
        ];
        for (line, want) in cases {
            let e = convert_lines(Options::default(), &[line]).unwrap_err();
            assert!(e.to_string().starts_with(want), "{line}: {e}");
            assert_eq!(TraceError::from(e).line, 2);
        }
    }

    #[test]
    fn the_first_line_must_be_a_session_header_of_a_known_version() {
        let read = |text: &[u8]| convert(text, Options::default(), |_, _| Ok(())).unwrap_err();
        let e = read(b"\x28\xb5\x2f\xfd\x04\x58rest");
        assert!(e.to_string().contains("zstd -dc"), "{e}");
        assert!(read(b"").to_string().contains("the log is empty"));
        let e = read(br#"{"type":"turn/start","seq":0,"time":0,"data":{}}"#);
        assert!(
            matches!(e, ConvertError::Log(LogError::NoHeader { line: 1, .. })),
            "{e}"
        );
        let e = read(br#"{"type":"session","version":1,"id":"s","createdAt":0}"#);
        assert!(
            matches!(e, ConvertError::Log(LogError::Version { line: 1, .. })),
            "{e}"
        );
    }

    /// The typed pass reads every event the real logs hold as the `Value` path reads it, and
    /// attributes it by the same members.
    #[test]
    fn the_typed_pass_reads_the_real_logs_as_the_value_path_does() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/data/deepseek-harness");
        let mut typed = 0;
        for name in ["rc8-session", "rc8-cli-s2", "rc8-cli-s3", "rc8-cli-s4"] {
            let text = std::fs::read_to_string(dir.join(format!("{name}.jsonl"))).unwrap();
            for line in text.lines().skip(1).filter(|l| !l.trim().is_empty()) {
                let Line::Object { members, .. } = read_line(line, Need::Event).unwrap() else {
                    panic!("{line}")
                };
                let kind = members["type"].as_str().unwrap().to_owned();
                if Need::of(&kind) != Need::Typed {
                    continue;
                }
                let event = event_record_type_first(line)
                    .unwrap_or_else(|| panic!("declined: {line}"))
                    .event;
                // The members `attribute` reads for this type.
                let used = |i: &Ids<'_>| -> Vec<Option<String>> {
                    let fields = match kind.as_str() {
                        "tool/call" => vec![i.call],
                        "tool/result" => vec![i.result_call],
                        "approval/asked" => vec![i.id, i.call],
                        "approval/decided" => vec![i.id],
                        "tool/code-dispatch-start" | "tool/code-dispatch" => vec![i.sub, i.parent],
                        "hook/invoked" | "hook/result" => vec![i.point, i.handler],
                        _ => vec![],
                    };
                    fields.into_iter().map(|f| f.map(str::to_owned)).collect()
                };
                assert_eq!(
                    used(&Ids::of_body(&event.body)),
                    used(&Ids::of_value(&members["data"])),
                    "{line}"
                );
                let read = direct_event(&kind, &members)
                    .or_else(|| serde_json::from_value(Value::Object(members)).ok());
                assert_eq!(Some(event), read, "{line}");
                typed += 1;
            }
        }
        assert!(typed > 150, "{typed}");
    }

    /// Converts `text` line by line, the quick way where it is sure or only the general way:
    /// each line's outcome, the summary, and how many lines after the header the quick way was
    /// sure of.
    fn outcomes(
        text: &str,
        general_only: bool,
    ) -> (Vec<Result<Option<TraceRecord>, LogError>>, Summary, usize) {
        let options = Options {
            safe: Some(BTreeSet::from(["read_file".to_owned()])),
        };
        let mut converter = Converter::new(options.clone());
        converter.general_only = general_only;
        let mut sure = 0;
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if i > 0 && !line.trim().is_empty() {
                sure += usize::from(!matches!(parse(&options, line.as_bytes()), Parsed::Again));
            }
            out.push(converter.line(i + 1, line.as_bytes()));
        }
        (out, converter.finish(), sure)
    }

    /// A log that ends inside a turn (a `turn/start` with no `turn/end` after it) says where
    /// that turn began, read either way; one whose last turn ended says none.
    #[test]
    fn a_log_that_ends_inside_a_turn_says_where_the_turn_began() {
        let turn = |seq: u64, kind: &str| event(seq, kind, r#"{"turn":1}"#);
        for (lines, inside) in [
            (
                vec![turn(0, "turn/start"), batch(1, &[("a", "read")])],
                Some(2),
            ),
            (
                vec![
                    turn(0, "turn/start"),
                    batch(1, &[("a", "read")]),
                    turn(2, "turn/end"),
                ],
                None,
            ),
            (
                vec![
                    turn(0, "turn/start"),
                    turn(1, "turn/end"),
                    turn(2, "turn/start"),
                    call(3, "a", "read"),
                ],
                Some(4),
            ),
            (vec![batch(0, &[("a", "read")])], None),
        ] {
            let text = std::iter::once(HEADER.to_owned())
                .chain(lines)
                .collect::<Vec<_>>()
                .join("\n");
            for general_only in [false, true] {
                let (_, summary, _) = outcomes(&text, general_only);
                assert_eq!(
                    summary.ends_inside_turn, inside,
                    "{text} (general only: {general_only})"
                );
            }
        }
    }

    /// A `tool/result` of error code `code` for call `id`, at step 1 of turn 1.
    fn recovered(seq: u64, id: &str, code: &str) -> String {
        let with_error = result(seq, id);
        let cut = with_error.len() - 2;
        format!(
            r#"{},"error":{{"name":"E","code":"{code}"}}}}}}"#,
            &with_error[..cut]
        )
    }

    /// The results deepseek-harness writes when it reloads a session a crash interrupted are
    /// passed over and cut the open batch short at the first of them, once; a turn that begins
    /// inside another cuts that one short; read either way, and handed on as a cut before
    /// anything else the line makes.
    #[test]
    fn a_turn_a_crash_interrupted_cuts_its_batch_short_where_the_log_shows_it() {
        let turn = |seq: u64, kind: &str| event(seq, kind, r#"{"turn":1}"#);
        let lines = [
            turn(0, "turn/start"),
            batch(1, &[("a", "read"), ("b", "read")]),
            call(2, "a", "read"),
            recovered(3, "a", "TOOL_OUTCOME_UNKNOWN"),
            recovered(4, "b", "TOOL_NOT_STARTED"),
            event(
                5,
                "turn/end",
                r#"{"turn":1,"reason":{"kind":"interrupted"}}"#,
            ),
            turn(6, "turn/start"),
            batch(7, &[("c", "read")]),
            call(8, "c", "read"),
            recovered(9, "c", "ABORTED"),
            turn(10, "turn/start"),
            batch(11, &[("d", "read")]),
        ];
        let text = std::iter::once(HEADER.to_owned())
            .chain(lines)
            .collect::<Vec<_>>()
            .join("\n");
        let want = vec![
            Interruption {
                turn: Some(2),
                at: 5,
                recovered: vec![5, 6],
            },
            Interruption {
                turn: Some(8),
                at: 12,
                recovered: vec![],
            },
        ];
        for general_only in [false, true] {
            let mut converter = Converter::new(Options::default());
            converter.general_only = general_only;
            let mut made = Vec::new();
            for (i, line) in text.lines().enumerate() {
                let record = converter.line(i + 1, line.as_bytes()).unwrap();
                if converter.take_cut() {
                    made.push((i + 1, "cut"));
                }
                if record.is_some() {
                    made.push((i + 1, "record"));
                }
            }
            // The result of another code (line 11) is the pipeline's: a record.
            let lines_made = [
                (1, "record"),
                (3, "record"),
                (4, "record"),
                (5, "cut"),
                (9, "record"),
                (10, "record"),
                (11, "record"),
                (12, "cut"),
                (13, "record"),
            ];
            assert_eq!(made, lines_made, "general only: {general_only}");
            let summary = converter.finish();
            assert_eq!(summary.interrupted, want, "general only: {general_only}");
            assert_eq!(summary.ends_inside_turn, Some(12));
        }
        // `convert` hands each cut on before the line's record, as `Converted::CutShort`, and
        // one after the last line (13) of a log that ends inside a turn.
        let mut cuts = Vec::new();
        convert(text.as_bytes(), Options::default(), |line, made| {
            if made == Converted::CutShort {
                cuts.push(line);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(cuts, [5, 12, 13]);
        let ended = format!("{text}\n{}", turn(12, "turn/end"));
        cuts.clear();
        convert(ended.as_bytes(), Options::default(), |line, made| {
            if made == Converted::CutShort {
                cuts.push(line);
            }
            Ok(())
        })
        .unwrap();
        assert_eq!(cuts, [5, 12]);
    }

    /// A last line with no newline whose JSON (or UTF-8) breaks off is a torn tail, passed
    /// over, read either way and on any number of threads; a complete last line with no
    /// newline is read as any line; a broken line that is not the last, or a last line that is
    /// complete JSON but no event, is an error.
    #[test]
    fn a_last_line_broken_off_with_no_newline_is_a_torn_tail() {
        let whole = call(1, "é", "read");
        let at_e = whole.find('é').unwrap() + 1; // inside the two bytes of `é`
        let torn = |upto: usize| {
            let mut text = format!("{HEADER}\n{}\n", batch(0, &[("é", "read")])).into_bytes();
            text.extend_from_slice(&whole.as_bytes()[..upto]);
            text
        };
        let read = |text: &[u8], workers: usize| {
            let mut records = 0;
            let summary = convert_parallel(text, Options::default(), workers, |_, made| {
                records += usize::from(made.record().is_some());
                Ok(())
            });
            (records, summary)
        };
        for upto in [1, 20, at_e, whole.len() - 1] {
            for workers in [0, 2] {
                let (records, summary) = read(&torn(upto), workers);
                let summary = summary.unwrap();
                assert_eq!(
                    summary.torn_tail,
                    Some(3),
                    "{upto} bytes, {workers} workers"
                );
                assert_eq!(records, 2, "the header and the batch");
            }
        }
        let (records, summary) = read(&torn(whole.len()), 0);
        assert_eq!((records, summary.unwrap().torn_tail), (3, None));
        let mut inner = torn(20);
        inner.extend_from_slice(b"\n");
        inner.extend_from_slice(call(2, "b", "read").as_bytes());
        assert!(matches!(
            read(&inner, 0).1,
            Err(ConvertError::Log(LogError::NotAnEvent { line: 3, .. }))
        ));
        let mut no_event = torn(0);
        no_event.extend_from_slice(br#"{"note":1}"#);
        assert!(matches!(
            read(&no_event, 0).1,
            Err(ConvertError::Log(LogError::NotAnEvent { line: 3, .. }))
        ));
        assert!(cut_off(&"é".as_bytes()[..1]) && !cut_off(b"{} x") && !cut_off(b"{]"));
    }

    /// A line is read the same wherever the reader's buffer cuts it: in place or gathered from
    /// several fills, with a carriage return before its newline or none, the last one with no
    /// newline at all.
    #[test]
    fn a_line_reads_the_same_wherever_the_readers_buffer_cuts_it() {
        let text = format!(
            "{HEADER}\r\n{}\n{}\r\n\n{}\r\n{}",
            batch(0, &[("a", "read"), ("b", "é")]),
            call(1, "a", "read"),
            call(2, "b", "é"),
            result(3, "a"),
        );
        let read = |reader: &mut dyn BufRead| {
            let mut records = Vec::new();
            let summary = convert(reader, Options::default(), |line, made| {
                records.extend(made.record().map(|r| (line, r.clone())));
                Ok(())
            })
            .unwrap();
            (records, summary)
        };
        let (records, summary) = read(&mut text.as_bytes());
        // The header, the batch, both calls (after the blank line 4) and the result.
        let lines: Vec<usize> = records.iter().map(|(line, _)| *line).collect();
        assert_eq!(lines, [1, 2, 3, 5, 6]);
        assert_eq!((summary.lines, summary.torn_tail), (5, None));
        for capacity in [1, 2, 3, 5, 8, 64] {
            let mut small = std::io::BufReader::with_capacity(capacity, text.as_bytes());
            let (again, summary_again) = read(&mut small);
            assert_eq!(again, records, "capacity {capacity}");
            assert_eq!(summary_again, summary, "capacity {capacity}");
        }
    }

    /// A line longer than [`MAX_LINE_BYTES`] is refused at its line before it is parsed, in
    /// place or gathered, with a newline or as the last line; one of exactly that length is
    /// read (and here refused as what it is: no JSON).
    #[test]
    fn a_line_longer_than_the_limit_is_refused_at_its_line() {
        let line = |len: usize, newline: bool| {
            let mut text = format!("{HEADER}\n").into_bytes();
            text.resize(text.len() + len, b'x');
            if newline {
                text.extend_from_slice(b"\n");
            }
            text
        };
        for newline in [true, false] {
            for workers in [0, 1] {
                let too_long = line(MAX_LINE_BYTES + 1, newline);
                let at_limit = line(MAX_LINE_BYTES, newline);
                for capacity in [64 * 1024, MAX_LINE_BYTES * 2] {
                    let convert = |text: &[u8]| {
                        let reader = std::io::BufReader::with_capacity(capacity, text);
                        convert_parallel(reader, Options::default(), workers, |_, _| Ok(()))
                    };
                    let case = format!("{newline} {workers} {capacity}");
                    assert!(
                        matches!(
                            convert(&too_long),
                            Err(ConvertError::Log(LogError::Read { line: 2, ref why }))
                                if why.contains("line longer than")
                        ),
                        "{case}"
                    );
                    assert!(
                        matches!(
                            convert(&at_limit),
                            Err(ConvertError::Log(LogError::NotAnEvent { line: 2, .. }))
                        ),
                        "{case}"
                    );
                }
            }
        }
    }

    /// The quick way (no strict serde pass where a line is surely accepted) makes, of every
    /// line of every log the project keeps, what the general way makes: the same records, the
    /// same errors, the same summary; and it is the way every line of the real logs is read.
    #[test]
    fn the_quick_way_reads_every_log_as_the_general_way_does() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/data/deepseek-harness");
        let mut logs = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let (quick, quick_summary, sure) = outcomes(&text, false);
            let (general, general_summary, _) = outcomes(&text, true);
            assert_eq!(quick, general, "{}", path.display());
            assert_eq!(quick_summary, general_summary, "{}", path.display());
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("rc8-") {
                let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
                assert_eq!(sure, lines - 1, "{name}");
            }
            logs += 1;
        }
        assert!(logs >= 10, "{logs}");
        // Lines it is not sure of are the general way's, errors and all.
        const MESSAGE: &str =
            r#"{"id":"ID","role":"user","content":[],"source":{"kind":"tool","callId":"c1"}}"#;
        let crafted = [
            event(1, "tool/call", r#"{"callId":"c1","callId":"c2"}"#),
            r#"{"type":"tool/call","type":"x","seq":1,"time":1,"data":{}}"#.to_owned(),
            r#"{"type":"tool\u002fcall","seq":1,"time":1,"data":{}}"#.to_owned(),
            r#"{"type":"step/start","seq":-0,"time":1e0,"data":{}}"#.to_owned(),
            r#"{"type":"step/start","seq":18446744073709551616,"time":1,"data":{}}"#.to_owned(),
            event(2, "user/message", r#"{"id":"m\u0031","text":"\ud800"}"#),
            event(
                3,
                "agent/inbox/spliced",
                r#"{"inserted":[{"id":"x"}],"n":1e400}"#,
            ),
            event(4, "turn/start", "{}"),
            r#"{"type":"step/start","seq":-1,"time":1,"data":{}}"#.to_owned(),
            // A line between a result and its splice: the splice stages nothing.
            result(5, "c1"),
            event(6, "step/end", "{}"),
            event(
                7,
                "agent/inbox/spliced",
                r#"{"target":"next-step","removedCount":0,"inserted":[{"id":"m9"}]}"#,
            ),
            event(8, "user/message", MESSAGE.replace("ID", "m9").as_str()),
            // Without the line between, it does.
            result(9, "c1"),
            event(
                10,
                "agent/inbox/spliced",
                r#"{"target":"next-step","removedCount":0,"inserted":[{"id":"m10"},{"id":"m11","source":{"kind":"user"}}]}"#,
            ),
            event(11, "user/message", MESSAGE.replace("ID", "m10").as_str()),
            // A user's own message is no context.
            event(12, "user/message", MESSAGE.replace("ID", "m11").as_str()),
        ];
        let text = std::iter::once(HEADER.to_owned())
            .chain(crafted)
            .collect::<Vec<_>>()
            .join("\n");
        let (quick, general) = (outcomes(&text, false).0, outcomes(&text, true).0);
        assert_eq!(quick, general);
        let records = quick.iter().filter(|r| matches!(r, Ok(Some(_)))).count();
        assert_eq!(
            records, 4,
            "the header, two results, one context: {quick:?}"
        );
        let Some(Ok(Some(TraceRecord::Event(context)))) = quick.iter().rev().nth(1) else {
            panic!("{quick:?}");
        };
        assert_eq!(context.call, Some(CallId::new("c1")));
    }

    mod batch_text {
        use super::*;
        use proptest::prelude::*;
        use serde_json::json;

        /// A member's value: the strings a block is read for, others, escapes, non-strings.
        fn member() -> BoxedStrategy<Value> {
            prop_oneof![
                3 => Just(json!("tool-call")),
                1 => Just(json!("text")),
                3 => "[ab\"\\\n/]{0,4}".prop_map(Value::from),
                1 => (0..3u8).prop_map(Value::from),
                1 => Just(Value::Null),
                1 => Just(json!({"type": "tool-call", "id": [1, "x"], "n": {}})),
                // Decoys: what a message holds, where no message is read.
                1 => Just(json!({"content": [{"type": "tool-call", "id": "d", "name": "d"}]})),
                1 => Just(json!([{"type": "tool-call", "id": "f", "name": "f"}])),
                1 => Just(json!({"message": {"content": [{"type": "tool-call", "id": "e", "name": "e"}]}})),
            ]
            .boxed()
        }

        /// `value` as JSON text, each object's members in an order `turn` picks (a real log
        /// writes `type` before `id`; serde_json's map sorts them), spread over lines or not.
        fn write_json(value: &Value, turn: &mut u64, pretty: bool, out: &mut String) {
            let (open, comma, colon) = if pretty {
                ("\n  ", ",\n  ", ": ")
            } else {
                ("", ",", ":")
            };
            match value {
                Value::Object(map) => {
                    let mut members: Vec<_> = map.iter().collect();
                    if !members.is_empty() {
                        let by = usize::try_from(*turn % 7).unwrap() % members.len();
                        members.rotate_left(by);
                    }
                    *turn = turn.rotate_left(3) ^ 0x9E37;
                    out.push('{');
                    out.push_str(open);
                    for (i, (key, value)) in members.into_iter().enumerate() {
                        if i > 0 {
                            out.push_str(comma);
                        }
                        out.push_str(&serde_json::to_string(key).unwrap());
                        out.push_str(colon);
                        write_json(value, turn, pretty, out);
                    }
                    out.push('}');
                }
                Value::Array(items) => {
                    out.push('[');
                    for (i, item) in items.iter().enumerate() {
                        if i > 0 {
                            out.push_str(comma);
                        }
                        write_json(item, turn, pretty, out);
                    }
                    out.push(']');
                }
                leaf => out.push_str(&serde_json::to_string(leaf).unwrap()),
            }
        }

        /// An object of some of `keys` (mostly there, so that most blocks declare a call),
        /// each with a value from its strategy, and one other member.
        fn object_of(
            keys: &'static [&'static str],
            values: Vec<BoxedStrategy<Value>>,
        ) -> BoxedStrategy<Value> {
            let values: Vec<_> = values
                .into_iter()
                .map(|v| prop::option::weighted(0.9, v))
                .collect();
            (values, prop::option::of(member()))
                .prop_map(move |(values, other)| {
                    let mut map = Map::new();
                    for (key, value) in keys.iter().zip(values) {
                        if let Some(value) = value {
                            map.insert((*key).to_owned(), value);
                        }
                    }
                    if let Some(other) = other {
                        map.insert("arguments".to_owned(), other);
                    }
                    Value::Object(map)
                })
                .boxed()
        }

        /// `shape` nine times in ten, else any [`member`].
        fn mostly(shape: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
            prop_oneof![9 => shape, 1 => member()].boxed()
        }

        /// An array of up to four `items`.
        fn array_of(items: BoxedStrategy<Value>) -> BoxedStrategy<Value> {
            prop::collection::vec(items, 0..5)
                .prop_map(Value::Array)
                .boxed()
        }

        /// A short plain string two times in three, else any [`member`].
        fn short_text() -> BoxedStrategy<Value> {
            prop_oneof![2 => "[ab]{1,3}".prop_map(Value::from), 1 => member()].boxed()
        }

        fn data() -> BoxedStrategy<Value> {
            let kind = prop_oneof![4 => Just(json!("tool-call")), 1 => member()].boxed();
            let block = mostly(object_of(
                &["type", "id", "name"],
                vec![kind, short_text(), short_text()],
            ));
            let message = mostly(object_of(&["content"], vec![mostly(array_of(block))]));
            object_of(&["message"], vec![message])
        }

        /// An inbox splice's data: mostly at `next-step`, removing none, inserting messages
        /// of the model, a tool or the user, with ids and without.
        fn splice() -> BoxedStrategy<Value> {
            let either = |often: Value| prop_oneof![4 => Just(often), 1 => member()].boxed();
            let removed = prop_oneof![
                4 => Just(json!(0)),
                1 => (1..3u8).prop_map(Value::from),
                1 => member(),
            ]
            .boxed();
            let kind = prop_oneof![
                2 => Just(json!("user")),
                2 => Just(json!("tool")),
                1 => member(),
            ]
            .boxed();
            let source = mostly(object_of(&["kind"], vec![kind]));
            let message = mostly(object_of(&["source", "id"], vec![source, short_text()]));
            let inserted = mostly(array_of(message));
            object_of(
                &["target", "removedCount", "inserted"],
                vec![either(json!("next-step")), removed, inserted],
            )
        }

        /// Of the generated messages, more than a fifth declare calls, and more than a fifth have
        /// escapes in their strings; more than a fifth of the splices stage a message.
        #[test]
        fn the_generated_messages_declare_calls() {
            let mut runner = proptest::test_runner::TestRunner::deterministic();
            let (mut with_calls, mut escaped) = (0, 0);
            for _ in 0..200 {
                let data = data().new_tree(&mut runner).unwrap().current();
                with_calls += usize::from(!declared_calls(&Options::default(), &data).is_empty());
                escaped += usize::from(serde_json::to_string(&data).unwrap().contains('\\'));
            }
            assert!(with_calls > 40 && escaped > 40, "{with_calls} {escaped}");
            let staging = (0..200)
                .filter(|_| {
                    let data = splice().new_tree(&mut runner).unwrap().current();
                    !staged_ids(&data).is_empty()
                })
                .count();
            assert!(staging > 40, "{staging}");
        }

        proptest! {
            /// Read from its text, an assistant message declares the calls its value declares
            /// ([`declared_calls`], the general way), compact or spread over lines, its members
            /// in any order; it is unsure only of a text with an escape.
            #[test]
            fn a_batch_read_from_its_text_declares_what_its_value_declares(
                data in data(),
                safe in any::<bool>(),
                turn in any::<u64>(),
            ) {
                let options = Options {
                    safe: safe.then(|| BTreeSet::from(["a".to_owned()])),
                };
                let general = declared_calls(&options, &data);
                for pretty in [false, true] {
                    let mut written = String::new();
                    write_json(&data, &mut turn.clone(), pretty, &mut written);
                    prop_assert_eq!(&serde_json::from_str::<Value>(&written).unwrap(), &data);
                    let text = written;
                    prop_assert!(strict_json::sure::value(&text).is_some(), "{}", text);
                    match sure_batch(&options, &text) {
                        Some(calls) => prop_assert_eq!(&calls, &general, "{}", text),
                        None => prop_assert!(text.contains('\\'), "{}", text),
                    }
                }
            }

            /// Read from its text, an inbox splice stages the messages its value stages
            /// ([`staged_ids`], the general way), compact or spread over lines, its members in
            /// any order; it is unsure only of a text with an escape.
            #[test]
            fn a_splice_read_from_its_text_stages_what_its_value_stages(
                data in splice(),
                turn in any::<u64>(),
            ) {
                let general = staged_ids(&data);
                for pretty in [false, true] {
                    let mut text = String::new();
                    write_json(&data, &mut turn.clone(), pretty, &mut text);
                    prop_assert!(strict_json::sure::value(&text).is_some(), "{}", text);
                    match sure_contexts(&text) {
                        Some(ids) => prop_assert_eq!(&ids, &general, "{}", text),
                        None => prop_assert!(text.contains('\\'), "{}", text),
                    }
                }
            }
        }
    }

    /// The listed types, and only they, are known: no neighbour in length or spelling.
    #[test]
    fn the_known_types_are_the_listed_ones() {
        assert!(KNOWN_EVENT_TYPES.windows(2).all(|w| w[0] < w[1]));
        for kind in KNOWN_EVENT_TYPES {
            assert!(is_known_type(kind), "{kind}");
            let mut near = vec![
                format!("{kind}s"),
                format!(" {kind}"),
                kind.to_uppercase(),
                kind[..kind.len() - 1].to_owned(),
                kind[1..].to_owned(),
            ];
            // The same length, one byte changed.
            let mut bytes = kind.as_bytes().to_vec();
            bytes[kind.len() / 2] ^= 1;
            near.extend(String::from_utf8(bytes).ok());
            for other in near {
                assert!(!is_known_type(&other), "{other}");
            }
        }
        for other in ["", "text-chunks", "session", "tool"] {
            assert!(!is_known_type(other), "{other}");
        }
    }

    /// Lines of the types the converter does not use are read into nothing, yet refused as
    /// strictly as the others: a key named twice anywhere, with the error the whole-line reader
    /// gives; and a line whose `data` comes before its `type` is read whole.
    #[test]
    fn passed_over_lines_are_checked_as_strictly_as_the_others() {
        let refused = [
            (
                r#"{"type":"request/header","seq":1,"time":1,"data":{"a":[{"x":1,"x":2}]}}"#,
                "duplicate key `x` at line 1 column 65",
            ),
            (
                r#"{"type":"turn/start","seq":1,"type":"turn/end","time":1,"data":{}}"#,
                "duplicate key `type`",
            ),
            (
                r#"{"type":"x/y","seq":1,"time":1,"data":{"a\u0062":1,"ab":2}}"#,
                "duplicate key `ab`",
            ),
            (
                r#"{"type":"text-chunks","data":{"b":[1}}"#,
                "expected `,` or `]`",
            ),
            (
                r#"{"type":"step/end","seq":1,"time":1,"data":"\ud800"}"#,
                "hex escape",
            ),
            (r#"[{"a":1,"a":2}]"#, "duplicate key `a`"),
        ];
        for (line, want) in refused {
            let e = convert_lines(Options::default(), &[line])
                .unwrap_err()
                .to_string();
            let whole = strict_json::value_from_str(line).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("line 2: not a session event: invalid JSON ({whole})")
            );
            assert!(e.contains(want), "{line}: {e}");
        }
        let first = r#"{"data":{"turn":1,"step":1,"callId":"a","name":"x","arguments":"{}"},"seq":1,"time":1,"type":"tool/call"}"#;
        let lines = [batch(0, &[("a", "x")]), first.to_owned()];
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let (records, _) = convert_lines(Options::default(), &lines).unwrap();
        let TraceRecord::Event(e) = &records[2].1 else {
            panic!("{records:?}")
        };
        assert_eq!(e.event.body.type_name(), "tool/call");
    }

    /// A type that makes a record is read in one typed pass that also checks the line: a key
    /// named twice is refused wherever it stands, in a member read by hand or in a value handed
    /// to serde (which keeps the last of two), with the strict reader's own error.
    #[test]
    fn typed_lines_are_checked_as_strictly_as_the_others() {
        let message = r#""message":{"source":{"kind":"tool","callId":"a"},"content":[{"type":"tool-result","toolCallId":"a","content":[{"type":"text","text":"ok"}],"isError":false}],"role":"user","id":"m"}"#;
        // Each with whether the typed pass, not strict, would read it (keeping the last key):
        // there only the strict pass refuses it.
        let refused = [
            // Handed to serde: `meta`, a call's arguments, a whole `approval/asked`.
            (
                format!(
                    r#"{{"type":"tool/result","seq":1,"time":1,"data":{{"turn":1,"step":1,{message},"meta":{{"k":1,"k":2}}}}}}"#
                ),
                true,
            ),
            (
                r#"{"type":"tool/code-dispatch-start","seq":1,"time":1,"data":{"rootCallId":"a","parentCallId":"a","subCallId":"a:1","name":"x","arguments":{"p":1,"p":2}}}"#.to_owned(),
                true,
            ),
            (
                r#"{"type":"approval/asked","seq":1,"time":1,"data":{"id":"p","toolName":"x","id":"q"}}"#.to_owned(),
                false,
            ),
            // Read by hand.
            (
                r#"{"type":"hook/invoked","seq":1,"time":1,"data":{"turn":1,"point":"PreToolUse","dialect":"claude-code","point":"PostToolUse","handlerId":"h"}}"#.to_owned(),
                false,
            ),
            (
                r#"{"type":"tool/call","seq":1,"time":1,"data":{"turn":1,"step":1,"callId":"a","name":"x","arguments":"{}"},"seq":2}"#.to_owned(),
                false,
            ),
        ];
        for (line, lenient_reads) in &refused {
            let lines = [batch(0, &[("a", "x")]), line.clone()];
            let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
            let e = convert_lines(Options::default(), &lines)
                .unwrap_err()
                .to_string();
            let whole = strict_json::value_from_str(line).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("line 3: not a session event: invalid JSON ({whole})"),
                "{line}"
            );
            assert!(e.contains("duplicate key"), "{line}: {e}");
            assert_eq!(
                event_record_type_first(line).is_some(),
                *lenient_reads,
                "{line}"
            );
            assert!(event_record_strict(line).is_none(), "{line}");
        }
    }

    /// Every map of the converter holds what is still open: a prompt until it is decided (a
    /// second decision in the same batch still names its call), a batch's decisions until the
    /// next batch.
    #[test]
    fn approval_prompts_are_forgotten_once_settled() {
        let asked = |seq, prompt: &str, call: &str| {
            event(
                seq,
                "approval/asked",
                &format!(r#"{{"id":"{prompt}","toolName":"rm","callId":"{call}"}}"#),
            )
        };
        let decided = |seq, prompt: &str| {
            event(
                seq,
                "approval/decided",
                &format!(r#"{{"id":"{prompt}","outcome":"rejected"}}"#),
            )
        };
        let mut converter = Converter::new(Options::default());
        let mut lines = vec![HEADER.to_owned()];
        for n in 0..50u64 {
            let call = format!("c{n}");
            let prompt = format!("p{n}");
            lines.push(batch(4 * n, &[(&call, "rm")]));
            lines.push(asked(4 * n + 1, &prompt, &call));
            lines.push(decided(4 * n + 2, &prompt));
            lines.push(decided(4 * n + 3, &prompt));
        }
        let mut calls = Vec::new();
        for (i, text) in lines.iter().enumerate() {
            if let Some(TraceRecord::Event(e)) = converter.line(i + 1, text.as_bytes()).unwrap() {
                calls.push(e.call.as_ref().map(ToString::to_string));
            }
        }
        // Each batch: asked (its data names the call), then both decisions for the call.
        assert_eq!(calls.len(), 150);
        assert_eq!(
            calls[148..],
            [Some("c49".to_owned()), Some("c49".to_owned())]
        );
        assert!(converter.prompts.is_empty(), "{:?}", converter.prompts);
        assert_eq!(converter.decided.len(), 1, "{:?}", converter.decided);
    }

    #[test]
    fn without_safe_tools_the_barrier_is_not_checkable() {
        let ids = |o: &Options| -> Vec<InvariantId> {
            not_checkable(o).into_iter().map(|(id, _)| id).collect()
        };
        assert_eq!(
            ids(&Options::default()),
            [
                InvariantId::ExclusiveBarrier,
                InvariantId::SubCallContextsOmitted
            ]
        );
        let safe = Options {
            safe: Some(BTreeSet::new()),
        };
        assert_eq!(ids(&safe), [InvariantId::SubCallContextsOmitted]);
    }
}
