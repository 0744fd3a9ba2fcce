//! The bucket log (issue 44, increment 5): the folder log's protocol on objects under an
//! `s3://bucket/prefix/log` location, for hosts that share nothing but a bucket. Position p is the
//! object `<location>/<20-digit p>.batch` (keys sort like numbers, so a LIST walks the log in
//! order) holding `envelope.rs`'s envelope; position 0 holds the adoption stamp; truncation marks
//! are `<location>/truncated/<position>`. The rules are `gapless.rs`'s, as for the folder log.
//!
//! A position is won by a create-if-absent PUT (`If-None-Match: *`): the store arbitrates every
//! race, so an offer on a known head is one request. A store that ignored the header would let two
//! committers win one position without anyone noticing, so adoption first probes it.
//!
//! A PUT's answer is not always the outcome. "Taken" may be our own PUT, retried by the client
//! after it landed (412), or no decision at all: object_store reports S3's 409
//! ConditionalRequestConflict as taken too. An error may follow a PUT that landed. So anything
//! short of a plain win is settled by reading the position back: our bytes are a win, another
//! batch a loss, nothing a retry (after a 409) or the error (the commit is not acknowledged, and
//! nothing acknowledged is lost).
//!
//! Requests cost money (docs/design/object-storage.md, "Requests per commit"): a tail of k
//! positions is k + 1 GETs, a long replay a LIST and 32 GETs in flight, and waits look every 20 ms.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use super::envelope::{envelope, open_envelope};
use super::gapless::{self, position_name, position_of, Positions, Seen};
use super::{Batch, CommitLogProvider, Committer, LogReader, Offered};
use crate::error::{Error, ErrorKind, Result};
use crate::io::object;

/// How often a wait for a position looks again (each look is a request: not the folder's 2 ms).
const POLL: Duration = Duration::from_millis(20);
const TRUNCATED: &str = "truncated";
const PROBE: &str = "probe";
/// How many conditional PUTs of one position may come back undecided (409) before the offer
/// fails, and the first wait between them (doubled each time).
const TRIES: u32 = 5;
const UNDECIDED_WAIT: Duration = Duration::from_millis(20);
/// A tail GETs this many positions one by one (a poll finds a few); a replay longer than that
/// LISTs what follows and GETs it `IN_FLIGHT` at a time.
const ONE_BY_ONE: usize = 64;
const IN_FLIGHT: usize = 32;
/// Truncation marks kept: a reader needs only the highest; the one before shows the last step.
const MARKS_KEPT: usize = 2;
/// How long the head this log just won, or read up to a missing position, is taken to be still
/// there, so that the next offer after it is one PUT without a look at the position before.
/// Truncation spares every position younger than [`keep_age`] (an hour), so one seen this
/// recently is still there.
const HEAD_TRUST: Duration = Duration::from_secs(1);

