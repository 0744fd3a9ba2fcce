//! Committing through a commit log (issue 23, docs/design/commit-log.md). The log is the arbiter
//! and the durable record: a commit is a batch won at a position. The catalog file is every
//! process's fold of the log (opened by all of them at once, redb's multi-writer mode), with the
//! last folded position (`log_position`) as its checkpoint.
//!
//! One commit: prepare the group on the file as it is (position h) in a write transaction that is
//! then aborted, which yields each request's result exactly as a fold on h will; offer the
//! requests that passed as a batch at h + 1; won, fold it (unless another process already did);
//! lost, fold the batches that won and prepare again on the new head, where a request whose
//! premise changed fails its check (a conflict: the transaction rebases its appends or reports a
//! retryable conflict, as it does in one process).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redb::{ReadableTable, WriteTransaction};

use super::commit::{apply_requests, CommitRequest};
use super::log_batch::{BatchKind, LogBatch};
use super::store::{CommitRecord, Store};
use super::tables::{COMMIT_LOG, COUNTERS, LOG_HEAD_ID, LOG_POSITION, META, NEXT_SNAPSHOT_ID};
use crate::commit_log::{Batch, Committer, LogReader, Offered};
use crate::error::{Error, Result};

/// How often one commit may lose its position before it gives up (each loss folds the winners,
/// so only a stream of other processes' commits makes it lose again).
const MAX_LOST: usize = 256;
/// Snapshot ids reserved at a time: the first block small (one process's ids stay 1, 2, 3, ...
/// across a few reopens), then doubling up to the last.
const ID_BLOCKS: [i64; 4] = [16, 64, 256, 1024];
/// Folds read this many batches at a time.
const FOLD_CHUNK: usize = 256;
/// The log keeps this many positions below the catalog file's checkpoint (for inspection and
/// for processes that are a little behind), and is truncated in steps of this many.
pub const LOG_RETAIN: u64 = 1024;

/// A catalog's link to its commit log.
pub(crate) struct LogLink {
    pub provider: String,
    pub location: String,
    /// None for a read-only attach.
    committer: Option<Box<dyn Committer>>,
    reader: Arc<dyn LogReader>,
    /// How often the catalog looks for other processes' commits.
    pub poll: Duration,
    /// The log position the in-memory state shows.
    pub position: AtomicU64,
    /// Snapshot ids reserved for this process: the next one and the end of the block, and how
    /// many blocks it took.
    ids: Mutex<(i64, i64, usize)>,
    /// Where this process last truncated the log.
    truncated_below: AtomicU64,
    /// Offers this process won and lost (a lost one folds the winners and is offered again).
    won: AtomicU64,
    lost: AtomicU64,
    /// This process's appends that landed built on another append still in flight (`chains`).
    pub chained: AtomicU64,
    /// This process won a position that calls for a checkpoint (a bucket log's): the poll
    /// writes one (`take_checkpoint_due`), off the commit's path.
    checkpoint_due: AtomicBool,
    /// This process won the position half-way past a multiple: the poll writes a checkpoint if
    /// none covers that multiple (`take_checkpoint_due`).
    checkpoint_missing: AtomicU64,
    /// When this process last read the log's head (a catch-up or an offer): a poll soon after
    /// has nothing to learn (`looked_within`).
    looked: Mutex<Option<std::time::Instant>>,
}

/// A log-resident catalog's commit log as one process sees it (`skade_commit_log`).
#[derive(Debug, Clone)]
pub struct LogStatus {
    pub provider: String,
    pub location: String,
    /// The last position folded into the catalog file (its checkpoint).
    pub checkpoint: u64,
    /// The first and last positions the log holds (0, 0 when it holds none).
    pub start: u64,
    pub end: u64,
    /// Offers of this process won and lost since it attached.
    pub won: u64,
    pub lost: u64,
    pub poll_ms: u64,
    /// This process's appends that landed built on another append still in flight.
    pub chained: u64,
}

/// What a commit through the log came to.
pub(crate) struct Landed {
    /// One result per request of the group.
    pub results: Vec<Result<Vec<CommitRecord>>>,
    /// The position the group was prepared on, and the one it won (None: nothing to offer,
    /// every request failed its checks).
    pub prepared_on: u64,
    pub won: Option<u64>,
    /// Whether this commit's fold was the file's next step from `prepared_on` (no other
    /// process folded anything in between): the in-memory state then needs only this group.
    pub folded_alone: bool,
}

