//! Key remapping: an ordered list of regex rewrites from a file's key to a Burn module path.

use regex::Regex;

/// An ordered table of `(pattern, replacement)` rewrites, each applied in turn.
#[derive(Debug, Clone)]
pub struct KeyRemap {
    rules: Vec<(Regex, &'static str)>,
}

impl KeyRemap {
    /// Builds a table from static rules. Panics on an invalid pattern: the tables are constants
    /// of the crate and a test exercises each.
    pub fn new(rules: &[(&'static str, &'static str)]) -> Self {
        let rules = rules.iter().map(|(p, r)| (Regex::new(p).expect("valid remap pattern"), *r)).collect();
        Self { rules }
    }

    /// The module path of a file key.
    pub fn apply(&self, key: &str) -> String {
        let mut k = key.to_string();
        for (re, rep) in &self.rules {
            k = re.replace_all(&k, *rep).into_owned();
        }
        k
    }
}
