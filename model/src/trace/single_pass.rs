//! The single-pass reader behind [`TraceRecord::from_json_tag_first`]: one walk over a line's
//! bytes straight into the typed record, with no intermediate `serde_json::Value` and none of
//! serde's buffering of tagged or flattened enums. A call's stages repeat its identity byte for
//! byte, so each thread remembers the last few identity texts it read and shares their value.
//!
//! It reads the shapes traces hold (the record's `kind` first, an event's `type` before its
//! `data`) and declines everything else, so that the general path, which also words the errors,
//! reads those lines. The rule that keeps the two paths in agreement: a value is read by hand only
//! in its usual shape (known keys without escapes, each once; strings, canonical unsigned
//! integers, booleans, `null` for an optional field); a value in any other shape that stands on
//! its own (a field's whole value) is handed to serde's derived `Deserialize` for that type, which
//! is what the general path runs on it too, unless that type ignores unknown fields; anything
//! else declines the whole line.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::de::value::BorrowedStrDeserializer;
use serde_json::{Map, Value};

use super::{DeclaredCall, EventRecord, GuardVerdictRecord, Mark, Observation, TraceRecord};
use crate::graph::NodeId;
use crate::identity::{CallId, Identity};
use crate::result::{AdditionalContext, ContentBlock, ErrorInfo, ResultError, ToolResult};
use crate::session::{
    CodeDispatch, CodeDispatchStart, EventBody, MessageSource, SessionEvent, ToolCallData,
    ToolResultBlock, ToolResultBlockType, ToolResultData, ToolResultMessage, ToolResultRecord,
};

/// Reads one line, or declines it (`None`): the general path reads it then.
pub(super) fn read(text: &str) -> Option<TraceRecord> {
    let mut line = Line { text, at: 0 };
    let record = line.record()?;
    line.skip_whitespace();
    (line.at == text.len()).then_some(record)
}

/// The bytes that end a run of plain string bytes: a quote, a backslash, a control character.
const ENDS_A_RUN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = true;
        b += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

/// A value serde hands over this deep is left to the general path, so that serde's recursion
/// limit (128 levels for the whole line) is met where the general path meets it.
const MAX_DELEGATED_DEPTH: usize = 64;

thread_local! {
    /// The identities this thread read last, by their text: the stages of a call repeat its
    /// identity, and reading it again would build the same value. (Call ids are not shared
    /// so: an `Arc<str>`'s atomic counts cost more than copying a short id, measured.)
    static RECENT_IDENTITIES: RefCell<RecentIdentities> =
        const { RefCell::new(RecentIdentities::new()) };
}

/// How many identities [`RECENT_IDENTITIES`] keeps: enough for the calls of a batch whose
/// stages interleave, few enough that a miss costs little.
const RECENT: usize = 4;

/// An identity whose text is longer is not remembered: a thread-local copy of a 16 MiB
/// identity (its text and its parsed value, about 40 times the text) would outlive the trace
/// on every parsing thread; measured, 8 such lines took `tep check -j 8` to 4.7 GB. Below
/// this, sharing saves the time it was made for (an identity is usually under 200 bytes).
const MAX_REMEMBERED_BYTES: usize = 4096;

/// The last [`RECENT`] identities read, each with its text.
struct RecentIdentities {
    entries: [(String, Option<Arc<Identity>>); RECENT],
    next: usize,
}

impl RecentIdentities {
    const fn new() -> Self {
        RecentIdentities {
            entries: [const { (String::new(), None) }; RECENT],
            next: 0,
        }
    }

    /// The identity whose text `rest` starts with, and the text's length. A text is one whole
    /// JSON value (an object or an array), which ends where it ends whatever follows it, so a
    /// line that starts with it holds that value.
    fn find(&self, rest: &[u8]) -> Option<(usize, Arc<Identity>)> {
        self.entries.iter().find_map(|(text, identity)| {
            let identity = identity.as_ref()?;
            rest.starts_with(text.as_bytes())
                .then(|| (text.len(), Arc::clone(identity)))
        })
    }

    fn remember(&mut self, text: &str, identity: &Arc<Identity>) {
        let (kept, slot) = &mut self.entries[self.next];
        kept.clear();
        kept.push_str(text);
        *slot = Some(Arc::clone(identity));
        self.next = (self.next + 1) % RECENT;
    }
}

/// A line being read, and the byte the next token starts at (or whitespace before it).
struct Line<'a> {
    text: &'a str,
    at: usize,
}

/// Marks a field as read; `None` when it was read before (serde refuses a repeated field).
fn first_time(seen: &mut u32, bit: u32) -> Option<()> {
    if *seen & bit != 0 {
        return None;
    }
    *seen |= bit;
    Some(())
}

