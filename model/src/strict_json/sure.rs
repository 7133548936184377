//! A quick look at a line that settles the usual case without serde: a JSON object that
//! [`super::value_from_str`] certainly accepts, its top-level members as text.
//!
//! It walks the bytes once and builds nothing. It answers only when it is sure: every value in
//! its plain shape (keys without escapes, numbers that cannot overflow, escapes that are no
//! UTF-16 surrogates, nesting far from serde's recursion limit, no key named twice in an object).
//! Anything else, an error included, is "not sure" (`None`), and the caller reads the line
//! with serde, which words the error. So whenever this says yes, the strict reader says yes.

use wide::u8x16;

/// Deeper than this is left to serde (its limit is 128 levels).
const MAX_DEPTH: usize = 100;

/// A number longer than this, or with an exponent of more than two digits, is left to serde
/// (it may be out of `f64`'s range, which serde refuses).
const MAX_NUMBER_BYTES: usize = 100;

/// Calls `member` with each top-level member of `text` (its key and its value's text, without
/// surrounding whitespace), in order, and says `Some(())` when `text` is certainly a JSON object
/// that [`super::value_from_str`] reads without error. `None`: not sure (the members handed over
/// so far mean nothing then).
pub fn object_members<'t>(text: &'t str, mut member: impl FnMut(&'t str, &'t str)) -> Option<()> {
    Scan::run(text, Some(b'{'), |scan| {
        scan.object(0, &mut |key, start, end| {
            member(&text[key.0..key.1], &text[start..end])
        })
    })
}

/// Calls `element` with the text of each element of the array `text`, in order, and says
/// `Some(())` when `text` is certainly a JSON array that [`super::value_from_str`] reads without
/// error; `None`: not sure, as [`object_members`].
pub fn array_elements<'t>(text: &'t str, mut element: impl FnMut(&'t str)) -> Option<()> {
    Scan::run(text, Some(b'['), |scan| {
        scan.array(0, &mut |start, end| element(&text[start..end]))
    })
}

/// Says `Some(())` when `text` is certainly one JSON value (of any kind) that
/// [`super::value_from_str`] reads without error; `None`: not sure.
pub fn value(text: &str) -> Option<()> {
    Scan::run(text, None, |scan| scan.value(0))
}

/// The members of an object inside a line [`object_members`] was sure of, as it gives them:
/// found without checking again what the line's scan checked (its keys have no escapes, its
/// values are whole). It skims: it finds where each value ends and no more, so it is several
/// times quicker than a scan. On any other text it gives what it finds and never panics.
pub fn members_of_sure<'t>(object: &'t str, mut member: impl FnMut(&'t str, &'t str)) {
    debug_assert!(value(object).is_some(), "not a sure value: {object}");
    object_of_sure(object, 0, |key, start| {
        let end = value_end(object.as_bytes(), start);
        member(key, object.get(start..end)?);
        Some(end)
    });
}

/// The elements of an array inside a line [`object_members`] was sure of, as
/// [`array_elements`] gives them, skimmed as [`members_of_sure`] skims.
pub fn elements_of_sure<'t>(array: &'t str, mut element: impl FnMut(&'t str)) {
    debug_assert!(value(array).is_some(), "not a sure value: {array}");
    array_of_sure(array, 0, |at| {
        let end = value_end(array.as_bytes(), at);
        element(array.get(at..end)?);
        Some(end)
    });
}

/// The members of the object at `at` in `text`, a line (or a value in one) [`object_members`]
/// was sure of, skimmed as [`members_of_sure`] skims them, where `member` may read a value
/// itself rather than have it skimmed first: it gets the key and where the value starts, and
/// says where the value ends (`None`: skim it). So a value read inside another is walked once,
/// not once for each level above it. Says where the object ends (just past it); a value that is
/// no object is skimmed, and hands over no member. On any other text it never panics.
pub fn object_of_sure<'t>(
    text: &'t str,
    at: usize,
    mut member: impl FnMut(&'t str, usize) -> Option<usize>,
) -> usize {
    let bytes = text.as_bytes();
    skim_items(bytes, at, b'{', |at| {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let key_end = string_end(bytes, at);
        let key = text.get(at + 1..key_end.saturating_sub(1))?;
        let colon = skim_whitespace(bytes, key_end);
        if bytes.get(colon) != Some(&b':') {
            return None;
        }
        let start = skim_whitespace(bytes, colon + 1);
        Some(member(key, start).unwrap_or_else(|| value_end(bytes, start)))
    })
}

