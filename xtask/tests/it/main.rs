//! The doc generator's and the workspace's integration tests, one binary (ripgrep's `tests/it`
//! shape):
//!
//! - `architecture`: the dependency rules of `docs/architecture.md` (crates, module and file
//!   cycles, old paths, the verdict policy, one test binary per crate);
//! - `docs`: `cargo xtask docs` prints, round-trips, and `--check` has teeth;
//! - `spec_coverage`: `spec/clauses.toml` against the spec and the catalog;
//! - `svg_layout`: the committed pictures are laid out for reading.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod architecture;
mod docs;
mod spec_coverage;
mod svg_layout;

/// The workspace's root directory.
fn root() -> std::path::PathBuf {
    xtask::repo_root()
}

/// A copy of what the generator reads and writes (the docs, the templates, the spec and the
/// READMEs whose counts are generated), in a directory of its own, to break on purpose.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("xtask-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["docs", "xtask/templates", "spec"] {
        copy_tree(&root().join(sub), &dir.join(sub));
    }
    for readme in [
        "README.md",
        "conformance/adapters/python/README.md",
        "conformance/adapters/typescript/README.md",
    ] {
        let to = dir.join(readme);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(root().join(readme), to).unwrap();
    }
    dir
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}
