//! Delivery of lineage events, off DuckDB's threads: one background worker per attached lake
//! and sink (the history table; an OpenLineage collector), started at ATTACH, ended when the
//! lake's last ATTACH goes. Each reads the durable commit log from its sink's cursor, so nothing
//! is lost to an outage or a crash; a commit only wakes it.
//!
//! A collector gets each event at least once, in commit_seq order: its cursor moves when it
//! acknowledges (2xx), and becomes durable at most [`PERSIST_EVERY`] later (a crash sends the
//! events of that last moment again; within one process none is sent twice, even across DETACH
//! and ATTACH). Down, slow or 5xx: the same event is retried, backing off to [`MAX_BACKOFF`].
//! A 4xx is the collector refusing that event: recorded with its message, and skipped.
//!
//! Through a commit log several processes attach one lake, and each starts its workers: one of
//! them delivers to a sink at a time, holding a lease in the sink's record ([`lease`], renewed as
//! it delivers, released at DETACH); the others wait for the lease to lapse (an owner that died
//! or went idle), so a collector gets each event once, not once per process.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::events;
use super::history;
use super::openlineage::{run_event, Naming};
use super::sink::{HttpSink, LineageSink, Outcome};
use crate::catalog::names::is_reserved;
use crate::catalog::options::LineageOptions;
use crate::catalog::sinks::{SinkChange, SinkRecord};
use crate::catalog::{Catalog, WeakCatalog};
use crate::error::{Error, Result};

