//! Fixed-capacity slots keyed by a host index (`index mod capacity`).

use super::Entry;
use crate::error::{BankName, Result, SchedError};

#[derive(Debug)]
pub(super) struct Ring<T> {
    name: BankName,
    slots: Vec<Option<(usize, T)>>,
    bytes: usize,
}

impl<T: Entry> Ring<T> {
    pub fn new(name: BankName, capacity: usize) -> Self {
        Self { name, slots: (0..capacity).map(|_| None).collect(), bytes: 0 }
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Stores `entry` for `index`, evicting whatever held its slot.
    pub fn publish(&mut self, index: usize, entry: T) -> Result<()> {
        let cap = self.slots.len();
        if cap == 0 {
            return Err(SchedError::OutOfRange { bank: self.name, index, size: 0 });
        }
        let slot = &mut self.slots[index % cap];
        if let Some((_, old)) = slot.take() {
            self.bytes -= old.bytes();
        }
        self.bytes += entry.bytes();
        *slot = Some((index, entry));
        Ok(())
    }

    pub fn get(&self, index: usize) -> Result<&T> {
        let cap = self.slots.len();
        if cap == 0 {
            return Err(SchedError::OutOfRange { bank: self.name, index, size: 0 });
        }
        match &self.slots[index % cap] {
            Some((i, entry)) if *i == index => Ok(entry),
            Some((holder, _)) if *holder > index => Err(SchedError::Evicted { bank: self.name, index, holder: *holder, capacity: cap }),
            _ => Err(SchedError::NotPublished { bank: self.name, index }),
        }
    }
}
