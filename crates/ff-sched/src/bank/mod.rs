//! K/V banks with host-side indices: [`AnchorBank`] (clean anchor K/V per anchor frame, indexed
//! by anchor index) and [`StageBank`] (one history bank, e.g. FlashForward's stage-k bank: the
//! last `H` chunks' K/V as a ring, indexed by chunk). Both are fixed-capacity rings, so their
//! memory does not grow with the video: an entry lives in slot `index mod capacity`. Reading an
//! entry that was never published, or that a later entry has overwritten, is a typed error.
//!
//! Banks are generic over the entry ([`Entry`]); executors store `ff_model::dit::ChunkKv` and hand
//! the entries a forward reads (see [`Banks::segments`]) to the runner, which copies each into its
//! in-place K/V window once (`exec::dit`).

mod bytes;
mod ring;

pub use bytes::{KvDims, WorkerBanks, bank_plan};

use crate::error::{BankName, Result};
use crate::schedule::{Graph, KvKey};
use ring::Ring;

/// Something a bank can hold.
pub trait Entry {
    /// Memory held, in bytes.
    fn bytes(&self) -> usize;
}

/// Clean anchor K/V, one entry per anchor frame.
#[derive(Debug)]
pub struct AnchorBank<T> {
    ring: Ring<T>,
}

impl<T: Entry> AnchorBank<T> {
    /// An empty bank of `capacity` slots.
    pub fn new(capacity: usize) -> Self {
        Self { ring: Ring::new(BankName::Anchor, capacity) }
    }
    /// Stores the entry of anchor index `anchor`, evicting what held its slot (slot `anchor mod
    /// capacity`); a bank of no
    /// capacity fails with [`SchedError::OutOfRange`](crate::SchedError::OutOfRange).
    pub fn publish(&mut self, anchor: usize, entry: T) -> Result<()> {
        self.ring.publish(anchor, entry)
    }
    /// The entry of anchor index `anchor`; [`SchedError::NotPublished`](crate::SchedError::NotPublished)
    /// or [`SchedError::Evicted`](crate::SchedError::Evicted) when the slot does not hold it.
    pub fn get(&self, anchor: usize) -> Result<&T> {
        self.ring.get(anchor)
    }
    /// Memory held by the entries, in bytes.
    pub fn bytes(&self) -> usize {
        self.ring.bytes()
    }
    /// Slots (anchors) the bank holds at once.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }
}

/// One history bank: the K/V of the last `capacity` chunks.
#[derive(Debug)]
pub struct StageBank<T> {
    ring: Ring<T>,
}

impl<T: Entry> StageBank<T> {
    /// An empty history bank with id `bank` (named in errors) and `capacity` chunk slots.
    pub fn new(bank: usize, capacity: usize) -> Self {
        Self { ring: Ring::new(BankName::History(bank), capacity) }
    }
    /// Stores the entry of chunk `chunk`, evicting what held its slot (slot `chunk mod capacity`);
    /// a bank of no capacity fails with [`SchedError::OutOfRange`](crate::SchedError::OutOfRange).
    pub fn publish(&mut self, chunk: usize, entry: T) -> Result<()> {
        self.ring.publish(chunk, entry)
    }
    /// The entry of chunk `chunk`; [`SchedError::NotPublished`](crate::SchedError::NotPublished)
    /// or [`SchedError::Evicted`](crate::SchedError::Evicted) when the slot does not hold it.
    pub fn get(&self, chunk: usize) -> Result<&T> {
        self.ring.get(chunk)
    }
    /// Memory held by the entries, in bytes.
    pub fn bytes(&self) -> usize {
        self.ring.bytes()
    }
}

/// The banks one worker holds for a graph.
#[derive(Debug)]
pub struct Banks<T> {
    /// The anchor bank (no slots on a worker that reads no anchors).
    pub anchors: AnchorBank<T>,
    /// One history bank per graph bank id (`graph.history_banks`); those the worker does not
    /// use have no slots.
    pub history: Vec<StageBank<T>>,
}

impl<T: Entry> Banks<T> {
    /// The banks `plan` (from [`bank_plan`]) gives one worker of `graph`.
    pub fn new(graph: &Graph, plan: &WorkerBanks) -> Self {
        let history = (0..graph.history_banks)
            .map(|b| StageBank::new(b, if plan.history_banks.contains(&b) { graph.history_capacity } else { 0 }))
            .collect();
        Self { anchors: AnchorBank::new(plan.anchor_slots), history }
    }

    /// Stores the entry of `key` in its bank.
    pub fn publish(&mut self, key: KvKey, entry: T) -> Result<()> {
        match key {
            KvKey::Anchor(m) => self.anchors.publish(m, entry),
            KvKey::Chunk { bank, chunk } => self.history[bank].publish(chunk, entry),
        }
    }

    /// The entry of `key`, or its bank's typed error (see [`AnchorBank::get`]).
    pub fn get(&self, key: KvKey) -> Result<&T> {
        match key {
            KvKey::Anchor(m) => self.anchors.get(m),
            KvKey::Chunk { bank, chunk } => self.history[bank].get(chunk),
        }
    }

    /// Whether `key` is present (published and not evicted).
    pub fn has(&self, key: KvKey) -> bool {
        self.get(key).is_ok()
    }

    /// The entries of `keys`, in order (what a forward reads), or the first missing one's error.
    pub fn segments(&self, keys: &[KvKey]) -> Result<Vec<&T>> {
        keys.iter().map(|&k| self.get(k)).collect()
    }

    /// Memory held by all entries.
    pub fn bytes(&self) -> usize {
        self.anchors.bytes() + self.history.iter().map(StageBank::bytes).sum::<usize>()
    }
}

#[cfg(test)]
mod tests;
