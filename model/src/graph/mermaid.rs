//! Printing a [`StageGraph`] as a Mermaid flowchart, and reading one back.
//!
//! The printer follows the original generator's rules: node lines `id["label"]`, code spans as
//! `<code>` with `&`, `<`, `>` escaped, `<br/>` literal, edges `-->`, `-->|x|` and `-.->|x|`.
//! The reader is a small tokenizer for exactly that subset; it ignores line breaks, so it also
//! reads the rev1 spec whose Mermaid block was flattened onto one line.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::{EdgeStyle, StageGraph};

/// Which text a printed label carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelStyle {
    /// As the doc writes it: `<code>…</code>` and `<br/>`.
    Markup,
    /// What a reader should see where `<code>` is not rendered (the SVG): plain words, `<br/>`.
    Plain,
}

/// Prints the graph as the body of a ```` ```mermaid ```` block (no fences), ending with a newline.
pub fn print_flowchart(graph: &StageGraph, style: LabelStyle) -> String {
    let mut out = String::from("flowchart TD\n");
    for node in graph.nodes() {
        let label = match style {
            LabelStyle::Markup => node.label.to_mermaid(),
            LabelStyle::Plain => node.label.to_plain_mermaid(),
        };
        // A double quote would end the label early; Mermaid's entity keeps it.
        let label = label.replace('"', "#quot;");
        let _ = writeln!(out, "  {}[\"{}\"]", node.id, label);
    }
    for edge in graph.edges() {
        let arrow = match edge.style {
            EdgeStyle::Solid => "-->",
            EdgeStyle::Dotted => "-.->",
        };
        match edge.label {
            Some(label) => {
                let _ = writeln!(out, "  {} {}|{}| {}", edge.from, arrow, label, edge.to);
            }
            None => {
                let _ = writeln!(out, "  {} {} {}", edge.from, arrow, edge.to);
            }
        }
    }
    out
}

/// A node as read from Mermaid source.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ParsedNode {
    pub id: String,
    pub label: String,
}

/// An edge as read from Mermaid source.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ParsedEdge {
    pub from: String,
    pub to: String,
    pub label: Option<String>,
    pub dotted: bool,
}

impl std::fmt::Display for ParsedEdge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let arrow = if self.dotted { "-.->" } else { "-->" };
        match &self.label {
            Some(l) => write!(f, "{} {}|{}| {}", self.from, arrow, l, self.to),
            None => write!(f, "{} {} {}", self.from, arrow, self.to),
        }
    }
}

/// A flowchart as read from Mermaid source, in source order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flowchart {
    pub direction: String,
    pub nodes: Vec<ParsedNode>,
    pub edges: Vec<ParsedEdge>,
}

impl Flowchart {
    /// The flowchart the printer would write for `graph`, without going through text.
    pub fn of(graph: &StageGraph, style: LabelStyle) -> Flowchart {
        Flowchart {
            direction: "TD".to_owned(),
            nodes: graph
                .nodes()
                .iter()
                .map(|n| ParsedNode {
                    id: n.id.as_str().to_owned(),
                    label: match style {
                        LabelStyle::Markup => n.label.to_mermaid(),
                        LabelStyle::Plain => n.label.to_plain_mermaid(),
                    },
                })
                .collect(),
            edges: graph
                .edges()
                .iter()
                .map(|e| ParsedEdge {
                    from: e.from.as_str().to_owned(),
                    to: e.to.as_str().to_owned(),
                    label: e.label.map(str::to_owned),
                    dotted: e.style == EdgeStyle::Dotted,
                })
                .collect(),
        }
    }

