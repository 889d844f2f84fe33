//! [`Queue`]: at most `workers` generations run at once, at most `queue` more wait in arrival
//! order, and any further request is refused ([`ServeError::Busy`], HTTP 503). A [`Ticket`] is a
//! place in it: waiting, then running; dropping it frees the place (a client that leaves while
//! queued, or a generation that ended) and wakes the waiters, who see their new positions.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::error::{Result, ServeError};

/// Running and waiting generations (see the module docs).
#[derive(Debug)]
pub struct Queue {
    workers: usize,
    queue: usize,
    state: Mutex<State>,
    changed: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct State {
    running: usize,
    waiting: VecDeque<u64>,
    next: u64,
}

/// How many generations run and wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Load {
    /// Generations running.
    pub running: usize,
    /// Generations waiting.
    pub waiting: usize,
    /// Generations that may run at once.
    pub workers: usize,
    /// Places in the queue.
    pub queue: usize,
}

/// A place in the [`Queue`].
#[derive(Debug)]
pub struct Ticket {
    id: u64,
    running: bool,
    queue: Arc<Queue>,
}

impl Queue {
    /// A queue running `workers` (at least 1) generations at once with `queue` places to wait.
    pub fn new(workers: usize, queue: usize) -> Arc<Self> {
        Arc::new(Self { workers: workers.max(1), queue, state: Mutex::default(), changed: watch::channel(0).0 })
    }

    /// Counts now.
    pub fn load(&self) -> Load {
        let state = self.lock();
        Load { running: state.running, waiting: state.waiting.len(), workers: self.workers, queue: self.queue }
    }

    /// Whether a new request would be refused now.
    pub fn check(&self) -> Result<()> {
        let load = self.load();
        match load.running + load.waiting >= self.workers + self.queue {
            true => Err(ServeError::Busy { running: load.running, waiting: load.waiting, queue: self.queue }),
            false => Ok(()),
        }
    }

    /// A waiting place at the back, or [`ServeError::Busy`] when every place is taken.
    pub fn join(self: &Arc<Self>) -> Result<Ticket> {
        let mut state = self.lock();
        if state.running + state.waiting.len() >= self.workers + self.queue {
            return Err(ServeError::Busy { running: state.running, waiting: state.waiting.len(), queue: self.queue });
        }
        let id = state.next;
        state.next += 1;
        state.waiting.push_back(id);
        drop(state);
        self.notify();
        Ok(Ticket { id, running: false, queue: self.clone() })
    }

    /// A receiver that wakes whenever a place is taken or freed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn notify(&self) {
        self.changed.send_modify(|version| *version += 1);
    }
}

impl Ticket {
    /// Starts running when this ticket is first in line and a worker is free; else returns its
    /// position in the queue (1: next).
    pub fn try_start(&mut self) -> Result<(), usize> {
        if self.running {
            return Ok(());
        }
        let mut state = self.queue.lock();
        let position = state.waiting.iter().position(|&id| id == self.id).expect("a waiting ticket is queued");
        if position > 0 || state.running >= self.queue.workers {
            return Err(position + 1);
        }
        state.waiting.pop_front();
        state.running += 1;
        self.running = true;
        drop(state);
        self.queue.notify();
        Ok(())
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        match self.running {
            true => state.running -= 1,
            false => state.waiting.retain(|&id| id != self.id),
        }
        drop(state);
        self.queue.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_taken_in_order_and_freed_on_drop() {
        let queue = Queue::new(1, 2);
        let mut a = queue.join().unwrap();
        let mut b = queue.join().unwrap();
        let mut c = queue.join().unwrap();
        assert!(matches!(queue.join(), Err(ServeError::Busy { running: 0, waiting: 3, queue: 2 })));
        assert_eq!(b.try_start(), Err(2), "b waits behind a");
        assert_eq!(a.try_start(), Ok(()));
        assert_eq!(b.try_start(), Err(1), "one worker: b waits for a to finish");
        assert_eq!(c.try_start(), Err(2));
        assert!(queue.check().is_err(), "one running and two waiting fill 1 + 2 places");
        drop(b);
        assert_eq!(c.try_start(), Err(1), "a queued client that leaves moves the others up");
        queue.check().unwrap();
        drop(a);
        assert_eq!(c.try_start(), Ok(()));
        assert_eq!(queue.load(), Load { running: 1, waiting: 0, workers: 1, queue: 2 });
        drop(c);
        assert_eq!(queue.load().running, 0);
    }

    #[test]
    fn waiters_are_woken_when_places_change() {
        let queue = Queue::new(1, 1);
        let mut rx = queue.subscribe();
        rx.borrow_and_update();
        let ticket = queue.join().unwrap();
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        drop(ticket);
        assert!(rx.has_changed().unwrap());
    }
}
