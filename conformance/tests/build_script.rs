//! `build.rs` embeds the corpus; a corpus it cannot read fails the build instead of embedding
//! nothing (a `tep` with no scenarios would call every implementation conformant).

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
#[path = "../build.rs"]
mod build_script;

use std::path::{Path, PathBuf};

use build_script::{corpus_source, rerun_lines, scenario_files};

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tep-build-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_real_corpus_is_listed_in_file_name_order() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let names: Vec<String> = scenario_files(&dir)
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let embedded: Vec<&str> = tep_conformance::scenario::corpus_files()
        .iter()
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(names, embedded);
}

#[test]
fn a_missing_or_empty_corpus_fails() {
    let missing = std::env::temp_dir().join("tep-build-no-such-dir");
    let e = scenario_files(&missing).unwrap_err();
    assert!(
        e.starts_with(&format!("cannot read {}", missing.display())),
        "{e}"
    );
    let empty = temp_dir("empty");
    std::fs::write(empty.join("README.md"), "not a scenario").unwrap();
    let e = scenario_files(&empty).unwrap_err();
    assert_eq!(e, format!("{} has no *.json scenario", empty.display()));
}

#[test]
fn an_entry_that_cannot_be_embedded_fails() {
    let dir = temp_dir("dir-entry");
    std::fs::write(dir.join("a.json"), "{}").unwrap();
    std::fs::create_dir(dir.join("b.json")).unwrap();
    let e = scenario_files(&dir).unwrap_err();
    assert_eq!(e, format!("{} is not a file", dir.join("b.json").display()));
}

#[cfg(unix)]
#[test]
fn a_file_name_that_is_not_utf8_fails() {
    use std::os::unix::ffi::OsStrExt;
    let dir = temp_dir("non-utf8");
    let name = std::ffi::OsStr::from_bytes(b"bad-\xff.json");
    std::fs::write(dir.join(name), "{}").unwrap();
    let e = scenario_files(&dir).unwrap_err();
    assert!(e.ends_with("is not a UTF-8 file name"), "{e}");
}

/// Two checkouts may share a target directory, and cargo gives both one build directory for
/// this package: nothing the script writes may name a checkout's absolute path, or the second
/// checkout watches and embeds the first one's corpus (attack run, N12).
#[test]
fn the_generated_build_names_no_checkout() {
    let names = ["a.json".to_owned(), "b c.json".to_owned()];
    let source = corpus_source(&names);
    let here = env!("CARGO_MANIFEST_DIR");
    let lines = rerun_lines(&names);
    assert_eq!(
        lines,
        [
            "cargo:rerun-if-changed=scenarios",
            "cargo:rerun-if-changed=scenarios/a.json",
            "cargo:rerun-if-changed=scenarios/b c.json"
        ]
    );
    assert!(!source.contains(here), "{source}");
    assert!(
        source.contains(r#"("b c.json", include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/b c.json"))),"#),
        "{source}"
    );
}
