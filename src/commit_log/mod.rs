//! The commit-log plug boundary (seed 001, issue 23): what a catalog needs from a log that several
//! processes commit through, whoever implements it. A log is a sequence of opaque batches at
//! positions 1, 2, ...; position 0 holds the adoption stamp that makes a catalog log-resident.
//! A committer offers a batch at the position the head it was prepared on implies (head + 1) and
//! either wins it or loses it to the batches that landed first, which it folds before it retries;
//! a reader tails the log. Envelopes, the race and truncation are the provider's: the catalog
//! never names a file or an object. The in-tree providers: `folder` (a folder of batch files) and
//! `bucket` (objects under an `s3://` prefix), both storing batches in `envelope`'s form.

pub mod bucket;
mod envelope;
pub mod folder;
mod gapless;

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::error::{Error, Result};

/// One batch of the log: its position and the catalog's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub seq: u64,
    pub bytes: Vec<u8>,
}

/// What an offer came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offered {
    /// The batch holds this position.
    Won(u64),
    /// Another batch held the position first: these are every batch from the raced position on,
    /// to fold before preparing again on the new head.
    Lost(Vec<Batch>),
}

/// The writing side of a log, for one open catalog.
pub trait Committer: Send + Sync {
    /// Offers `batch` at `seq`, the head it was prepared on plus one (at least 1).
    fn offer(&self, seq: u64, batch: &[u8]) -> Result<Offered>;
    /// The stamp at position 0, if the log was adopted.
    fn adoption(&self) -> Result<Option<Vec<u8>>>;
    /// Races `stamp` for position 0; returns the stamp that holds it (this one or an earlier one).
    fn adopt(&self, stamp: &[u8]) -> Result<Vec<u8>>;
    /// Waits until readers are served `seq`, at most `timeout`; whether they are.
    fn wait_served(&self, seq: u64, timeout: Duration) -> Result<bool>;
}

/// The reading side of a log.
pub trait LogReader: Send + Sync {
    /// The batches from `from` on (at least 1), in order and without gaps, at most `max`.
    fn tail(&self, from: u64, max: usize) -> Result<Vec<Batch>>;
    /// Removes the batches below `seq` (every reader starts from a checkpoint past them); the
    /// adoption stamp stays. Returns how many it removed.
    fn truncate_below(&self, seq: u64) -> Result<u64>;
    /// The stamp at position 0, if the log was adopted.
    fn adoption(&self) -> Result<Option<Vec<u8>>>;
    /// The first position the log still holds (1 unless it was truncated).
    fn start(&self) -> Result<u64>;
}

/// A commit log implementation: hands an open catalog the committer and reader of the log at
/// `location` (a path or URL, the provider's to interpret).
pub trait CommitLogProvider: fmt::Debug + Send + Sync + 'static {
    /// The name a log-resident catalog's stamp records and an open without it reports.
    fn name(&self) -> &str;
    fn committer(&self, location: &str) -> Result<Box<dyn Committer>>;
    fn reader(&self, location: &str) -> Result<Arc<dyn LogReader>>;
    /// The reader and (`writable`) the committer of one open catalog's link to the log. A
    /// provider whose committer and reader learn from each other (what position was won, where
    /// the log starts) hands out one object as both.
    fn link(&self, location: &str, writable: bool) -> Result<(Arc<dyn LogReader>, Option<Box<dyn Committer>>)> {
        let committer = if writable { Some(self.committer(location)?) } else { None };
        Ok((self.reader(location)?, committer))
    }
}

static REGISTERED: OnceLock<Arc<dyn CommitLogProvider>> = OnceLock::new();

/// Registers the process's commit log provider (the route of a host that cannot pass one per
/// open, such as the DuckDB extension's glue). One process, one provider: a second registration
/// is a configuration error.
pub fn register_commit_log(provider: Arc<dyn CommitLogProvider>) -> Result<()> {
    let name = provider.name().to_string();
    REGISTERED.set(provider).map_err(|_| {
        let first = REGISTERED.get().map(|p| p.name().to_string()).unwrap_or_default();
        Error::invalid(format!(
            "a commit log provider ({first}) is registered in this process already; {name} cannot be registered \
             too (one process, one provider)"
        ))
    })
}

/// The provider an open uses: its own when it carries one, else the process's registered one.
pub fn provider_for(own: Option<&Arc<dyn CommitLogProvider>>) -> Option<Arc<dyn CommitLogProvider>> {
    own.cloned().or_else(|| REGISTERED.get().cloned())
}

/// The provider of an open that names a log `location` or not: its own, else the process's
/// registered one, else (a location given) the in-tree log for it: the bucket log for an `s3://`
/// location, the folder log for a path.
pub fn provider_for_open(
    own: Option<&Arc<dyn CommitLogProvider>>,
    location: Option<&str>,
) -> Option<Arc<dyn CommitLogProvider>> {
    provider_for(own).or_else(|| {
        location.map(|l| match crate::io::object::is_object(l) {
            true => Arc::new(bucket::BucketLogProvider) as Arc<dyn CommitLogProvider>,
            false => Arc::new(folder::FolderLogProvider) as Arc<dyn CommitLogProvider>,
        })
    })
}
