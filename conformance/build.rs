//! Embeds the scenario corpus (`scenarios/*.json`) into the binary, so `tep` needs no files
//! beside it. The generated list is sorted by file name. A corpus that cannot be read fails the
//! build: an empty one would make a `tep` that runs no scenario and calls that conformant.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    println!("cargo:rerun-if-changed={}", dir.display());
    let files = match scenario_files(&dir) {
        Ok(files) => files,
        Err(message) => {
            eprintln!("error: cannot embed the scenario corpus: {message}");
            std::process::exit(1);
        }
    };
    let mut out = String::from(
        "/// (file name, contents) of every scenario.\npub static CORPUS: &[(&str, &str)] = &[\n",
    );
    for (name, path) in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let _ = writeln!(
            out,
            "    ({name:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    out.push_str("];\n");
    let target = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("corpus.rs");
    if let Err(e) = std::fs::write(&target, out) {
        eprintln!("error: cannot write {}: {e}", target.display());
        std::process::exit(1);
    }
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
