//! Embeds the scenario corpus (`scenarios/*.json`) into the binary, so `tep` needs no files
//! beside it. The generated list is sorted by file name. A corpus that cannot be read fails the
//! build: an empty one would make a `tep` that runs no scenario and calls that conformant.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    // Relative to the package: the paths this build writes must name this checkout's corpus.
    // Absolute ones let a second checkout sharing the target directory reuse the first's
    // build (cargo keys a package's build directory by name and version, not by where it
    // is): its `rerun-if-changed` watched the first checkout's files and its `include_str!`
    // embedded them (attack run, N12).
    // Read when the script runs, not when it was compiled: a script compiled in another
    // checkout sharing the target directory would list that checkout's corpus.
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| ".".into());
    let dir = Path::new(&manifest).join(CORPUS_DIR);
    let files = match scenario_files(&dir) {
        Ok(files) => files,
        Err(message) => {
            eprintln!("error: cannot embed the scenario corpus: {message}");
            std::process::exit(1);
        }
    };
    let names: Vec<String> = files.into_iter().map(|(name, _)| name).collect();
    for line in rerun_lines(&names) {
        println!("{line}");
    }
    let target = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("corpus.rs");
    if let Err(e) = std::fs::write(&target, corpus_source(&names)) {
        eprintln!("error: cannot write {}: {e}", target.display());
        std::process::exit(1);
    }
}

/// The corpus directory, relative to the package.
pub(crate) const CORPUS_DIR: &str = "scenarios";

/// What cargo is told to watch: the directory (a file added or removed) and each file, by
/// paths relative to the package, which cargo resolves in the checkout it builds.
pub(crate) fn rerun_lines(names: &[String]) -> Vec<String> {
    std::iter::once(format!("cargo:rerun-if-changed={CORPUS_DIR}"))
        .chain(
            names
                .iter()
                .map(|name| format!("cargo:rerun-if-changed={CORPUS_DIR}/{name}")),
        )
        .collect()
}

/// The generated `corpus.rs`: each file included from the package being compiled
/// (`CARGO_MANIFEST_DIR` at compile time), never from a path fixed when the script ran.
pub(crate) fn corpus_source(names: &[String]) -> String {
    let mut out = String::from(
        "/// (file name, contents) of every scenario.\npub static CORPUS: &[(&str, &str)] = &[\n",
    );
    for name in names {
        let _ = writeln!(
            out,
            "    ({name:?}, include_str!(concat!(env!(\"CARGO_MANIFEST_DIR\"), {:?}))),",
            format!("/{CORPUS_DIR}/{name}")
        );
    }
    out.push_str("];\n");
    out
}

/// The `*.json` files of `dir` as (file name, path), sorted by name. Every problem is an error:
/// an unreadable directory or entry, a name that is not UTF-8, a file that cannot be opened, or
/// no scenario at all.
pub(crate) fn scenario_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot read an entry of {}: {e}", dir.display()))?
            .path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{} is not a UTF-8 file name", path.display()))?
            .to_owned();
        if !path.is_file() {
            return Err(format!("{} is not a file", path.display()));
        }
        std::fs::File::open(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        files.push((name, path));
    }
    if files.is_empty() {
        return Err(format!("{} has no *.json scenario", dir.display()));
    }
    files.sort();
    Ok(files)
}
