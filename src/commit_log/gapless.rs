//! The rules that keep an in-tree log gapless and honest (`docs/design/commit-log.md`), whatever
//! stores its positions (a folder, a bucket): every provider answers what is stored, and these
//! functions decide, so the folder and bucket logs refuse the same things with the same words.
//! - Everything but adoption needs the stamp at position 0: a missing folder or an empty prefix
//!   (unmounted, mistyped) is an error, never a fresh empty log.
//! - An offer whose previous position is not written is refused (a head from the future would
//!   leave a batch no reader folds in order).
//! - Truncation leaves a mark `truncated/<position>` before it removes anything: a committer or
//!   reader behind the highest mark gets an error naming it, never a win or an empty tail that it
//!   would take for the head.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// What the rules ask of a log's storage.
pub(super) trait Positions {
    /// The log's location, for messages.
    fn location(&self) -> String;
    /// What holds the log, for messages ("folder", "prefix").
    fn holder(&self) -> &'static str;
    fn exists(&self, seq: u64) -> Result<bool>;
    /// The highest truncation mark, if any.
    fn highest_mark(&self) -> Result<Option<u64>>;
    fn seen(&self) -> &Seen;
}

/// What a log remembers of what it saw: the stamp, and where the log starts.
pub(super) struct Seen {
    adopted: AtomicBool,
    low: AtomicU64,
}

impl Default for Seen {
    fn default() -> Self {
        Seen { adopted: AtomicBool::new(false), low: AtomicU64::new(1) }
    }
}

impl Seen {
    pub fn set_adopted(&self) {
        self.adopted.store(true, Ordering::Release);
    }

    pub fn low(&self) -> u64 {
        self.low.load(Ordering::Acquire)
    }

    /// Moves the start seen up to `low` (marks only ever rise); returns the start seen.
    pub fn raise_low(&self, low: u64) -> u64 {
        self.low.fetch_max(low, Ordering::AcqRel).max(low)
    }
}

pub(super) fn require_adopted(log: &impl Positions) -> Result<()> {
    if log.seen().adopted.load(Ordering::Acquire) {
        return Ok(());
    }
    if !log.exists(0)? {
        return Err(Error::catalog(format!(
            "{} is not an adopted commit log (no stamp at position 0): the {} is missing, empty or not a log",
            log.location(),
            log.holder()
        )));
    }
    // (where the log starts, from its marks, before this log serves anything: a batch a stalled
    // committer left below the start is never read or built on)
    refresh_low(log)?;
    log.seen().set_adopted();
    Ok(())
}

/// Where the log starts now (1 unless truncated), read from the truncation marks.
pub(super) fn refresh_low(log: &impl Positions) -> Result<u64> {
    Ok(log.seen().raise_low(log.highest_mark()?.unwrap_or(1)))
}

/// An adopted log whose stamp is gone (its folder or prefix removed, moved or unmounted since) is
/// an error naming it, never an empty log or a gap.
fn check_still_there(log: &impl Positions) -> Result<()> {
    if log.exists(0)? {
        return Ok(());
    }
    Err(Error::catalog(format!(
        "the commit log {} is missing (no adoption stamp): was its {} removed, moved or unmounted?",
        log.location(),
        log.holder()
    )))
}

pub(super) fn truncated(log: &impl Positions, seq: u64, low: u64) -> Error {
    Error::catalog(format!(
        "position {seq} of the commit log {} was truncated (the log starts at {low}): read from a checkpoint past it",
        log.location()
    ))
}

/// Whether `seq` may be offered. `after_known`: the position before it is known to be written
/// (a win or a read moments ago), so it is not looked up again.
pub(super) fn check_offer(log: &impl Positions, seq: u64, after_known: bool) -> Result<()> {
    if seq == 0 {
        return Err(Error::internal("position 0 of a commit log is its adoption stamp"));
    }
    require_adopted(log)?;
    if seq < log.seen().low() {
        return Err(truncated(log, seq, log.seen().low()));
    }
    if seq == 1 || after_known || log.exists(seq - 1)? {
        return Ok(());
    }
    // truncated below (a stale head) or not written yet (a head from the future): either way a
    // win here would be a batch no reader folds in order
    check_still_there(log)?;
    let low = refresh_low(log)?;
    if seq < low {
        return Err(truncated(log, seq, low));
    }
    if seq > low {
        return Err(Error::internal(format!(
            "offer at position {seq} of the commit log {}, but position {} is not written: a gap",
            log.location(),
            seq - 1
        )));
    }
    Ok(())
}

/// A tail from `from` that found nothing there: the head, or a position truncated meanwhile
/// (then an error, never an empty answer a reader would take for the head).
pub(super) fn check_nothing_at(log: &impl Positions, from: u64) -> Result<()> {
    check_still_there(log)?;
    let low = refresh_low(log)?;
    if from < low {
        return Err(truncated(log, from, low));
    }
    Ok(())
}

/// A truncation below `seq` needs a batch there: the head always stays.
pub(super) fn check_truncatable(log: &impl Positions, seq: u64) -> Result<()> {
    require_adopted(log)?;
    if log.exists(seq)? {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "cannot truncate the commit log {} below position {seq}: it holds no batch there (the head stays)",
        log.location()
    )))
}

/// The start of a tail from `from`, which must not be behind the log's start as last seen.
pub(super) fn tail_start(log: &impl Positions, from: u64) -> Result<u64> {
    require_adopted(log)?;
    let seq = from.max(1);
    if seq < log.seen().low() {
        return Err(truncated(log, seq, log.seen().low()));
    }
    Ok(seq)
}

/// Waits until `seq` is written, looking every `poll`, at most `timeout`; whether it is.
pub(super) fn wait_for(log: &impl Positions, seq: u64, timeout: Duration, poll: Duration) -> Result<bool> {
    require_adopted(log)?;
    let end = Instant::now() + timeout;
    loop {
        if log.exists(seq)? {
            return Ok(true);
        }
        if Instant::now() >= end {
            return Ok(false);
        }
        std::thread::sleep(poll);
    }
}

/// The name of position `seq` in its folder or prefix: 20 digits, so that names sort like numbers.
pub(super) fn position_name(seq: u64) -> String {
    format!("{seq:020}.batch")
}

/// The position a name (the last segment of a path or key) holds, if it names one.
pub(super) fn position_of(name: &str) -> Option<u64> {
    name.strip_suffix(".batch")?.parse().ok()
}
