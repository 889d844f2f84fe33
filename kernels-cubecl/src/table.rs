//! [`BlockTable`]: frame-granular attention rules, never a token-level mask.
//!
//! Queries and keys are sequences of frames (each a run of tokens; frames may differ in size).
//! Consecutive query frames with the same allowed key frames form one [`QueryGroup`]; a group
//! lists its allowed key frames as sorted, disjoint, non-adjacent ranges. Every token of a query
//! frame attends to every token of its allowed key frames and to nothing else. Building a table
//! costs O(query frames × key frames) at most; token offsets are prefix sums.
//!
//! A packed training sequence has the same frames on both sides (self-attention under
//! frame-level rules); a chunk forward over published segments has its own frames as queries
//! and the segments' frames followed by its own as keys, all allowed.

use std::ops::Range;

/// A run of consecutive query frames that may see the same key frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryGroup {
    /// Query frames of the group.
    pub frames: Range<usize>,
    /// Allowed key frames: sorted, disjoint, non-adjacent, non-empty ranges.
    pub keys: Vec<Range<usize>>,
}

/// Frame-level attention rules between a query sequence and a key sequence.
///
/// ```
/// use kernels_cubecl::{BlockTable, QueryGroup};
///
/// // Block-causal over blocks of 2 frames, 3 tokens each, plus a ragged last frame of 2 tokens.
/// let t = [3, 3, 3, 3, 2];
/// let table = BlockTable::from_rules(&t, &t, |q| 0..((q / 2 + 1) * 2).min(5));
/// assert_eq!(table.groups().len(), 3);
/// assert_eq!(table.groups()[1], QueryGroup { frames: 2..4, keys: vec![0..4] });
/// assert_eq!(table.query_tokens(&(4..5)), 12..14);
/// assert!(table.is_allowed(1, 1) && !table.is_allowed(1, 2));
/// assert_eq!(table.allowed_pairs(), 6 * 6 + 6 * 12 + 2 * 14);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockTable {
    q_offsets: Vec<usize>,
    k_offsets: Vec<usize>,
    groups: Vec<QueryGroup>,
}

fn offsets(sizes: &[usize]) -> Vec<usize> {
    std::iter::once(0)
        .chain(sizes.iter().scan(0, |acc, s| {
            *acc += s;
            Some(*acc)
        }))
        .collect()
}

/// Sorted key frames → maximal ranges.
fn ranges(frames: impl IntoIterator<Item = usize>) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    for f in frames {
        match out.last_mut() {
            Some(r) if r.end == f => r.end = f + 1,
            _ => out.push(f..f + 1),
        }
    }
    out
}

impl BlockTable {
    /// Rules given per query frame: `allowed(q)` yields the key frames query frame `q` may see,
    /// in increasing order. `q_tokens[i]` / `k_tokens[j]` are the token counts of the frames.
    pub fn from_rules<I: IntoIterator<Item = usize>>(q_tokens: &[usize], k_tokens: &[usize], mut allowed: impl FnMut(usize) -> I) -> Self {
        let mut groups: Vec<QueryGroup> = Vec::new();
        for q in 0..q_tokens.len() {
            let keys = ranges(allowed(q));
            debug_assert!(keys.iter().all(|r| r.end <= k_tokens.len()), "key frame out of range");
            match groups.last_mut() {
                Some(g) if g.keys == keys => g.frames.end = q + 1,
                _ => groups.push(QueryGroup { frames: q..q + 1, keys }),
            }
        }
        Self { q_offsets: offsets(q_tokens), k_offsets: offsets(k_tokens), groups }
    }

    /// Every query token sees every key token (a chunk forward over its whole context).
    pub fn full(q_tokens: &[usize], k_tokens: &[usize]) -> Self {
        let all = 0..k_tokens.len();
        Self::from_rules(q_tokens, k_tokens, |_| all.clone())
    }

    /// The rules of query tokens `tokens` alone, over the same keys: the table of one shard of a
    /// context-parallel forward, whose queries are a run of the whole forward's tokens. A query
    /// frame the run cuts keeps its rules (every token of a frame shares them) with fewer tokens.
    ///
    /// ```
    /// use kernels_cubecl::{BlockTable, QueryGroup};
    ///
    /// let t = [2, 2, 2, 2];
    /// let causal = BlockTable::from_rules(&t, &t, |q| 0..q + 1);
    /// let shard = causal.query_rows(4..8);
    /// assert_eq!((shard.frames(), shard.tokens()), ((2, 4), (4, 8)));
    /// assert_eq!(shard.groups()[0], QueryGroup { frames: 0..1, keys: vec![0..3] });
    /// // one query frame of 6 tokens (a chunk over its context), cut to tokens 2..4
    /// let full = BlockTable::full(&[6], &[4, 6]);
    /// assert_eq!(full.query_rows(2..4).tokens(), (2, 10));
    /// ```
    pub fn query_rows(&self, tokens: Range<usize>) -> Self {
        let (q_frames, _) = self.frames();
        // the query frames the run touches, and the tokens of each it keeps
        let kept: Vec<(usize, usize)> = (0..q_frames)
            .filter_map(|f| {
                let (start, end) = (self.q_offsets[f].max(tokens.start), self.q_offsets[f + 1].min(tokens.end));
                (start < end).then(|| (f, end - start))
            })
            .collect();
        let first = kept.first().map_or(0, |k| k.0);
        let groups = self
            .groups
            .iter()
            .filter_map(|g| {
                let inside: Vec<usize> = kept.iter().map(|k| k.0).filter(|f| g.frames.contains(f)).collect();
                let (&lo, &hi) = (inside.first()?, inside.last()?);
                Some(QueryGroup { frames: lo - first..hi + 1 - first, keys: g.keys.clone() })
            })
            .collect();
        let sizes: Vec<usize> = kept.iter().map(|k| k.1).collect();
        Self { q_offsets: offsets(&sizes), k_offsets: self.k_offsets.clone(), groups }
    }

