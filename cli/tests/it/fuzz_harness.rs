//! `tep fuzz --harness`: the harness options are `tep run --harness`'s, and a harness that fails
//! is an errored case, never a failure (small fake harnesses; the real one is in
//! docs/harness-profiles.md's "Fuzzing a shipped harness").

use crate::util::{code, stderr, stdout, temp_dir, tep, tep_in};

#[test]
fn the_harness_options_are_run_s_and_refuse_what_they_refuse() {
    let help = stdout(&tep(&["fuzz", "--help"]));
    for option in [
        "--harness <NAME>",
        "--harness-command <CMD>",
        "--harness-hooks",
        "--boot-timeout <SECS>",
        "--keep",
    ] {
        assert!(help.contains(option), "{option} in:\n{help}");
    }
    for (args, says) in [
        (
            &["fuzz", "--harness", "deepseek-harness", "--adapter", "x"][..],
            "cannot be used with",
        ),
        (
            &[
                "fuzz",
                "--harness",
                "deepseek-harness",
                "--mutant",
                "contexts-reversed",
            ][..],
            "cannot be used with",
        ),
        (
            &["fuzz", "--harness-command", "dsh"][..],
            "--harness <NAME>",
        ),
        (&["fuzz", "--keep"][..], "--harness <NAME>"),
        (&["fuzz", "--harness-hooks"][..], "--harness <NAME>"),
        (
            &[
                "fuzz",
                "--harness",
                "deepseek-harness",
                "--boot-timeout",
                "0",
            ][..],
            "out of range",
        ),
        (
            &["fuzz", "--harness", "no-such-harness"][..],
            "deepseek-harness",
        ),
    ] {
        let o = tep(args);
        assert_eq!(code(&o), 2, "{args:?}: {}{}", stdout(&o), stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
    }
}

/// Fake harnesses, each counting its starts in `starts`: one that exits at once, one that asks
/// the model for the batch and exits without sending its results.
#[cfg(unix)]
#[test]
fn a_harness_that_fails_is_an_errored_case_never_a_failure_nor_replayed() {
    let dir = temp_dir("fuzz-harness-fails");
    let starts = dir.join("starts");
    let count = format!("echo x >> \"{}\"", starts.display());
    let exits = format!("sh -c '{count}; echo no such model >&2; exit 7'");
    let asks = format!(
        r#"sh -c '{count}; exec python3 -c "
import json, os, urllib.request
url = os.environ[\"DEEPSEEK_SEARCH_BASE_URL\"] + \"/chat/completions\"
body = {{\"model\": \"m\", \"stream\": True, \"tools\": [{{\"type\": \"function\"}}], \"messages\": []}}
req = urllib.request.Request(url, json.dumps(body).encode(), {{\"content-type\": \"application/json\"}})
urllib.request.urlopen(req).read()
"'"#
    );
    for (fake, error) in [
        (exits, "exit status: 7"),
        (asks, "without sending the batch's results"),
    ] {
        let _ = std::fs::remove_file(&starts);
        let o = tep_in(
            &dir,
            &[
                "fuzz",
                "--harness",
                "deepseek-harness",
                "--harness-command",
                &fake,
                "--cases",
                "3",
                "--seed",
                "1",
                "--boot-timeout",
                "5",
            ],
        );
        let out = stdout(&o);
        assert!(out.contains("3 case(s) in"), "{out}{}", stderr(&o));
        assert!(out.contains("0 skipped, 3 errored"), "{out}");
        assert!(
            out.contains("first error: ") && out.contains(error),
            "{out}"
        );
        assert!(!out.contains("FAILED") && !out.contains("flaky"), "{out}");
        assert!(out.contains("nothing was tested"), "{out}");
        assert_eq!(code(&o), 1, "nothing was tested: {out}");
        // Each case ran once: an errored run is neither replayed nor shrunk.
        let started = std::fs::read_to_string(&starts).unwrap_or_default();
        assert_eq!(started.lines().count(), 3, "{out}");
    }
}

/// The `tep fuzz --harness` commands the docs give, as they are written but for the harness
/// (a fake that exits at once) and the number of cases: each parses and runs.
#[cfg(unix)]
#[test]
fn the_documented_fuzz_harness_commands_run() {
    let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    let mut commands = Vec::new();
    for page in ["harness-profiles.md", "conformance.md"] {
        let text = std::fs::read_to_string(docs.join(page)).unwrap();
        commands.extend(
            text.lines()
                .filter(|l| l.starts_with("tep fuzz --harness"))
                .map(|l| (page, l.split(" #").next().unwrap_or(l).to_owned())),
        );
    }
    assert!(commands.len() >= 3, "{commands:?}");
    let dir = temp_dir("fuzz-harness-docs");
    for (page, line) in commands {
        let mut words = shlex::split(&line).unwrap();
        assert_eq!(words.remove(0), "tep");
        for (option, value) in [("--harness-command", "sh -c 'exit 9'"), ("--cases", "2")] {
            let at = words.iter().position(|w| w == option);
            let at = at.unwrap_or_else(|| panic!("{page}: {line} has no {option}"));
            words[at + 1] = value.to_owned();
        }
        let args: Vec<&str> = words.iter().map(String::as_str).collect();
        let o = tep_in(&dir, &args);
        let out = stdout(&o);
        assert!(
            out.contains("2 case(s) in"),
            "{page}: {line}\n{out}{}",
            stderr(&o)
        );
        assert!(
            out.contains("0 skipped, 2 errored"),
            "{page}: {line}\n{out}"
        );
    }
}
