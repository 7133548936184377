//! `cargo xtask docs`: everything in `docs/` that is derived from the definitions.
//!
//! [`generate`] computes every generated file in memory; [`stale`] compares them with the files
//! on disk (for `--check` and for the `docs_are_fresh` test); [`write`] replaces the changed
//! ones atomically (write to a temporary sibling, then rename).

use std::fmt;
use std::path::{Path, PathBuf};

use similar::TextDiff;
use tep_conformance::scenario::{Scenario, corpus};
use tep_model::graph::mermaid::{LabelStyle, print_flowchart};
use tep_model::graph::{Revision, StageGraph};
use tep_model::vocabulary;

use crate::markdown::{self, MarkdownError, code_spans};
use crate::{coverage, pages, svg};

/// One generated file, relative to the repository root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generated {
    pub path: PathBuf,
    pub contents: String,
}

/// A name in curated prose that no definition knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownName {
    pub file: PathBuf,
    pub line: usize,
    pub name: String,
}

impl fmt::Display for UnknownName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: `{}` names no node, event, extension point or known term (model/src/vocabulary.rs)",
            self.file.display(),
            self.line,
            self.name
        )
    }
}

/// Why the docs could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum DocsError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {blocker} is a file, not a directory")]
    NotADirectory { path: PathBuf, blocker: PathBuf },
    #[error("{path}: {source}")]
    Template {
        path: PathBuf,
        source: MarkdownError,
    },
    #[error("curated prose names what the definitions do not know:\n{}", .0.iter().map(|u| format!("  {u}")).collect::<Vec<_>>().join("\n"))]
    UnknownNames(Vec<UnknownName>),
    #[error("{} does not hold the spec's clauses against the catalog:\n{}", crate::coverage::CLAUSES_FILE, .0.iter().map(|p| format!("  {p}")).collect::<Vec<_>>().join("\n"))]
    Coverage(Vec<crate::coverage::Problem>),
    #[error("{0}")]
    Generate(String),
}

/// A generated file whose committed copy differs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub path: PathBuf,
    /// A short unified diff (committed → generated), or why there is none.
    pub diff: String,
}

/// A page of the pipeline doc: its template (curated prose), the revision whose flowchart fills
/// its Mermaid block, and where the page and its SVG go.
struct PipelinePage {
    template: &'static str,
    /// The graph printed into the page, and the name of its `<!-- generated: NAME -->` block.
    graph: fn() -> &'static StageGraph,
    block: &'static str,
    page: &'static str,
    picture: &'static str,
}

const PIPELINE_PAGES: &[PipelinePage] = &[
    PipelinePage {
        template: "xtask/templates/tool-execution-pipeline.md",
        graph: || StageGraph::of(Revision::Rev2),
        block: "stage-graph rev2",
        page: "docs/tool-execution-pipeline.md",
        picture: "docs/tool-execution-pipeline.svg",
    },
    PipelinePage {
        template: "xtask/templates/revisions/rev1/tool-execution-pipeline.md",
        graph: || StageGraph::of(Revision::Rev1),
        block: "stage-graph rev1",
        page: "docs/revisions/rev1/tool-execution-pipeline.md",
        picture: "docs/revisions/rev1/tool-execution-pipeline.svg",
    },
    PipelinePage {
        template: "xtask/templates/code-mode.md",
        graph: || StageGraph::code_mode(Revision::Rev2),
        block: "code-mode rev2",
        page: "docs/code-mode.md",
        picture: "docs/code-mode.svg",
    },
];

/// A graph and where its picture goes.
type Picture = (fn() -> &'static StageGraph, &'static str);

/// Pictures of graphs no page prints: rev1's Code Mode graph, which the HTML report of a rev1
/// run draws.
const PICTURES: &[Picture] = &[(
    || StageGraph::code_mode(Revision::Rev1),
    "docs/revisions/rev1/code-mode.svg",
)];

fn read(root: &Path, rel: &str) -> Result<String, DocsError> {
    let path = root.join(rel);
    std::fs::read_to_string(&path).map_err(|source| DocsError::Read { path, source })
}

/// The names in backticks of a template's prose that nothing defines.
pub fn lint(file: &Path, template: &str) -> Vec<UnknownName> {
    code_spans(template)
        .into_iter()
        .filter(|(_, name)| !vocabulary::is_known(name))
        .map(|(line, name)| UnknownName {
            file: file.to_path_buf(),
            line,
            name,
        })
        .collect()
}

