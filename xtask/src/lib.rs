//! Maintainer tasks. `cargo xtask docs` regenerates `docs/` from the stage graph, the invariant
//! catalog, the scenario corpus and the Rust types; `cargo xtask docs --check` fails when a
//! committed file has drifted. `cargo xtask dist` builds the wheel and the npm tarball into
//! `target/dist/`. `cargo xtask fuzz` runs the `tep-fuzz` crate in a release build.

pub mod coverage;
pub mod dist;
pub mod docs;
pub mod layered;
pub mod markdown;
pub mod pages;
pub mod readme;
pub mod svg;
pub mod versions_page;

/// The repository root (the workspace this xtask belongs to).
pub fn repo_root() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default()
}
