//! The work split of the CPU kernel: query tiles (rows of one query group, with the group's
//! allowed key token ranges) and key tiles, both in increasing token order.

use crate::BlockTable;
use std::ops::Range;

/// Query rows per tile (the M of the tile GEMMs; a multiple of `simd::LANES`, so that a tile's
/// padded score rows fit the scratch).
pub const QUERY_TILE: usize = 128;
/// Key rows per tile (the N of Q·Kᵀ, the K of P·V).
pub const KEY_TILE: usize = 512;

/// A query group's token rows and allowed key token ranges.
pub struct Group {
    pub rows: Range<usize>,
    pub keys: Vec<Range<usize>>,
}

/// The table's groups in token units; their rows partition the query tokens in order.
pub fn groups(table: &BlockTable) -> Vec<Group> {
    table.groups().iter().map(|g| Group { rows: table.query_tokens(&g.frames), keys: table.group_key_tokens(g) }).collect()
}

/// `range` cut into consecutive pieces of at most `size`.
pub fn split(range: Range<usize>, size: usize) -> impl Iterator<Item = Range<usize>> {
    range.clone().step_by(size).map(move |s| s..(s + size).min(range.end))
}

/// Query tiles in order: `(group index, rows)`; together they partition the query tokens.
pub fn query_tiles(groups: &[Group]) -> Vec<(usize, Range<usize>)> {
    groups.iter().enumerate().flat_map(|(g, group)| split(group.rows.clone(), QUERY_TILE).map(move |rows| (g, rows))).collect()
}

/// The key tiles of a group in order (each inside one allowed range).
pub fn key_tiles(group: &Group) -> impl Iterator<Item = Range<usize>> + '_ {
    group.keys.iter().flat_map(|r| split(r.clone(), KEY_TILE))
}

/// The parts of `keys` inside `tile`, in order.
pub fn clip<'a>(keys: &'a [Range<usize>], tile: &'a Range<usize>) -> impl Iterator<Item = Range<usize>> + 'a {
    keys.iter().map(|r| r.start.max(tile.start)..r.end.min(tile.end)).filter(|r| !r.is_empty())
}
