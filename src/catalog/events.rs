//! The commit feed for embedders: every commit after a cursor, in order, gapless. Live commits
//! arrive through the in-process broadcast (a sub-millisecond hint); whenever the broadcast
//! skipped something (a lagging receiver, or commits from before subscribing), the feed reads
//! the missing rows from the durable commit log. The log is the truth; the broadcast is speed.

use std::collections::VecDeque;

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

use super::open::{Catalog, CommitEvent};
use crate::error::{Error, Result};

/// Commit-log rows read at a time.
pub const CATCH_UP_PAGE: usize = 4096;

pub struct CommitFeed {
    catalog: Catalog,
    receiver: Receiver<CommitEvent>,
    /// The last commit_seq delivered.
    cursor: u64,
    backlog: VecDeque<CommitEvent>,
}

impl CommitFeed {
    /// A feed of every commit with `commit_seq > since`. It subscribes before reading the log,
    /// so no commit can fall between the two.
    pub fn new(catalog: &Catalog, since: u64) -> Self {
        let receiver = catalog.subscribe_commits();
        CommitFeed { catalog: catalog.clone(), receiver, cursor: since, backlog: VecDeque::new() }
    }

    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The next commit, waiting for one if needed.
    pub async fn next(&mut self) -> Result<CommitEvent> {
        loop {
            if let Some(e) = self.backlog.pop_front() {
                self.cursor = e.seq;
                return Ok(e);
            }
            // Anything already in the log comes first.
            self.catch_up()?;
            if !self.backlog.is_empty() {
                continue;
            }
            match self.receiver.recv().await {
                Ok(e) if e.seq <= self.cursor => continue, // delivered from the log already
                Ok(e) if e.seq == self.cursor + 1 => {
                    self.cursor = e.seq;
                    return Ok(e);
                }
                Ok(_) | Err(RecvError::Lagged(_)) => continue, // a gap: the log fills it
                Err(RecvError::Closed) => return Err(Error::catalog("the catalog was closed")),
            }
        }
    }

    fn catch_up(&mut self) -> Result<()> {
        let rows = self.catalog.commits_since(self.cursor, CATCH_UP_PAGE)?;
        self.backlog.extend(rows);
        Ok(())
    }
}
