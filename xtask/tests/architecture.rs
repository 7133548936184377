//! The architecture's invariants (docs/architecture.md) as tests: what each crate may depend on,
//! and no cycle between the top-level modules of any crate.
//!
//! Cargo already refuses a cycle between crates; inside a crate only a scan can see one. A module
//! here is a crate's top-level module (`src/<name>.rs` or `src/<name>/`): its submodules are its
//! own business, and a path that reaches another module (`crate::<name>`) is an edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The crates of the workspace, by directory.
const CRATES: &[&str] = &[
    "model",
    "reference",
    "check",
    "conformance",
    "cli",
    "xtask",
    "fuzz",
];

/// What each library crate may depend on (normal dependencies, by package name).
const ALLOWED: &[(&str, &[&str])] = &[
    // The spec's data: serde and a few data crates (strsim: a string distance for "did you
    // mean"), no runtime, no I/O.
    (
        "model",
        &["serde", "serde_json", "schemars", "thiserror", "strsim"],
    ),
    // The checker: the model and data crates; no tokio, no reference, no processes.
    (
        "check",
        &[
            "tep-model",
            "serde",
            "serde_json",
            "memchr",
            "thiserror",
            "schemars",
        ],
    ),
];

/// What no crate but the binary may depend on: the CLI's parser, its error type, its terminal
/// output and the allocator choice.
const BINARY_ONLY: &[&str] = &["clap", "anyhow", "indicatif", "anstream", "mimalloc"];

/// The names under `[dependencies]` (and target-specific dependencies) of a manifest.
fn dependencies(manifest: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]"
                || (line.starts_with("[target.") && line.ends_with(".dependencies]"));
            continue;
        }
        if !in_deps || line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some((name, _)) = line.split_once('=') {
            names.insert(name.trim().to_owned());
        }
    }
    names
}

fn manifest(krate: &str) -> String {
    std::fs::read_to_string(root().join(krate).join("Cargo.toml"))
        .unwrap_or_else(|e| panic!("{krate}/Cargo.toml: {e}"))
}

#[test]
fn the_model_and_the_checker_depend_only_on_data_crates() {
    for (krate, allowed) in ALLOWED {
        let deps = dependencies(&manifest(krate));
        let extra: Vec<&String> = deps
            .iter()
            .filter(|d| !allowed.contains(&d.as_str()))
            .collect();
        assert!(
            extra.is_empty(),
            "{krate}/Cargo.toml depends on {extra:?}; allowed: {allowed:?}"
        );
    }
}

/// The names under `[dev-dependencies]` (and target-specific dev-dependencies) of a manifest.
fn dev_dependencies(manifest: &str) -> BTreeSet<String> {
    let dev = manifest
        .replace("[dependencies]", "[normal]")
        .replace("[dev-dependencies]", "[dependencies]")
        .replace(".dependencies]", ".normal]")
        .replace(".dev-dependencies]", ".dependencies]");
    dependencies(&dev)
}

#[test]
fn the_checker_s_tests_build_no_other_tep_crate_but_the_model() {
    // Its tests check the corpus traces the conformance crate snapshots, as files; itself
    // again (with `testing`) is not another crate.
    let deps = dev_dependencies(&manifest("check"));
    let others: Vec<&String> = deps
        .iter()
        .filter(|d| d.starts_with("tep-") && *d != "tep-model" && *d != "tep-check")
        .collect();
    assert!(
        others.is_empty(),
        "check/Cargo.toml dev-depends on {others:?}"
    );
    assert!(deps.contains("proptest"), "the scan sees {deps:?}");
}

#[test]
fn the_reference_never_depends_on_its_judge() {
    let deps = dependencies(&manifest("reference"));
    for judge in ["tep-check", "tep-conformance"] {
        assert!(!deps.contains(judge), "reference/Cargo.toml names {judge}");
    }
}

