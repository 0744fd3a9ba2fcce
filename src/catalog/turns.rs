//! Per-table commit turns (docs/design/commit.md, "Many writers into one table").
//!
//! Committers of one table take turns from reading its head to handing their request to the
//! group committer, so concurrent commits queue instead of racing and redoing their metadata.
//! An append holds the turn only that long: once its request is queued it leaves its new pointer
//! as the table's *tentative* head and hands the turn on, and the next append builds on that
//! pointer while the first one is made durable. Its request is queued after, so it lands after
//! (in the same group commit or a later one), or fails its precondition with its predecessor and
//! is rebuilt. Every other change (deletes, rewrites, DDL, expiry) waits until no request of the
//! table is in flight, and then decides its conflicts on the committed head exactly as before;
//! so do appends once a request in flight failed (the pointers built on it are doomed).
//!
//! No committer waits for a table to settle while it holds a turn: the committers in flight
//! settle their tables one turn at a time, in any order.

use std::sync::{Condvar, Mutex, MutexGuard};

/// One table's turn.
#[derive(Default)]
pub struct Turn {
    state: Mutex<TurnState>,
    settled: Condvar,
}

#[derive(Default)]
pub struct TurnState {
    /// The metadata location of the newest request of the table queued and not yet answered.
    pub tentative: Option<String>,
    /// A request in flight failed: the pointers built on it are doomed, so nothing builds on the
    /// tentative head until the table has settled.
    broken: bool,
}

/// A held turn.
pub type Held<'a> = MutexGuard<'a, TurnState>;

impl TurnState {
    /// Whether an append may build on what is in flight (or nothing is).
    pub fn chainable(&self) -> bool {
        !self.broken
    }

    /// Whether nothing of the table is in flight.
    pub fn settled(&self) -> bool {
        self.tentative.is_none()
    }
}

impl Turn {
    /// Takes the turn, whatever is in flight.
    pub fn take(&self) -> Held<'_> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits, holding no turn, until nothing of the table is in flight.
    pub fn wait_settled(&self) {
        let held = self.take();
        drop(self.settled.wait_while(held, |s| !s.settled()).unwrap_or_else(|p| p.into_inner()));
    }

    /// The request that left `location` as the tentative head was answered (`landed` or not):
    /// unless a later request built on it since, nothing of the table is in flight any more.
    pub fn settle(&self, location: &str, landed: bool) {
        let mut state = self.take();
        if !landed {
            state.broken = true;
        }
        if state.tentative.as_deref() == Some(location) {
            *state = TurnState::default();
            self.settled.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn a_table_settles_when_its_newest_request_is_answered() {
        let turn = Arc::new(Turn::default());
        turn.take().tentative = Some("v1".into());
        turn.take().tentative = Some("v2".into()); // (an append built on v1)
        turn.settle("v1", true); // v1 landed: v2 still in flight
        assert_eq!(turn.take().tentative.as_deref(), Some("v2"));
        let waiter = {
            let turn = turn.clone();
            std::thread::spawn(move || turn.wait_settled())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!waiter.is_finished());
        turn.settle("v2", true);
        waiter.join().unwrap();
        assert!(turn.take().settled());
    }

    #[test]
    fn nothing_builds_on_a_chain_whose_request_failed_until_it_settles() {
        let turn = Turn::default();
        turn.take().tentative = Some("v1".into());
        turn.take().tentative = Some("v2".into());
        turn.settle("v1", false); // v1 failed: v2, built on it, is doomed
        assert!(!turn.take().chainable());
        turn.settle("v2", false);
        let state = turn.take();
        assert!(state.settled() && state.chainable());
    }
}
