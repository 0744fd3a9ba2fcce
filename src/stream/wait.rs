//! Waiting for the next commit: returns as soon as a commit after a commit_seq lands (of some
//! tables only, when given), woken by the in-process commit broadcast; it looks at the durable
//! log before it sleeps, so a commit already there returns at once, and it gives up after its
//! timeout. The caller's interruption is polled while it sleeps.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::catalog::consumers::ConsumerRecord;
use crate::catalog::events::{CommitFeed, CATCH_UP_PAGE};
use crate::catalog::names;
use crate::catalog::store::CommitRecord;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::runtime::block_on;

/// How often a sleeping wait looks at its caller's interruption.
const INTERRUPT_POLL: Duration = Duration::from_millis(20);

/// Which commits a wait is for.
pub struct WaitFor<'a> {
    /// Commits with a greater commit_seq.
    pub after: u64,
    /// Only the commits a consumer of these tables (uuids) is delivered (those with a snapshot)
    /// or stopped by (a drop); None: any commit.
    pub tables: Option<&'a HashSet<String>>,
    pub timeout: Duration,
    /// The consumer waited for, if any: a drop of it (by another transaction) ends the wait with
    /// an error naming it; a reset, consuming read or acknowledgement of it ends the wait too
    /// (with the wanted commits after `after` the log has, maybe none).
    pub consumer: Option<&'a ConsumerRecord>,
}

impl WaitFor<'_> {
    fn wanted(&self, commit: &CommitRecord) -> bool {
        match self.tables {
            None => true,
            Some(t) => {
                commit.table_uuid.as_ref().is_some_and(|u| t.contains(u))
                    && (commit.snapshot_id.is_some() || commit.operation == "drop_table")
            }
        }
    }
}

/// The wanted commits after `wait.after` once there is at least one (every wanted one the log
/// then holds, up to a page), or none after the timeout. `interrupted` is polled while waiting:
/// when it says so, the wait ends with an interruption error.
pub fn wait_for_commit(
    catalog: &Catalog,
    wait: &WaitFor<'_>,
    interrupted: &dyn Fn() -> bool,
) -> Result<Vec<CommitRecord>> {
    // Subscribed before the log is read (the feed does both): no commit falls between.
    let mut feed = CommitFeed::new(catalog, wait.after);
    let deadline = Instant::now() + wait.timeout;
    // As committed now (one this transaction created is not: nobody else can drop it).
    let committed = wait.consumer.and_then(|c| catalog.state().consumer(&c.name).cloned());
    let first = block_on(async {
        loop {
            if interrupted() {
                return Err(Error::interrupted());
            }
            if let Some(c) = &committed {
                match catalog.state().consumer(&c.name) {
                    None => {
                        return Err(Error::catalog(format!(
                            "consumer {} was dropped while this statement waited for its next commit",
                            names::shown(&c.name)
                        )))
                    }
                    Some(now) if now.generation != c.generation || now.cursor != c.cursor => return Ok(Moved),
                    Some(_) => {}
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(TimedOut);
            }
            match tokio::time::timeout(left.min(INTERRUPT_POLL), feed.next()).await {
                Ok(Ok(commit)) if wait.wanted(&commit) => return Ok(Landed(Box::new(commit))),
                Ok(Ok(_)) => {} // another table's
                Ok(Err(e)) => return Err(e),
                Err(_) => {} // (the feed's next is cancel-safe: nothing is lost)
            }
        }
    })?;
    let (mut found, seq) = match first {
        TimedOut => return Ok(vec![]),
        Landed(first) => {
            let seq = first.seq;
            (vec![*first], seq)
        }
        Moved => (vec![], wait.after),
    };
    found.extend(catalog.commits_since(seq, CATCH_UP_PAGE)?.into_iter().filter(|c| wait.wanted(c)));
    Ok(found)
}

/// How a wait ended.
enum Woken {
    TimedOut,
    Landed(Box<CommitRecord>),
    /// Another transaction moved the consumer (a reset, a consuming read, an acknowledgement).
    Moved,
}
use Woken::*;
