//! "Did you mean": the one known name closest to a mistyped one, for error messages.

/// How alike two names must be (Jaro-Winkler similarity, 0 to 1) for the known one to be offered;
/// clap offers a flag from 0.7, which for short ids lets unrelated names through, so a little more.
const THRESHOLD: f64 = 0.8;

/// The known name most like `name`, if one is close enough to be a likely typo.
pub fn closest<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    known
        .into_iter()
        .filter(|k| *k != name)
        .map(|k| (strsim::jaro_winkler(name, k), k))
        .filter(|(score, _)| *score >= THRESHOLD)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// `" (did you mean `x`?)"` when a known name is close to `name`, else nothing: for the end of an
/// error message.
pub fn hint<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    closest(name, known)
        .map(|k| format!(" (did you mean `{k}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDS: &[&str] = &[
        "pre-deny-skips-body",
        "pre-allow-runs-body",
        "approval-comes-before-guards",
        "run-body-after-deny",
    ];

    #[test]
    fn a_typo_gets_the_nearest_name() {
        assert_eq!(
            closest("pre-deny-skip-body", IDS.iter().copied()),
            Some("pre-deny-skips-body")
        );
        assert_eq!(
            closest("run-body-after-dny", IDS.iter().copied()),
            Some("run-body-after-deny")
        );
        assert_eq!(
            hint("aproval-comes-before-guards", IDS.iter().copied()),
            " (did you mean `approval-comes-before-guards`?)"
        );
    }

    #[test]
    fn an_unrelated_name_gets_no_suggestion() {
        assert_eq!(closest("zzz", IDS.iter().copied()), None);
        assert_eq!(hint("timeout", IDS.iter().copied()), "");
        assert_eq!(closest("x", std::iter::empty()), None);
    }
}
