//! Choosing scenarios: `--scenario GLOB` (repeatable), `--invariant ID`, `--capability NAME`,
//! `--exclude GLOB`, shared by `tep run` and `tep scenarios list`.
//!
//! A scenario is selected when it matches any `--scenario` glob (all do when there is none),
//! exercises any `--invariant` (when given), needs any `--capability` (when given), and matches
//! no `--exclude` glob. A filter that matches nothing is a usage error, named, so a typo never
//! turns into a run that tests less than it seems to.

use globset::{Glob, GlobMatcher};
use tep_model::trace::Capability;

use crate::scenario::Scenario;
use tep_check::invariants::InvariantId;

/// What to run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Scenario ids or globs (`deny-*`, `*-throws`); any may match.
    pub scenarios: Vec<String>,
    /// Only scenarios that exercise one of these invariants.
    pub invariants: Vec<InvariantId>,
    /// Only scenarios that need one of these capabilities.
    pub capabilities: Vec<Capability>,
    /// Scenario ids or globs to leave out.
    pub exclude: Vec<String>,
}

/// Why a selection is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    #[error("`{pattern}` is not a valid glob: {message}")]
    BadGlob { pattern: String, message: String },
    /// `hint`: a "did you mean" for the closest id, or empty.
    #[error("no scenario is called {0}{1} (run `tep scenarios list`)")]
    UnknownScenario(String, String),
    #[error("no scenario matches `{0}` (run `tep scenarios list`)")]
    NoMatch(String),
    /// `--exclude` that leaves nothing out: a typo would otherwise run what it meant to skip.
    /// `hint`: a "did you mean" for the closest id, or empty.
    #[error("--exclude `{0}` matches no scenario{1} (run `tep scenarios list`)")]
    ExcludesNothing(String, String),
    #[error("no scenario exercises {0} (run `tep invariants explain {0}`)")]
    NotExercised(InvariantId),
    #[error("no scenario needs the capability {0}")]
    NoScenarioNeeds(Capability),
    #[error("the selection is empty: no scenario passes every filter")]
    Empty,
}

impl Selection {
    /// Whether the selection is the whole corpus.
    pub fn is_everything(&self) -> bool {
        self == &Selection::default()
    }

    /// The selected scenarios, in corpus order.
    pub fn apply<'a>(&self, corpus: &'a [Scenario]) -> Result<Vec<&'a Scenario>, SelectError> {
        let include = matchers(&self.scenarios)?;
        let exclude = matchers(&self.exclude)?;
        for (pattern, matcher) in &include {
            if !corpus.iter().any(|s| matcher.is_match(&s.id)) {
                return Err(if is_literal(pattern) {
                    SelectError::UnknownScenario(
                        pattern.clone(),
                        tep_model::suggest::hint(pattern, corpus.iter().map(|s| s.id.as_str())),
                    )
                } else {
                    SelectError::NoMatch(pattern.clone())
                });
            }
        }
        if let Some((pattern, _)) = exclude
            .iter()
            .find(|(_, m)| !corpus.iter().any(|s| m.is_match(&s.id)))
        {
            let hint = if is_literal(pattern) {
                tep_model::suggest::hint(pattern, corpus.iter().map(|s| s.id.as_str()))
            } else {
                String::new()
            };
            return Err(SelectError::ExcludesNothing(pattern.clone(), hint));
        }
        if let Some(&inv) = self
            .invariants
            .iter()
            .find(|inv| !corpus.iter().any(|s| s.exercises.contains(inv)))
        {
            return Err(SelectError::NotExercised(inv));
        }
        if let Some(&cap) = self
            .capabilities
            .iter()
            .find(|cap| !corpus.iter().any(|s| s.requires.contains(cap)))
        {
            return Err(SelectError::NoScenarioNeeds(cap));
        }
        let selected: Vec<&Scenario> = corpus
            .iter()
            .filter(|s| include.is_empty() || include.iter().any(|(_, m)| m.is_match(&s.id)))
            .filter(|s| {
                self.invariants.is_empty()
                    || self.invariants.iter().any(|inv| s.exercises.contains(inv))
            })
            .filter(|s| {
                self.capabilities.is_empty()
                    || self.capabilities.iter().any(|cap| s.requires.contains(cap))
            })
            .filter(|s| !exclude.iter().any(|(_, m)| m.is_match(&s.id)))
            .collect();
        if selected.is_empty() {
            return Err(SelectError::Empty);
        }
        Ok(selected)
    }
}

fn is_literal(pattern: &str) -> bool {
    !pattern.contains(['*', '?', '[', '{'])
}