/// Truncation never removes a position younger than this, by the store's clock (its newest
/// object's time is its now): an hour, or `SKADE_LOG_KEEP_MS` (tests). A committer that saw its
/// head within half of it cannot win a removed position; one stalled longer between seeing its
/// head and its PUT (SIGSTOP, a suspended laptop) looks at the truncation marks after its win.
pub fn keep_age() -> Duration {
    let set = KEEP_MS.load(std::sync::atomic::Ordering::Relaxed);
    let ms = match set {
        u64::MAX => std::env::var("SKADE_LOG_KEEP_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(3_600_000),
        ms => ms,
    };
    Duration::from_millis(ms)
}

/// Sets [`keep_age`] for this process (tests in one binary: no environment to race over).
pub fn set_keep_age(age: Duration) {
    KEEP_MS.store(age.as_millis() as u64, std::sync::atomic::Ordering::Relaxed);
}

static KEEP_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(u64::MAX);

/// Time since boot, suspend and SIGSTOP included (CLOCK_BOOTTIME; `Instant` leaves out a
/// suspended machine's sleep, in which truncation may remove the head a committer trusts).
fn boot_clock() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    #[cfg(target_os = "linux")]
    let clock = libc::CLOCK_BOOTTIME;
    #[cfg(not(target_os = "linux"))]
    let clock = libc::CLOCK_MONOTONIC;
    if unsafe { libc::clock_gettime(clock, &mut t) } != 0 {
        return Duration::ZERO; // (never: then nothing is trusted for long)
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The provider of bucket logs; a location is an `s3://bucket/prefix` URL.
#[derive(Debug, Default)]
pub struct BucketLogProvider;

impl CommitLogProvider for BucketLogProvider {
    fn name(&self) -> &str {
        "skade bucket log"
    }

    fn committer(&self, location: &str) -> Result<Box<dyn Committer>> {
        Ok(Box::new(BucketLog::open(location)?))
    }

    fn reader(&self, location: &str) -> Result<Arc<dyn LogReader>> {
        Ok(Arc::new(BucketLog::open(location)?))
    }

    /// One log as both: a position the committer won or read is the reader's head too, so a
    /// poll right after this host's commit is 1 GET (not a HEAD and a LIST besides).
    fn link(&self, location: &str, writable: bool) -> Result<(Arc<dyn LogReader>, Option<Box<dyn Committer>>)> {
        let log = Arc::new(BucketLog::open(location)?);
        let committer = writable.then(|| Box::new(SharedLog(log.clone())) as Box<dyn Committer>);
        Ok((log, committer))
    }
}

/// A bucket log shared by a link's reader and committer.
struct SharedLog(Arc<BucketLog>);

impl Committer for SharedLog {
    fn offer(&self, seq: u64, batch: &[u8]) -> Result<Offered> {
        self.0.offer(seq, batch)
    }

    fn adoption(&self) -> Result<Option<Vec<u8>>> {
        Committer::adoption(&*self.0)
    }

    fn adopt(&self, stamp: &[u8]) -> Result<Vec<u8>> {
        self.0.adopt(stamp)
    }

    fn wait_served(&self, seq: u64, timeout: Duration) -> Result<bool> {
        self.0.wait_served(seq, timeout)
    }
}

/// One bucket log, opened (no request yet). Everything but `adopt` needs its stamp at position 0:
/// an empty prefix is an error, never a fresh log.
pub struct BucketLog {
    location: String,
    seen: Seen,
    /// The head this log won or read last (the position after it missing then), and when.
    head: Mutex<Option<(u64, Duration)>>,
    /// [`keep_age`] when it was opened.
    keep: Duration,
    /// The last position looked up with a HEAD, and its time by the store's clock.
    looked: Mutex<Option<(u64, std::time::SystemTime)>>,
}

/// What a conditional PUT came to, once settled.
enum Claim {
    Ours,
    /// Another batch holds the position: its stored bytes.
    Theirs(Bytes),
}

impl BucketLog {
    pub fn open(location: &str) -> Result<BucketLog> {
        let location = location.trim_end_matches('/').to_string();
        object::split(&location)?;
        Ok(BucketLog {
            location,
            seen: Seen::default(),
            head: Mutex::new(None),
            keep: keep_age(),
            looked: Mutex::new(None),
        })
    }

    /// This log with another [`keep_age`] (tests).
    pub fn with_keep_age(mut self, keep: Duration) -> BucketLog {
        self.keep = keep;
        self
    }

    fn object(&self, seq: u64) -> String {
        format!("{}/{}", self.location, position_name(seq))
    }

    /// The name under this log of a listed object (`s3://bucket/prefix/log/<name>`).
    fn name_of<'a>(&self, listed: &'a str) -> Option<&'a str> {
        listed.strip_prefix(self.location.as_str())?.strip_prefix('/')
    }

    fn mark_of(&self, listed: &str) -> Option<u64> {
        self.name_of(listed)?.strip_prefix(TRUNCATED)?.strip_prefix('/')?.parse().ok()
    }

    fn decode(&self, seq: u64, stored: &[u8]) -> Result<Batch> {
        open_envelope(stored, seq)
            .map(|bytes| Batch { seq, bytes })
            .map_err(|problem| Error::corrupt(format!("commit log object {} is damaged: {problem}", self.object(seq))))
    }

    fn get(&self, seq: u64) -> Result<Option<Batch>> {
        object::wait(object::get(&self.object(seq)))?.map(|stored| self.decode(seq, &stored)).transpose()
    }

    fn saw(&self, seq: u64) {
        let mut head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        if head.is_none_or(|(s, _)| s <= seq) {
            *head = Some((seq, boot_clock()));
        }
    }

    /// Whether `seq` is the position this log won or read last, moments ago.
    fn just_saw(&self, seq: u64) -> bool {
        let head = self.head.lock().unwrap_or_else(|p| p.into_inner());
        head.is_some_and(|(s, at)| s == seq && boot_clock().saturating_sub(at) < HEAD_TRUST)
    }

    /// PUTs `stored` at `seq` unless the position is taken, and settles any answer short of a
    /// plain win by reading the position back.
    fn claim(&self, seq: u64, stored: Bytes) -> Result<Claim> {
        let location = self.object(seq);
        let mut wait = UNDECIDED_WAIT;
        let mut in_flight = None;
        for _ in 0..TRIES {
            let put = object::wait(object::put_new(&location, stored.clone()));
            if let Ok(true) = put {
                return Ok(Claim::Ours);
            }
            match object::wait(object::get(&location))? {
                // our own PUT: retried after it landed (the retry's 412), or its answer was lost
                Some(found) if found == stored => return Ok(Claim::Ours),
                Some(found) => return Ok(Claim::Theirs(found)),
                // taken yet nothing there: a 409, the store decided nothing
                None => match put {
                    Ok(_) => {}
                    // refused (403, 400): it cannot land later, the commit was not made
                    Err(e) if e.kind != ErrorKind::Io => return Err(e),
                    // a timeout, a lost connection, a 5xx: that PUT may still land. The same
                    // bytes are offered again until the position is decided (the late PUT then
                    // finds it taken, by itself or by another host).
                    Err(e) => in_flight = Some(e),
                },
            }
            std::thread::sleep(wait);
            wait *= 2;
        }
        match in_flight {
            Some(e) => Err(Error::io(format!(
                "{}; {TRIES} tries could not decide position {seq}: a PUT still in flight may land it later, so this \
                 commit's outcome is unknown (the next statement shows whether it landed)",
                e.message
            ))),
            None => Err(Error::io(format!(
                "cannot write {location}: {TRIES} conditional PUTs came back undecided (ConditionalRequestConflict) \
                 and none landed; the commit was not made"
            ))),
        }
    }

    /// After a win at `seq` by an offer that stalled so long that truncation may have removed the
    /// position meanwhile (a create-if-absent PUT succeeds on a removed key): a win below the
    /// log's start is void: its batch is removed (no reader would fold it) and the commit fails.
    fn void_if_truncated(&self, seq: u64) -> Result<()> {
        let low = gapless::refresh_low(self)?;
        if seq >= low {
            return Ok(());
        }
        object::wait(object::delete(&[self.object(seq)]))?;
        Err(Error::conflict(format!(
            "this commit stalled so long that position {seq} of the commit log {} was truncated before it landed \
             (the log starts at {low}): nothing was committed, retry the transaction",
            self.location
        )))
    }

    /// Checks that the store refuses a second create-if-absent PUT of one key: one that ignores
    /// `If-None-Match` would let two committers win one position.
    fn probe(&self) -> Result<()> {
        let body = Bytes::from_static(b"skade probe");
        for _ in 0..TRIES {
            let probe = format!("{}/{PROBE}/{}", self.location, uuid::Uuid::new_v4());
            let created = object::wait(object::put_new(&probe, body.clone()))?;
            let again = if created { object::wait(object::put_new(&probe, body.clone())) } else { Ok(false) };
            object::wait(object::delete(std::slice::from_ref(&probe)))?;
            match (created, again?) {
                (true, false) => return Ok(()),
                (true, true) => {
                    let (store, _) = object::store_for(&probe)?;
                    let endpoint = store.options.as_ref().and_then(|o| o.endpoint_url());
                    return Err(Error::invalid(format!(
                        "{}/{} does not honour If-None-Match: skade cannot commit through it safely (it created \
                         the probe {probe} twice)",
                        endpoint.as_deref().unwrap_or("AWS S3"),
                        store.bucket
                    )));
                }
                // a new key reported taken: an undecided 409; probe again
                (false, _) => std::thread::sleep(UNDECIDED_WAIT),
            }
        }
        Err(Error::io(format!("cannot probe {}/{PROBE}: every conditional PUT came back undecided", self.location)))
    }

    /// The batches from `from` on up to the first missing position, at most `max` (fewer: the
    /// position after the last was missing).
    /// The batches from `from` on up to the first missing position, at most `max` (fewer: the
    /// position after the last was missing), and whether it LISTed (a long replay, which may run
    /// into a hole that a truncation going on left: its end is not taken for the head).
    fn run_listed(&self, from: u64, max: usize) -> Result<(Vec<Batch>, bool)> {
        let mut batches: Vec<Batch> = vec![];
        let mut listed = false;
        while batches.len() < max {
            let seq = from + batches.len() as u64;
            if batches.len() >= ONE_BY_ONE && !listed {
                // a long replay: one LIST and parallel GETs, then one by one what came since
                listed = true;
                batches.extend(self.listed_run(seq, max - batches.len())?);
                continue;
            }
            match self.get(seq)? {
                Some(batch) => batches.push(batch),
                None => break,
            }
        }
        Ok((batches, listed))
    }

    /// The run of consecutive positions from `from` that a LIST shows, read `IN_FLIGHT` at a
    /// time, in order, up to the first missing one.
    fn listed_run(&self, from: u64, max: usize) -> Result<Vec<Batch>> {
        let found = object::wait(object::list(&self.location, Some(&self.object(from - 1))))?;
        let seqs: Vec<u64> = found
            .iter()
            .filter_map(|l| position_of(self.name_of(&l.location)?))
            .zip(from..)
            .take_while(|(found, wanted)| found == wanted)
            .map(|(seq, _)| seq)
            .take(max)
            .collect();
        let gets = seqs.iter().map(|&seq| {
            let location = self.object(seq);
            async move { object::get(&location).await }
        });
        let got = object::wait(futures::stream::iter(gets).buffered(IN_FLIGHT).collect::<Vec<_>>());
        let mut batches = vec![];
        for (seq, got) in seqs.into_iter().zip(got) {
            match got? {
                Some(stored) => batches.push(self.decode(seq, &stored)?),
                // (removed since the LIST: the caller's next look decides truncated or head)
                None => break,
            }
        }
        Ok(batches)
    }
}