/// How often a collector's cursor is made durable while events flow.
pub const PERSIST_EVERY: Duration = Duration::from_secs(1);
/// The history table takes one commit per this interval at most (each is a snapshot).
pub const HISTORY_EVERY: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// Events read from the log per round.
const ROUND_RECORDS: usize = 256;
/// A worker looks at whether its lake is still attached this often while it waits.
const TICK: Duration = Duration::from_millis(100);
/// How long a process's lease on a sink lasts without renewal (a log-resident lake); it is
/// renewed once half of it is left. 10 s; `SKADE_LINEAGE_LEASE_MS` sets another (tests).
fn lease() -> Duration {
    static LEASE: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *LEASE.get_or_init(|| {
        let ms = std::env::var("SKADE_LINEAGE_LEASE_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
        Duration::from_millis(ms)
    })
}

/// What a worker reports about itself (`skade_lineage_delivery`).
#[derive(Debug, Clone, Default)]
pub struct Status {
    /// The last commit_seq the sink acknowledged (durable or about to be).
    pub delivered_seq: u64,
    /// Events delivered by this process.
    pub delivered: u64,
    /// The last failure (cleared by the next success), and when.
    pub last_error: Option<String>,
    pub last_error_at_us: Option<i64>,
    /// Failed attempts in a row.
    pub failures: u64,
}

pub struct Worker {
    pub catalog_path: PathBuf,
    pub sink: String,
    /// This worker, as a sink's record names its owner (`pid@host/<uuid>`).
    pub owner_id: String,
    /// The jobs' namespace of its RunEvents.
    pub namespace: String,
    catalog: WeakCatalog,
    status: Mutex<Status>,
    /// A collector's cursor as acknowledged (made durable by DETACH if the worker has not).
    acknowledged: Mutex<Option<SinkRecord>>,
    stop: AtomicBool,
}

impl Worker {
    pub fn status(&self) -> Status {
        self.status.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A collector's cursor as acknowledged (its refusals included), ahead of the stored one.
    pub fn acknowledged(&self) -> Option<SinkRecord> {
        self.acknowledged.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn running(&self) -> bool {
        !self.stop.load(Ordering::SeqCst) && self.catalog.is_open()
    }

    fn update(&self, f: impl FnOnce(&mut Status)) {
        f(&mut self.status.lock().unwrap_or_else(|p| p.into_inner()));
    }

    fn failed(&self, message: String) {
        self.update(|s| {
            s.last_error = Some(message);
            s.last_error_at_us = Some(chrono::Utc::now().timestamp_micros());
            s.failures += 1;
        });
    }

    /// Sleeps `d`, or less if the lake is detached meanwhile; false then.
    fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        while self.running() {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            std::thread::sleep(left.min(TICK));
        }
        false
    }
}

static WORKERS: Mutex<Vec<Arc<Worker>>> = Mutex::new(Vec::new());
/// What each collector acknowledged in this process, by (catalog, sink): a worker started again
/// (DETACH, ATTACH) does not send again what the last one delivered but had not made durable.
static ACKED: Mutex<Option<HashMap<(PathBuf, String), u64>>> = Mutex::new(None);

fn acked(key: &(PathBuf, String)) -> u64 {
    ACKED.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|m| m.get(key).copied()).unwrap_or(0)
}

fn note_acked(key: &(PathBuf, String), seq: u64) {
    let mut memo = ACKED.lock().unwrap_or_else(|p| p.into_inner());
    let seen = memo.get_or_insert_with(HashMap::new).entry(key.clone()).or_default();
    *seen = (*seen).max(seq);
}

/// Starts the workers `options` ask for on `catalog` (none on a read-only ATTACH: a cursor is a
/// write), unless this open catalog has them already.
pub fn start(catalog: &Catalog, options: &LineageOptions) {
    if catalog.read_only() {
        return;
    }
    if options.enabled {
        spawn(catalog, history::SINK.into(), &options.namespace, move |w| history_loop(&w));
    }
    if let Some(url) = options.endpoint_url() {
        let sink = HttpSink::new(url, options.api_key.clone());
        spawn(catalog, sink.name(), &options.namespace, move |w| collector_loop(&w, &sink));
    }
}

fn spawn(catalog: &Catalog, sink: String, namespace: &str, run: impl FnOnce(Arc<Worker>) + Send + 'static) {
    let mut workers = WORKERS.lock().unwrap_or_else(|p| p.into_inner());
    workers.retain(|w| w.running());
    if workers.iter().any(|w| w.sink == sink && w.catalog.same(catalog)) {
        return;
    }
    let worker = Arc::new(Worker {
        catalog_path: catalog.path().to_path_buf(),
        sink,
        owner_id: format!("{}@{}/{}", std::process::id(), crate::io::host_name(), uuid::Uuid::new_v4()),
        namespace: namespace.to_string(),
        catalog: catalog.downgrade(),
        status: Mutex::new(Status::default()),
        acknowledged: Mutex::new(None),
        stop: AtomicBool::new(false),
    });
    workers.push(worker.clone());
    let name = format!("skade-lineage-{}", if worker.sink == history::SINK { "history" } else { "http" });
    let w = worker.clone();
    let body = move || {
        // (a defect in a worker ends that worker, reported in its status, never the process)
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(w.clone())));
        if caught.is_err() {
            w.failed("the delivery worker stopped on an internal error; ATTACH the lake again to restart it".into());
            w.stop.store(true, Ordering::SeqCst);
        }
    };
    if let Err(e) = std::thread::Builder::new().name(name).spawn(body) {
        worker.stop.store(true, Ordering::SeqCst);
        eprintln!("skade: cannot start lineage delivery to {} ({e}); events wait in the commit log", worker.sink);
    }
}

/// The workers running on `catalog`.
pub fn workers_of(catalog: &Catalog) -> Vec<Arc<Worker>> {
    let workers = WORKERS.lock().unwrap_or_else(|p| p.into_inner());
    workers.iter().filter(|w| w.running() && w.catalog.same(catalog)).cloned().collect()
}

