//! Waiting for the next commit: returns as soon as a commit after a commit_seq lands (of some
//! tables only, when given), woken by the in-process commit broadcast; it looks at the durable
//! log before it sleeps, so a commit already there returns at once, and it gives up after its
//! timeout. The caller's interruption is polled while it sleeps.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::catalog::events::{CommitFeed, CATCH_UP_PAGE};
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
    let first = block_on(async {
        loop {
            if interrupted() {
                return Err(Error::interrupted());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            match tokio::time::timeout(left.min(INTERRUPT_POLL), feed.next()).await {
                Ok(Ok(commit)) if wait.wanted(&commit) => return Ok(Some(commit)),
                Ok(Ok(_)) => {} // another table's
                Ok(Err(e)) => return Err(e),
                Err(_) => {} // (the feed's next is cancel-safe: nothing is lost)
            }
        }
    })?;
    let Some(first) = first else {
        return Ok(vec![]);
    };
    let seq = first.seq;
    let mut found = vec![first];
    found.extend(catalog.commits_since(seq, CATCH_UP_PAGE)?.into_iter().filter(|c| wait.wanted(c)));
    Ok(found)
}