/// The elements of the array at `at` in `text`, as [`object_of_sure`] gives an object's
/// members: `element` gets where each starts and says where it ends (`None`: skim it).
pub fn array_of_sure(
    text: &str,
    at: usize,
    mut element: impl FnMut(usize) -> Option<usize>,
) -> usize {
    let bytes = text.as_bytes();
    skim_items(bytes, at, b'[', |at| {
        if bytes.get(at) == Some(&b']') {
            return None;
        }
        Some(element(at).unwrap_or_else(|| value_end(bytes, at)))
    })
}

/// Where the value at `at` in `text` ends (just past it), in a line [`object_members`] was sure
/// of: a string's closing quote, a container's closing bracket.
pub fn end_of_sure_value(text: &str, at: usize) -> usize {
    value_end(text.as_bytes(), at)
}

/// The items of the object or array that opens with `open` at `at` (after whitespace),
/// separated by commas: `item` reads the one at `at` (after whitespace) and says where it ends,
/// or `None` where there is none (the container's end). Says where the container ends, just
/// past its closing bracket (or where a text no scan was sure of stops making sense); a value
/// that does not open with `open` is skimmed whole, with no item read.
fn skim_items(
    bytes: &[u8],
    at: usize,
    open: u8,
    mut item: impl FnMut(usize) -> Option<usize>,
) -> usize {
    let at = skim_whitespace(bytes, at);
    if bytes.get(at) != Some(&open) {
        return value_end(bytes, at);
    }
    let mut at = at + 1;
    loop {
        at = skim_whitespace(bytes, at);
        let Some(end) = item(at) else {
            return (at + 1).min(bytes.len());
        };
        at = skim_whitespace(bytes, end);
        if bytes.get(at) != Some(&b',') {
            return (at + 1).min(bytes.len());
        }
        at += 1;
    }
}

fn skim_whitespace(bytes: &[u8], mut at: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = bytes.get(at) {
        at += 1;
    }
    at
}

/// Just past the closing quote of the string whose opening quote is at `at`.
fn string_end(bytes: &[u8], at: usize) -> usize {
    let mut at = at + 1;
    loop {
        at = plain_run(bytes, at);
        match bytes.get(at) {
            Some(b'"') => return at + 1,
            // The escaped byte cannot end the string.
            Some(b'\\') => at += 2,
            // A control byte, in a string no scan was sure of.
            Some(_) => at += 1,
            None => return bytes.len(),
        }
    }
}