/// A unit variant of `T` named by `name`, as serde reads it from a JSON string.
fn unit_variant<T: DeserializeOwned>(name: &str) -> Option<T> {
    T::deserialize(BorrowedStrDeserializer::<serde::de::value::Error>::new(
        name,
    ))
    .ok()
}

impl<'a> Line<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    fn skip_whitespace(&mut self) {
        // Traces this toolkit writes have none: one comparison settles the usual case.
        while let Some(&b) = self.bytes().get(self.at) {
            if b > b' ' || !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.at += 1;
        }
    }

    /// The next token's first byte, after any whitespace.
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.at).copied()
    }

    /// Takes `byte` as the next token.
    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Takes `byte` if it is the next token.
    fn take_if(&mut self, byte: u8) -> bool {
        let taken = self.peek() == Some(byte);
        if taken {
            self.at += 1;
        }
        taken
    }

    /// Takes a literal such as `true`; what follows it is checked by the caller's next token.
    fn literal(&mut self, word: &[u8]) -> bool {
        self.skip_whitespace();
        let taken = self.bytes()[self.at..].starts_with(word);
        if taken {
            self.at += word.len();
        }
        taken
    }

    /// Reads an object of fields, handing each key (as its raw bytes) to `field`, which reads
    /// the value.
    fn object(&mut self, field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.object_keyed(Line::key, field)
    }

    /// Reads an object whose keys `key` reads, handing each to `member`, which reads the value.
    fn object_keyed<K>(
        &mut self,
        key: impl Fn(&mut Self) -> Option<K>,
        mut member: impl FnMut(&mut Self, K) -> Option<()>,
    ) -> Option<()> {
        self.expect(b'{')?;
        if self.take_if(b'}') {
            return Some(());
        }
        let first = key(self)?;
        self.expect(b':')?;
        member(self, first)?;
        self.more_members(key, member)
    }

    /// The members of an object after one was read: `, key: value` until the closing `}`.
    fn more_members<K>(
        &mut self,
        key: impl Fn(&mut Self) -> Option<K>,
        mut member: impl FnMut(&mut Self, K) -> Option<()>,
    ) -> Option<()> {
        loop {
            match self.peek()? {
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                b',' => self.at += 1,
                _ => return None,
            }
            let k = key(self)?;
            self.expect(b':')?;
            member(self, k)?;
        }
    }

    /// Reads an array, each element with `element`.
    fn array<T>(&mut self, mut element: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        self.expect(b'[')?;
        let mut out = Vec::new();
        if self.take_if(b']') {
            return Some(out);
        }
        loop {
            out.push(element(self)?);
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(out);
                }
                _ => return None,
            }
        }
    }

    /// An object key, as its raw bytes; a key with an escape (or a control character) declines,
    /// since it could spell a known key another way.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let start = self.at;
        let end = self.plain_run(start);
        if self.bytes().get(end) != Some(&b'"') {
            return None;
        }
        self.at = end + 1;
        Some(&self.bytes()[start..end])
    }

    /// Where the run of plain string bytes from `from` ends: at a quote, a backslash, a control
    /// character (which JSON forbids in a string) or the end of the line. Strings in traces are
    /// short: eight bytes at a time in a `u64` beats a vectorized search's setup.
    fn plain_run(&self, from: usize) -> usize {
        const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
        const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
        /// The high bit of each byte of `x` that is zero, and maybe of bytes above the first such
        /// byte (never below it, so the lowest set bit is exact).
        fn zero_bytes(x: u64) -> u64 {
            x.wrapping_sub(ONES) & !x & HIGHS
        }
        let bytes = self.bytes();
        let mut at = from;
        while let Some(word) = bytes.get(at..at + 8) {
            let mut eight = [0; 8];
            eight.copy_from_slice(word);
            let x = u64::from_le_bytes(eight);
            let stops = zero_bytes(x ^ (ONES * u64::from(b'"')))
                | zero_bytes(x ^ (ONES * u64::from(b'\\')))
                // A byte below 0x20: subtracting 0x20 borrows into its high bit (bytes of 0x80
                // and up are masked off by `!x`).
                | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
            if stops != 0 {
                return at + (stops.trailing_zeros() / 8) as usize;
            }
            at += 8;
        }
        while let Some(&b) = bytes.get(at) {
            if ENDS_A_RUN[usize::from(b)] {
                break;
            }
            at += 1;
        }
        at
    }

    /// A string, borrowed from the line unless it holds escapes.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.at;
        self.at = self.plain_run(start);
        match self.bytes().get(self.at)? {
            b'"' => {
                self.at += 1;
                // Both ends are at an ASCII quote, so they are character boundaries.
                return self.text.get(start..self.at - 1).map(Cow::Borrowed);
            }
            b'\\' => {}
            _ => return None,
        }
        let mut owned = String::from(self.text.get(start..self.at)?);
        loop {
            match self.bytes().get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(Cow::Owned(owned));
                }
                b'\\' => {
                    self.at += 1;
                    let escaped = *self.bytes().get(self.at)?;
                    self.at += 1;
                    owned.push(match escaped {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    });
                }
                b if *b < 0x20 => return None,
                _ => {
                    let from = self.at;
                    self.at = self.plain_run(from);
                    owned.push_str(self.text.get(from..self.at)?);
                }
            }
        }
    }

    /// The character of a `\u` escape (after the `u`): a surrogate pair is one character, and a
    /// lone surrogate declines (serde_json refuses it).
    fn unicode_escape(&mut self) -> Option<char> {
        let high = self.hex4()?;
        match high {
            0xD800..=0xDBFF => {
                if !self.bytes()[self.at..].starts_with(b"\\u") {
                    return None;
                }
                self.at += 2;
                let low = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&low) {
                    return None;
                }
                char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            }
            0xDC00..=0xDFFF => None,
            _ => char::from_u32(high),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes().get(self.at..self.at + 4)?;
        let mut n = 0;
        for &d in digits {
            n = n * 16 + char::from(d).to_digit(16)?;
        }
        self.at += 4;
        Some(n)
    }

    fn owned_string(&mut self) -> Option<String> {
        self.string().map(Cow::into_owned)
    }

    fn call_id(&mut self) -> Option<CallId> {
        self.string().map(|s| CallId::new(s.into_owned()))
    }

    /// An unsigned integer as JSON writes it (no sign, fraction, exponent or leading zero);
    /// any other number declines, and serde words it.
    fn unsigned(&mut self) -> Option<u64> {
        self.skip_whitespace();
        let bytes = self.bytes();
        let mut n: u64 = 0;
        let start = self.at;
        while let Some(&d @ b'0'..=b'9') = bytes.get(self.at) {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            self.at += 1;
        }
        let digits = self.at - start;
        let leading_zero = digits > 1 && bytes[start] == b'0';
        if digits == 0 || leading_zero || matches!(bytes.get(self.at), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        Some(n)
    }

    fn boolean(&mut self) -> Option<bool> {
        if self.literal(b"true") {
            Some(true)
        } else if self.literal(b"false") {
            Some(false)
        } else {
            None
        }
    }

    /// An optional field's value: `null` is `None`, as serde reads it.
    fn optional<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<T>> {
        if self.literal(b"null") {
            Some(None)
        } else {
            read(self).map(Some)
        }
    }

    /// A unit variant of `T`, from a string.
    fn variant<T: DeserializeOwned>(&mut self) -> Option<T> {
        unit_variant(&self.string()?)
    }

    /// A whole value read by serde's derived `Deserialize` for `T`, as the general path reads it.
    fn serde<T: DeserializeOwned>(&mut self) -> Option<T> {
        self.skip_whitespace();
        let rest = self.text.get(self.at..)?;
        let mut values = serde_json::Deserializer::from_str(rest).into_iter::<T>();
        let value = values.next()?.ok()?;
        let used = values.byte_offset();
        let nesting = rest.as_bytes()[..used]
            .iter()
            .filter(|&&b| b == b'{' || b == b'[')
            .count();
        if nesting > MAX_DELEGATED_DEPTH {
            return None;
        }
        self.at += used;
        Some(value)
    }

    /// A value read by `by_hand` in its usual shape, or else by serde.
    fn or_serde<T: DeserializeOwned>(
        &mut self,
        by_hand: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<T> {
        let start = self.at;
        if let Some(value) = by_hand(self) {
            return Some(value);
        }
        self.at = start;
        self.serde()
    }

    /// A JSON value (a call's arguments) built by hand when it holds only strings, unsigned
    /// integers, booleans, `null`, arrays and objects, as serde_json builds it (a repeated key
    /// keeps its last value); any other number, or nesting deeper than serde hands over here,
    /// declines, and the caller hands the value to serde.
    fn json_value(&mut self, depth: usize) -> Option<Value> {
        if depth > MAX_DELEGATED_DEPTH {
            return None;
        }
        Some(match self.peek()? {
            b'"' => Value::String(self.owned_string()?),
            b'{' => {
                let mut map = Map::new();
                self.object_keyed(
                    // serde_json's own markers for raw values and exact numbers decline.
                    |line| {
                        line.owned_string()
                            .filter(|k| !k.starts_with("$serde_json"))
                    },
                    |line, key| {
                        map.insert(key, line.json_value(depth + 1)?);
                        Some(())
                    },
                )?;
                Value::Object(map)
            }
            b'[' => Value::Array(self.array(|line| line.json_value(depth + 1))?),
            b't' | b'f' => Value::Bool(self.boolean()?),
            b'n' if self.literal(b"null") => Value::Null,
            b'0'..=b'9' => Value::Number(self.unsigned()?.into()),
            _ => return None,
        })
    }

    /// A call's arguments: by hand, or by serde when they hold other numbers.
    fn arguments(&mut self) -> Option<Value> {
        self.or_serde(|line| line.json_value(0))
    }

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
            "event" => TraceRecord::Event(Box::new(self.event_record()?)),
            "mark" => TraceRecord::Mark(self.mark()?),
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
        let mut obs = Box::new(Observation::at(NodeId::Model));
        let mut seen = 0;
        self.rest_of_record(|line, key| {
            let bit = match key {
                b"node" => {
                    let name = line.string()?;
                    let node: NodeId = unit_variant(&name)?;
                    // The worded path also parses the name with `FromStr`.
                    if node.as_str() != name {
                        return None;
                    }
                    obs.node = node;
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
                    obs.result = line.optional(|l| l.or_serde(Line::tool_result))?;
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

    /// An identity, shared with the last ones read on this thread when its text is theirs.
    fn shared_identity(&mut self) -> Option<Arc<Identity>> {
        self.skip_whitespace();
        let start = self.at;
        let rest = &self.bytes()[start..];
        if let Some((len, identity)) = RECENT_IDENTITIES.with_borrow(|recent| recent.find(rest)) {
            self.at += len;
            return Some(identity);
        }
        let identity = Arc::new(self.or_serde(Line::identity)?);
        let text = self.text.get(start..self.at)?;
        if text.len() <= MAX_REMEMBERED_BYTES {
            RECENT_IDENTITIES.with_borrow_mut(|recent| recent.remember(text, &identity));
        }
        Some(identity)
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

    fn tool_result(&mut self) -> Option<ToolResult> {
        let (mut is_error, mut content) = (None, None);
        let mut result = ToolResult {
            is_error: false,
            content: Vec::new(),
            error: None,
            meta: None,
            additional_contexts: Vec::new(),
            value: None,
        };
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
        Some(result)
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

    fn event_record(&mut self) -> Option<EventRecord> {
        let (mut call, mut event) = (None, None);
        let mut seen = 0;
        self.rest_of_record(|line, key| {
            let bit = match key {
                b"call" => {
                    call = line.optional(Line::call_id)?;
                    1
                }
                b"event" => {
                    event = Some(line.session_event()?);
                    2
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(EventRecord {
            call,
            event: event?,
        })
    }

    /// A session event whose `type` comes before its `data`.
    fn session_event(&mut self) -> Option<SessionEvent> {
        let (mut seq, mut time, mut kind, mut body) = (None, None, None, None);
        let (mut surface_op, mut source_event_seqs) = (None, None);
        let mut seen = 0;
        self.object(|line, key| {
            let bit = match key {
                b"seq" => {
                    seq = Some(line.unsigned()?);
                    1
                }
                b"time" => {
                    time = Some(line.unsigned()?);
                    2
                }
                b"type" => {
                    kind = Some(line.string()?);
                    4
                }
                b"data" => {
                    body = Some(line.event_body(kind.as_deref()?)?);
                    8
                }
                b"surfaceOp" => {
                    surface_op = line.optional(Line::variant)?;
                    16
                }
                b"sourceEventSeqs" => {
                    source_event_seqs =
                        line.optional(|l| l.or_serde(|l| l.array(Line::unsigned)))?;
                    32
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(SessionEvent {
            seq: seq?,
            time: time?,
            body: body?,
            surface_op,
            source_event_seqs,
        })
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
            "user/message" => EventBody::UserMessage(self.serde()?),
            "context/message" => EventBody::ContextMessage(self.serde()?),
            "approval/asked" => EventBody::ApprovalAsked(self.serde()?),
            "approval/decided" => EventBody::ApprovalDecided(self.serde()?),
            "todo/write" => EventBody::TodoWrite(self.serde()?),
            "fs/observed" => EventBody::FsObserved(self.serde()?),
            "hook/invoked" => EventBody::HookInvoked(self.serde()?),
            "hook/result" => EventBody::HookResult(self.serde()?),
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
        let (mut id, mut role, mut source, mut content) = (None, None, None, None);
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
                    content = Some(line.array(Line::tool_result_block)?);
                    8
                }
                _ => return None,
            };
            first_time(&mut seen, bit)
        })?;
        Some(ToolResultMessage {
            id: id?,
            role: role?,
            source: source?,
            content: content?,
        })
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