    /// Query frames, key frames.
    pub fn frames(&self) -> (usize, usize) {
        (self.q_offsets.len() - 1, self.k_offsets.len() - 1)
    }

    /// Total query tokens, key tokens.
    pub fn tokens(&self) -> (usize, usize) {
        (*self.q_offsets.last().unwrap_or(&0), *self.k_offsets.last().unwrap_or(&0))
    }

    /// Panics unless `q_tokens` query and `k_tokens`, `v_tokens` key tokens are the table's.
    pub fn assert_tokens(&self, q_tokens: usize, k_tokens: usize, v_tokens: usize) {
        let (tq, tk) = self.tokens();
        assert!(
            (q_tokens, k_tokens, v_tokens) == (tq, tk, tk),
            "q/k/v have {q_tokens}/{k_tokens}/{v_tokens} tokens, the block table {tq} query and {tk} key tokens"
        );
    }

    /// The query groups, in query-frame order; together they cover every query frame.
    pub fn groups(&self) -> &[QueryGroup] {
        &self.groups
    }

    /// Token range of query frames `frames`.
    pub fn query_tokens(&self, frames: &Range<usize>) -> Range<usize> {
        self.q_offsets[frames.start]..self.q_offsets[frames.end]
    }

    /// Token range of key frames `frames`.
    pub fn key_tokens(&self, frames: &Range<usize>) -> Range<usize> {
        self.k_offsets[frames.start]..self.k_offsets[frames.end]
    }

    /// Allowed key token ranges of a group.
    pub fn group_key_tokens(&self, group: &QueryGroup) -> Vec<Range<usize>> {
        group.keys.iter().map(|r| self.key_tokens(r)).collect()
    }

    /// Whether query frame `q` may see key frame `k` (O(ranges) lookup).
    pub fn is_allowed(&self, q: usize, k: usize) -> bool {
        self.groups.iter().find(|g| g.frames.contains(&q)).is_some_and(|g| g.keys.iter().any(|r| r.contains(&k)))
    }

    /// Whether every query token sees every key token and there are keys (a chunk forward over
    /// its whole context, text cross-attention): dense attention needs no table at all.
    pub fn is_full(&self) -> bool {
        let (q, k) = self.tokens();
        k > 0 && self.allowed_pairs() == q * k
    }

    /// Query-token × key-token pairs that are allowed (the work a sparse kernel does).
    pub fn allowed_pairs(&self) -> usize {
        self.groups
            .iter()
            .map(|g| self.query_tokens(&g.frames).len() * self.group_key_tokens(g).iter().map(|r| r.len()).sum::<usize>())
            .sum()
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)] // key ranges of one range
mod tests {
    use super::*;

    #[test]
    fn groups_merge_equal_rules_and_ranges_merge_adjacent_frames() {
        // Block-causal over blocks of 2 frames, 3 tokens each, plus a ragged last frame.
        let t = [3, 3, 3, 3, 2];
        let table = BlockTable::from_rules(&t, &t, |q| 0..((q / 2 + 1) * 2).min(5));
        assert_eq!(table.groups().len(), 3);
        assert_eq!(table.groups()[1], QueryGroup { frames: 2..4, keys: vec![0..4] });
        assert_eq!(table.query_tokens(&(4..5)), 12..14);
        assert_eq!(table.group_key_tokens(&table.groups()[2]), vec![0..14]);
        assert!(table.is_allowed(1, 1) && !table.is_allowed(1, 2));
        assert_eq!(table.allowed_pairs(), 6 * 6 + 6 * 12 + 2 * 14);
        assert!(!table.is_full());
    }

    /// Full tables (chunk forwards, text cross-attention) and only they go to dense attention.
    #[test]
    fn full_tables_are_recognised_and_keyless_ones_are_not() {
        assert!(BlockTable::full(&[3, 3], &[2, 2, 5]).is_full());
        assert!(BlockTable::from_rules(&[3, 3], &[2, 2], |_| [0, 1]).is_full());
        assert!(!BlockTable::from_rules(&[3, 3], &[2, 2], |q| 0..q + 1).is_full());
        assert!(!BlockTable::full(&[3], &[]).is_full());
    }

    #[test]
    fn non_adjacent_key_frames_stay_separate_ranges() {
        let table = BlockTable::from_rules(&[4], &[4; 6], |_| [0, 1, 3, 5]);
        assert_eq!(table.groups()[0].keys, vec![0..2, 3..4, 5..6]);
        assert_eq!(table.tokens(), (4, 24));
    }
}