impl Positions for BucketLog {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn holder(&self) -> &'static str {
        "prefix"
    }

    fn exists(&self, seq: u64) -> Result<bool> {
        let found = object::wait(object::head(&self.object(seq)))?;
        if let Some((_, modified)) = found {
            *self.looked.lock().unwrap_or_else(|p| p.into_inner()) = Some((seq, modified));
        }
        Ok(found.is_some())
    }

    fn highest_mark(&self) -> Result<Option<u64>> {
        let marks = object::wait(object::list(&format!("{}/{TRUNCATED}", self.location), None))?;
        Ok(marks.iter().filter_map(|l| self.mark_of(&l.location)).max())
    }

    fn seen(&self) -> &Seen {
        &self.seen
    }
}

impl Committer for BucketLog {
    fn offer(&self, seq: u64, batch: &[u8]) -> Result<Offered> {
        // (when the head was last known to be there: HEAD_TRUST ago at most)
        let checked = boot_clock().saturating_sub(HEAD_TRUST);
        let after_known = seq > 0 && self.just_saw(seq - 1);
        gapless::check_offer(self, seq, after_known)?;
        // a head looked up now but written long ago: this committer's fold may be as old, and
        // truncation may remove `seq` between that look and the PUT
        let old_head = !after_known
            && self.looked.lock().unwrap_or_else(|p| p.into_inner()).is_some_and(|(s, modified)| {
                s + 1 == seq
                    && std::time::SystemTime::now().duration_since(modified).unwrap_or_default() >= self.keep / 2
            });
        match self.claim(seq, Bytes::from(envelope(seq, batch)))? {
            Claim::Ours => {
                if old_head || boot_clock().saturating_sub(checked) >= self.keep / 2 {
                    self.void_if_truncated(seq)?;
                }
                self.saw(seq);
                Ok(Offered::Won(seq))
            }
            Claim::Theirs(stored) => {
                // (the batch that won is read already: the rest follows it)
                let mut since = vec![self.decode(seq, &stored)?];
                let (rest, listed) = self.run_listed(seq + 1, usize::MAX)?;
                since.extend(rest);
                if !listed {
                    self.saw(seq + since.len() as u64 - 1); // (a long run's end may be a hole)
                }
                Ok(Offered::Lost(since))
            }
        }
    }

