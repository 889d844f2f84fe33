//! Host-side flattening of a [`BlockTable`] into the integer buffers the kernels read.
//!
//! A [`TilePlan`] is a list of tiles and a CSR of token ranges. Tile `t` owns rows
//! `tiles[4t]..tiles[4t+1]` (one kernel unit per row, at most `rows` per tile) and visits the
//! token ranges `ranges[2r]..ranges[2r+1]` for `r` in `tiles[4t+2]..tiles[4t+3]`. Tiles never
//! cross a boundary of the rules, so every row of a tile visits the same ranges and a kernel
//! reads no mask. Built in O(groups × key frames + tiles), never per token pair.
//!
//! - [`TilePlan::queries`]: rows are query tokens, ranges are the allowed key tokens (forward, dQ).
//! - [`TilePlan::keys`]: rows are key tokens, ranges are the query tokens that see them (dK, dV).

use crate::BlockTable;
use std::ops::Range;

/// Tiles and their token ranges, flattened for a kernel (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TilePlan {
    /// `[tiles, 4]`: row start, row end, first range, end of ranges.
    pub tiles: Vec<u32>,
    /// `[ranges, 2]`: token start, token end (non-empty).
    pub ranges: Vec<u32>,
}

fn to_u32(x: usize) -> u32 {
    u32::try_from(x).expect("attention kernel: token index exceeds u32")
}

impl TilePlan {
    fn new() -> Self {
        Self { tiles: Vec::new(), ranges: Vec::new() }
    }

    /// Tiles of at most `rows` rows over `row_tokens`, each visiting `visit` (token ranges).
    fn push(&mut self, row_tokens: Range<usize>, visit: impl IntoIterator<Item = Range<usize>>, rows: usize) {
        let first = self.ranges.len() / 2;
        for r in visit.into_iter().filter(|r| !r.is_empty()) {
            self.ranges.extend([to_u32(r.start), to_u32(r.end)]);
        }
        let end = self.ranges.len() / 2;
        for start in row_tokens.clone().step_by(rows) {
            let stop = (start + rows).min(row_tokens.end);
            self.tiles.extend([to_u32(start), to_u32(stop), to_u32(first), to_u32(end)]);
        }
    }

    /// Number of tiles (the kernel grid's x extent).
    pub fn tile_count(&self) -> usize {
        self.tiles.len() / 4
    }

    /// Query tiles over their allowed key tokens.
    pub fn queries(table: &BlockTable, rows: usize) -> Self {
        let mut plan = Self::new();
        for group in table.groups() {
            plan.push(table.query_tokens(&group.frames), table.group_key_tokens(group), rows);
        }
        plan
    }

    /// Key tiles over the query tokens that may see them (the table transposed).
    pub fn keys(table: &BlockTable, rows: usize) -> Self {
        let (_, key_frames) = table.frames();
        // Per key frame, the query frames that see it, as sorted merged ranges.
        let mut seen_by: Vec<Vec<Range<usize>>> = vec![Vec::new(); key_frames];
        for group in table.groups() {
            for frame in group.keys.iter().flat_map(|r| r.clone()) {
                match seen_by[frame].last_mut() {
                    Some(last) if last.end == group.frames.start => last.end = group.frames.end,
                    _ => seen_by[frame].push(group.frames.clone()),
                }
            }
        }
        let mut plan = Self::new();
        let mut start = 0;
        for frame in 1..=key_frames {
            if frame == key_frames || seen_by[frame] != seen_by[start] {
                let queries = seen_by[start].iter().map(|f| table.query_tokens(f));
                plan.push(table.key_tokens(&(start..frame)), queries, rows);
                start = frame;
            }
        }
        plan
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expands a plan into per-row visited tokens, to compare with the table's rules.
    fn visits(plan: &TilePlan, row: usize) -> Vec<usize> {
        let t = plan.tiles.chunks(4).find(|t| (t[0] as usize..t[1] as usize).contains(&row)).expect("row not covered");
        (t[2] as usize..t[3] as usize).flat_map(|r| plan.ranges[2 * r] as usize..plan.ranges[2 * r + 1] as usize).collect()
    }

    fn frame_of(sizes: &[usize], token: usize) -> usize {
        let mut acc = 0;
        sizes
            .iter()
            .position(|s| {
                acc += s;
                token < acc
            })
            .unwrap()
    }

    #[test]
    fn plans_cover_exactly_the_allowed_pairs_with_ragged_frames() {
        let qt = [3, 5, 1, 4];
        let kt = [2, 0, 6, 3, 1];
        let rule = |q: usize| -> Vec<usize> { (0..5).filter(|k| (q + k) % 3 != 1 || *k == 4).collect() };
        let table = BlockTable::from_rules(&qt, &kt, rule);
        let (nq, nk) = table.tokens();
        let fwd = TilePlan::queries(&table, 2);
        let bwd = TilePlan::keys(&table, 4);
        assert!(fwd.tiles.chunks(4).all(|t| t[1] - t[0] <= 2) && bwd.tiles.chunks(4).all(|t| t[1] - t[0] <= 4));
        let mut pairs = 0;
        for q in 0..nq {
            let want: Vec<usize> = (0..nk).filter(|&k| table.is_allowed(frame_of(&qt, q), frame_of(&kt, k))).collect();
            pairs += want.len();
            assert_eq!(visits(&fwd, q), want, "query token {q}");
        }
        for k in 0..nk {
            let want: Vec<usize> = (0..nq).filter(|&q| table.is_allowed(frame_of(&qt, q), frame_of(&kt, k))).collect();
            assert_eq!(visits(&bwd, k), want, "key token {k}");
        }
        assert_eq!(pairs, table.allowed_pairs());
    }
}
