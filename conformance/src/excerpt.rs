//! The lines of a trace a report quotes: the text report's witness lines and the HTML report's
//! trace. A failing scenario's trace is written to its file as it is judged and dropped from
//! memory; what the reports show of it is this excerpt, bounded whatever the trace's size: at
//! most [`FULL_TRACE_LINES`] lines plus the witnesses' surroundings, each cut at
//! [`MAX_LINE_SHOWN`] bytes.

use std::io::BufRead;

/// A trace with more lines than this is shown in part: its first lines, and the lines around
/// each witness.
pub const FULL_TRACE_LINES: usize = 500;
/// The first lines of a long trace shown (its header and first batch).
pub(crate) const HEAD_LINES: usize = 10;
/// Lines of context shown around a witness line of a long trace.
pub(crate) const CONTEXT_LINES: usize = 3;
/// A line longer than this is shown cut, with its length: a reader cannot take in more, and a
/// 16 MiB line kept whole for each of a run's failing scenarios is what made memory grow with
/// them (the corpus's longest trace line is under 1 KiB).
pub const MAX_LINE_SHOWN: usize = 4096;

/// The lines of a trace the report shows: all of a trace of up to [`FULL_TRACE_LINES`] lines,
/// else its first lines and the lines around each witness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceExcerpt {
    /// How many lines the trace has.
    pub total: usize,
    /// The lines shown, numbered from 1, in order.
    pub lines: Vec<(usize, String)>,
}

impl TraceExcerpt {
    /// The excerpt of a trace in memory (JSON Lines).
    pub fn of(jsonl: &str, witnesses: &std::collections::BTreeSet<usize>) -> Self {
        // Reading from memory cannot fail.
        Self::read(jsonl.as_bytes(), witnesses).unwrap_or_default()
    }

    /// Reads a trace and keeps the lines it shows: at most [`FULL_TRACE_LINES`] and the
    /// witnesses' surroundings are held at any time, however long the trace.
    pub fn read(
        mut reader: impl BufRead,
        witnesses: &std::collections::BTreeSet<usize>,
    ) -> std::io::Result<Self> {
        let near = |n: usize| {
            n <= HEAD_LINES
                || witnesses
                    .range(n.saturating_sub(CONTEXT_LINES)..=n + CONTEXT_LINES)
                    .next()
                    .is_some()
        };
        let mut excerpt = TraceExcerpt::default();
        let mut buf = Vec::new();
        loop {
            buf.clear();
            if reader.read_until(b'\n', &mut buf)? == 0 {
                break;
            }
            excerpt.total += 1;
            let n = excerpt.total;
            if n == FULL_TRACE_LINES + 1 {
                excerpt.lines.retain(|(k, _)| near(*k));
            }
            if n <= FULL_TRACE_LINES || near(n) {
                let line = buf.strip_suffix(b"\n").unwrap_or(&buf);
                let line = line.strip_suffix(b"\r").unwrap_or(line);
                excerpt.lines.push((n, shown_line(line)));
            }
        }
        Ok(excerpt)
    }

    /// Line `n` (from 1), when the excerpt shows it.
    pub fn line(&self, n: usize) -> Option<&str> {
        let i = self.lines.binary_search_by_key(&n, |(k, _)| *k).ok()?;
        Some(self.lines[i].1.as_str())
    }
}

/// A line as shown: whole up to [`MAX_LINE_SHOWN`] bytes, else its start (cut at a character)
/// and how long it is.
fn shown_line(line: &[u8]) -> String {
    if line.len() <= MAX_LINE_SHOWN {
        return String::from_utf8_lossy(line).into_owned();
    }
    let mut cut = MAX_LINE_SHOWN;
    // A UTF-8 continuation byte is 0b10xx_xxxx: back up to the start of a character.
    while cut > 0 && line[cut] & 0xC0 == 0x80 {
        cut -= 1;
    }
    format!(
        "{}\u{2026} (the line has {} bytes; the trace file holds it whole)",
        String::from_utf8_lossy(&line[..cut]),
        line.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn a_long_line_is_cut_at_a_character_and_says_how_long_it_was() {
        let long = format!("{}é{}", "a".repeat(MAX_LINE_SHOWN - 1), "b".repeat(10_000));
        let jsonl = format!("short\n{long}\nlast");
        let excerpt = TraceExcerpt::of(&jsonl, &BTreeSet::from([2]));
        assert_eq!(excerpt.total, 3);
        assert_eq!(excerpt.line(1), Some("short"));
        let shown = excerpt.line(2).unwrap_or_default();
        assert!(
            shown.starts_with(&"a".repeat(MAX_LINE_SHOWN - 1)),
            "{shown:.20}"
        );
        // The two-byte `é` straddles the cut: it is left out whole, not split.
        assert!(!shown.contains('é') && !shown.contains('\u{fffd}'));
        assert!(shown.ends_with(&format!(
            "(the line has {} bytes; the trace file holds it whole)",
            long.len()
        )));
        assert!(shown.len() < MAX_LINE_SHOWN + 100);
        assert_eq!(excerpt.line(3), Some("last"));
        assert_eq!(excerpt.line(4), None);
    }

    #[test]
    fn a_long_line_of_no_character_start_is_cut_without_panicking() {
        // Continuation bytes only (a line that is not UTF-8): the cut finds no character start
        // and stops at the line's beginning.
        let bytes = vec![0x80u8; MAX_LINE_SHOWN + 10];
        let shown = shown_line(&bytes);
        assert!(shown.starts_with('\u{2026}'), "{shown:.20}");
        assert!(shown.ends_with(&format!(
            "(the line has {} bytes; the trace file holds it whole)",
            bytes.len()
        )));
    }

    #[test]
    fn a_line_at_the_limit_is_shown_whole() {
        let line = "x".repeat(MAX_LINE_SHOWN);
        let excerpt = TraceExcerpt::of(&format!("{line}\r\n"), &BTreeSet::new());
        assert_eq!(excerpt.line(1), Some(line.as_str()));
    }
}
