//! The single-pass reader behind [`TraceRecord::from_json_tag_first`]: one walk over a line's
//! bytes straight into the typed record, with no intermediate `serde_json::Value` and none of
//! serde's buffering of tagged or flattened enums. A call's stages repeat its identity (and its
//! later stages its result) byte for byte, so each thread remembers the last few such texts it
//! read and shares their value.
//!
//! It reads the shapes traces hold (the record's `kind` first, an event's `type` before its
//! `data`) and declines everything else, so that the general path, which also words the errors,
//! reads those lines. The rule that keeps the two paths in agreement: a value is read by hand only
//! in its usual shape (known keys without escapes, each once; strings, canonical unsigned
//! integers, booleans, `null` for an optional field); a value in any other shape that stands on
//! its own (a field's whole value) is handed to serde's derived `Deserialize` for that type, which
//! is what the general path runs on it too, unless that type ignores unknown fields; anything
//! else declines the whole line.

use std::sync::Arc;

use super::recent::{MAX_REMEMBERED_BYTES, RECENT_IDENTITIES, RECENT_RESULTS, Recent};
use super::scanner::Line;
use super::{DeclaredCall, EventRecord, GuardVerdictRecord, Mark, Observation, TraceRecord};
use crate::graph::NodeId;
use crate::identity::Identity;
use crate::result::{AdditionalContext, ContentBlock, ErrorInfo, ResultError, ToolResult};
use crate::session::{
    CodeDispatch, CodeDispatchStart, EventBody, HookInvoked, HookResult, MessageSource, Role,
    SessionEvent, TodoWrite, ToolCallData, ToolResultBlock, ToolResultBlockType, ToolResultData,
    ToolResultMessage, ToolResultRecord, UserMessage,
};

/// Reads one line, or declines it (`None`): the general path reads it then.
pub(super) fn read(text: &str) -> Option<TraceRecord> {
    whole(text, false, Line::record)
}

/// Reads one session event whose `type` comes before its `data`, or declines it (`None`): what
/// [`read`] makes of the event record holding it.
pub(super) fn read_event(text: &str, strict: bool) -> Option<SessionEvent> {
    whole(text, strict, Line::session_event)
}

/// [`read_event`], as an event record of no call: the event is read into the box it stays in.
pub(super) fn read_event_record(text: &str, strict: bool) -> Option<Box<EventRecord>> {
    whole(text, strict, |line| {
        let mut record = blank_record();
        line.session_event_into(&mut record.event)?;
        Some(record)
    })
}

/// What `read` reads from the start of `text`, if nothing but whitespace follows it.
fn whole<'t, T>(
    text: &'t str,
    strict: bool,
    read: impl FnOnce(&mut Line<'t>) -> Option<T>,
) -> Option<T> {
    let mut line = Line {
        text,
        at: 0,
        strict,
    };
    let value = read(&mut line)?;
    line.skip_whitespace();
    (line.at == text.len()).then_some(value)
}

/// A record to read an event into ([`Line::session_event_into`]), in fresh memory (`Box::new`
/// would build the large record on the stack and copy it).
fn blank_record() -> Box<EventRecord> {
    Box::write(
        Box::new_uninit(),
        EventRecord {
            call: None,
            event: blank_event(),
        },
    )
}

/// An event to read into: its body a variant that allocates nothing, replaced when the `data`
/// is read.
fn blank_event() -> SessionEvent {
    SessionEvent {
        seq: 0,
        time: 0,
        body: EventBody::TodoWrite(TodoWrite { todos: Vec::new() }),
        surface_op: None,
        source_event_seqs: None,
    }
}

/// Marks a field as read; `None` when it was read before (serde refuses a repeated field).
fn first_time(seen: &mut u32, bit: u32) -> Option<()> {
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}