    /// The same flowchart with every label reduced to its words: `<code>` tags dropped and
    /// `<br/>` written as a newline. Used to compare with a source that lost its markup.
    pub fn without_markup(&self) -> Flowchart {
        let strip = |s: &str| {
            s.replace("<code>", "")
                .replace("</code>", "")
                .replace("<br/>", "\n")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&")
        };
        Flowchart {
            direction: self.direction.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|n| ParsedNode {
                    id: n.id.clone(),
                    label: strip(&n.label),
                })
                .collect(),
            edges: self.edges.clone(),
        }
    }

    /// Every difference between `self` (expected) and `other` (actual), one line each:
    /// missing and extra nodes, label differences, missing and extra edges. Empty when the
    /// node and edge sets are equal. Order is not compared; see [`Flowchart::order_differences`].
    pub fn differences(&self, other: &Flowchart) -> Vec<String> {
        let mut out = Vec::new();
        for n in &self.nodes {
            match other.nodes.iter().find(|m| m.id == n.id) {
                None => out.push(format!("missing node {}[\"{}\"]", n.id, n.label)),
                Some(m) if m.label != n.label => out.push(format!(
                    "node {} label differs:\n    expected \"{}\"\n    actual   \"{}\"",
                    n.id, n.label, m.label
                )),
                Some(_) => {}
            }
        }
        for m in &other.nodes {
            if !self.nodes.iter().any(|n| n.id == m.id) {
                out.push(format!("extra node {}[\"{}\"]", m.id, m.label));
            }
        }
        let expected: BTreeSet<&ParsedEdge> = self.edges.iter().collect();
        let actual: BTreeSet<&ParsedEdge> = other.edges.iter().collect();
        for e in expected.difference(&actual) {
            out.push(format!("missing edge {e}"));
        }
        for e in actual.difference(&expected) {
            out.push(format!("extra edge {e}"));
        }
        if self.edges.len() != expected.len() {
            out.push("expected side has a duplicate edge".to_owned());
        }
        if other.edges.len() != actual.len() {
            out.push("actual side has a duplicate edge".to_owned());
        }
        out
    }

    /// Differences in declaration order of nodes and edges (meaningful once the sets agree).
    pub fn order_differences(&self, other: &Flowchart) -> Vec<String> {
        let mut out = Vec::new();
        let ids = |f: &Flowchart| f.nodes.iter().map(|n| n.id.clone()).collect::<Vec<_>>();
        if ids(self) != ids(other) {
            out.push(format!(
                "node order differs:\n    expected {:?}\n    actual   {:?}",
                ids(self),
                ids(other)
            ));
        }
        for (i, (a, b)) in self.edges.iter().zip(&other.edges).enumerate() {
            if a != b {
                out.push(format!(
                    "edge {} differs: expected `{a}`, actual `{b}`",
                    i + 1
                ));
                break;
            }
        }
        out
    }
}

/// Why Mermaid source could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("mermaid parse error at byte {offset}: {message}")]
pub struct ParseError {
    pub offset: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Ident(String),
    NodeLabel(String),
    Arrow { dotted: bool },
    EdgeLabel(String),
}

fn tokenize(src: &str) -> Result<Vec<(usize, Token)>, ParseError> {
    let bytes = src.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    let err = |offset: usize, message: &str| ParseError {
        offset,
        message: message.to_owned(),
    };
    while i < bytes.len() {
        let rest = &src[i..];
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if rest.starts_with("%%") {
            // A comment runs to the end of the line.
            i += rest.find('\n').unwrap_or(rest.len());
        } else if let Some(label) = rest.strip_prefix("[\"") {
            let end = label
                .find("\"]")
                .ok_or_else(|| err(i, "unterminated node label"))?;
            out.push((i, Token::NodeLabel(label[..end].to_owned())));
            i += 2 + end + 2;
        } else if rest.starts_with("-.->") {
            out.push((i, Token::Arrow { dotted: true }));
            i += 4;
        } else if rest.starts_with("-->") {
            out.push((i, Token::Arrow { dotted: false }));
            i += 3;
        } else if c == b'|' {
            let end = rest[1..]
                .find('|')
                .ok_or_else(|| err(i, "unterminated edge label"))?;
            out.push((i, Token::EdgeLabel(rest[1..1 + end].to_owned())));
            i += 1 + end + 1;
        } else if c.is_ascii_alphanumeric() || c == b'_' {
            let len = rest
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
                .count();
            out.push((i, Token::Ident(rest[..len].to_owned())));
            i += len;
        } else {
            return Err(err(
                i,
                &format!("unexpected character {:?}", rest.chars().next()),
            ));
        }
    }
    Ok(out)
}

