//! Editing Markdown in place with pulldown-cmark's offset iterator: the curated prose around a
//! generated part stays byte for byte as it was.
//!
//! Two kinds of generated parts:
//! - a fenced ```` ```mermaid ```` block right after `<!-- generated: NAME -->`, whose body is
//!   replaced ([`replace_mermaid`]);
//! - a region between `<!-- begin: NAME -->` and `<!-- end: NAME -->` ([`replace_region`]).

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};

/// Why a generated part could not be found or replaced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MarkdownError {
    #[error("no `<!-- generated: {0} -->` marker followed by a ```mermaid block")]
    NoMermaidBlock(String),
    #[error(
        "the ```mermaid block after `<!-- generated: {0} -->` must be top-level, LF-terminated and closed"
    )]
    UnsupportedBlock(String),
    #[error("no `<!-- begin: {0} -->` ... `<!-- end: {0} -->` region")]
    NoRegion(String),
}

fn events(src: &str) -> Vec<(Event<'_>, Range<usize>)> {
    Parser::new_ext(src, Options::empty())
        .into_offset_iter()
        .collect()
}

fn marker(html: &str, kind: &str, name: &str) -> bool {
    html.trim() == format!("<!-- {kind}: {name} -->")
}

/// The byte range of the body of the mermaid block that follows `<!-- generated: NAME -->`.
fn mermaid_body(src: &str, name: &str) -> Result<Range<usize>, MarkdownError> {
    let evs = events(src);
    let mut armed = false;
    for (i, (event, range)) in evs.iter().enumerate() {
        match event {
            Event::Html(html) if marker(html, "generated", name) => armed = true,
            Event::Start(Tag::HtmlBlock) | Event::End(TagEnd::HtmlBlock) | Event::Html(_) => {}
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) if armed => {
                if info.split_whitespace().next() != Some("mermaid") {
                    return Err(MarkdownError::NoMermaidBlock(name.to_owned()));
                }
                let block = &src[range.clone()];
                if block.contains('\r') || !block.trim_end().ends_with("```") {
                    return Err(MarkdownError::UnsupportedBlock(name.to_owned()));
                }
                let texts: Vec<&Range<usize>> = evs[i + 1..]
                    .iter()
                    .take_while(|(e, _)| !matches!(e, Event::End(TagEnd::CodeBlock)))
                    .map(|(_, r)| r)
                    .collect();
                return match texts.as_slice() {
                    [] => {
                        // An empty block: insert right after the opening fence line.
                        let line_end = block.find('\n').map_or(range.end, |n| range.start + n + 1);
                        Ok(line_end..line_end)
                    }
                    [only] => Ok((*only).clone()),
                    _ => Err(MarkdownError::UnsupportedBlock(name.to_owned())),
                };
            }
            _ => armed = false,
        }
    }
    Err(MarkdownError::NoMermaidBlock(name.to_owned()))
}

/// Replaces the body of the mermaid block after `<!-- generated: NAME -->` with `body` (which
/// should end with a newline).
pub fn replace_mermaid(src: &str, name: &str, body: &str) -> Result<String, MarkdownError> {
    let range = mermaid_body(src, name)?;
    Ok(format!(
        "{}{}{}",
        &src[..range.start],
        body,
        &src[range.end..]
    ))
}

/// The current body of the mermaid block after `<!-- generated: NAME -->`.
pub fn mermaid_block<'a>(src: &'a str, name: &str) -> Result<&'a str, MarkdownError> {
    mermaid_body(src, name).map(|r| &src[r])
}

/// Replaces everything between `<!-- begin: NAME -->` and `<!-- end: NAME -->` with `content`.
pub fn replace_region(src: &str, name: &str, content: &str) -> Result<String, MarkdownError> {
    let evs = events(src);
    let begin = evs
        .iter()
        .find(|(e, _)| matches!(e, Event::Html(h) if marker(h, "begin", name)))
        .map(|(_, r)| r.end);
    let end = evs
        .iter()
        .find(|(e, _)| matches!(e, Event::Html(h) if marker(h, "end", name)))
        .map(|(_, r)| r.start);
    match (begin, end) {
        (Some(b), Some(e)) if b <= e => {
            // Blank lines around the content keep it a separate Markdown block.
            let before = &src[..b];
            let newline = if before.ends_with('\n') { "" } else { "\n" };
            Ok(format!(
                "{before}{newline}\n{}\n\n{}",
                content.trim_end(),
                &src[e..]
            ))
        }
        _ => Err(MarkdownError::NoRegion(name.to_owned())),
    }
}

/// Every inline code span of the prose, with its 1-based line number (code blocks excluded).
pub fn code_spans(src: &str) -> Vec<(usize, String)> {
    events(src)
        .into_iter()
        .filter_map(|(event, range)| match event {
            Event::Code(code) => {
                let line = src[..range.start].matches('\n').count() + 1;
                Some((line, code.into_string()))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str =
        "# T\n\nIntro with `a`.\n\n<!-- generated: g -->\n```mermaid\nold\n```\n\nOutro.\n";

    #[test]
    fn replaces_only_the_block_body() {
        let out = replace_mermaid(PAGE, "g", "new\nlines\n").unwrap_or_default();
        assert_eq!(
            out,
            "# T\n\nIntro with `a`.\n\n<!-- generated: g -->\n```mermaid\nnew\nlines\n```\n\nOutro.\n"
        );
        assert_eq!(mermaid_block(&out, "g"), Ok("new\nlines\n"));
    }

    #[test]
    fn fills_an_empty_block() {
        let page = "<!-- generated: g -->\n```mermaid\n```\nafter\n";
        assert_eq!(
            replace_mermaid(page, "g", "x\n").unwrap_or_default(),
            "<!-- generated: g -->\n```mermaid\nx\n```\nafter\n"
        );
    }

    #[test]
    fn refuses_what_it_cannot_edit_safely() {
        assert!(matches!(
            replace_mermaid(PAGE, "other", "x"),
            Err(MarkdownError::NoMermaidBlock(_))
        ));
        let crlf = "<!-- generated: g -->\r\n```mermaid\r\na\r\nb\r\n```\r\n";
        assert!(replace_mermaid(crlf, "g", "x").is_err());
        let unmarked = "```mermaid\na\n```\n";
        assert!(replace_mermaid(unmarked, "g", "x").is_err());
    }

    #[test]
    fn replaces_regions_between_markers() {
        let page = "a\n\n<!-- begin: r -->\nold\n<!-- end: r -->\n\nb\n";
        assert_eq!(
            replace_region(page, "r", "new\n").unwrap_or_default(),
            "a\n\n<!-- begin: r -->\n\nnew\n\n<!-- end: r -->\n\nb\n"
        );
        // Idempotent: replacing again gives the same page.
        let once = replace_region(page, "r", "new\n").unwrap_or_default();
        assert_eq!(
            replace_region(&once, "r", "new\n").unwrap_or_default(),
            once
        );
        assert!(replace_region(page, "q", "x").is_err());
    }

    #[test]
    fn finds_code_spans_with_lines_but_not_code_blocks() {
        let spans = code_spans(PAGE);
        assert_eq!(spans, vec![(3, "a".to_owned())]);
    }
}