impl<'a> Line<'a> {
    /// `{"kind": ..., ...}`: the tag first, then the variant's own fields.
    fn record(&mut self) -> Option<TraceRecord> {
        self.expect(b'{')?;
        if self.key()? != b"kind" {
            return None;
        }
        self.expect(b':')?;
        let kind = self.string()?;
        let record = match &*kind {
            "stage" => TraceRecord::Stage(self.observation()?),
            "event" => TraceRecord::Event(self.event_record()?),
            "mark" => TraceRecord::Mark(Box::new(self.mark()?)),
            // One line a trace: the general path reads it.
            _ => return None,
        };
        Some(record)
    }

    /// The fields after a record's `kind`, handed to `field` as [`Line::object`] would.
    fn rest_of_record(
        &mut self,
        field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        self.more_members(Line::key, field)
    }

    fn observation(&mut self) -> Option<Box<Observation>> {
        // Filled in place: the record is large, and moving it costs more than reading it.
        // (`Box::write` into fresh memory, where `Box::new` built it on the stack and copied it.)
        let mut obs = Box::write(Box::new_uninit(), Observation::at(NodeId::Model));
        let mut seen = 0;
        self.rest_of_record(|line, key| {
            let bit = match key {
                b"node" => {
                    // The worded path parses the name with `FromStr` and with serde, whose
                    // names are `as_str`'s (a test says so): `FromStr` alone settles it.
                    obs.node = line.string()?.parse().ok()?;
                    1
                }
                b"call" => {
                    obs.call = line.optional(Line::call_id)?;
                    2
                }
                b"outcome" => {
                    obs.outcome = line.optional(Line::variant)?;
                    4
                }
                b"reason" => {
                    obs.reason = line.optional(Line::owned_string)?;
                    8
                }
                b"identity" => {
                    obs.identity = line.optional(Line::shared_identity)?;
                    16
                }
                b"listeners" => {
                    obs.listeners =
                        line.optional(|l| l.or_serde(|l| l.array(Line::owned_string)))?;
                    32
                }
                b"verdicts" => {
                    obs.verdicts = line.optional(|l| l.or_serde(|l| l.array(Line::verdict)))?;
                    64
                }
                b"intent" => {
                    obs.intent = line.optional(Line::serde)?;
                    128
                }
                b"result" => {
                    obs.result =
                        line.optional(|l| l.shared(&RECENT_RESULTS, Line::stage_result))?;
                    256
                }
                b"calls" => {
                    obs.calls = line.optional(|l| l.or_serde(|l| l.array(Line::declared_call)))?;
                    512
                }
                b"parent" => {
                    obs.parent = line.optional(Line::call_id)?;
                    1024
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        (seen & 1 != 0).then_some(obs)
    }

    /// A value read by `read`, shared with the last ones `recent` holds when its text is
    /// theirs.
    fn shared<T>(
        &mut self,
        recent: &'static std::thread::LocalKey<std::cell::RefCell<Recent<T>>>,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Arc<T>> {
        self.skip_whitespace();
        let start = self.at;
        let rest = &self.bytes()[start..];
        if let Some((len, value)) = recent.with_borrow(|recent| recent.find(rest)) {
            self.at += len;
            return Some(value);
        }
        let value = Arc::new(read(self)?);
        let text = self.text.get(start..self.at)?;
        if text.len() <= MAX_REMEMBERED_BYTES {
            recent.with_borrow_mut(|recent| recent.remember(text, &value));
        }
        Some(value)
    }

    /// An identity, shared with the last ones read on this thread when its text is theirs.
    fn shared_identity(&mut self) -> Option<Arc<Identity>> {
        self.shared(&RECENT_IDENTITIES, |line| line.or_serde(Line::identity))
    }

    fn identity(&mut self) -> Option<Identity> {
        let (mut token, mut call_id, mut name, mut arguments) = (None, None, None, None);
        let mut parent_token = None;
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"token" => {
                    token = Some(line.owned_string()?);
                    1
                }
                b"callId" => {
                    call_id = Some(line.call_id()?);
                    2
                }
                b"name" => {
                    name = Some(line.owned_string()?);
                    4
                }
                b"arguments" => {
                    arguments = Some(line.arguments()?);
                    8
                }
                b"parentToken" => {
                    parent_token = line.optional(Line::owned_string)?;
                    16
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(Identity {
            token: token?,
            call_id: call_id?,
            name: name?,
            arguments: arguments?,
            parent_token,
        })
    }

    /// A stage's result: by hand in its usual shape, or else by serde.
    fn stage_result(&mut self) -> Option<ToolResult> {
        let start = self.at;
        let mut result = ToolResult {
            is_error: false,
            content: Vec::new(),
            error: None,
            meta: None,
            additional_contexts: Vec::new(),
            value: None,
        };
        if self.tool_result(&mut result).is_some() {
            return Some(result);
        }
        self.at = start;
        self.serde()
    }

    /// A result by hand into `result` (empty), or `None` (and `result` half read).
    fn tool_result(&mut self, result: &mut ToolResult) -> Option<()> {
        let (mut is_error, mut content) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"isError" => {
                    is_error = Some(line.boolean()?);
                    1
                }
                b"content" => {
                    content = Some(line.content()?);
                    2
                }
                b"error" => {
                    result.error = line.optional(|l| l.or_serde(Line::result_error))?;
                    4
                }
                b"meta" => {
                    result.meta = line.optional(Line::serde)?;
                    8
                }
                b"additionalContexts" => {
                    result.additional_contexts = line.array(Line::additional_context)?;
                    16
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        result.is_error = is_error?;
        result.content = content?;
        Some(())
    }

    /// Content blocks: `[{"type": "text", "text": ...}]`, each block's fields in either order.
    fn content(&mut self) -> Option<Vec<ContentBlock>> {
        self.array(|line| {
            let text = line.tagged(b"type", "text", b"text", Line::owned_string)?;
            Some(ContentBlock::Text { text })
        })
    }

    /// An object of exactly two fields in either order: a tag `tag` whose value is `variant`,
    /// and `field`, read by `read` (an internally tagged variant with one field).
    fn tagged<T>(
        &mut self,
        tag: &[u8],
        variant: &str,
        field: &[u8],
        read: impl Fn(&mut Self) -> Option<T>,
    ) -> Option<T> {
        let mut value = None;
        let mut seen = 0;
        self.object(|line, key| {
            let bit = if key == tag {
                if line.string()? != variant {
                    return None;
                }
                1
            } else if key == field {
                value = Some(read(line)?);
                2
            } else {
                return None;
            };
            first_time(&mut seen, bit)
        })?;
        if seen != 3 {
            return None;
        }
        value
    }

    fn result_error(&mut self) -> Option<ResultError> {
        let (mut message, mut info) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"message" => {
                    message = Some(line.owned_string()?);
                    1
                }
                b"info" => {
                    info = line.optional(|l| l.or_serde(Line::error_info))?;
                    2
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(ResultError {
            message: message?,
            info,
        })
    }

    fn error_info(&mut self) -> Option<ErrorInfo> {
        let (mut name, mut code) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"name" => {
                    name = Some(line.owned_string()?);
                    1
                }
                b"code" => {
                    code = Some(line.owned_string()?);
                    2
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(ErrorInfo {
            name: name?,
            code: code?,
        })
    }

    fn additional_context(&mut self) -> Option<AdditionalContext> {
        let (mut origin, mut text) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"origin" => {
                    origin = Some(line.variant()?);
                    1
                }
                b"text" => {
                    text = Some(line.owned_string()?);
                    2
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(AdditionalContext {
            origin: origin?,
            text: text?,
        })
    }

    fn verdict(&mut self) -> Option<GuardVerdictRecord> {
        let (mut guard, mut verdict, mut reason) = (None, None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"guard" => {
                    guard = Some(line.owned_string()?);
                    1
                }
                b"verdict" => {
                    verdict = Some(line.variant()?);
                    2
                }
                b"reason" => {
                    reason = line.optional(Line::owned_string)?;
                    4
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(GuardVerdictRecord {
            guard: guard?,
            verdict: verdict?,
            reason,
        })
    }

    fn declared_call(&mut self) -> Option<DeclaredCall> {
        let (mut call_id, mut name, mut concurrency_safe) = (None, None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"callId" => {
                    call_id = Some(line.call_id()?);
                    1
                }
                b"name" => {
                    name = Some(line.owned_string()?);
                    2
                }
                b"concurrencySafe" => {
                    concurrency_safe = line.optional(Line::boolean)?;
                    4
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(DeclaredCall {
            call_id: call_id?,
            name: name?,
            concurrency_safe,
        })
    }

    fn mark(&mut self) -> Option<Mark> {
        let (mut call, mut mark, mut by) = (None, None, None);
        let (mut after_ms, mut rejection) = (0, None);
        let mut seen = 0;
        self.rest_of_record(|line, key| {
            let bit = match key {
                b"call" => {
                    call = Some(line.call_id()?);
                    1
                }
                b"mark" => {
                    mark = Some(line.variant()?);
                    2
                }
                b"by" => {
                    by = Some(line.owned_string()?);
                    4
                }
                b"afterMs" => {
                    after_ms = line.unsigned()?;
                    8
                }
                b"rejection" => {
                    rejection = line.optional(Line::serde)?;
                    16
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(Mark {
            call: call?,
            mark: mark?,
            by: by?,
            after_ms,
            rejection,
        })
    }

    fn event_record(&mut self) -> Option<Box<EventRecord>> {
        // Filled in place, as an observation is: the event is not moved from one function's
        // result to the next.
        let mut record = blank_record();
        let mut seen = 0;
        self.rest_of_record(|line, key| {
            let bit = match key {
                b"call" => {
                    record.call = line.optional(Line::call_id)?;
                    1
                }
                b"event" => {
                    line.session_event_into(&mut record.event)?;
                    2
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        (seen & 2 != 0).then_some(record)
    }

    /// A session event whose `type` comes before its `data`.
    fn session_event(&mut self) -> Option<SessionEvent> {
        let mut event = blank_event();
        self.session_event_into(&mut event)?;
        Some(event)
    }

    /// [`Line::session_event`], written into `event` (every field, or `None`).
    fn session_event_into(&mut self, event: &mut SessionEvent) -> Option<()> {
        let mut kind = None;
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"seq" => {
                    event.seq = line.unsigned()?;
                    1
                }
                b"time" => {
                    event.time = line.unsigned()?;
                    2
                }
                b"type" => {
                    kind = Some(line.string()?);
                    4
                }
                b"data" => {
                    event.body = line.event_body(kind.as_deref()?)?;
                    8
                }
                b"surfaceOp" => {
                    event.surface_op = line.optional(Line::variant)?;
                    16
                }
                b"sourceEventSeqs" => {
                    event.source_event_seqs =
                        line.optional(|l| l.or_serde(|l| l.array(Line::unsigned)))?;
                    32
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        // `seq`, `time`, `type` and `data` are required.
        (seen & 0b1111 == 0b1111).then_some(())
    }

    /// An event's `data`, read as its `type` says.
    fn event_body(&mut self, kind: &str) -> Option<EventBody> {
        Some(match kind {
            // Not handed to serde: `ToolCallData` ignores unknown fields, and serde skips an
            // ignored value without checking its escapes, where the general path (which
            // buffers the record) reads it whole and refuses a lone surrogate.
            "tool/call" => EventBody::ToolCall(self.tool_call()?),
            "tool/result" => EventBody::ToolResult(self.tool_result_data()?),
            "tool/code-dispatch-start" => {
                EventBody::CodeDispatchStart(self.or_serde(Line::dispatch_start)?)
            }
            "tool/code-dispatch" => EventBody::CodeDispatch(self.or_serde(Line::dispatch)?),
            "user/message" => EventBody::UserMessage(self.or_serde(Line::user_message)?),
            "context/message" => EventBody::ContextMessage(self.serde()?),
            "approval/asked" => EventBody::ApprovalAsked(self.serde()?),
            "approval/decided" => EventBody::ApprovalDecided(self.serde()?),
            "todo/write" => EventBody::TodoWrite(self.serde()?),
            "fs/observed" => EventBody::FsObserved(self.serde()?),
            "hook/invoked" => EventBody::HookInvoked(self.or_serde(Line::hook_invoked)?),
            "hook/result" => EventBody::HookResult(self.or_serde(Line::hook_result)?),
            _ => return None,
        })
    }

    fn tool_call(&mut self) -> Option<ToolCallData> {
        let (mut turn, mut step, mut call_id) = (None, None, None);
        let (mut name, mut arguments) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"turn" => {
                    turn = Some(line.unsigned()?);
                    1
                }
                b"step" => {
                    step = Some(line.unsigned()?);
                    2
                }
                b"callId" => {
                    call_id = Some(line.call_id()?);
                    4
                }
                b"name" => {
                    name = Some(line.owned_string()?);
                    8
                }
                b"arguments" => {
                    arguments = Some(line.owned_string()?);
                    16
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(ToolCallData {
            turn: turn?,
            step: step?,
            call_id: call_id?,
            name: name?,
            arguments: arguments?,
        })
    }

    /// `tool/result` data in its message shape (`turn`, `step`, `message`), read by hand;
    /// the flat shape, and any other spelling, by serde's untagged reader.
    fn tool_result_data(&mut self) -> Option<ToolResultData> {
        self.or_serde(|line| line.tool_result_record().map(ToolResultData::Message))
    }

    fn tool_result_record(&mut self) -> Option<ToolResultRecord> {
        let (mut turn, mut step, mut message) = (None, None, None);
        let (mut error, mut meta) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"turn" => {
                    turn = Some(line.unsigned()?);
                    1
                }
                b"step" => {
                    step = Some(line.unsigned()?);
                    2
                }
                b"message" => {
                    message = Some(line.tool_result_message()?);
                    4
                }
                b"error" => {
                    error = line.optional(Line::error_info)?;
                    8
                }
                b"meta" => {
                    meta = line.optional(Line::serde)?;
                    16
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(ToolResultRecord {
            turn: turn?,
            step: step?,
            message: message?,
            error,
            meta,
        })
    }

    fn tool_result_message(&mut self) -> Option<ToolResultMessage> {
        let (id, role, source, content) = self.message(|l| l.array(Line::tool_result_block))?;
        Some(ToolResultMessage {
            id,
            role,
            source,
            content,
        })
    }

    /// A `user/message`'s data (an injected context), read as a result's message is.
    fn user_message(&mut self) -> Option<UserMessage> {
        let (id, role, source, content) = self.message(Line::content)?;
        Some(UserMessage {
            id,
            role,
            source,
            content,
        })
    }

    /// A model-visible message's members (`id`, `role`, `source`, and `content`, which
    /// `content` reads), each once and none other.
    fn message<C>(
        &mut self,
        mut content: impl FnMut(&mut Self) -> Option<C>,
    ) -> Option<(String, Role, MessageSource, C)> {
        let (mut id, mut role, mut source, mut read) = (None, None, None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"id" => {
                    id = Some(line.owned_string()?);
                    1
                }
                b"role" => {
                    role = Some(line.variant()?);
                    2
                }
                b"source" => {
                    source = Some(line.message_source()?);
                    4
                }
                b"content" => {
                    read = Some(content(line)?);
                    8
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some((id?, role?, source?, read?))
    }

    /// A message source; only `{"kind": "tool", "callId": ...}` by hand (serde's internally
    /// tagged reader ignores unknown fields, so anything else is its to read).
    fn message_source(&mut self) -> Option<MessageSource> {
        self.or_serde(|line| {
            let call_id = line.tagged(b"kind", "tool", b"callId", Line::call_id)?;
            Some(MessageSource::Tool { call_id })
        })
    }

    fn tool_result_block(&mut self) -> Option<ToolResultBlock> {
        let (mut call_id, mut content, mut is_error) = (None, None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"type" => {
                    let ToolResultBlockType::ToolResult = line.variant()?;
                    1
                }
                b"toolCallId" => {
                    call_id = Some(line.call_id()?);
                    2
                }
                b"content" => {
                    content = Some(line.content()?);
                    4
                }
                b"isError" => {
                    is_error = Some(line.boolean()?);
                    8
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        (seen & 1 != 0).then_some(ToolResultBlock {
            kind: ToolResultBlockType::ToolResult,
            tool_call_id: call_id?,
            content: content?,
            is_error: is_error?,
        })
    }

    fn hook_invoked(&mut self) -> Option<HookInvoked> {
        let (mut turn, mut point, mut dialect) = (None, None, None);
        let (mut matcher, mut handler_id) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"turn" => {
                    turn = Some(line.unsigned()?);
                    1
                }
                b"point" => {
                    point = Some(line.owned_string()?);
                    2
                }
                b"dialect" => {
                    dialect = Some(line.owned_string()?);
                    4
                }
                b"matcher" => {
                    matcher = line.optional(Line::owned_string)?;
                    8
                }
                b"handlerId" => {
                    handler_id = Some(line.owned_string()?);
                    16
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(HookInvoked {
            turn: turn?,
            point: point?,
            dialect: dialect?,
            matcher,
            handler_id: handler_id?,
        })
    }

    fn hook_result(&mut self) -> Option<HookResult> {
        let (mut turn, mut point, mut handler_id) = (None, None, None);
        let (mut decision, mut exit_code) = (None, None);
        let (mut stderr_summary, mut duration_ms) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"turn" => {
                    turn = Some(line.unsigned()?);
                    1
                }
                b"point" => {
                    point = Some(line.owned_string()?);
                    2
                }
                b"handlerId" => {
                    handler_id = Some(line.owned_string()?);
                    4
                }
                b"decision" => {
                    decision = Some(line.owned_string()?);
                    8
                }
                // Numbers other than unsigned integers are serde's to read (its float parsing
                // is what the general path gives).
                b"exitCode" => {
                    exit_code = line.optional(Line::serde)?;
                    16
                }
                b"stderrSummary" => {
                    stderr_summary = line.optional(Line::owned_string)?;
                    32
                }
                b"durationMs" => {
                    duration_ms = Some(line.serde()?);
                    64
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(HookResult {
            turn: turn?,
            point: point?,
            handler_id: handler_id?,
            decision: decision?,
            exit_code,
            stderr_summary,
            duration_ms: duration_ms?,
        })
    }

    fn dispatch_start(&mut self) -> Option<CodeDispatchStart> {
        let (mut root, mut parent, mut sub) = (None, None, None);
        let (mut name, mut arguments) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"rootCallId" => {
                    root = Some(line.call_id()?);
                    1
                }
                b"parentCallId" => {
                    parent = Some(line.call_id()?);
                    2
                }
                b"subCallId" => {
                    sub = Some(line.call_id()?);
                    4
                }
                b"name" => {
                    name = Some(line.owned_string()?);
                    8
                }
                b"arguments" => {
                    arguments = Some(line.arguments()?);
                    16
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(CodeDispatchStart {
            root_call_id: root?,
            parent_call_id: parent?,
            sub_call_id: sub?,
            name: name?,
            arguments: arguments?,
        })
    }

    fn dispatch(&mut self) -> Option<CodeDispatch> {
        let (mut root, mut parent, mut sub) = (None, None, None);
        let (mut name, mut arguments, mut is_error) = (None, None, None);
        let (mut content, mut result_summary) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"rootCallId" => {
                    root = line.optional(Line::call_id)?;
                    1
                }
                b"parentCallId" => {
                    parent = Some(line.call_id()?);
                    2
                }
                b"subCallId" => {
                    sub = Some(line.call_id()?);
                    4
                }
                b"name" => {
                    name = Some(line.owned_string()?);
                    8
                }
                b"arguments" => {
                    arguments = Some(line.arguments()?);
                    16
                }
                b"isError" => {
                    is_error = Some(line.boolean()?);
                    32
                }
                b"content" => {
                    content = line.optional(Line::content)?;
                    64
                }
                b"resultSummary" => {
                    result_summary = line.optional(Line::owned_string)?;
                    128
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(CodeDispatch {
            root_call_id: root,
            parent_call_id: parent?,
            sub_call_id: sub?,
            name: name?,
            arguments: arguments?,
            is_error: is_error?,
            content,
            result_summary,
        })
    }
}
