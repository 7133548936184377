//! The byte scanner under the single-pass reader ([`super::single_pass`]): a line being read,
//! and its JSON tokens (keys, strings, unsigned integers, booleans, objects and arrays) read
//! by hand in their usual shape, or whole values handed to serde.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use serde::de::value::BorrowedStrDeserializer;
use serde_json::{Map, Value};

use crate::identity::CallId;

/// A value serde hands over this deep is left to the general path, so that serde's recursion
/// limit (128 levels for the whole line) is met where the general path meets it.
const MAX_DELEGATED_DEPTH: usize = 64;

/// A line being read, and the byte the next token starts at (or whitespace before it).
pub(super) struct Line<'a> {
    pub(super) text: &'a str,
    pub(super) at: usize,
    /// Read as [`crate::strict_json::value_from_str`] reads: a line it refuses (a key named
    /// twice anywhere) declines. What is read by hand already is (known keys, each once); this
    /// adds the values handed to serde, which would keep the last of two equal keys.
    pub(super) strict: bool,
}

/// A unit variant of `T` named by `name`, as serde reads it from a JSON string.
pub(super) fn unit_variant<T: DeserializeOwned>(name: &str) -> Option<T> {
    T::deserialize(BorrowedStrDeserializer::<serde::de::value::Error>::new(
        name,
    ))
    .ok()
}

impl<'a> Line<'a> {
    pub(super) fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    pub(super) fn skip_whitespace(&mut self) {
        // Traces this toolkit writes have none: one comparison settles the usual case.
        while let Some(&b) = self.bytes().get(self.at) {
            if b > b' ' || !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                break;
            }
            self.at += 1;
        }
    }

    /// The next token's first byte, after any whitespace.
    #[inline]
    fn peek(&mut self) -> Option<u8> {
        match self.bytes().get(self.at) {
            // The usual case (traces this toolkit writes have no whitespace), settled inline:
            // measured, about 3% of reading a trace went to looking for whitespace not there.
            Some(&b) if b > b' ' => Some(b),
            _ => {
                self.skip_whitespace();
                self.bytes().get(self.at).copied()
            }
        }
    }

    /// Takes `byte` as the next token.
    pub(super) fn expect(&mut self, byte: u8) -> Option<()> {
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
    pub(super) fn literal(&mut self, word: &[u8]) -> bool {
        self.skip_whitespace();
        let taken = self.bytes()[self.at..].starts_with(word);
        if taken {
            self.at += word.len();
        }
        taken
    }

    /// Reads an object of fields, handing each key (as its raw bytes) to `field`, which reads
    /// the value.
    pub(super) fn object(
        &mut self,
        field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
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
    pub(super) fn more_members<K>(
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
    pub(super) fn array<T>(
        &mut self,
        mut element: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
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
    pub(super) fn key(&mut self) -> Option<&'a [u8]> {
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
    /// character (which JSON forbids in a string) or the end of the line.
    fn plain_run(&self, from: usize) -> usize {
        crate::strict_json::sure::plain_run(self.bytes(), from)
    }

    /// A string, borrowed from the line unless it holds escapes.
    pub(super) fn string(&mut self) -> Option<Cow<'a, str>> {
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
        // One allocation of the escaped text's length, which its unescaped text never exceeds:
        // growing the string escape by escape was a tenth of reading a `tool/call` (measured).
        let mut owned = String::with_capacity(self.closing_quote(self.at)? - start);
        owned.push_str(self.text.get(start..self.at)?);
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

    /// Where the string whose escape starts at `at` ends: its closing quote (`None` at a
    /// control character or the end of the line, where [`Line::string`] declines anyway).
    fn closing_quote(&self, mut at: usize) -> Option<usize> {
        loop {
            match self.bytes().get(at)? {
                b'"' => return Some(at),
                // The escaped byte is never the closing quote; a `\u`'s digits are plain.
                b'\\' => at = self.plain_run(at + 2),
                _ => return None,
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

    pub(super) fn owned_string(&mut self) -> Option<String> {
        self.string().map(Cow::into_owned)
    }

    pub(super) fn call_id(&mut self) -> Option<CallId> {
        self.string().map(|s| CallId::new(s.into_owned()))
    }

    /// An unsigned integer as JSON writes it (no sign, fraction, exponent or leading zero);
    /// any other number declines, and serde words it.
    pub(super) fn unsigned(&mut self) -> Option<u64> {
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

    pub(super) fn boolean(&mut self) -> Option<bool> {
        if self.literal(b"true") {
            Some(true)
        } else if self.literal(b"false") {
            Some(false)
        } else {
            None
        }
    }

    /// An optional field's value: `null` is `None`, as serde reads it.
    pub(super) fn optional<T>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if self.literal(b"null") {
            Some(None)
        } else {
            read(self).map(Some)
        }
    }

    /// A unit variant of `T`, from a string.
    pub(super) fn variant<T: DeserializeOwned>(&mut self) -> Option<T> {
        unit_variant(&self.string()?)
    }

    /// A whole value read by serde's derived `Deserialize` for `T`, as the general path reads it.
    pub(super) fn serde<T: DeserializeOwned>(&mut self) -> Option<T> {
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
        if self.strict && crate::strict_json::sure::value(&rest[..used]).is_none() {
            return None;
        }
        self.at += used;
        Some(value)
    }

    /// A value read by `by_hand` in its usual shape, or else by serde.
    pub(super) fn or_serde<T: DeserializeOwned>(
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
                        let value = line.json_value(depth + 1)?;
                        // Strict: a key named twice declines, as the strict reader refuses it.
                        (map.insert(key, value).is_none() || !line.strict).then_some(())
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
    pub(super) fn arguments(&mut self) -> Option<Value> {
        self.or_serde(|line| line.json_value(0))
    }
}