/// Every generated file.
pub fn generate(root: &Path) -> Result<Vec<Generated>, DocsError> {
    let corpus: Vec<Scenario> = corpus().map_err(|e| DocsError::Generate(e.to_string()))?;
    let mut out = Vec::new();
    let mut unknown = Vec::new();
    for page in PIPELINE_PAGES {
        let template = read(root, page.template)?;
        unknown.extend(lint(Path::new(page.template), &template));
        let graph = (page.graph)();
        let body = markdown::replace_mermaid(
            &template,
            page.block,
            &print_flowchart(graph, LabelStyle::Markup),
        )
        .map_err(|source| DocsError::Template {
            path: page.template.into(),
            source,
        })?;
        out.push(Generated {
            path: page.page.into(),
            contents: pages::header(&format!(
                "{} and the `{}` graph of model/src/graph/",
                page.template, page.block
            )) + &body,
        });
        out.push(Generated {
            path: page.picture.into(),
            contents: svg::render(graph).map_err(DocsError::Generate)?,
        });
    }
    for (graph, picture) in PICTURES {
        out.push(Generated {
            path: picture.into(),
            contents: svg::render(graph()).map_err(DocsError::Generate)?,
        });
    }
    if !unknown.is_empty() {
        return Err(DocsError::UnknownNames(unknown));
    }
    out.push(Generated {
        path: "docs/invariants.md".into(),
        contents: pages::invariants_page(&corpus),
    });
    out.push(Generated {
        path: "docs/events.md".into(),
        contents: pages::events_page(),
    });
    out.push(Generated {
        path: "docs/scenarios.md".into(),
        contents: pages::scenarios_page(&corpus),
    });
    out.push(Generated {
        path: "docs/revisions/changes.md".into(),
        contents: pages::changes_page(&corpus),
    });
    out.push(Generated {
        path: "README.md".into(),
        contents: crate::readme::rewrite(
            &read(root, "README.md")?,
            &crate::readme::counts(&corpus),
        )
        .map_err(DocsError::Generate)?,
    });
    for (file, capabilities) in crate::readme::KIT_READMES {
        out.push(Generated {
            path: file.into(),
            contents: crate::readme::rewrite_file(
                file,
                &read(root, file)?,
                &crate::readme::quick_start_counts(&corpus, capabilities),
            )
            .map_err(DocsError::Generate)?,
        });
    }
    out.push(Generated {
        path: "docs/stage-graph.md".into(),
        contents: pages::stage_graph_page(&corpus).map_err(DocsError::Generate)?,
    });
    out.extend(schemas()?);
    out.push(Generated {
        path: "docs/spec-coverage.md".into(),
        contents: spec_coverage(root, &corpus)?,
    });
    out.push(adapter_protocol(root, &corpus)?);
    Ok(out)
}

/// The JSON Schemas of `docs/schemas/`, from the Rust types.
fn schemas() -> Result<Vec<Generated>, DocsError> {
    let mut out = Vec::new();
    for (file, mut schema) in pages::schemas() {
        // JSON has no comments; JSON Schema's `$comment` carries the generated-file notice.
        if let Some(map) = schema.as_object_mut() {
            map.insert(
                "$comment".to_owned(),
                serde_json::Value::String(
                    "Generated by `cargo xtask docs` from the Rust types - do not edit by hand."
                        .to_owned(),
                ),
            );
        }
        let text = serde_json::to_string_pretty(&schema)
            .map_err(|e| DocsError::Generate(e.to_string()))?;
        out.push(Generated {
            path: Path::new("docs/schemas").join(file),
            contents: text + "\n",
        });
    }
    Ok(out)
}

/// `docs/adapter-protocol.md`: its template with the worked exchange, the observation model and
/// the scenario versions filled in.
fn adapter_protocol(root: &Path, corpus: &[Scenario]) -> Result<Generated, DocsError> {
    let template = "xtask/templates/adapter-protocol.md";
    let protocol = read(root, template)?;
    let exchange = pages::adapter_exchange(corpus).map_err(DocsError::Generate)?;
    let protocol = markdown::replace_region(&protocol, "worked-exchange", &exchange)
        .and_then(|p| {
            markdown::replace_region(&p, "observation-model", &pages::observation_table())
        })
        .and_then(|p| {
            markdown::replace_region(
                &p,
                "scenario-versions",
                &crate::versions_page::version_table(),
            )
        })
        .map_err(|source| DocsError::Template {
            path: template.into(),
            source,
        })?;
    Ok(Generated {
        path: "docs/adapter-protocol.md".into(),
        contents: pages::header(template) + &protocol,
    })
}