/// Reads a `flowchart` (or `graph`) block body: node declarations `id["label"]` and edges
/// `a --> b`, `a -->|x| b`, `a -.->|x| b`. Line breaks are not significant.
pub fn parse_flowchart(src: &str) -> Result<Flowchart, ParseError> {
    let tokens = tokenize(src)?;
    let mut it = tokens.into_iter().peekable();
    let mut chart = Flowchart::default();
    match (it.next(), it.next()) {
        (Some((_, Token::Ident(kw))), Some((_, Token::Ident(dir))))
            if kw == "flowchart" || kw == "graph" =>
        {
            chart.direction = dir;
        }
        _ => {
            return Err(ParseError {
                offset: 0,
                message: "expected `flowchart <direction>`".to_owned(),
            });
        }
    }
    while let Some((offset, tok)) = it.next() {
        let Token::Ident(id) = tok else {
            return Err(ParseError {
                offset,
                message: format!("expected a node id, found {tok:?}"),
            });
        };
        match it.next() {
            Some((_, Token::NodeLabel(label))) => chart.nodes.push(ParsedNode { id, label }),
            Some((_, Token::Arrow { dotted })) => {
                let label = match it.peek() {
                    Some((_, Token::EdgeLabel(_))) => match it.next() {
                        Some((_, Token::EdgeLabel(l))) => Some(l),
                        _ => None,
                    },
                    _ => None,
                };
                match it.next() {
                    Some((_, Token::Ident(to))) => chart.edges.push(ParsedEdge {
                        from: id,
                        to,
                        label,
                        dotted,
                    }),
                    other => {
                        return Err(ParseError {
                            offset: other.map_or(src.len(), |(o, _)| o),
                            message: "expected the target node id of an edge".to_owned(),
                        });
                    }
                }
            }
            other => {
                return Err(ParseError {
                    offset: other.map_or(src.len(), |(o, _)| o),
                    message: format!("expected a label or an arrow after `{id}`"),
                });
            }
        }
    }
    Ok(chart)
}

/// The body of the first ```` ```mermaid ```` fence in `text`, found by plain search. Meant for
/// the vendored spec files (rev1's fence is not on a line of its own, which Markdown parsers do
/// not accept); `cargo xtask docs` edits real Markdown with pulldown-cmark instead.
pub fn find_mermaid_block(text: &str) -> Option<&str> {
    const OPEN: &str = "```mermaid";
    let start = text.find(OPEN)? + OPEN.len();
    let len = text[start..].find("```")?;
    Some(&text[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_graph_reads_back_as_the_graph() {
        let g = StageGraph::rev2();
        let printed = print_flowchart(g, LabelStyle::Markup);
        let parsed = parse_flowchart(&printed);
        assert_eq!(parsed, Ok(Flowchart::of(g, LabelStyle::Markup)));
    }

    #[test]
    fn reads_flattened_source() {
        let chart = parse_flowchart("flowchart TD a[\"x\ny\"] b[\"z\"] a -->|go| b a -.-> b");
        let chart = chart.expect("parses");
        assert_eq!(chart.nodes.len(), 2);
        assert_eq!(chart.nodes[0].label, "x\ny");
        assert_eq!(chart.edges[0].label.as_deref(), Some("go"));
        assert!(chart.edges[1].dotted);
    }

    #[test]
    fn reports_where_source_is_broken() {
        let err = parse_flowchart("flowchart TD\n  a[\"open").map(|_| ());
        assert_eq!(err.map_err(|e| e.offset), Err(16));
        assert!(parse_flowchart("flowchart TD\n a -->").is_err());
        assert!(parse_flowchart("sequenceDiagram").is_err());
    }

    #[test]
    fn differences_name_what_differs() {
        let g = StageGraph::rev2();
        let mut chart = Flowchart::of(g, LabelStyle::Markup);
        chart.edges.pop();
        chart.nodes[0].label = "changed".to_owned();
        let diff = Flowchart::of(g, LabelStyle::Markup).differences(&chart);
        assert_eq!(diff.len(), 2, "{diff:#?}");
        assert!(diff[0].starts_with("node model label differs"));
        assert_eq!(diff[1], "missing edge allResults --> context");
    }
}
