//! Key remapping: an ordered list of regex rewrites from a file's key to a Burn module path.

use regex::Regex;

/// An ordered table of `(pattern, replacement)` rewrites, each applied in turn, plus the file
/// keys that are tied duplicates of another key (e.g. transformers' `encoder.embed_tokens.weight`
/// beside `shared.weight`): such a key may map to a module path another key already fills, and is
/// then dropped.
#[derive(Debug, Clone)]
pub struct KeyRemap {
    rules: Vec<(Regex, String)>,
    tied: Vec<Regex>,
}

impl KeyRemap {
    /// Builds a table from static rules. Panics on an invalid pattern: the tables are constants
    /// of the crate and a test exercises each.
    pub fn new(rules: &[(&'static str, &'static str)]) -> Self {
        let rules = rules.iter().map(|(p, r)| (Regex::new(p).expect("valid remap pattern"), r.to_string())).collect();
        Self { rules, tied: Vec::new() }
    }

    /// Marks file keys matching `pattern` as tied duplicates (see the type's doc).
    pub fn with_tied(mut self, pattern: &str) -> Self {
        self.tied.push(Regex::new(pattern).expect("valid tied-key pattern"));
        self
    }

    /// Whether a file key is a tied duplicate.
    pub fn is_tied(&self, key: &str) -> bool {
        self.tied.iter().any(|re| re.is_match(key))
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
        self.tied.extend(next.tied.iter().cloned());
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
