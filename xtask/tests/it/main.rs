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
