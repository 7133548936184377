//! Terminal-safe text: what an implementation or a trace controls is shown, never obeyed.
//!
//! An adapter's stderr, its messages, a trace's strings and an implementation's name reach the
//! terminal (and `--format text` files, and CI logs) through the text reports. A control
//! character in them could set the window title, clear the screen, move the cursor, write a
//! link or redraw an ERROR line as PASS (a bare CR is enough). So every control character is
//! escaped into visible text, ESC as `\u001b`: C0 (except newline and tab), DEL, C1 and the
//! bidirectional overrides. The same form is a JSON string escape, so a JSON report written
//! through an escaping writer stays valid JSON with the same values (outside its strings it
//! has no control character but newlines).
//!
//! Two functions, two places: [`escape_controls`] for a string an implementation controls (and
//! for output that carries no colour at all); [`escape_except_sgr`] at the writer of coloured
//! output, where the only escape sequences left through are colours (SGR: `ESC [ digits m`).
//! The report builders escape what they did not write themselves, so colours are ours alone.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is escaped: C0 but newline and tab, DEL, C1, and the bidirectional embeddings,
/// overrides and isolates (which reorder what a reader sees).
fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `\u001b`: visible, and the same character again inside a JSON string (the writers that
/// escape also carry JSON reports, which stay valid and mean the same).
fn push_escaped(out: &mut String, c: char) {
    let _ = write!(out, "\\u{:04x}", u32::from(c));
}

/// `text` with every control character but newline and tab escaped (see the module docs).
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_unsafe(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The length in bytes of the SGR sequence (`ESC [ [0-9;:]* m`) at the start of `text`, if one is.
fn sgr_len(text: &str) -> Option<usize> {
    let rest = text.strip_prefix("\u{1b}[")?;
    let params = rest
        .bytes()
        .take_while(|b| b.is_ascii_digit() || *b == b';' || *b == b':')
        .count();
    (rest.as_bytes().get(params) == Some(&b'm')).then_some(2 + params + 1)
}

/// `text` with every control character escaped but newline, tab and the colour sequences
/// (SGR) the report builders wrote: the last line of defence of coloured output.
pub fn escape_except_sgr(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if let Some(n) = sgr_len(rest) {
            out.push_str(&rest[..n]);
            rest = &rest[n..];
            continue;
        }
        if is_unsafe(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOSTILE: &str = "a\u{1b}]0;TITLE\u{7}b\u{1b}[2J\r PASS\u{9b}31m\u{202e}\u{7f}\0";

    #[test]
    fn every_control_character_is_shown_escaped() {
        assert_eq!(
            escape_controls(HOSTILE),
            "a\\u001b]0;TITLE\\u0007b\\u001b[2J\\u000d PASS\\u009b31m\\u202e\\u007f\\u0000"
        );
        assert_eq!(escape_controls("line\n\tnext é ✓"), "line\n\tnext é ✓");
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_json_document_stays_the_same_json() {
        let value = serde_json::json!({"message": HOSTILE, "n": [1, 2]});
        let text = serde_json::to_string_pretty(&value).unwrap();
        let escaped = escape_controls(&text);
        assert!(!escaped.chars().any(is_unsafe));
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn only_colour_sequences_pass_the_coloured_writer() {
        assert_eq!(
            escape_except_sgr("\u{1b}[1m\u{1b}[31mFAIL\u{1b}[0m x\u{1b}[2K\u{1b}[m"),
            "\u{1b}[1m\u{1b}[31mFAIL\u{1b}[0m x\\u001b[2K\u{1b}[m"
        );
        assert_eq!(
            escape_except_sgr(HOSTILE),
            "a\\u001b]0;TITLE\\u0007b\\u001b[2J\\u000d PASS\\u009b31m\\u202e\\u007f\\u0000"
        );
        // A lone ESC at the end, or one that starts no SGR, is escaped.
        assert_eq!(escape_except_sgr("x\u{1b}"), "x\\u001b");
        assert_eq!(escape_except_sgr("\u{1b}[31"), "\\u001b[31");
    }
}