/// Waits until a commit that is not the history's own lands, or `d` passes; false when the
/// lake is detached.
fn wait_for_commit(
    worker: &Worker,
    rx: &mut tokio::sync::broadcast::Receiver<crate::catalog::CommitEvent>,
    d: Duration,
) -> bool {
    let end = Instant::now() + d;
    while worker.running() {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        let next = crate::runtime::block_on(async { tokio::time::timeout(left.min(TICK), rx.recv()).await });
        match next {
            Ok(Ok(c)) if is_reserved(&c.schema) => {}
            Ok(Ok(_)) | Ok(Err(RecvError::Lagged(_))) => return true,
            Ok(Err(RecvError::Closed)) => return false,
            Err(_) => {} // a tick
        }
    }
    false
}

fn history_loop(worker: &Worker) {
    let Some(catalog) = worker.catalog.upgrade() else { return };
    let mut rx = catalog.subscribe_commits();
    drop(catalog);
    let mut backoff = FIRST_BACKOFF;
    loop {
        let Some(catalog) = worker.catalog.upgrade() else { return };
        let started = Instant::now();
        match own(worker, &catalog) {
            Ok(None) => {}
            Ok(Some(wait)) => {
                // another process writes the history: look again when its lease may have lapsed
                worker.update(|s| s.delivered_seq = history::cursor(&catalog));
                drop(catalog);
                if !wait_for_commit(worker, &mut rx, wait) {
                    return;
                }
                continue;
            }
            Err(e) => {
                worker.failed(format!("taking over lineage sink {}: {e}", worker.sink));
                drop(catalog);
                if !worker.sleep(backoff) {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        }
        match history::catch_up(&catalog, &worker.namespace) {
            Ok(n) => {
                let seq = history::cursor(&catalog);
                worker.update(|s| {
                    s.delivered += n as u64;
                    s.delivered_seq = seq;
                    s.failures = 0;
                    s.last_error = None;
                });
                backoff = FIRST_BACKOFF;
            }
            Err(e) => {
                worker.failed(format!("writing {}.{}: {e}", crate::catalog::names::LINEAGE_SCHEMA, history::TABLE));
                drop(catalog);
                if !worker.sleep(backoff) {
                    return;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        }
        drop(catalog);
        if !wait_for_commit(worker, &mut rx, Duration::from_secs(3600)) {
            return;
        }
        // gather what commits next: one snapshot per interval
        if !worker.sleep(HISTORY_EVERY.saturating_sub(started.elapsed())) {
            return;
        }
    }
}

/// A collector's cursor, moved in memory as it acknowledges and made durable now and then.
struct Cursor {
    key: (PathBuf, String),
    stored: SinkRecord,
    record: SinkRecord,
    persisted_at: Instant,
}

impl Cursor {
    fn dirty(&self) -> bool {
        self.record != self.stored
    }

    /// Makes the cursor durable (a lake detached meanwhile: false).
    fn persist(&mut self, worker: &Worker) -> Result<bool> {
        let Some(catalog) = worker.catalog.upgrade() else { return Ok(false) };
        let mut record = self.record.clone();
        record.delivered_at_us = Some(chrono::Utc::now().timestamp_micros());
        store_cursor(&catalog, &worker.sink, &record)?;
        self.stored = record.clone();
        self.record = record;
        self.persisted_at = Instant::now();
        Ok(true)
    }
}

fn collector_loop(worker: &Worker, sink: &dyn LineageSink) {
    let Some(catalog) = worker.catalog.upgrade() else { return };
    let mut rx = catalog.subscribe_commits();
    let key = (catalog.path().to_path_buf(), worker.sink.clone());
    let stored = catalog.state().sinks.get(&worker.sink).map(|s| (**s).clone()).unwrap_or_default();
    let mut record = stored.clone();
    record.delivered_seq = record.delivered_seq.max(acked(&key));
    drop(catalog);
    worker.update(|s| s.delivered_seq = record.delivered_seq);
    *worker.acknowledged.lock().unwrap_or_else(|p| p.into_inner()) = Some(record.clone());
    let mut cursor = Cursor { key, stored, record, persisted_at: Instant::now() };
    while worker.running() {
        let Some(catalog) = worker.catalog.upgrade() else { return };
        let owned = own(worker, &catalog);
        match owned {
            Ok(None) => {
                // (taken over from another process: on from where it left the cursor)
                let stored = catalog.state().sinks.get(&worker.sink).map(|s| (**s).clone()).unwrap_or_default();
                if stored.delivered_seq > cursor.record.delivered_seq || stored.owner != cursor.stored.owner {
                    let mut record = stored.clone();
                    record.delivered_seq = record.delivered_seq.max(cursor.record.delivered_seq);
                    cursor.stored = stored;
                    cursor.record = record;
                }
            }
            Ok(Some(wait)) => {
                let at = catalog.state().sinks.get(&worker.sink).map_or(0, |s| s.delivered_seq);
                worker.update(|s| s.delivered_seq = s.delivered_seq.max(at));
                drop(catalog);
                if !wait_for_commit(worker, &mut rx, wait) {
                    return;
                }
                continue;
            }
            Err(e) => {
                drop(catalog);
                worker.failed(format!("taking over lineage sink {}: {e}", worker.sink));
                if !worker.sleep(FIRST_BACKOFF) {
                    return;
                }
                continue;
            }
        }
        drop(catalog);
        match deliver_round(worker, sink, &mut cursor) {
            Ok(Some(true)) => {} // more to read
            Ok(Some(false)) => {
                // caught up: durable within PERSIST_EVERY, then wait for the next commit
                if cursor.dirty() {
                    let due = PERSIST_EVERY.saturating_sub(cursor.persisted_at.elapsed());
                    if !wait_for_commit(worker, &mut rx, due) {
                        return;
                    }
                    if cursor.persisted_at.elapsed() >= PERSIST_EVERY {
                        if let Err(e) = cursor.persist(worker) {
                            worker.failed(format!("recording the delivered commit_seq: {e}"));
                        }
                    }
                } else if !wait_for_commit(worker, &mut rx, Duration::from_secs(3600)) {
                    return;
                }
            }
            Ok(None) => return, // detached
            Err(e) => {
                worker.failed(e.message);
                if !worker.sleep(FIRST_BACKOFF) {
                    return;
                }
            }
        }
        if cursor.dirty() && cursor.persisted_at.elapsed() >= PERSIST_EVERY {
            if let Err(e) = cursor.persist(worker) {
                worker.failed(format!("recording the delivered commit_seq: {e}"));
            }
        }
    }
}

/// Stores `record` as the cursor of `sink`, unless the stored one is as far already (DETACH
/// stored what the worker acknowledged).
fn store_cursor(catalog: &Catalog, sink: &str, record: &SinkRecord) -> Result<()> {
    let stored = catalog.state().sinks.get(sink).map(|s| (**s).clone()).unwrap_or_default();
    if stored.delivered_seq > record.delivered_seq
        || (stored.delivered_seq == record.delivered_seq && stored.rejected == record.rejected)
    {
        return Ok(());
    }
    if let Some(owner) = &record.owner {
        if stored.owner.as_ref() != Some(owner) {
            return Ok(()); // another process took the sink over: its cursor is its own now
        }
    }
    let mut record = record.clone();
    if record.owner.is_some() {
        record.lease_until_us = Some(now_us() + lease().as_micros() as i64); // (renewed as it delivers)
    }
    let txn = catalog.begin();
    let from_owner = stored.owner.clone();
    txn.stage_sink(SinkChange { name: sink.into(), from_seq: stored.delivered_seq, from_owner, record })?;
    txn.commit()?;
    Ok(())
}

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

/// Whether this worker still holds its sink (renewing its lease when half of it is gone); None
/// when the lake was detached.
fn still_own(worker: &Worker) -> Result<Option<bool>> {
    let Some(catalog) = worker.catalog.upgrade() else { return Ok(None) };
    if !catalog.is_log_resident() {
        return Ok(Some(true));
    }
    Ok(Some(own(worker, &catalog)?.is_none()))
}

/// Whether this worker delivers to its sink now: None when it does (a plain lake, one process:
/// always; through a commit log: holding the sink's lease, claimed or renewed here), else how
/// long to wait before looking again (another process holds it).
fn own(worker: &Worker, catalog: &Catalog) -> Result<Option<Duration>> {
    if !catalog.is_log_resident() {
        return Ok(None);
    }
    catalog.catch_up()?;
    let stored = catalog.state().sinks.get(&worker.sink).map(|s| (**s).clone()).unwrap_or_default();
    let now = now_us();
    if let Some((_, until)) = stored.held_by_other(&worker.owner_id, now) {
        return Ok(Some(Duration::from_micros((until - now) as u64 + 1000).min(Duration::from_secs(60))));
    }
    let mine = stored.owner.as_deref() == Some(worker.owner_id.as_str());
    if mine && stored.lease_until_us.unwrap_or(0) - now > lease().as_micros() as i64 / 2 {
        return Ok(None);
    }
    let record = SinkRecord {
        owner: Some(worker.owner_id.clone()),
        lease_until_us: Some(now + lease().as_micros() as i64),
        ..stored.clone()
    };
    let txn = catalog.begin();
    txn.stage_sink(SinkChange {
        name: worker.sink.clone(),
        from_seq: stored.delivered_seq,
        from_owner: stored.owner.clone(),
        record,
    })?;
    match txn.commit() {
        Ok(_) => Ok(None),
        Err(e) if e.kind == crate::error::ErrorKind::Conflict => Ok(Some(TICK)), // raced: look again
        Err(e) => Err(e),
    }
}

/// Makes what each collector of `catalog` acknowledged durable now (DETACH, a connection's
/// close): the next process does not send it again. Best effort: on failure, it is sent again.
pub fn persist_acknowledged(catalog: &Catalog) {
    if catalog.read_only() {
        return;
    }
    for w in workers_of(catalog).iter().filter(|w| w.sink != history::SINK) {
        let Some(mut record) = w.acknowledged() else { continue };
        record.delivered_at_us = Some(chrono::Utc::now().timestamp_micros());
        if let Err(e) = store_cursor(catalog, &w.sink, &record) {
            eprintln!("skade: recording what {} acknowledged failed ({e}); it may get those events again", w.sink);
        }
    }
}

/// Gives up the leases this process's workers hold on `catalog`'s sinks (DETACH): another
/// process takes over at once rather than after the lease lapses. Best effort.
pub fn release_leases(catalog: &Catalog) {
    if catalog.read_only() || !catalog.is_log_resident() {
        return;
    }
    for w in workers_of(catalog) {
        let stored = catalog.state().sinks.get(&w.sink).map(|s| (**s).clone());
        let Some(stored) = stored.filter(|s| s.owner.as_deref() == Some(w.owner_id.as_str())) else { continue };
        let record = SinkRecord { owner: None, lease_until_us: None, ..stored.clone() };
        let txn = catalog.begin();
        let change = SinkChange {
            name: w.sink.clone(),
            from_seq: stored.delivered_seq,
            from_owner: stored.owner.clone(),
            record,
        };
        let _ = txn.stage_sink(change).and_then(|()| txn.commit().map(drop));
    }
}

/// Sends the events after the cursor, one round: Some(true) when more may follow, Some(false)
/// when caught up, None when the lake was detached.
fn deliver_round(worker: &Worker, sink: &dyn LineageSink, cursor: &mut Cursor) -> Result<Option<bool>> {
    let Some(catalog) = worker.catalog.upgrade() else { return Ok(None) };
    let (events, read) = events::since(&catalog, cursor.record.delivered_seq, ROUND_RECORDS)?;
    let Some(read) = read else { return Ok(Some(false)) };
    let naming = Naming { catalog: &catalog, namespace: &worker.namespace };
    let bodies: Vec<(u64, Value)> = events.iter().map(|e| (e.last_seq, run_event(&naming, e))).collect();
    drop(catalog); // (a collector that hangs must not keep the lake open)
    for (seq, body) in bodies {
        let mut backoff = FIRST_BACKOFF;
        loop {
            // Through a commit log, the lease is held (renewed) event by event: a round can outlast
            // it (a slow or failing collector), and another process may have taken the sink over.
            match still_own(worker)? {
                Some(true) => {}
                Some(false) => return Ok(Some(true)), // taken over: the loop looks again
                None => return Ok(None),
            }
            match sink.send(&body) {
                Outcome::Delivered => {
                    worker.update(|s| {
                        s.delivered += 1;
                        s.failures = 0;
                        s.last_error = None;
                    });
                    break;
                }
                Outcome::Rejected(message) => {
                    cursor.record.rejected += 1;
                    cursor.record.last_rejected_seq = Some(seq);
                    cursor.record.last_rejection = Some(message.clone());
                    worker.failed(message);
                    break;
                }
                Outcome::Failed(message) => {
                    worker.failed(message);
                    if !worker.sleep(backoff) {
                        return Ok(None);
                    }
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
        advance(worker, cursor, seq);
    }
    advance(worker, cursor, read);
    Ok(Some(true))
}

fn advance(worker: &Worker, cursor: &mut Cursor, seq: u64) {
    if seq > cursor.record.delivered_seq {
        cursor.record.delivered_seq = seq;
        note_acked(&cursor.key, seq);
        worker.update(|s| s.delivered_seq = seq);
    }
    *worker.acknowledged.lock().unwrap_or_else(|p| p.into_inner()) = Some(cursor.record.clone());
}

/// Brings the history table up to date now, in the caller, and waits up to `timeout` for every
/// collector of `catalog` to acknowledge every event committed so far.
pub fn flush(catalog: &Catalog, timeout: Duration) -> Result<()> {
    let workers = workers_of(catalog);
    if workers.is_empty() && catalog.read_only() {
        return Err(Error::invalid(format!(
            "skade catalog {} is attached read-only: a read-only ATTACH delivers no lineage (a sink's \
             cursor is a write)",
            catalog.path().display()
        )));
    }
    if workers.is_empty() {
        return Err(Error::invalid(format!(
            "lineage is off for skade catalog {}: ATTACH it with LINEAGE true (or OPENLINEAGE_URL)",
            catalog.path().display()
        )));
    }
    let head = catalog.head_seq();
    if let Some(w) = workers.iter().find(|w| w.sink == history::SINK) {
        history::catch_up(catalog, &w.namespace)?;
    }
    let end = Instant::now() + timeout;
    for w in workers.iter().filter(|w| w.sink != history::SINK) {
        // (done when no event up to the head is left: the commits after the last one may make none)
        loop {
            // (another process may be the one delivering to it: its stored cursor counts too)
            catalog.catch_up()?;
            let stored = catalog.state().sinks.get(&w.sink).map_or(0, |s| s.delivered_seq);
            let at = w.status().delivered_seq.max(stored);
            if at >= head || events::since(catalog, at, (head - at) as usize)?.0.iter().all(|e| e.last_seq > head) {
                break;
            }
            if !w.running() {
                return Err(Error::io(format!("lineage delivery to {} stopped: the lake was detached", w.sink)));
            }
            if Instant::now() >= end {
                let last = w.status().last_error.map(|e| format!(" (last error: {e})")).unwrap_or_default();
                return Err(Error::io(format!(
                    "lineage delivery to {} is still behind commit_seq {head} after {} ms{last}",
                    w.sink,
                    timeout.as_millis()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    persist_acknowledged(catalog);
    Ok(())
}