impl LogLink {
    pub fn new(
        provider: &str,
        location: &str,
        committer: Option<Box<dyn Committer>>,
        reader: Arc<dyn LogReader>,
        poll: Duration,
        position: u64,
    ) -> LogLink {
        LogLink {
            provider: provider.to_string(),
            location: location.to_string(),
            committer,
            reader,
            poll,
            position: AtomicU64::new(position),
            ids: Mutex::new((0, 0, 0)),
            truncated_below: AtomicU64::new(0),
            won: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            chained: AtomicU64::new(0),
            checkpoint_due: AtomicBool::new(false),
            checkpoint_missing: AtomicU64::new(0),
            looked: Mutex::new(None),
        }
    }

    /// Notes that the file holds every position the log held at `at` (a look that began then
    /// and whose batches are folded).
    fn looked_at(&self, at: std::time::Instant) {
        let mut looked = self.looked.lock().unwrap_or_else(|p| p.into_inner());
        if looked.is_none_or(|l| l < at) {
            *looked = Some(at);
        }
    }

    /// How long ago the file was last known to hold every position of the log (a catch-up that
    /// reached the head, or an offer and its fold): a committing host's own commits keep it as
    /// fresh as its poll would.
    pub fn looked_ago(&self) -> Option<Duration> {
        self.looked.lock().unwrap_or_else(|p| p.into_inner()).map(|at| at.elapsed())
    }

    fn committer(&self) -> Result<&dyn Committer> {
        self.committer.as_deref().ok_or_else(|| Error::permission("a read-only attach does not commit"))
    }

    /// Commits `group` through the log (called by the group-commit leader).
    pub fn commit(&self, store: &Store, group: &[CommitRequest]) -> Result<Landed> {
        for _ in 0..MAX_LOST {
            let (h, committed_at_us, results) = store.write_aborted(|tx| {
                let h = position(tx)?;
                // (commit times never go back along commit_seq, whichever process's clock)
                let now = chrono::Utc::now().timestamp_micros() + crate::failpoint::clock_offset_us();
                let committed_at_us = now.max(last_committed_at(tx)?);
                Ok((h, committed_at_us, apply_requests(tx, group, committed_at_us)?.1))
            })?;
            let passing: Vec<CommitRequest> =
                group.iter().zip(&results).filter(|(_, r)| r.is_ok()).map(|(q, _)| q.clone()).collect();
            if passing.is_empty() {
                return Ok(Landed { results, prepared_on: h, won: None, folded_alone: false });
            }
            let batch = LogBatch::new(BatchKind::Commit { committed_at_us, requests: passing });
            // (when the offer was made: a win is the head then, a loss reads the positions up to it)
            let asked = std::time::Instant::now();
            match self.offer(h + 1, &batch)? {
                None => {
                    // Landed: the batch is the durable record. A fold that fails here (a full disk)
                    // is done by the next commit or poll, of this process or another.
                    let folded = fold_into(store, [(h + 1, &batch)], &self.location);
                    match &folded {
                        Ok(_) => self.looked_at(asked),
                        Err(e) => {
                            eprintln!(
                                "skade: folding position {} of the commit log {} failed: {e}",
                                h + 1,
                                self.location
                            )
                        }
                    }
                    crate::failpoint::hit("after_log_fold");
                    let folded_alone = folded.is_ok_and(|n| n == 1);
                    return Ok(Landed { results, prepared_on: h, won: Some(h + 1), folded_alone });
                }
                Some(winners) => {
                    self.fold_batches(store, &winners)?;
                    self.looked_at(asked);
                }
            }
        }
        Err(Error::conflict(format!(
            "transaction conflict: {MAX_LOST} commits of other processes landed in the commit log {} while this one \
             was being offered; nothing was committed, retry the transaction",
            self.location
        )))
    }