    fn adoption(&self) -> Result<Option<Vec<u8>>> {
        Ok(self.get(0)?.map(|b| b.bytes))
    }

    fn adopt(&self, stamp: &[u8]) -> Result<Vec<u8>> {
        self.probe()?;
        let held = match self.claim(0, Bytes::from(envelope(0, stamp)))? {
            Claim::Ours => stamp.to_vec(),
            Claim::Theirs(stored) => self.decode(0, &stored)?.bytes,
        };
        self.seen.set_adopted();
        Ok(held)
    }

    fn wait_served(&self, seq: u64, timeout: Duration) -> Result<bool> {
        gapless::wait_for(self, seq, timeout, POLL)
    }
}

impl LogReader for BucketLog {
    fn tail(&self, from: u64, max: usize) -> Result<Vec<Batch>> {
        let from = gapless::tail_start(self, from)?;
        let (batches, listed) = self.run_listed(from, max)?;
        match batches.last() {
            Some(last) if batches.len() < max && !listed => self.saw(last.seq),
            // A poll at the head finds nothing: whether the log is still there and not truncated
            // past `from` (a HEAD and a LIST) is asked once per HEAD_TRUST, not at every poll
            // (10 polls a second would be 10 LISTs, billed as PUTs).
            None if max > 0 && !self.just_saw(from - 1) => {
                gapless::check_nothing_at(self, from)?;
                self.saw(from - 1);
            }
            _ => {}
        }
        Ok(batches)
    }