/// Just past the end of the value that starts at `at`.
fn value_end(bytes: &[u8], at: usize) -> usize {
    match bytes.get(at) {
        Some(b'"') => string_end(bytes, at),
        Some(b'{' | b'[') => {
            let (mut depth, mut at) = (0usize, at);
            while let Some(&b) = bytes.get(at) {
                match b {
                    b'"' => {
                        at = string_end(bytes, at);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return at + 1;
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
            bytes.len()
        }
        // A number or a literal.
        _ => {
            let mut at = at;
            while let Some(&b) = bytes.get(at) {
                if let b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' = b {
                    break;
                }
                at += 1;
            }
            at
        }
    }
}

/// A key's place in the text: start and end (without the quotes).
type Span = (usize, usize);

struct Scan<'t> {
    bytes: &'t [u8],
    at: usize,
    /// The keys of the objects being read, innermost last.
    keys: Vec<Span>,
}

thread_local! {
    /// The key stack of the last scan on this thread, kept for the next (no allocation a line).
    static KEYS: std::cell::Cell<Vec<Span>> = const { std::cell::Cell::new(Vec::new()) };
}

impl<'t> Scan<'t> {
    /// Scans `text`, a value opening with `open` (if given) read by `value`, and nothing after it.
    fn run(
        text: &'t str,
        open: Option<u8>,
        value: impl FnOnce(&mut Self) -> Option<()>,
    ) -> Option<()> {
        let mut keys = KEYS.take();
        keys.clear();
        let mut scan = Scan {
            bytes: text.as_bytes(),
            at: 0,
            keys,
        };
        scan.whitespace();
        let read = (open.is_none() || scan.peek() == open)
            .then(|| value(&mut scan))
            .flatten()
            .and_then(|()| {
                scan.whitespace();
                (scan.at == scan.bytes.len()).then_some(())
            });
        KEYS.set(scan.keys);
        read
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    /// Takes `byte` after any whitespace.
    fn expect(&mut self, byte: u8) -> Option<()> {
        self.whitespace();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        self.whitespace();
        match self.peek()? {
            b'{' => self.object(depth, &mut |_, _, _| {}),
            b'[' => self.array(depth, &mut |_, _| {}),
            b'"' => self.string().map(|_| ()),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.bytes[self.at..]
            .starts_with(word)
            .then(|| self.at += word.len())
    }

    /// An object, at `self.at`; `member` gets each key and the span of its value.
    fn object(&mut self, depth: usize, member: &mut impl FnMut(Span, usize, usize)) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.at += 1;
        self.whitespace();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        let start = self.keys.len();
        loop {
            self.whitespace();
            if self.peek()? != b'"' {
                return None;
            }
            let (key, escaped) = self.string()?;
            let (bytes, name) = (self.bytes, &self.bytes[key.0..key.1]);
            if escaped
                || self.keys[start..]
                    .iter()
                    .any(|k| same(&bytes[k.0..k.1], name))
            {
                return None;
            }
            self.keys.push(key);
            self.expect(b':')?;
            self.whitespace();
            let from = self.at;
            self.value(depth + 1)?;
            member(key, from, self.at);
            self.whitespace();
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    self.keys.truncate(start);
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// An array, at `self.at`; `element` gets the span of each element.
    fn array(&mut self, depth: usize, element: &mut impl FnMut(usize, usize)) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        self.at += 1;
        self.whitespace();
        if self.peek()? == b']' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.whitespace();
            let from = self.at;
            self.value(depth + 1)?;
            element(from, self.at);
            self.whitespace();
            match self.peek()? {
                b',' => self.at += 1,
                b']' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string at `self.at` (its opening quote): the span of its contents, and whether it has
    /// an escape.
    fn string(&mut self) -> Option<(Span, bool)> {
        self.at += 1;
        let start = self.at;
        let mut escaped = false;
        loop {
            self.at = plain_run(self.bytes, self.at);
            match self.peek()? {
                b'"' => {
                    let span = (start, self.at);
                    self.at += 1;
                    return Some((span, escaped));
                }
                b'\\' => {
                    escaped = true;
                    self.escape()?;
                }
                // A raw control character: serde refuses it.
                _ => return None,
            }
        }
    }

    /// An escape at `self.at` (its backslash).
    fn escape(&mut self) -> Option<()> {
        match self.bytes.get(self.at + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.at += 2;
                Some(())
            }
            b'u' => {
                let hex = self.bytes.get(self.at + 2..self.at + 6)?;
                let hex = std::str::from_utf8(hex).ok()?;
                let unit = u16::from_str_radix(hex, 16).ok()?;
                // A surrogate must be paired: left to serde.
                if (0xD800..0xE000).contains(&unit) || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return None;
                }
                self.at += 6;
                Some(())
            }
            _ => None,
        }
    }

    fn number(&mut self) -> Option<()> {
        let start = self.at;
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.at += 1;
            }
            let from = self.at;
            self.some_digits()?;
            if self.at - from > 2 {
                return None;
            }
        }
        (self.at - start <= MAX_NUMBER_BYTES).then_some(())
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
    }

    /// At least one digit.
    fn some_digits(&mut self) -> Option<()> {
        let from = self.at;
        self.digits();
        (self.at > from).then_some(())
    }
}

/// Whether two keys are the same bytes, compared here rather than in a call to `memcmp`:
/// keys are short, and most pairs differ in length or first byte.
#[inline]
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// Where the run of plain string bytes from `at` ends: the first quote, backslash or control
/// character (or the end). Sixteen bytes at a time, as one vector: most strings (keys, ids,
/// names) end in their first sixteen bytes. Near the end, the last sixteen bytes are looked at
/// and those before `at` left out, so only a text shorter than a vector is read a byte at a
/// time. Out of line: copied into each caller, the trace check ran 5% slower.
#[inline(never)]
pub(crate) fn plain_run(bytes: &[u8], mut at: usize) -> usize {
    while let Some(chunk) = bytes.get(at..at + LANES) {
        match stops_in(chunk) {
            0 => at += LANES,
            hits => return at + hits.trailing_zeros() as usize,
        }
    }
    match bytes.len().checked_sub(LANES) {
        Some(last) if at < bytes.len() => {
            let hits = stops_in(&bytes[last..]) >> (at - last);
            at + if hits == 0 {
                bytes.len() - at
            } else {
                hits.trailing_zeros() as usize
            }
        }
        _ => byte_by_byte(bytes, at),
    }
}

/// A bit for each byte of a vector's worth that ends a run, the first byte's lowest.
#[inline]
fn stops_in(chunk: &[u8]) -> u32 {
    let mut lanes = [0; LANES];
    lanes.copy_from_slice(chunk);
    let v = u8x16::new(lanes);
    (v.simd_eq(QUOTES) | v.simd_eq(BACKSLASHES) | v.min(CONTROLS).simd_eq(v)).to_bitmask()
}

const LANES: usize = 16;
const QUOTES: u8x16 = u8x16::new([b'"'; LANES]);
const BACKSLASHES: u8x16 = u8x16::new([b'\\'; LANES]);
/// The highest control byte: `min(b, 0x1f) == b` says `b` is one.
const CONTROLS: u8x16 = u8x16::new([0x1f; LANES]);

/// Whether a byte ends a run of plain string bytes.
#[inline]
fn stops(b: u8) -> bool {
    (b == b'"') | (b == b'\\') | (b < 0x20)
}

/// [`plain_run`] near the end of `bytes`, where a vector does not fit.
fn byte_by_byte(bytes: &[u8], at: usize) -> usize {
    let rest = bytes.get(at..).unwrap_or_default();
    at + rest.iter().position(|&b| stops(b)).unwrap_or(rest.len())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn members(text: &str) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        object_members(text, |k, v| out.push((k.to_owned(), v.to_owned())))?;
        Some(out)
    }

    #[test]
    fn a_plain_object_gives_its_members_as_text() {
        let got = members(
            " {\"type\" : \"x\",\"seq\":12, \"data\":{\"a\":[1,-2.5e3,\"\\n\\u00e9\",null,true,false,{}]} }\n",
        );
        assert_eq!(
            got.unwrap(),
            [
                ("type", "\"x\""),
                ("seq", "12"),
                (
                    "data",
                    "{\"a\":[1,-2.5e3,\"\\n\\u00e9\",null,true,false,{}]}"
                )
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        );
        assert_eq!(members("{}").unwrap(), []);
        let mut elements = Vec::new();
        array_elements(r#" [ 1 , {"a":[2]},"x" ] "#, |e| elements.push(e)).unwrap();
        assert_eq!(elements, ["1", r#"{"a":[2]}"#, r#""x""#]);
        assert!(array_elements(r#"[{"a":1,"a":2}]"#, |_| {}).is_none());
        assert!(array_elements("[1,]", |_| {}).is_none());
        assert!(array_elements("{}", |_| {}).is_none());
    }

    /// Every text it is sure of, the strict reader accepts; of each text the strict reader
    /// refuses, it is not sure; and the shapes it leaves to serde are left.
    #[test]
    fn it_is_sure_only_of_what_the_strict_reader_accepts() {
        let plain = "r".repeat(20);
        for (text, sure) in [
            (
                r#"{"a":1,"b":{"a":2},"c":[{"a":1},{"a":1}]}"#.to_owned(),
                true,
            ),
            (format!(r#"{{"a":"{plain}","b":"{plain}\"{plain}"}}"#), true),
            (
                "{\"a\": 1,\n \"b\": {\"c\": false,\n \"c\": true}}".to_owned(),
                false,
            ),
            (r#"{"a":1,"a":1}"#.to_owned(), false),
            (r#"{"a\u0062":1,"ab":2}"#.to_owned(), false),
            (r#"{"a":"\ud800"}"#.to_owned(), false),
            (r#"{"a":"\ud83d\ude00"}"#.to_owned(), false),
            (r#"{"a":"\x"}"#.to_owned(), false),
            (format!("{{\"a\":\"{plain}\u{1}\"}}"), false),
            (r#"{"a":1e400}"#.to_owned(), false),
            (format!(r#"{{"a":{}}}"#, "9".repeat(400)), false),
            (r#"{"a":01}"#.to_owned(), false),
            (r#"{"a":1.}"#.to_owned(), false),
            (r#"{"a":-}"#.to_owned(), false),
            (r#"{"a":tru}"#.to_owned(), false),
            (r#"{"a":1,}"#.to_owned(), false),
            (r#"{"a":1} x"#.to_owned(), false),
            (r#"{"a":[1,]}"#.to_owned(), false),
            (r#"[1]"#.to_owned(), false),
            (
                format!(r#"{{"a":{}{}}}"#, "[".repeat(98), "]".repeat(98)),
                true,
            ),
            (
                format!(r#"{{"a":{}{}}}"#, "[".repeat(200), "]".repeat(200)),
                false,
            ),
        ] {
            let strict = super::super::value_from_str(&text);
            let got = members(&text);
            assert_eq!(got.is_some(), sure, "{text}");
            if got.is_some() {
                assert!(strict.is_ok(), "{text}");
            }
        }
    }

    mod generated {
        use proptest::prelude::*;

        use super::members;
        use crate::strict_json::value_from_str;

        /// A string literal from pieces that are plain, escaped, surrogate, invalid or raw
        /// control characters.
        fn string() -> impl Strategy<Value = String> {
            literal(vec![
                "a",
                "é",
                "rrrrrrrrrrrrrrrrrrrrrrrr",
                "\\n",
                "\\\"",
                "\\u00e9",
                "\\ud83d\\ude00",
                "\\ud800",
                "\\x",
                "\u{1}",
                "\t",
            ])
        }

        /// A string literal of up to three of `pieces`.
        fn literal(pieces: Vec<&'static str>) -> impl Strategy<Value = String> {
            prop::collection::vec(prop::sample::select(pieces), 0..4)
                .prop_map(|p| format!("\"{}\"", p.concat()))
        }

        /// Keys drawn from a few, so that objects name some twice, some with an escape.
        fn key() -> impl Strategy<Value = String> {
            prop::sample::select(vec!["\"a\"", "\"b\"", "\"ab\"", "\"a\\u0062\"", "\"\\n\""])
                .prop_map(str::to_owned)
        }

        fn value() -> impl Strategy<Value = String> {
            let number = prop::sample::select(vec![
                "0",
                "-0",
                "12",
                "-3.5",
                "1e5",
                "1E+2",
                "-2.5e-3",
                "1e400",
                "01",
                "1.",
                "-",
                "99999999999999999999999",
            ])
            .prop_map(str::to_owned);
            let leaf = prop_oneof![
                prop::sample::select(vec!["null", "true", "false", "tru"]).prop_map(str::to_owned),
                number,
                string(),
            ];
            leaf.prop_recursive(4, 24, 5, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4)
                        .prop_map(|v| format!("[{}]", v.join(","))),
                    prop::collection::vec((key(), inner), 0..4).prop_map(|m| {
                        let members: Vec<String> =
                            m.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                        format!("{{{}}}", members.join(", "))
                    }),
                ]
            })
        }

        /// A line: an object of generated members, sometimes with one character dropped or one
        /// inserted.
        fn line() -> impl Strategy<Value = String> {
            let object = prop::collection::vec((key(), value()), 0..5).prop_map(|m| {
                let members: Vec<String> = m.into_iter().map(|(k, v)| format!("{k}:{v}")).collect();
                format!(" {{{}}}\n", members.join(","))
            });
            let edit = prop_oneof![
                Just(None),
                (
                    any::<prop::sample::Index>(),
                    prop::sample::select(vec![
                        "", "{", "}", "[", "]", ",", ":", "\"", "\\", " ", "1",
                    ])
                )
                    .prop_map(Some),
            ];
            (object, edit).prop_map(|(text, edit)| match edit {
                None => text,
                Some((at, with)) => {
                    let chars: Vec<char> = text.chars().collect();
                    let i = at.index(chars.len());
                    let mut out: String = chars[..i].iter().collect();
                    out.push_str(with);
                    // An empty insertion drops the character instead.
                    let rest = if with.is_empty() { i + 1 } else { i };
                    out.extend(chars.get(rest..).unwrap_or_default());
                    out
                }
            })
        }

        /// Every object and array within `value` (itself included), skimmed and scanned:
        /// the members or elements each way, or the first that differs.
        fn skimmed_as_scanned(value: &str) -> Result<(), String> {
            let (skimmed, scanned) = match value.as_bytes().first() {
                Some(b'{') => {
                    let mut skimmed = Vec::new();
                    super::super::members_of_sure(value, |k, v| skimmed.push(format!("{k}={v}")));
                    let mut scanned = Vec::new();
                    super::super::object_members(value, |k, v| scanned.push(format!("{k}={v}")));
                    (skimmed, scanned)
                }
                Some(b'[') => {
                    let mut skimmed = Vec::new();
                    super::super::elements_of_sure(value, |v| skimmed.push(v.to_owned()));
                    let mut scanned = Vec::new();
                    super::super::array_elements(value, |v| scanned.push(v.to_owned()));
                    (skimmed, scanned)
                }
                _ => return Ok(()),
            };
            if skimmed != scanned {
                return Err(format!(
                    "{value:?}: skimmed {skimmed:?}, scanned {scanned:?}"
                ));
            }
            // Read from within: each value read by the caller, or left to the skim, and the
            // container's end found either way.
            for read in [true, false] {
                let mut nested = Vec::new();
                let mut item = |key: Option<&str>, at: usize| {
                    let end = super::super::end_of_sure_value(value, at);
                    nested.push(match key {
                        Some(k) => format!("{k}={}", &value[at..end]),
                        None => value[at..end].to_owned(),
                    });
                    read.then_some(end)
                };
                let end = if value.starts_with('{') {
                    super::super::object_of_sure(value, 0, |k, at| item(Some(k), at))
                } else {
                    super::super::array_of_sure(value, 0, |at| item(None, at))
                };
                if nested != scanned || end != value.len() {
                    return Err(format!(
                        "{value:?}: read from within {nested:?} to {end}, scanned {scanned:?}"
                    ));
                }
            }
            for inner in scanned {
                let inner = inner
                    .split_once('=')
                    .filter(|_| value.starts_with('{'))
                    .map_or(inner.as_str(), |(_, v)| v);
                skimmed_as_scanned(inner)?;
            }
            Ok(())
        }

        /// A line it is sure of: only valid pieces, no key twice, whitespace here and there.
        fn sure_line() -> impl Strategy<Value = String> {
            let string = literal(vec![
                "a",
                "é",
                "rrrrrrrrrrrrrrrrrrrrrrrr",
                "\\n",
                "\\\"",
                "\\\\",
                "\\u00e9",
                ",]}",
            ]);
            let leaf = prop_oneof![
                prop::sample::select(vec!["null", "true", "-2.5e-3", "12", "0"])
                    .prop_map(str::to_owned),
                string,
            ];
            let space = prop::sample::select(vec!["", " ", "\n "]);
            let value = leaf.prop_recursive(4, 24, 5, move |inner| {
                let space = space.clone();
                prop_oneof![
                    prop::collection::vec((inner.clone(), space.clone()), 0..4).prop_map(|v| {
                        let items: Vec<String> =
                            v.into_iter().map(|(v, s)| format!("{s}{v}{s}")).collect();
                        format!("[{}]", items.join(","))
                    }),
                    prop::collection::btree_map(
                        prop::sample::select(vec!["a", "b", "ab", "c"]),
                        (inner, space),
                        0..4
                    )
                    .prop_map(|m| {
                        let members: Vec<String> = m
                            .into_iter()
                            .map(|(k, (v, s))| format!("{s}\"{k}\"{s}:{s}{v}{s}"))
                            .collect();
                        format!("{{{}}}", members.join(","))
                    }),
                ]
            });
            prop::collection::btree_map(
                prop::sample::select(vec!["type", "data", "x"]),
                value,
                0..4,
            )
            .prop_map(|m| {
                let members: Vec<String> =
                    m.into_iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                format!("{{{}}}", members.join(","))
            })
        }

        proptest! {
            /// In a line it is sure of, every object and array is skimmed to the members and
            /// elements a scan finds.
            #[test]
            fn a_sure_line_skims_as_it_scans(text in prop_oneof![line(), sure_line()]) {
                if members(&text).is_some() {
                    prop_assert_eq!(skimmed_as_scanned(text.trim()), Ok(()));
                }
            }

            /// Whatever it is sure of, the strict reader accepts, with the same members.
            #[test]
            fn sure_means_the_strict_reader_accepts_the_same_members(text in line()) {
                if let Some(found) = members(&text) {
                    let read = value_from_str(&text);
                    prop_assert!(read.is_ok(), "sure of {text:?}, refused: {read:?}");
                    let read = read.unwrap_or_default();
                    let object = read.as_object();
                    prop_assert!(object.is_some(), "{text:?}");
                    let object = object.cloned().unwrap_or_default();
                    prop_assert_eq!(found.len(), object.len(), "{:?}", text);
                    for (key, value) in &found {
                        let member = value_from_str(value).ok();
                        prop_assert!(member.is_some(), "{value:?}");
                        prop_assert_eq!(object.get(key), member.as_ref(), "{:?}", text);
                    }
                }
            }
        }
    }

    /// A stop byte is found wherever it stands in the bytes looked at at once, and after them.
    #[test]
    fn a_quote_backslash_or_control_byte_stops_a_run_wherever_it_stands() {
        for len in 0..200 {
            for stop in [b'"', b'\\', 0x1f, 0] {
                let mut bytes = vec![b'r'; len];
                bytes.push(stop);
                bytes.extend_from_slice(b"rrrrrrrrr");
                assert_eq!(plain_run(&bytes, 0), len, "{len} {stop}");
            }
            assert_eq!(plain_run(&vec![0xc3; len], 0), len);
        }
    }

    /// From any start, in buffers shorter and longer than a vector (so the last, overlapping
    /// vector is looked at from each of its bytes), with the bytes next to each stop and bytes
    /// past ASCII: where a byte-by-byte search stops.
    #[test]
    fn a_run_ends_where_a_byte_by_byte_search_ends_from_any_start() {
        let alphabet = [
            b'"', b'\\', 0, 0x1f, 0x20, 0x21, b'#', b']', b'[', b'r', 0x7f, 0x80, 0xc3, 0xff,
        ];
        let naive = |bytes: &[u8], at: usize| {
            (at..bytes.len())
                .find(|&i| matches!(bytes[i], b'"' | b'\\' | 0..=0x1f))
                .unwrap_or(bytes.len().max(at))
        };
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 33) as usize
        };
        for round in 0..4000 {
            let len = round % 97;
            // Mostly plain bytes, so that runs are long enough to cross a vector or two, and to
            // end in the last one, which overlaps the one before.
            let bytes: Vec<u8> = (0..len)
                .map(|_| match next() % 8 {
                    0 => alphabet[next() % alphabet.len()],
                    _ => alphabet[6 + next() % (alphabet.len() - 6)],
                })
                .collect();
            for at in 0..=len + 2 {
                assert_eq!(
                    plain_run(&bytes, at),
                    naive(&bytes, at),
                    "{bytes:?} from {at}"
                );
            }
        }
    }
}