    /// Offers `batch` at `seq`: None when it won, else the batches that hold the positions from
    /// `seq` on. An offer that failed with an unknown outcome (an I/O error after the batch may
    /// have been published) is settled by reading the position back.
    fn offer(&self, seq: u64, batch: &LogBatch) -> Result<Option<Vec<Batch>>> {
        let bytes = batch.encode()?;
        let commit = matches!(batch.kind, BatchKind::Commit { .. });
        if commit {
            crate::failpoint::hit("before_log_offer");
        }
        let offered = self.committer()?.offer(seq, &bytes);
        if commit {
            crate::failpoint::hit("after_log_offer");
        }
        let ours = |held: &[Batch]| {
            held.first()
                .is_some_and(|b| LogBatch::decode(&b.bytes, seq, &self.location).is_ok_and(|b| b.id == batch.id))
        };
        let outcome = match offered {
            Ok(Offered::Won(_)) => Ok(None),
            // a provider that retried its conditional create after the first one landed reports
            // its own batch as the winner (an S3 retry answered 412, an NFS link retransmitted)
            Ok(Offered::Lost(held)) if ours(&held) => Ok(None),
            Ok(Offered::Lost(winners)) => Ok(Some(winners)),
            // (only an I/O error can come after the batch was published: others are refusals)
            Err(e) if e.kind == crate::error::ErrorKind::Io => match self.settle(seq, e) {
                // ours, read back: a win unless truncation removed the position before it landed
                // (a PUT that stalled long), which the provider's own look could not tell
                Ok(held) if ours(&held) => self.reader.start().and_then(|start| match start <= seq {
                    true => Ok(None),
                    false => Err(Error::conflict(format!(
                        "position {seq} of the commit log {} was truncated before this commit's batch landed there \
                         (the log starts at {start}): nothing was committed, retry the transaction",
                        self.location
                    ))),
                }),
                Ok(held) => Ok(Some(held)),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        if outcome.as_ref().is_ok_and(|o| o.is_none()) && self.in_bucket() {
            let every = super::checkpoint::every();
            // the winner of a multiple writes one; the winner half-way to the next looks whether
            // that happened (its writer may have exited first), and writes one if not
            if seq % every == 0 {
                self.checkpoint_due.store(true, Ordering::Release);
            } else if seq % every == every / 2 && seq > every {
                self.checkpoint_missing.store(seq - every / 2, Ordering::Release);
            }
        }
        match &outcome {
            Ok(None) => self.won.fetch_add(1, Ordering::Relaxed),
            Ok(Some(_)) => self.lost.fetch_add(1, Ordering::Relaxed),
            Err(_) => 0,
        };
        outcome
    }

    /// After an offer at `seq` failed with an unknown outcome: the batches from `seq` on, read
    /// back (a few tries), or the offer's error when nothing holds `seq` (nothing landed). When
    /// the position cannot be read back either, the outcome stays unknown, and the error says so.
    fn settle(&self, seq: u64, offered: Error) -> Result<Vec<Batch>> {
        let mut last = None;
        for attempt in 0..5u32 {
            match self.reader.tail(seq, usize::MAX) {
                Ok(held) if held.is_empty() => return Err(offered),
                Ok(held) => return Ok(held),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(20 << attempt));
        }
        Err(Error::io(format!(
            "the commit's outcome is unknown: offering it at position {seq} of the commit log {} failed ({}), and \
             the position cannot be read back ({}); it may have landed: look before retrying it",
            self.location,
            offered.message,
            last.map(|e| e.message).unwrap_or_default()
        )))
    }

    /// Folds batches another process won (read from the log) into the file.
    fn fold_batches(&self, store: &Store, batches: &[Batch]) -> Result<u64> {
        let decoded = batches
            .iter()
            .map(|b| Ok((b.seq, LogBatch::decode(&b.bytes, b.seq, &self.location)?)))
            .collect::<Result<Vec<_>>>()?;
        fold_into(store, decoded.iter().map(|(s, b)| (*s, b)), &self.location)
    }

    /// Folds into the file whatever the log holds past its checkpoint (other hosts' commits, or
    /// a commit whose process died between winning its position and folding it). Returns how
    /// many positions it folded.
    pub fn catch_up(&self, store: &Store) -> Result<u64> {
        let mut folded = 0;
        loop {
            let from = store.log_position()? + 1;
            let asked = std::time::Instant::now();
            let batches = match self.reader.tail(from, FOLD_CHUNK) {
                Ok(batches) => batches,
                // behind the log's truncation (a host away for a while): its newest checkpoint,
                // then what follows
                Err(e) if self.in_bucket() && self.reader.start().is_ok_and(|start| from < start) => {
                    let start = self.reader.start()?;
                    match super::checkpoint::restore_newest(store, &self.location, start - 1)? {
                        Some(_) => continue,
                        None => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            };
            if batches.is_empty() {
                self.looked_at(asked);
                return Ok(folded);
            }
            folded += self.fold_batches(store, &batches)?;
        }
    }

    /// The next snapshot id of this process's reserved block, reserving a block through the log
    /// when it is used up. (Called by a committing transaction before its commit, alongside the
    /// group-commit leader: a reservation and a commit of one process may race for a position,
    /// and the loser folds the winner as it would another process's.)
    pub fn next_snapshot_id(&self, store: &Store) -> Result<i64> {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if ids.0 >= ids.1 {
            let count = ID_BLOCKS[ids.2.min(ID_BLOCKS.len() - 1)];
            let first = self.reserve(store, count)?;
            *ids = (first, first + count, ids.2 + 1);
        }
        ids.0 += 1;
        Ok(ids.0 - 1)
    }

    fn reserve(&self, store: &Store, count: i64) -> Result<i64> {
        for _ in 0..MAX_LOST {
            let (h, first) = store.read(|tx| {
                let counters = tx.open_table(COUNTERS)?;
                let h = counters.get(LOG_POSITION)?.map(|v| v.value()).unwrap_or(0);
                Ok((h, counters.get(NEXT_SNAPSHOT_ID)?.map(|v| v.value()).unwrap_or(1) as i64))
            })?;
            let batch = LogBatch::new(BatchKind::ReserveSnapshotIds { first, count });
            match self.offer(h + 1, &batch)? {
                None => {
                    fold_into(store, [(h + 1, &batch)], &self.location)?;
                    return Ok(first);
                }
                Some(winners) => {
                    self.fold_batches(store, &winners)?;
                }
            }
        }
        Err(Error::conflict(format!(
            "could not reserve snapshot ids in the commit log {}: other processes kept winning its positions; retry",
            self.location
        )))
    }

    /// Whether the log is in a bucket (every look at it a request).
    pub fn in_bucket(&self) -> bool {
        crate::io::object::is_object(&self.location)
    }

    /// The id of the batch at position `seq`, if the log holds it (an error when it was truncated
    /// past it).
    pub fn batch_id(&self, seq: u64) -> Result<Option<String>> {
        match self.reader.tail(seq, 1)?.first() {
            Some(b) => Ok(Some(LogBatch::decode(&b.bytes, seq, &self.location)?.id)),
            None => Ok(None),
        }
    }

    /// The first position the log holds.
    pub fn start(&self) -> Result<u64> {
        self.reader.start()
    }

    /// Whether a checkpoint is due (and no longer, once asked): this process won a multiple of
    /// `checkpoint::every()`, or the position half-way past one that no checkpoint covers (1 LIST).
    pub fn take_checkpoint_due(&self) -> bool {
        if self.checkpoint_due.swap(false, Ordering::AcqRel) {
            return true;
        }
        match self.checkpoint_missing.swap(0, Ordering::AcqRel) {
            0 => false,
            multiple => super::checkpoint::list(&self.location)
                .map(|found| found.last().is_none_or(|c| c.position < multiple))
                .unwrap_or(true),
        }
    }

    /// Writes a checkpoint of the fold in `store` into a bucket log, then truncates the log below
    /// the older of the two newest checkpoints and removes the checkpoints before that one. The
    /// checkpoint's position.
    pub fn checkpoint(&self, store: &Store) -> Result<u64> {
        use super::checkpoint;
        let at = checkpoint::write(store, &self.location)?;
        crate::failpoint::hit("after_checkpoint_put");
        let found = checkpoint::list(&self.location)?;
        if let Some(below) = checkpoint::truncation_point(&found).filter(|&b| b > self.reader.start().unwrap_or(b)) {
            self.reader.truncate_below(below)?;
        }
        checkpoint::prune(&found, crate::commit_log::bucket::keep_age())?;
        Ok(at)
    }

    /// Truncates the log below `checkpoint - LOG_RETAIN` once that is another [`LOG_RETAIN`]
    /// past the last truncation (the catalog file, which every process shares, has folded
    /// everything below its checkpoint durably).
    pub fn truncate(&self, checkpoint: u64) -> Result<u64> {
        // A bucket log serves hosts whose caches this file is not: it is truncated only below a
        // checkpoint in the bucket (`Self::checkpoint`).
        if self.in_bucket() {
            return Ok(0);
        }
        let below = checkpoint.saturating_sub(LOG_RETAIN);
        if self.committer.is_none() || below <= self.truncated_below.load(Ordering::Acquire) + LOG_RETAIN {
            return Ok(0);
        }
        let start = self.reader.start()?;
        if below < start {
            self.truncated_below.fetch_max(start, Ordering::AcqRel); // another process did
            return Ok(0);
        }
        let removed = self.reader.truncate_below(below)?;
        self.truncated_below.fetch_max(below, Ordering::AcqRel);
        Ok(removed)
    }

    /// The log as this process sees it, `checkpoint` being the catalog file's.
    pub fn status(&self, checkpoint: u64) -> Result<LogStatus> {
        let start = self.reader.start()?;
        let mut end = checkpoint.max(start.saturating_sub(1));
        while let Some(b) = self.reader.tail(end + 1, FOLD_CHUNK)?.last() {
            end = b.seq;
        }
        Ok(LogStatus {
            provider: self.provider.clone(),
            location: self.location.clone(),
            checkpoint,
            start: if end >= start { start } else { 0 },
            end,
            won: self.won.load(Ordering::Relaxed),
            lost: self.lost.load(Ordering::Relaxed),
            poll_ms: self.poll.as_millis() as u64,
            chained: self.chained.load(Ordering::Relaxed),
        })
    }
}

/// When the file's last commit was committed (0 for none).
fn last_committed_at(tx: &WriteTransaction) -> Result<i64> {
    let log = tx.open_table(COMMIT_LOG)?;
    let Some((_, row)) = log.last()? else { return Ok(0) };
    let record: CommitRecord = serde_json::from_slice(row.value())?;
    Ok(record.committed_at_us)
}

/// The file's last folded log position.
fn position(tx: &WriteTransaction) -> Result<u64> {
    Ok(tx.open_table(COUNTERS)?.get(LOG_POSITION)?.map(|v| v.value()).unwrap_or(0))
}

/// [`fold`] in a write transaction of its own, committed (synced) only when it folded a batch:
/// another process has often folded them first.
fn fold_into<'a>(store: &Store, batches: impl IntoIterator<Item = (u64, &'a LogBatch)>, location: &str) -> Result<u64> {
    store.write_if_changed(true, |tx| {
        let folded = fold(tx, batches, location)?;
        Ok((folded, folded > 0))
    })
}

/// Folds `batches` (position, batch), in order, into the file: those at or below its checkpoint
/// are skipped (another process folded them), the rest must follow it without a gap. Returns how
/// many it folded. A batch that does not apply to the state it was prepared on is damage.
fn fold<'a>(
    tx: &WriteTransaction,
    batches: impl IntoIterator<Item = (u64, &'a LogBatch)>,
    location: &str,
) -> Result<u64> {
    let mut at = position(tx)?;
    let mut folded = 0;
    for (seq, batch) in batches {
        if seq <= at {
            continue;
        }
        if seq != at + 1 {
            return Err(Error::corrupt(format!(
                "the commit log {location} skips from position {at} to {seq}: the catalog cannot fold it"
            )));
        }
        let bad = |why: String| {
            Error::corrupt(format!(
                "position {seq} of the commit log {location} (from {}) does not apply to the catalog: {why}",
                batch.writer
            ))
        };
        match &batch.kind {
            BatchKind::Commit { committed_at_us, requests } => {
                let (_, results) = apply_requests(tx, requests, *committed_at_us)?;
                if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
                    return Err(bad(e.message));
                }
            }
            BatchKind::ReserveSnapshotIds { first, count } => {
                let mut counters = tx.open_table(COUNTERS)?;
                let next = counters.get(NEXT_SNAPSHOT_ID)?.map(|v| v.value()).unwrap_or(1) as i64;
                if next != *first || *count < 1 {
                    return Err(bad(format!("it reserves snapshot ids from {first}, the next free one is {next}")));
                }
                counters.insert(NEXT_SNAPSHOT_ID, (first + count) as u64)?;
            }
        }
        tx.open_table(COUNTERS)?.insert(LOG_POSITION, seq)?;
        // (host-local: which batch this file folded last, to tell a bucket whose history changed)
        if crate::io::object::is_object(location) {
            tx.open_table(META)?.insert(LOG_HEAD_ID, format!("{seq}:{}", batch.id).as_str())?;
        }
        at = seq;
        folded += 1;
    }
    Ok(folded)
}