/// `docs/spec-coverage.md`, or every problem of the clause list.
fn spec_coverage(root: &Path, corpus: &[Scenario]) -> Result<String, DocsError> {
    let file =
        coverage::parse(&read(root, coverage::CLAUSES_FILE)?).map_err(DocsError::Generate)?;
    let spec = coverage::SpecTexts::read(root).map_err(|source| DocsError::Read {
        path: root.join("spec"),
        source,
    })?;
    let coverage = coverage::Coverage::build(&file, &spec);
    if !coverage.problems.is_empty() {
        return Err(DocsError::Coverage(coverage.problems));
    }
    Ok(coverage::page::page(&coverage, corpus))
}

/// The generated files whose committed copies differ (or are missing).
pub fn stale(root: &Path, generated: &[Generated]) -> Vec<Stale> {
    generated
        .iter()
        .filter_map(|g| {
            let path = root.join(&g.path);
            let committed = match std::fs::read_to_string(&path) {
                Ok(text) => text.replace("\r\n", "\n"),
                Err(_) => {
                    return Some(Stale {
                        path: g.path.clone(),
                        diff: "missing".to_owned(),
                    });
                }
            };
            (committed != g.contents).then(|| Stale {
                path: g.path.clone(),
                diff: short_diff(&committed, &g.contents),
            })
        })
        .collect()
}

fn short_diff(old: &str, new: &str) -> String {
    const MAX_LINES: usize = 40;
    let diff = TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(2)
        .header("committed", "generated")
        .to_string();
    let lines: Vec<&str> = diff.lines().collect();
    if lines.len() <= MAX_LINES {
        return diff;
    }
    format!(
        "{}\n... ({} more diff lines)\n",
        lines[..MAX_LINES].join("\n"),
        lines.len() - MAX_LINES
    )
}

/// Writes the files that changed, each atomically. Returns the paths written.
pub fn write(root: &Path, generated: &[Generated]) -> Result<Vec<PathBuf>, DocsError> {
    let mut written = Vec::new();
    for g in stale(root, generated) {
        let contents = generated
            .iter()
            .find(|x| x.path == g.path)
            .map(|x| x.contents.as_str())
            .unwrap_or_default();
        let path = root.join(&g.path);
        let fail = |source| DocsError::Write {
            path: path.clone(),
            source,
        };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| {
                // "File exists" would name the file being written, which does not exist: name
                // the ancestor that is in the way.
                match dir.ancestors().find(|a| a.exists() && !a.is_dir()) {
                    Some(blocker) => DocsError::NotADirectory {
                        path: path.clone(),
                        blocker: blocker.to_path_buf(),
                    },
                    None => fail(source),
                }
            })?;
        }
        let tmp = path.with_file_name(format!(
            ".{}.tmp-{}",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("doc"),
            std::process::id()
        ));
        std::fs::write(&tmp, contents).map_err(fail)?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(e)
        })?;
        written.push(g.path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_in_the_way_of_a_directory_is_named() {
        for blocker in ["docs", "docs/schemas"] {
            let root = std::env::temp_dir().join(format!(
                "xtask-docs-blocked-{}-{}",
                std::process::id(),
                blocker.replace('/', "-")
            ));
            let _ = std::fs::remove_dir_all(&root);
            let blocked = root.join(blocker);
            std::fs::create_dir_all(blocked.parent().unwrap_or(&root))
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(&blocked, "not a directory").unwrap_or_else(|e| panic!("{e}"));
            let generated = [Generated {
                path: "docs/schemas/scenario.schema.json".into(),
                contents: "{}\n".to_owned(),
            }];
            let message = match write(&root, &generated) {
                Ok(_) => panic!("wrote below the file {blocker}"),
                Err(e) => e.to_string(),
            };
            assert_eq!(
                message,
                format!(
                    "cannot write {}: {} is a file, not a directory",
                    root.join("docs/schemas/scenario.schema.json").display(),
                    blocked.display()
                )
            );
            let _ = std::fs::remove_dir_all(&root);
        }
    }
}