    fn adoption(&self) -> Result<Option<Vec<u8>>> {
        Committer::adoption(self)
    }

    fn start(&self) -> Result<u64> {
        gapless::require_adopted(self)?;
        gapless::refresh_low(self)
    }

    /// Removes the batches below `seq`, but none younger than its keep age: it stops at the first
    /// of those (a committer that saw its head recently must not find it gone).
    fn truncate_below(&self, seq: u64) -> Result<u64> {
        gapless::check_truncatable(self, seq)?;
        // one listing: the positions' ages (by the store's clock), then what to remove
        let listed = object::wait(object::list(&self.location, None))?;
        let now = listed.iter().map(|l| l.modified).max().unwrap_or(std::time::UNIX_EPOCH);
        let young = |l: &object::Listed| now.duration_since(l.modified).unwrap_or_default() < self.keep;
        let seq = listed
            .iter()
            .filter_map(|l| Some((self.name_of(&l.location).and_then(position_of)?, l)))
            .filter(|(p, l)| *p >= 1 && *p < seq && young(l))
            .map(|(p, _)| p)
            .min()
            .unwrap_or(seq);
        if seq <= self.seen.low() {
            return Ok(0);
        }
        // the mark first: from then on a stale committer or reader below it gets an error
        object::wait(object::put_new(&format!("{}/{TRUNCATED}/{seq}", self.location), Bytes::new()))?;
        crate::failpoint::hit("after_truncation_mark");
        // then every batch below it (whatever an interrupted truncation left too) and the marks
        // older than the newest two, in bulk
        let mut marks: Vec<(u64, String)> =
            listed.iter().filter_map(|l| Some((self.mark_of(&l.location)?, l.location.clone()))).collect();
        marks.push((seq, format!("{}/{TRUNCATED}/{seq}", self.location)));
        marks.sort_unstable();
        marks.dedup();
        self.seen.raise_low(marks.last().map_or(seq, |(m, _)| seq.max(*m)));
        let below: Vec<String> = listed
            .iter()
            .filter(|l| self.name_of(&l.location).and_then(position_of).is_some_and(|p| p >= 1 && p < seq))
            .map(|l| l.location.clone())
            .collect();
        object::wait(object::delete(&below))?;
        let old_marks: Vec<String> =
            marks.iter().rev().skip(MARKS_KEPT).map(|(_, location)| location.clone()).collect();
        object::wait(object::delete(&old_marks))?;
        Ok(below.len() as u64)
    }
}