#[test]
fn only_the_binary_has_the_binary_s_dependencies() {
    for krate in CRATES
        .iter()
        .filter(|k| !["cli", "xtask", "fuzz"].contains(k))
    {
        let deps = dependencies(&manifest(krate));
        for dep in BINARY_ONLY {
            assert!(!deps.contains(*dep), "{krate}/Cargo.toml depends on {dep}");
        }
    }
    let cli = dependencies(&manifest("cli"));
    assert!(cli.contains("clap") && cli.contains("mimalloc"), "{cli:?}");
}

/// Source without comments, string literals and `#[cfg(test)]` modules: what a `crate::` path
/// in it means is a real dependency.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if bytes[i] == b'"' {
            i += 1;
            while i < bytes.len() && bytes[i] != b'"' {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
        } else {
            out.push(bytes[i] as char);
            i += 1;
        }
    }
    out
}

/// The top-level modules a source text reaches through `crate::`, one `use crate::{a, b::c}`
/// group included.
fn reached(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // The group ends at its own closing brace, past any nested group.
            let mut open = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    open += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    open == 0
                })
                .map_or(group.len(), |(i, _)| i);
            // Top-level names of the group: those after `{` or a `,` at nesting depth 0.
            let mut depth = 0;
            let mut start = true;
            for (i, c) in group[..end].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if c.is_whitespace() => {}
                    _ if start && depth == 0 => {
                        out.insert(ident(&group[i..]));
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.insert(ident(rest));
        }
    }
    out.retain(|m| !m.is_empty() && m.chars().next().is_some_and(|c| c.is_ascii_lowercase()));
    out
}

/// A crate's module graph: each top-level module and the others it reaches.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for entry in entries {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap_or_else(|e| panic!("{e}"));
            let first = rel
                .components()
                .next()
                .map(|c| c.as_os_str().to_string_lossy());
            let Some(module) = first.map(|f| f.trim_end_matches(".rs").to_owned()) else {
                continue;
            };
            if module == "lib" || module == "main" {
                continue;
            }
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut reaches = reached(&code(&text));
            reaches.remove(&module);
            graph.entry(module).or_default().extend(reaches);
        }
    }
    graph
}

/// A cycle of the graph, if it has one (the modules along it, the first repeated at the end).
fn a_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        marks: &mut BTreeMap<String, Mark>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = path.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = path[from..].to_vec();
                cycle.push(node.to_owned());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.to_owned(), Mark::Open);
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, marks, path) {
                return Some(cycle);
            }
        }
        path.pop();
        marks.insert(node.to_owned(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, graph, &mut marks, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}

#[test]
fn no_crate_has_a_cycle_between_its_modules() {
    for krate in CRATES {
        let graph = module_graph(&root().join(krate).join("src"));
        if let Some(cycle) = a_cycle(&graph) {
            panic!(
                "{krate}: the modules {} reach each other through `crate::` paths; \
                 move what they share into a module both may use",
                cycle.join(" -> ")
            );
        }
    }
}

#[test]
fn the_scan_sees_every_form_of_a_crate_path_and_finds_a_cycle() {
    let text = "use crate::a::X;\nuse crate::{b, c::{D, E}, f as g};\nfn x() { crate::h::y(); }\n\
                // crate::comment\nconst S: &str = \"crate::string\";\n\
                #[cfg(test)]\nmod tests { use crate::test_only; }\n";
    let seen = reached(&code(text));
    let expected: BTreeSet<String> = ["a", "b", "c", "f", "h"].map(String::from).into();
    assert_eq!(seen, expected);
    let graph = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry((*a).to_owned())
                .or_default()
                .insert((*b).to_owned());
            g.entry((*b).to_owned()).or_default();
        }
        g
    };
    assert_eq!(a_cycle(&graph(&[("a", "b"), ("b", "c"), ("a", "c")])), None);
    assert_eq!(
        a_cycle(&graph(&[("a", "b"), ("b", "c"), ("c", "a")])),
        Some(["a", "b", "c", "a"].map(String::from).to_vec())
    );
}
