//! Node labels as structured text.
//!
//! A label is written once, in a small markup: `` `name` `` is a code span (a name the project
//! knows: an event, an extension point) and `\n` is a line break. Every rendering is derived from
//! that one string: the Mermaid text of the doc (`<code>…</code>`, `<br/>`), the plain text handed
//! to the SVG renderer, and the list of code names the doc lint accepts.

use std::fmt;

/// One piece of a label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment<'a> {
    /// Plain words.
    Text(&'a str),
    /// A code span: the name of an event, an extension point or a component.
    Code(&'a str),
    /// A line break (`<br/>` in Mermaid).
    Break,
}

/// A node label in the project's markup (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Label(&'static str);

impl Label {
    /// Wraps a markup string. Backticks must be balanced; `tests::labels_are_well_formed`
    /// checks every label of every graph.
    pub const fn new(markup: &'static str) -> Self {
        Label(markup)
    }

    /// The markup as written in the definition.
    pub const fn markup(&self) -> &'static str {
        self.0
    }

    /// The label as a sequence of segments.
    pub fn segments(&self) -> Vec<Segment<'static>> {
        let mut out = Vec::new();
        for (line_no, line) in self.0.split('\n').enumerate() {
            if line_no > 0 {
                out.push(Segment::Break);
            }
            for (i, piece) in line.split('`').enumerate() {
                if piece.is_empty() {
                    continue;
                }
                // Odd pieces sit between a pair of backticks.
                out.push(if i % 2 == 1 {
                    Segment::Code(piece)
                } else {
                    Segment::Text(piece)
                });
            }
        }
        out
    }

    /// Whether every code span is closed on its own line.
    pub fn is_well_formed(&self) -> bool {
        self.0
            .split('\n')
            .all(|line| line.matches('`').count() % 2 == 0)
    }

    /// The label as the Mermaid source of the doc writes it: code spans as
    /// `<code>…</code>` with `&`, `<`, `>` escaped, line breaks as a literal `<br/>`.
    pub fn to_mermaid(&self) -> String {
        let mut out = String::new();
        for seg in self.segments() {
            match seg {
                Segment::Text(t) => out.push_str(t),
                Segment::Code(c) => {
                    out.push_str("<code>");
                    out.push_str(&escape_html(c));
                    out.push_str("</code>");
                }
                Segment::Break => out.push_str("<br/>"),
            }
        }
        out
    }

    /// What a reader should see: the words without markup, line breaks kept as `<br/>`
    /// (which the SVG renderer turns into a new line).
    pub fn to_plain_mermaid(&self) -> String {
        let mut out = String::new();
        for seg in self.segments() {
            match seg {
                Segment::Text(t) | Segment::Code(t) => out.push_str(t),
                Segment::Break => out.push_str("<br/>"),
            }
        }
        out
    }

    /// The label's lines without any markup.
    pub fn plain_lines(&self) -> Vec<String> {
        self.0
            .split('\n')
            .map(|line| line.replace('`', ""))
            .collect()
    }

    /// The names written as code spans.
    pub fn code_names(&self) -> impl Iterator<Item = &'static str> {
        self.segments().into_iter().filter_map(|seg| match seg {
            Segment::Code(c) => Some(c),
            _ => None,
        })
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.plain_lines().join(" / "))
    }
}

/// Escapes the three characters the original generator escapes inside `<code>` spans.
pub fn escape_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            _ => out.push(ch),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_code_spans_and_breaks() {
        let label = Label::new("Session event: `tool/call`\nlogged before execution");
        assert_eq!(
            label.to_mermaid(),
            "Session event: <code>tool/call</code><br/>logged before execution"
        );
        assert_eq!(
            label.to_plain_mermaid(),
            "Session event: tool/call<br/>logged before execution"
        );
        assert_eq!(label.code_names().collect::<Vec<_>>(), vec!["tool/call"]);
    }

    #[test]
    fn escapes_inside_code_only() {
        let label = Label::new("a < b `x<y&z>`");
        assert_eq!(label.to_mermaid(), "a < b <code>x&lt;y&amp;z&gt;</code>");
    }

    #[test]
    fn detects_unbalanced_backticks() {
        assert!(!Label::new("`open\nclose`").is_well_formed());
        assert!(Label::new("`a`, `b`").is_well_formed());
    }
}
