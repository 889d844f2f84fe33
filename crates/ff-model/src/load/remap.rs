//! Key remapping: an ordered list of regex rewrites from a file's key to a Burn module path.

use regex::Regex;

/// An ordered table of `(pattern, replacement)` rewrites, each applied in turn.
#[derive(Debug, Clone)]
pub struct KeyRemap {
    rules: Vec<(Regex, String)>,
}

impl KeyRemap {
    /// Builds a table from static rules. Panics on an invalid pattern: the tables are constants
    /// of the crate and a test exercises each.
    pub fn new(rules: &[(&'static str, &'static str)]) -> Self {
        let rules = rules.iter().map(|(p, r)| (Regex::new(p).expect("valid remap pattern"), r.to_string())).collect();
        Self { rules }
    }

    /// Appends a rule made at run time (e.g. per layer index of a config). Panics on an invalid
    /// pattern, like [`KeyRemap::new`].
    pub fn with_rule(mut self, pattern: &str, replacement: impl Into<String>) -> Self {
        self.rules.push((Regex::new(pattern).expect("valid remap pattern"), replacement.into()));
        self
    }

    /// This table's rules followed by those of `next`.
    pub fn then(mut self, next: &KeyRemap) -> Self {
        self.rules.extend(next.rules.iter().cloned());
        self
    }

    /// The module path of a file key.
    pub fn apply(&self, key: &str) -> String {
        let mut k = key.to_string();
        for (re, rep) in &self.rules {
            k = re.replace_all(&k, rep.as_str()).into_owned();
        }
        k
    }
}
