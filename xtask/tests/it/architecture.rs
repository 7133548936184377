//! The architecture's invariants (docs/architecture.md) as tests: what each crate may depend on,
//! and no cycle between the top-level modules of any crate.
//!
//! Cargo already refuses a cycle between crates; inside a crate only a scan can see one. A module
//! here is a crate's top-level module (`src/<name>.rs` or `src/<name>/`): its submodules are its
//! own business, and a path that reaches another module (`crate::<name>`) is an edge.

use crate::root;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The crates of the workspace, by directory.
const CRATES: &[&str] = &[
    "model",
    "reference",
    "check",
    "conformance",
    "harness",
    "cli",
    "xtask",
    "fuzz",
];

/// What each library crate may depend on (normal dependencies, by package name).
const ALLOWED: &[(&str, &[&str])] = &[
    // The spec's data: serde and a few data crates (strsim: a string distance for "did you
    // mean"; wide: safe vector types for the strict scan), no runtime, no I/O.
    (
        "model",
        &[
            "serde",
            "serde_json",
            "schemars",
            "thiserror",
            "strsim",
            "wide",
        ],
    ),
    // The checker: the model and data crates (simdutf8: UTF-8 checked with vector
    // instructions); no tokio, no reference, no processes.
    (
        "check",
        &[
            "tep-model",
            "serde",
            "serde_json",
            "memchr",
            "simdutf8",
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
fn the_suite_never_depends_on_the_harness_driver() {
    // tep-harness drives a harness with the suite's runner; the suite knows no harness.
    for krate in ["model", "reference", "check", "conformance"] {
        let deps = dependencies(&manifest(krate));
        assert!(
            !deps.contains("tep-harness"),
            "{krate}/Cargo.toml names tep-harness"
        );
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
    for path in rust_files_under(src) {
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
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut reaches = reached(&code(&text));
        reaches.remove(&module);
        graph.entry(module).or_default().extend(reaches);
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

/// The module path of a source file: `a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs`, `main.rs`
/// are the root.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Every path a source text names through `crate::`, `super::` or `self::`, groups expanded,
/// resolved against `module` (the file's own module path): the segments from the crate root.
fn paths_named(code: &str, module: &[String], is_mod_file: bool) -> Vec<Vec<String>> {
    fn ident(s: &str) -> &str {
        let end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len());
        &s[..end]
    }
    /// The segments after `prefix` in `rest`, expanding `{a, b::c}` groups.
    fn expand(prefix: Vec<String>, rest: &str, out: &mut Vec<Vec<String>>) {
        let rest = rest.trim_start();
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        expand(prefix.clone(), &group[start..i], out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(prefix.clone(), &group[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let name = ident(rest);
        if name.is_empty() || name == "self" {
            out.push(prefix);
            return;
        }
        let mut next = prefix;
        next.push(name.to_owned());
        match rest[name.len()..].strip_prefix("::") {
            Some(more) => expand(next, more, out),
            None => out.push(next),
        }
    }
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("::") {
        // The path's first segment: the identifier just before `::`.
        let start = code[..at]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |i| i + 1);
        if start > 1 && &bytes[start - 2..start] == b"::" {
            continue; // not the first segment
        }
        let mut base: Vec<String> = match &code[start..at] {
            "crate" => Vec::new(),
            "self" => module.to_vec(),
            "super" => {
                // `super` of `a/b.rs` (module a::b) is `a`; of `a/b/mod.rs` (a::b) also `a`.
                let _ = is_mod_file;
                module[..module.len().saturating_sub(1)].to_vec()
            }
            _ => continue,
        };
        let mut rest = &code[at + 2..];
        while let Some(more) = rest.strip_prefix("super::") {
            base.pop();
            rest = more;
        }
        expand(base, rest, &mut out);
    }
    out
}

/// The file that defines the deepest module on `path` (relative to `src`), if any but the root.
fn file_of(src: &Path, path: &[String]) -> Option<PathBuf> {
    let mut found = None;
    for depth in 1..=path.len() {
        let dir: PathBuf = path[..depth].iter().collect();
        let file = src.join(&dir).with_extension("rs");
        let module = src.join(&dir).join("mod.rs");
        if file.is_file() {
            found = Some(file);
        } else if module.is_file() {
            found = Some(module);
        } else {
            break;
        }
    }
    found
}

/// A crate's file graph: each source file and the files it imports from. A file declaring a
/// module contains it: its references down into its own submodules are containment, not
/// imports, and are left out (a child using its parent's items is an import).
fn file_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for path in rust_files_under(src) {
        let rel = path.strip_prefix(src).unwrap_or_else(|e| panic!("{e}"));
        let module = module_of(rel);
        let is_mod = rel.file_name().is_some_and(|n| n == "mod.rs");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let me = rel.display().to_string();
        let node = graph.entry(me.clone()).or_default();
        for named in paths_named(&code(&text), &module, is_mod) {
            if named.starts_with(&module) && named.len() >= module.len() {
                continue; // itself, or its own submodules
            }
            if let Some(file) = file_of(src, &named) {
                let target = file
                    .strip_prefix(src)
                    .unwrap_or_else(|e| panic!("{e}"))
                    .display()
                    .to_string();
                if target != me {
                    node.insert(target);
                }
            }
        }
    }
    graph
}

/// The groups of files that reach each other (strongly connected, two files or more), each
/// sorted, in order.
fn tangles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let reach = |from: &str| -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(n) = stack.pop() {
            for next in graph.get(&n).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&String, BTreeSet<String>> =
        graph.keys().map(|k| (k, reach(k))).collect();
    let mut out: Vec<Vec<String>> = Vec::new();
    for (file, from) in &reaches {
        let group: Vec<String> = from
            .iter()
            .filter(|other| reaches.get(other).is_some_and(|r| r.contains(*file)))
            .cloned()
            .collect();
        if group.len() > 1 && !out.contains(&group) {
            out.push(group);
        }
    }
    out
}

#[test]
fn no_crate_has_a_cycle_between_its_files() {
    let mut found = Vec::new();
    for krate in CRATES {
        let graph = file_graph(&root().join(krate).join("src"));
        for group in tangles(&graph) {
            found.push(format!("{krate}/src: {}", group.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other (move what they share into a file both may use):\n{}",
        found.join("\n")
    );
}

/// The files of the suite's reports (`report`, `html`, `baseline`), which read a run's outcome
/// and never the driver that produced it.
fn is_a_report_file(rel: &str) -> bool {
    ["report/", "html/", "html.rs", "baseline"]
        .iter()
        .any(|p| rel.starts_with(p))
        // A test module may drive a run to have a report to test.
        && !rel.ends_with("tests.rs")
}

/// The edges of a file graph from a report file into the driver.
fn reports_reaching_the_driver(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    graph
        .iter()
        .filter(|(file, _)| is_a_report_file(file))
        .flat_map(|(file, imports)| {
            imports
                .iter()
                .filter(|to| to.starts_with("runner/") || *to == "runner.rs")
                .map(move |to| format!("{file} imports {to}"))
        })
        .collect()
}

#[test]
fn the_suite_s_reports_import_the_outcome_not_the_driver() {
    let graph = file_graph(&root().join("conformance").join("src"));
    assert!(
        graph.contains_key("outcome.rs") || graph.contains_key("outcome/mod.rs"),
        "the run's outcome has a module of its own"
    );
    let found = reports_reaching_the_driver(&graph);
    assert!(
        found.is_empty(),
        "a report reads the run's outcome (`crate::outcome`), not drive mode:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_report_scan_sees_a_report_reaching_the_driver() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("report/json.rs", vec!["runner/mod.rs", "outcome.rs"]),
        ("html.rs", vec!["runner/mod.rs"]),
        ("baseline.rs", vec!["outcome.rs"]),
        ("html/tests.rs", vec!["runner/mod.rs"]),
        ("fuzz/mod.rs", vec!["runner/mod.rs"]),
    ]
    .into_iter()
    .map(|(f, to)| (f.to_owned(), to.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(
        reports_reaching_the_driver(&graph),
        [
            "html.rs imports runner/mod.rs",
            "report/json.rs imports runner/mod.rs"
        ]
    );
}

#[test]
fn the_file_scan_resolves_crate_super_and_self_paths_and_finds_a_cycle() {
    let dir = std::env::temp_dir().join(format!("tep-arch-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("a")).unwrap();
    let write = |rel: &str, text: &str| std::fs::write(src.join(rel), text).unwrap();
    write("lib.rs", "mod a;\nmod b;\nuse crate::a::X;\n");
    write("a/mod.rs", "mod c;\npub use c::Y;\nuse self::c::Z;\n");
    // A child reaching its parent and a sibling of the parent: imports.
    write("a/c.rs", "use super::X;\nuse crate::{b::{B, D}};\n");
    write("b.rs", "fn f() { super::a::c::g(); }\n");
    let graph = file_graph(&src);
    let edges = |f: &str| graph[f].iter().cloned().collect::<Vec<_>>();
    assert_eq!(
        edges("lib.rs"),
        Vec::<String>::new(),
        "containment is no import"
    );
    assert_eq!(edges("a/mod.rs"), Vec::<String>::new());
    assert_eq!(edges("a/c.rs"), ["a/mod.rs", "b.rs"]);
    assert_eq!(edges("b.rs"), ["a/c.rs"]);
    assert_eq!(
        a_cycle(&graph),
        Some(["a/c.rs", "b.rs", "a/c.rs"].map(String::from).to_vec())
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Paths that once re-exported another crate's types: an import names the crate that owns its
/// type, and tep-check's interior is private.
const OLD_PATHS: &[&str] = &[
    "tep_reference::graph",
    "tep_reference::result",
    "tep_reference::session",
    "tep_reference::vocabulary",
    "tep_reference::trace",
    "tep_reference::identity",
    "tep_reference::code_mode",
    "tep_reference::RUN_CODE",
    "tep_reference::pipeline::RUN_CODE",
    "tep_conformance::checker",
    "tep_conformance::invariants",
    "tep_conformance::catalog",
    "tep_conformance::observation",
    "tep_conformance::trace_io",
    "tep_conformance::mutation",
    "tep_conformance::teeth",
    "tep_conformance::rules",
    "tep_check::checker",
    "tep_check::catalog",
    "tep_check::trace_io",
    "tep_check::facts",
    "tep_check::rules",
];

/// How a caller would decide pass or fail itself: the policy is tep-check's (`Verdict`,
/// `Violation::fails`, `Level::fails`), written nowhere else.
const VERDICT_POLICY: &[&str] = &[
    "== Level::Must",
    "!= Level::Must",
    "== Level::Should",
    "!= Level::Should",
    "strict ||",
    "|| strict",
    "batches > 0",
    "batches == 0",
];

/// Every `.rs` file of the workspace under `dirs` (sources, tests, benches, examples).
fn rust_files(dirs: &[&str]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = dirs
        .iter()
        .flat_map(|d| rust_files_under(&root().join(d)))
        .collect();
    out.sort();
    out
}

/// Every `.rs` file under `dir`, sorted (none under `target` or `node_modules`).
fn rust_files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if name != "target" && name != "node_modules" {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The lines of `code` that contain one of `needles`, as `needle (line N)`.
fn mentions(code: &str, needles: &[&str]) -> Vec<String> {
    code.lines()
        .enumerate()
        .flat_map(|(i, line)| {
            needles
                .iter()
                .filter(move |n| line.contains(**n))
                .map(move |n| format!("{n} (line {})", i + 1))
        })
        .collect()
}

#[test]
fn no_import_takes_an_old_path_and_no_file_outside_check_decides_the_verdict() {
    let mut found = Vec::new();
    let everything = [
        "model",
        "reference",
        "check",
        "conformance",
        "cli",
        "xtask",
        "fuzz",
    ];
    for path in rust_files(&everything) {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        // Comments and strings may name anything; this test's own lists are data.
        if path.ends_with("xtask/tests/it/architecture.rs") {
            continue;
        }
        let code = code(&text);
        let rel = path
            .strip_prefix(root())
            .unwrap_or(&path)
            .display()
            .to_string();
        for hit in mentions(&code, OLD_PATHS) {
            found.push(format!("{rel}: old path {hit}"));
        }
        if !path.starts_with(root().join("check")) {
            for hit in mentions(&code, VERDICT_POLICY) {
                found.push(format!("{rel}: decides the verdict itself: {hit}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "import from the owning crate's root, and ask tep-check for the verdict \
         (CheckReport::verdict, Violation::fails):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_path_and_policy_scan_sees_what_it_forbids() {
    let text = "use tep_reference::graph::Revision;\n// tep_check::checker in a comment\n\
                let fails = strict || v.level == Level::Must;\nlet s = \"batches > 0\";\n";
    let code = code(text);
    assert_eq!(
        mentions(&code, OLD_PATHS),
        ["tep_reference::graph (line 1)"]
    );
    assert_eq!(
        mentions(&code, VERDICT_POLICY),
        ["== Level::Must (line 3)", "strict || (line 3)"]
    );
}

/// Test binaries that stand alone beside their crate's one binary, and why.
const ALONE: &[(&str, &str)] = &[
    (
        "conformance/tests/checkability.rs",
        "needs the crate's feature `checkability` and rewrites a generated table",
    ),
    (
        "fuzz/tests/checker_memory.rs",
        "measures the process's resident size: no other test may share its process",
    ),
];

/// The integration-test binaries of a crate's `tests/` directory, as paths from the root: each
/// `tests/*.rs` file and each `tests/<dir>/main.rs` (Cargo's two shapes).
fn test_binaries(krate: &str) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(root().join(krate).join("tests")) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() && path.join("main.rs").is_file() {
            out.push(format!("{krate}/tests/{name}/main.rs"));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(format!("{krate}/tests/{name}"));
        }
    }
    out.sort();
    out
}

/// The crates with more than one shared test binary, each with its binaries.
fn crates_with_several_binaries(
    binaries: impl Fn(&str) -> Vec<String>,
) -> Vec<(String, Vec<String>)> {
    CRATES
        .iter()
        .filter_map(|krate| {
            let shared: Vec<String> = binaries(krate)
                .into_iter()
                .filter(|b| !ALONE.iter().any(|(alone, _)| alone == b))
                .collect();
            (shared.len() > 1).then(|| ((*krate).to_owned(), shared))
        })
        .collect()
}

/// Each test binary links the crate and its dependencies again; tests that share helpers share
/// a binary (`tests/it/`), so each helper is defined once.
#[test]
fn each_crate_has_one_integration_test_binary() {
    let several = crates_with_several_binaries(test_binaries);
    assert!(
        several.is_empty(),
        "crates with more than one integration-test binary (move them into tests/it/ or list \
         one in ALONE with its reason): {several:?}"
    );
    for (alone, why) in ALONE {
        assert!(
            root().join(alone).is_file(),
            "{alone} ({why}) is gone: drop it from ALONE"
        );
    }
}

#[test]
fn the_binary_count_sees_a_second_binary() {
    let with_a_second = |krate: &str| {
        let mut binaries = test_binaries(krate);
        if krate == "harness" {
            binaries.push("harness/tests/another.rs".to_owned());
        }
        binaries
    };
    let several = crates_with_several_binaries(with_a_second);
    assert_eq!(several.len(), 1, "{several:?}");
    assert_eq!(several[0].0, "harness");
    assert!(test_binaries("harness").contains(&"harness/tests/it/main.rs".to_owned()));
    assert!(test_binaries("fuzz").contains(&"fuzz/tests/checker_memory.rs".to_owned()));
}