fn matchers(patterns: &[String]) -> Result<Vec<(String, GlobMatcher)>, SelectError> {
    patterns
        .iter()
        .map(|pattern| {
            Glob::new(pattern)
                .map(|glob| (pattern.clone(), glob.compile_matcher()))
                .map_err(|e| SelectError::BadGlob {
                    pattern: pattern.clone(),
                    message: e.kind().to_string(),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::corpus;

    fn ids(selection: &Selection) -> Result<Vec<String>, SelectError> {
        let corpus = corpus().unwrap_or_else(|e| panic!("{e}"));
        selection
            .apply(&corpus)
            .map(|v| v.iter().map(|s| s.id.clone()).collect())
    }

    #[test]
    fn globs_repeat_and_exclude() {
        let all = ids(&Selection::default()).unwrap_or_default();
        let throws = ids(&Selection {
            scenarios: vec!["*-throws".into()],
            ..Selection::default()
        })
        .unwrap_or_default();
        assert!(!throws.is_empty() && throws.len() < all.len(), "{throws:?}");
        assert!(throws.iter().all(|id| id.ends_with("-throws")));
        let both = ids(&Selection {
            scenarios: vec!["*-throws".into(), "allow-runs-body".into()],
            ..Selection::default()
        })
        .unwrap_or_default();
        assert_eq!(both.len(), throws.len() + 1);
        let fewer = ids(&Selection {
            scenarios: vec!["*-throws".into()],
            exclude: vec!["code-mode-*".into()],
            ..Selection::default()
        })
        .unwrap_or_default();
        assert!(!fewer.is_empty() && fewer.len() < throws.len(), "{fewer:?}");
        assert!(fewer.iter().all(|id| !id.starts_with("code-mode-")));
    }

    #[test]
    fn invariants_and_capabilities_filter_by_what_scenarios_declare() {
        let corpus = corpus().unwrap_or_else(|e| panic!("{e}"));
        let by_invariant = ids(&Selection {
            invariants: vec![InvariantId::DenySkipsBody],
            ..Selection::default()
        })
        .unwrap_or_default();
        let expected: Vec<String> = corpus
            .iter()
            .filter(|s| s.exercises.contains(&InvariantId::DenySkipsBody))
            .map(|s| s.id.clone())
            .collect();
        assert_eq!(by_invariant, expected);
        let by_capability = ids(&Selection {
            capabilities: vec![Capability::Approval],
            ..Selection::default()
        })
        .unwrap_or_default();
        assert!(!by_capability.is_empty());
        for id in &by_capability {
            let s = corpus.iter().find(|s| &s.id == id);
            assert!(s.is_some_and(|s| s.requires.contains(&Capability::Approval)));
        }
    }

    #[test]
    fn filters_that_match_nothing_are_named() {
        let unknown = ids(&Selection {
            scenarios: vec!["no-such-scenario".into()],
            ..Selection::default()
        });
        assert_eq!(
            unknown,
            Err(SelectError::UnknownScenario(
                "no-such-scenario".into(),
                String::new()
            ))
        );
        let typo = ids(&Selection {
            scenarios: vec!["pre-deny-skip-body".into()],
            ..Selection::default()
        })
        .map_err(|e| e.to_string());
        assert_eq!(
            typo,
            Err(
                "no scenario is called pre-deny-skip-body (did you mean `pre-deny-skips-body`?) \
                 (run `tep scenarios list`)"
                    .to_owned()
            )
        );
        let no_match = ids(&Selection {
            scenarios: vec!["zzz*".into()],
            ..Selection::default()
        });
        assert_eq!(no_match, Err(SelectError::NoMatch("zzz*".into())));
        let empty = ids(&Selection {
            scenarios: vec!["allow-runs-body".into()],
            exclude: vec!["allow-*".into()],
            ..Selection::default()
        });
        assert_eq!(empty, Err(SelectError::Empty));
        // An exclusion that leaves nothing out is a typo, named like the others.
        let excludes_nothing = ids(&Selection {
            exclude: vec!["pre-dny-*".into()],
            ..Selection::default()
        });
        assert_eq!(
            excludes_nothing,
            Err(SelectError::ExcludesNothing(
                "pre-dny-*".into(),
                String::new()
            ))
        );
        let typo = ids(&Selection {
            exclude: vec!["pre-deny-skip-body".into()],
            ..Selection::default()
        })
        .map_err(|e| e.to_string());
        assert_eq!(
            typo,
            Err(
                "--exclude `pre-deny-skip-body` matches no scenario (did you mean \
                 `pre-deny-skips-body`?) (run `tep scenarios list`)"
                    .to_owned()
            )
        );
        let bad = ids(&Selection {
            scenarios: vec!["[oops".into()],
            ..Selection::default()
        });
        assert!(matches!(bad, Err(SelectError::BadGlob { .. })), "{bad:?}");
    }
}
