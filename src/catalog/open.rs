//! An open catalog: one ATTACH's handle on the shared open store, its in-memory state, and the
//! commit path (group commit, durability, recovery after an I/O failure) that moves its pointers.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use iceberg::io::FileIO;
use tokio::sync::broadcast;

use super::chains::{self, SharedTurns};
use super::commit::{apply_group, CommitRequest, Committer, Staged, Ticket};
use super::log_commit::{Landed, LogLink, LogStatus};
use super::options::{AttachOptions, Durability};
use super::residency;
use super::state::CatalogState;
use super::store::{CommitRecord, Store};
use crate::error::{Error, ErrorKind, Result};
use crate::format::duckdb_types::Nanoseconds;
use crate::format::metadata::MetadataCache;
use crate::io::absolute;
use crate::lookup::cache::LookupCache;
use crate::read::caches::ReadCaches;

/// How long a commit waits for another process's turn on a table before it commits without
/// (a process stopped or hung while holding it must not stop every other writer of the table).
const TURN_WAIT: Duration = Duration::from_secs(2);

/// Buffered commit events per subscriber; a slower subscriber lags and recovers from the log.
pub const COMMIT_EVENT_BUFFER: usize = 1024;

/// A commit as published to subscribers: exactly the durable commit-log row.
pub type CommitEvent = CommitRecord;

/// One ATTACH of a catalog. Several handles (ATTACHes, DuckDB databases) in one process share
/// one open store, because the file can only be opened once.
pub struct Catalog {
    pub(crate) inner: Arc<Inner>,
    actor: String,
    read_only: bool,
    /// The ATTACH's TARGET_FILE_SIZE (see [`AttachOptions::target_file_size`]).
    pub(crate) target_file_size: Option<u64>,
    /// The ATTACH's TIMESTAMP_NS.
    nanoseconds: Nanoseconds,
    /// The ATTACH's FORMAT_VERSION: the Iceberg format of the tables it creates.
    format_version: iceberg::spec::FormatVersion,
}

pub(crate) struct Inner {
    pub store: Store,
    /// The warehouse: a folder's absolute path or an `s3://` prefix.
    pub data_path: String,
    pub durability: Durability,
    state: RwLock<Published>,
    committer: Committer,
    next_snapshot_id: AtomicI64,
    pub metadata: MetadataCache,
    pub read_caches: Arc<ReadCaches>,
    pub lookup_cache: LookupCache,
    pub file_io: FileIO,
    events: broadcast::Sender<CommitEvent>,
    /// Acknowledged commits that are not durable yet (DURABILITY 'eventual' or 'none').
    pending: Mutex<Pending>,
    /// Held for the whole of a flush.
    flushing: Mutex<()>,
    /// The `Catalog` handles on it (ATTACHes, transactions).
    handles: AtomicUsize,
    /// A reopened file lacks acknowledged commits that were not durable: they are written to it
    /// again before the next commit or flush (`recover_store`).
    needs_restore: AtomicBool,
    /// The last commit_seq known to be durable: the commit feed serves nothing beyond it.
    durable_seq: AtomicU64,
    /// One commit turn per table uuid (see `turns`).
    table_locks: Mutex<HashMap<String, Arc<super::turns::Turn>>>,
    /// A log-resident catalog's link to its commit log (its commits go through it).
    log: Option<LogLink>,
    /// When (ms of [`clock_ms`]) a transaction last began, and the log was last followed: a
    /// bucket log is polled only while the catalog is in use (see `spawn_follower`).
    last_used_ms: AtomicU64,
    last_followed_ms: AtomicU64,
    /// The URL of the lake in a bucket this catalog file caches (every host's cache names the
    /// same lake by it).
    lake_url: std::sync::OnceLock<String>,
}

/// The committed state, and its generation: a number that grows whenever the state is replaced
/// (a commit, another process's commit followed from the log, a reload). A transaction reads one
/// generation from its start to its end; DuckDB's catalog version is made of it, so a prepared
/// statement keeps its plan exactly while the state it was bound against is current.
struct Published {
    state: Arc<CatalogState>,
    generation: u64,
}

impl Published {
    fn replace(&mut self, state: CatalogState) {
        self.state = Arc::new(state);
        self.generation += 1;
    }

    /// Applies the requests of a group that landed; a group whose every request failed changes
    /// nothing, the generation included.
    fn apply<T>(&mut self, group: &[CommitRequest], results: &[Result<T>]) {
        if results.iter().any(|r| r.is_ok()) {
            let mut state = CatalogState::clone(&self.state);
            for (request, result) in group.iter().zip(results) {
                if result.is_ok() {
                    apply_request(&mut state, request);
                }
            }
            self.replace(state);
        }
    }
}

/// Milliseconds since the process first asked: a monotonic clock for idleness.
fn clock_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// How long after its last transaction a catalog on a bucket log stops polling it: an idle
/// attach costs no request (its next transaction looks itself).
const BUCKET_IDLE: Duration = Duration::from_secs(30);

/// How long an acknowledged commit may stay non-durable under DURABILITY 'eventual'.
pub const EVENTUAL_FLUSH_INTERVAL: Duration = Duration::from_millis(200);

static OPEN: Mutex<Option<HashMap<PathBuf, Weak<Inner>>>> = Mutex::new(None);
/// Catalogs whose DETACH could not make their acknowledged commits durable (see `detach`).
static KEPT: Mutex<Vec<Arc<Inner>>> = Mutex::new(Vec::new());

impl Catalog {
    /// Opens (or creates) the lake in a bucket at `url` (`s3://bucket/prefix`): this host's
    /// cache of it, through the bucket's commit log (see `catalog::lake`).
    pub fn open_lake(url: &str, options: AttachOptions) -> Result<Catalog> {
        let is_open = |file: &Path| {
            let key = file.canonicalize().unwrap_or_else(|_| file.to_path_buf());
            let registry = OPEN.lock().unwrap_or_else(|p| p.into_inner());
            registry.as_ref().and_then(|r| r.get(&key)).is_some_and(|w| w.strong_count() > 0)
        };
        let (cache_file, mut options) = super::lake::resolve(url, options, is_open)?;
        // A read-only host still folds the bucket's log into its cache (the cache is this
        // host's, not the lake): the file opens writable, the attach commits nothing.
        let read_only = std::mem::replace(&mut options.read_only, false);
        let mut catalog = match Catalog::open(&cache_file, options.clone()) {
            // The cache file itself is damaged (not redb, a page redb cannot read): it is never
            // the only copy of anything, so it is set aside and rebuilt from the bucket.
            Err(e) if damaged_cache(&e, &cache_file) => {
                eprintln!(
                    "skade: the cache of the lake {url} is damaged ({}); rebuilding it from the bucket",
                    e.message
                );
                super::lake::set_aside(cache_file.parent().unwrap_or(Path::new(".")))?;
                Catalog::open(&cache_file, options)?
            }
            other => other?,
        };
        catalog.read_only = read_only;
        let _ = catalog.inner.lake_url.set(crate::io::object::normalize(url)?);
        Ok(catalog)
    }

    /// Opens (or creates) the catalog file at `path`.
    pub fn open(path: &Path, options: AttachOptions) -> Result<Catalog> {
        if options.cache_path.is_some() {
            return Err(Error::invalid(format!(
                "CACHE_PATH is for a lake in a bucket (ATTACH 's3://bucket/prefix'); {} is a catalog file",
                path.display()
            )));
        }
        crate::format::avro_names::install(); // before any manifest is read or written
        let path = absolute(path)?;
        let data_path = options.data_path.as_deref().map(data_location).transpose()?;
        let log = crate::commit_log::provider_for(options.commit_log.as_ref());
        let mut registry = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        let registry = registry.get_or_insert_with(HashMap::new);
        let key = path.canonicalize().unwrap_or_else(|_| path.clone());
        if let Some(inner) = registry.get(&key).and_then(Weak::upgrade) {
            residency::check_shared_open(&path, inner.log.as_ref(), log.as_deref(), &options)?;
            if inner.store.read_only() && !options.read_only {
                return Err(Error::permission(format!(
                    "skade catalog {} is already attached read-only in this process; detach it first",
                    path.display()
                )));
            }
            shared_options_match(&path, &inner, data_path.as_deref(), &options)?;
            inner.handles.fetch_add(1, Ordering::SeqCst);
            return Ok(Catalog {
                inner,
                actor: options.actor,
                read_only: options.read_only,
                target_file_size: options.target_file_size,
                nanoseconds: options.timestamp_ns,
                format_version: options.format_version,
            });
        }
        // A handle of this process that is closing (flushing at DETACH) still holds the file for
        // a moment: wait for it rather than report another process.
        let closing = registry.contains_key(&key);
        let mut attempt = 0;
        let opened = loop {
            match residency::open(&path, &options, data_path.as_deref()) {
                Err(e) if closing && e.kind == ErrorKind::Permission && attempt < 200 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => break other?,
            }
        };
        let residency::Opened { store, loaded, log } = opened;
        let (events, _) = broadcast::channel(COMMIT_EVENT_BUFFER);
        let inner = Arc::new(Inner {
            store,
            data_path: loaded.data_path,
            durability: options.durability,
            state: RwLock::new(Published { state: Arc::new(loaded.state), generation: 0 }),
            committer: Committer::default(),
            next_snapshot_id: AtomicI64::new(loaded.next_snapshot_id),
            metadata: MetadataCache::default(),
            read_caches: Arc::default(),
            lookup_cache: LookupCache::default(),
            file_io: crate::io::storage::file_io(),
            events,
            pending: Mutex::new(Pending::default()),
            flushing: Mutex::new(()),
            needs_restore: AtomicBool::new(false),
            handles: AtomicUsize::new(0),
            durable_seq: AtomicU64::new(loaded.commit_seq),
            table_locks: Mutex::new(HashMap::new()),
            log,
            last_used_ms: AtomicU64::new(clock_ms()),
            last_followed_ms: AtomicU64::new(clock_ms()),
            lake_url: std::sync::OnceLock::new(),
        });
        if inner.durability == Durability::Eventual && !inner.store.read_only() {
            spawn_flusher(Arc::downgrade(&inner));
        }
        if let Some(link) = &inner.log {
            spawn_follower(Arc::downgrade(&inner), link.poll);
        }
        let key = path.canonicalize().unwrap_or(path);
        registry.retain(|_, w| w.strong_count() > 0);
        registry.insert(key, Arc::downgrade(&inner));
        inner.handles.fetch_add(1, Ordering::SeqCst);
        Ok(Catalog {
            inner,
            actor: options.actor,
            read_only: options.read_only,
            target_file_size: options.target_file_size,
            nanoseconds: options.timestamp_ns,
            format_version: options.format_version,
        })
    }

    pub fn path(&self) -> &Path {
        &self.inner.store.path
    }

    /// What names this lake to the world (lineage's namespace and run ids): a lake in a bucket's
    /// URL, the same on every host, else the catalog file's path.
    pub fn identity(&self) -> String {
        match self.inner.lake_url.get() {
            Some(url) => url.clone(),
            None => self.path().display().to_string(),
        }
    }

    pub fn data_path(&self) -> &str {
        &self.inner.data_path
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// How this ATTACH stores new TIMESTAMP_NS columns (TIMESTAMP_NS option).
    pub fn nanoseconds(&self) -> Nanoseconds {
        self.nanoseconds
    }

    /// The Iceberg format version of the tables this ATTACH creates (FORMAT_VERSION option).
    pub fn format_version(&self) -> iceberg::spec::FormatVersion {
        self.format_version
    }

    /// The caches every read of this catalog shares (manifests, footers, delete files).
    pub fn read_caches(&self) -> Arc<ReadCaches> {
        self.inner.read_caches.clone()
    }

    pub fn actor(&self) -> &str {
        &self.actor
    }

    /// Another handle on this catalog whose commits name `actor` (a REST client's commits name
    /// the client).
    pub fn with_actor(&self, actor: &str) -> Catalog {
        let mut other = self.clone();
        other.actor = actor.to_string();
        other
    }

    /// The current committed state.
    pub fn state(&self) -> Arc<CatalogState> {
        self.inner.state.read().unwrap_or_else(|p| p.into_inner()).state.clone()
    }

    /// The current committed state and its generation (see [`Published`]), read together.
    pub(super) fn state_and_generation(&self) -> (Arc<CatalogState>, u64) {
        let published = self.inner.state.read().unwrap_or_else(|p| p.into_inner());
        (published.state.clone(), published.generation)
    }

    /// Every commit with `seq > since`, in order, at most `limit`.
    /// Only durable commits are served: under 'eventual' a commit appears once flushed.
    pub fn commits_since(&self, since: u64, limit: usize) -> Result<Vec<CommitRecord>> {
        self.inner.usable_store()?;
        if let Some(link) = &self.inner.log {
            self.follow_if_stale(link)?; // (a feed read on its own, no transaction around it)
        }
        let durable = self.inner.durable_seq.load(Ordering::SeqCst);
        let mut rows = self.inner.store.commits_since(since, limit)?;
        rows.retain(|r| r.seq <= durable);
        Ok(rows)
    }

    /// The last commit_seq the commit feed serves (durable: under 'eventual' once flushed).
    pub fn head_seq(&self) -> u64 {
        self.inner.durable_seq.load(Ordering::SeqCst)
    }

    /// The last commit with a snapshot of the table `uuid` (dropped tables' too).
    pub fn last_commit_of(&self, uuid: &str) -> Result<Option<CommitRecord>> {
        self.inner.usable_store()?;
        self.inner.store.last_commit_of(uuid)
    }

    /// A table's metadata at `location` (cached; the file is read once).
    pub fn metadata_at(&self, location: &str) -> Result<Arc<iceberg::spec::TableMetadata>> {
        self.inner.metadata.get(location)
    }

    /// Commit events, published once each commit is durable and visible.
    pub fn subscribe_commits(&self) -> broadcast::Receiver<CommitEvent> {
        self.inner.events.subscribe()
    }

    pub fn commit_seq_of(&self, table_uuid: &str, snapshot_id: i64) -> Result<Option<u64>> {
        self.inner.usable_store()?;
        self.inner.store.commit_seq_of(table_uuid, snapshot_id)
    }

    /// A snapshot id no other snapshot of the catalog's tables has, whichever process stages it.
    pub(crate) fn allocate_snapshot_id(&self) -> Result<i64> {
        match &self.inner.log {
            Some(link) => {
                self.inner.usable_store()?;
                link.next_snapshot_id(&self.inner.store)
            }
            None => Ok(self.inner.next_snapshot_id.fetch_add(1, Ordering::SeqCst)),
        }
    }

    /// Whether the catalog commits through a commit log (several processes may have it open).
    pub fn is_log_resident(&self) -> bool {
        self.inner.log.is_some()
    }

    /// The commit log this catalog commits through, if it is log-resident, as this process sees
    /// it.
    pub fn commit_log_status(&self) -> Result<Option<LogStatus>> {
        let Some(link) = &self.inner.log else { return Ok(None) };
        self.inner.usable_store()?;
        Ok(Some(link.status(self.inner.store.log_position()?)?))
    }

    /// Writes a checkpoint of a bucket log now, after following it (hosts write one by
    /// themselves every `checkpoint::every()` positions), and truncates the log below it as they
    /// do. Its position.
    pub fn write_checkpoint(&self) -> Result<u64> {
        let link = self.inner.log.as_ref().filter(|l| l.in_bucket()).ok_or_else(|| {
            Error::invalid(format!(
                "skade catalog {} has no commit log in a bucket: checkpoints are a bucket log's",
                self.inner.store.path.display()
            ))
        })?;
        if self.read_only {
            return Err(Error::permission("a READ_ONLY attach writes no checkpoint"));
        }
        self.inner.follow(link)?;
        link.checkpoint(&self.inner.store)
    }

    /// The catalog file's fold as a checkpoint would hold it: its log position and a hash of
    /// every row but the file's own (`meta`): hosts of a lake at one position agree on it.
    pub fn fold_digest(&self) -> Result<(u64, u64)> {
        self.inner.usable_store()?;
        super::checkpoint::digest(&self.inner.store)
    }

    /// Brings the in-memory state up to the catalog file, which other processes fold their
    /// commits into (a log-resident catalog; a plain one has no other writer).
    pub(crate) fn catch_up(&self) -> Result<()> {
        let Some(link) = &self.inner.log else { return Ok(()) };
        if self.follow_if_stale(link)? {
            return Ok(());
        }
        self.inner.reload(link)
    }

    /// Marks the catalog in use and, on a bucket log, brings a fold older than the poll (an
    /// idle attach's, which polls no more) up to the log: other hosts fold nothing into this
    /// host's cache. Whether it followed the log.
    fn follow_if_stale(&self, link: &LogLink) -> Result<bool> {
        self.inner.last_used_ms.store(clock_ms(), Ordering::Relaxed);
        let age = clock_ms().saturating_sub(self.inner.last_followed_ms.load(Ordering::Relaxed));
        // (a head this host's own commit read within the poll is as fresh as a poll's)
        let looked = link.looked_ago().is_some_and(|ago| ago < link.poll);
        if link.in_bucket() && age > link.poll.as_millis() as u64 && !looked {
            self.inner.follow(link)?;
            return Ok(true);
        }
        Ok(false)
    }

    pub(crate) fn durable_at_commit(&self) -> bool {
        self.inner.durability.durable_at_commit()
    }

    /// The commit turns of tables across processes (a log-resident catalog; `Transaction::commit`
    /// takes them after the in-process ones): processes committing to one table take turns from
    /// reading its head to handing their request on, as threads of one process do, instead of
    /// racing and redoing their metadata until one gives up (`chains`). None held for a plain
    /// catalog (one process commits to it), or when one was kept longer than [`TURN_WAIT`].
    pub(crate) fn cross_process_turns<'a>(&self, uuids: impl IntoIterator<Item = &'a str>) -> Result<SharedTurns> {
        match self.shares_turns() {
            true => SharedTurns::take(&chains::turns_file(&self.inner.store.path), uuids, TURN_WAIT),
            false => Ok(SharedTurns::none()),
        }
    }

    /// The same, once nothing of the tables is in flight in any process (see
    /// [`SharedTurns::take_settled`]; `drain` for a commit that is not an append).
    pub(crate) fn settled_cross_process_turns(&self, uuids: &[&str], drain: bool) -> Result<SharedTurns> {
        if !self.shares_turns() {
            return Ok(SharedTurns::none());
        }
        // (under the turns, the committed head: what the processes that held them folded)
        let pointer = |uuid: &str| {
            self.catch_up()?;
            Ok(self.state().table_by_uuid(uuid).map(|t| t.metadata_location.clone()))
        };
        SharedTurns::take_settled(&chains::turns_file(&self.inner.store.path), uuids, TURN_WAIT, drain, pointer)
    }

    /// Requests of these chains failed (table uuid, chain, the location it would have put, the
    /// record of the commit in flight it built on, if any): the pointers built on them are doomed
    /// (see `SharedTurns::doom`; the appends waiting on them give up and are rebuilt). Best
    /// effort: a record is trusted no longer than `chains::chain_wait`.
    pub(crate) fn end_chains(&self, failed: &[(String, u64, String, Option<chains::Tentative>)]) {
        let doomed = self.cross_process_turns(failed.iter().map(|(u, ..)| u.as_str())).and_then(|turns| {
            failed
                .iter()
                .try_for_each(|(uuid, chain, location, base)| turns.doom(uuid, *chain, location, base.as_ref()))
        });
        if let Err(e) = doomed {
            eprintln!("skade: {}: ending a chain of appends: {e}", self.inner.store.path.display());
        }
    }

    fn shares_turns(&self) -> bool {
        self.inner.log.is_some() && !self.inner.store.read_only()
    }

    /// The commit turn of one table (see `Transaction::commit`).
    pub(crate) fn table_lock(&self, uuid: &str) -> Arc<super::turns::Turn> {
        let mut locks = self.inner.table_locks.lock().unwrap_or_else(|p| p.into_inner());
        if locks.len() > 4096 {
            locks.retain(|_, l| Arc::strong_count(l) > 1); // forget idle tables
        }
        locks.entry(uuid.to_string()).or_default().clone()
    }

    /// Makes every acknowledged commit durable now (CHECKPOINT; DETACH does it too).
    pub fn flush(&self) -> Result<()> {
        self.inner.flush()?;
        // Kept alive by a failed DETACH: durable now, it may close.
        KEPT.lock().unwrap_or_else(|p| p.into_inner()).retain(|k| !Arc::ptr_eq(k, &self.inner));
        Ok(())
    }

    /// DETACH: makes every acknowledged commit durable. When that fails (a full disk), the open
    /// catalog, with the commits that are not durable yet, stays in this process rather than
    /// closing and losing them: attached again, a CHECKPOINT (or DETACH) retries.
    pub fn detach(&self) -> Result<()> {
        if self.inner.store.read_only() {
            return Ok(());
        }
        let waiting = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner()).commits.len();
        self.flush().map_err(|e| {
            let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
            if !kept.iter().any(|k| Arc::ptr_eq(k, &self.inner)) {
                kept.push(self.inner.clone());
            }
            Error::new(
                e.kind,
                format!(
                    "DETACH could not make {waiting} acknowledged commit(s) of skade catalog {} durable ({}); \
                     they are kept in this process: once that is fixed, ATTACH the catalog again and run \
                     CHECKPOINT",
                    self.path().display(),
                    e.message
                ),
            )
        })
    }

    /// Group-commits `request`; on success the new state is visible before this returns.
    pub(crate) fn commit(&self, request: CommitRequest) -> Result<Vec<CommitRecord>> {
        let ticket = self.submit(request);
        ticket.ready(Ok(()));
        self.finish(ticket)
    }

    /// Queues `request` for the next group commit (see [`Committer::submit`]): it lands after
    /// every request queued before it. Mark the ticket ready, then [`Catalog::finish`] it.
    pub(crate) fn submit(&self, request: CommitRequest) -> Ticket {
        self.inner.committer.submit(request)
    }

    /// Whether appends to one table may build on a request still in flight (see `turns`): not
    /// through a commit log, whose cross-process turns order commits of other processes too.
    pub(crate) fn chains_appends(&self) -> bool {
        self.inner.log.is_none()
    }

    /// The outcome of a submitted request (see [`Catalog::commit`]).
    pub(crate) fn finish(&self, ticket: Ticket) -> Result<Vec<CommitRecord>> {
        let inner = &self.inner;
        if let Some(link) = &inner.log {
            return inner.committer.finish(ticket, |group| inner.commit_through_log(link, &group));
        }
        inner.committer.finish(ticket, |group| {
            crate::failpoint::hit("before_catalog_commit");
            if let Err(e) = inner.recover_store() {
                return group.iter().map(|_| Err(e.clone())).collect();
            }
            let now_us = chrono::Utc::now().timestamp_micros();
            let next_snapshot_id = inner.next_snapshot_id.load(Ordering::SeqCst);
            let durable = inner.durability.durable_at_commit();
            let mut staged = None;
            let results = match apply_group(&inner.store, &group, durable, next_snapshot_id, now_us, &mut staged) {
                Ok(results) => results,
                Err(e) => match inner.landed_after_failure(staged) {
                    Some(results) => results,
                    None => return group.iter().map(|_| Err(e.clone())).collect(),
                },
            };
            crate::failpoint::hit("after_catalog_commit");
            inner.state.write().unwrap_or_else(|p| p.into_inner()).apply(&group, &results);
            let records: Vec<CommitRecord> = results.iter().flatten().flatten().cloned().collect();
            if inner.durability.durable_at_commit() {
                inner.publish(records);
            } else {
                // Still under the leader lock: the next flush cannot miss these files or commits.
                let mut pending = inner.pending.lock().unwrap_or_else(|p| p.into_inner());
                let mut consumers = false;
                for (request, result) in group.iter().zip(&results) {
                    if result.is_ok() {
                        pending.files.extend(request.files.iter().cloned());
                        consumers |= !request.consumers.is_empty() || !request.sinks.is_empty();
                    }
                }
                pending.consumers |= consumers;
                if !records.is_empty() || consumers {
                    pending.since.get_or_insert_with(Instant::now);
                }
                pending.commits.extend(records);
            }
            results
        })
    }
}

/// Commits acknowledged under 'eventual' or 'none' and not yet durable.
#[derive(Default)]
struct Pending {
    files: Vec<String>,
    commits: Vec<CommitRecord>,
    /// Whether a consumer or a lineage sink changed since the last flush (their changes take no
    /// commit_seq).
    consumers: bool,
    /// When the oldest of them was acknowledged.
    since: Option<Instant>,
    /// Counts the times the queue was emptied: a flush that synced part of the queue before
    /// taking the commit lock knows by it whether that part is still the queue's start.
    generation: u64,
}

impl Pending {
    /// Everything queued (now durable, or to be made durable), leaving an empty queue of the
    /// next generation.
    fn drain(&mut self) -> Pending {
        let generation = self.generation + 1;
        let drained = std::mem::take(self);
        self.generation = generation;
        drained
    }
}

impl Inner {
    /// The commit path of a log-resident catalog (called by the group-commit leader): the group
    /// goes through the log, then the in-memory state follows the file, with this group's changes
    /// applied directly when nothing else landed in between. Appends chained onto other
    /// processes' appends go once those have landed: the group is committed in segments, each
    /// after what its first request built on (`chains`).
    fn commit_through_log(&self, link: &LogLink, group: &[CommitRequest]) -> Vec<Result<Vec<CommitRecord>>> {
        if group.iter().all(|q| q.awaits.is_empty()) {
            return self.commit_segment_through_log(link, group);
        }
        let turns = chains::turns_file(&self.store.path);
        let mut results = Vec::with_capacity(group.len());
        while results.len() < group.len() {
            let start = results.len();
            let end = chains::segment_end(&turns, link, &self.store, group, start);
            results.extend(self.commit_segment_through_log(link, &group[start..end]));
        }
        let chained = group.iter().zip(&results).filter(|(q, r)| !q.awaits.is_empty() && r.is_ok()).count();
        link.chained.fetch_add(chained as u64, Ordering::Relaxed);
        results
    }

    fn commit_segment_through_log(&self, link: &LogLink, group: &[CommitRequest]) -> Vec<Result<Vec<CommitRecord>>> {
        crate::failpoint::hit("before_catalog_commit");
        let landed = self.usable_store().and_then(|_| link.commit(&self.store, group));
        let Landed { results, prepared_on, won, folded_alone } = match landed {
            Ok(landed) => landed,
            Err(e) => {
                let _ = self.reload(link); // (winners folded on the way are visible all the same)
                return group.iter().map(|_| Err(e.clone())).collect();
            }
        };
        crate::failpoint::hit("after_catalog_commit");
        let applied_alone = won.is_some() && folded_alone && {
            let mut guard = self.state.write().unwrap_or_else(|p| p.into_inner());
            let alone = link.position.load(Ordering::SeqCst) == prepared_on;
            if alone {
                guard.apply(group, &results);
                link.position.store(prepared_on + 1, Ordering::SeqCst);
                self.publish(results.iter().flatten().flatten().cloned().collect());
            }
            alone
        };
        if !applied_alone {
            if won.is_some() && !folded_alone {
                // a fold that failed after the win (the file latched an I/O error): once more,
                // so that this process sees its own commit at its next statement
                let _ = self.usable_store().and_then(|_| link.catch_up(&self.store));
            }
            if let Err(e) = self.reload(link) {
                // the commit landed (its batch is in the log); the state catches up at the next poll
                eprintln!("skade: {}: reading the catalog after a commit failed: {e}", self.store.path.display());
            }
        }
        results
    }

    /// Brings the in-memory state of a log-resident catalog up to the catalog file (which every
    /// process folds its commits into), publishing the commits it had not seen, in order.
    fn reload(&self, link: &LogLink) -> Result<()> {
        if self.store.log_position()? <= link.position.load(Ordering::SeqCst) {
            return Ok(());
        }
        let loaded = self.store.load(None)?;
        let mut guard = self.state.write().unwrap_or_else(|p| p.into_inner());
        if loaded.log_position <= link.position.load(Ordering::SeqCst) {
            return Ok(()); // another thread got there first
        }
        let seen = self.durable_seq.load(Ordering::SeqCst);
        let mut records = self.store.commits_since(seen, usize::MAX)?;
        records.retain(|r| r.seq <= loaded.commit_seq);
        guard.replace(loaded.state);
        link.position.store(loaded.log_position, Ordering::SeqCst);
        self.durable_seq.fetch_max(loaded.commit_seq, Ordering::SeqCst);
        self.publish(records);
        Ok(())
    }

    /// One poll of a log-resident catalog: fold what the log holds past the file (a writable
    /// attach), truncate the log now and then, and bring the in-memory state up to the file.
    fn follow(&self, link: &LogLink) -> Result<()> {
        self.usable_store()?;
        self.last_followed_ms.store(clock_ms(), Ordering::Relaxed);
        if !self.store.read_only() {
            self.committer.exclusive(|| link.catch_up(&self.store))?;
            link.truncate(self.store.log_position()?)?;
        }
        self.reload(link)
    }

    fn publish(&self, records: Vec<CommitRecord>) {
        if let Some(last) = records.last() {
            self.durable_seq.fetch_max(last.seq, Ordering::SeqCst);
        }
        for r in records {
            let _ = self.events.send(r);
        }
    }

    /// Syncs the files of non-durable commits, then makes the catalog durable, with no commit in
    /// between: a pointer may only become durable after the files it references. The bulk of the
    /// syncing happens before taking the commit lock, so commits keep flowing meanwhile; under the
    /// lock only the files of commits that landed during that first pass remain. Pending commits
    /// leave the queue only once durable: on failure everything stays for the next attempt.
    fn flush(&self) -> Result<()> {
        if self.store.read_only() {
            return Ok(());
        }
        // One flush at a time: a second one could make commits durable whose files the first
        // has not synced yet.
        let _flushing = self.flushing.lock().unwrap_or_else(|p| p.into_inner());
        let (early_files, generation) = {
            let p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            (p.files.clone(), p.generation)
        };
        let early_synced = crate::io::sync_filesystems(early_files.iter().map(String::as_str));
        self.committer.exclusive(|| {
            early_synced.clone()?;
            // Commits only append to the queue (under the commit lock, held here): what is past
            // the files synced above landed meanwhile, unless the queue was emptied since (a
            // recovery restored it): then all of it is new.
            let (late_files, any) = {
                let p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let start = if p.generation == generation { early_files.len().min(p.files.len()) } else { 0 };
                (p.files[start..].to_vec(), !p.commits.is_empty() || p.consumers)
            };
            crate::io::sync_filesystems(late_files.iter().map(String::as_str))?;
            if self.store.failed() || self.needs_restore.load(Ordering::SeqCst) {
                return self.recover_store(); // makes the queue durable on the reopened file
            }
            if any {
                self.store.make_durable()?;
            }
            let done = self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain();
            self.publish(done.commits);
            Ok(())
        })
    }

    /// Recovers the store first if an I/O failure left it unusable (outside the commit path).
    /// (A read needs the file reopened, not the lost commits restored: it serves durable state.)
    pub(crate) fn usable_store(&self) -> Result<()> {
        if self.store.failed() {
            self.committer.exclusive(|| self.reopen_store())?;
        }
        Ok(())
    }

    /// The last commit_seq this process assigned (durable or not).
    fn last_seq(&self) -> u64 {
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let durable = self.durable_seq.load(Ordering::SeqCst);
        pending.commits.last().map_or(durable, |c| c.seq.max(durable))
    }

    /// Reopens the catalog file after redb latched an I/O failure (a full disk), so that commits
    /// work again once the cause is gone. The reopened file holds its last durable state: commits
    /// acknowledged but not yet durable ('eventual', 'none') are written to it again, with the
    /// files they reference synced first, so that no acknowledged commit is lost and the
    /// in-memory state stays what the file holds. Called with the commit lock held.
    fn recover_store(&self) -> Result<()> {
        self.reopen_store()?;
        if !self.needs_restore.load(Ordering::SeqCst) {
            return Ok(());
        }
        let pending = self.pending.lock().unwrap_or_else(|p| p.into_inner()).drain();
        let restored = crate::io::sync_filesystems(pending.files.iter().map(String::as_str)).and_then(|_| {
            let state = self.state.read().unwrap_or_else(|p| p.into_inner()).state.clone();
            let next_snapshot_id = self.next_snapshot_id.load(Ordering::SeqCst);
            self.store.restore(&state, &pending.commits, next_snapshot_id)
        });
        match restored {
            Ok(()) => {
                self.needs_restore.store(false, Ordering::SeqCst);
                self.publish(pending.commits);
                Ok(())
            }
            Err(e) => {
                // Put back, ahead of nothing: the commit lock is held.
                let mut p = self.pending.lock().unwrap_or_else(|p| p.into_inner());
                let generation = p.generation;
                *p = Pending { generation, ..pending };
                Err(e)
            }
        }
    }

    /// The first half of [`Self::recover_store`]: reopens a file redb latched an I/O failure on,
    /// and notes what the reopened file lacks (`needs_restore`: commits acknowledged but not
    /// durable) or holds beyond memory (a commit reported failed that landed after all: memory
    /// is reloaded from the file). Called with the commit lock held.
    fn reopen_store(&self) -> Result<()> {
        if !self.store.failed() {
            return Ok(());
        }
        self.store.reopen()?;
        if let Some(link) = &self.log {
            // the shared file holds what every process folded: the state follows it, in order
            return self.reload(link);
        }
        let file_seq = self.store.commit_seq()?;
        let last = self.last_seq();
        let consumers = self.pending.lock().unwrap_or_else(|p| p.into_inner()).consumers;
        if file_seq < last || consumers {
            // (consumer changes take no commit_seq: the file may lack them at the same seq)
            self.needs_restore.store(true, Ordering::SeqCst);
        } else if file_seq > last && !self.needs_restore.load(Ordering::SeqCst) {
            let loaded = self.store.load(None)?;
            self.state.write().unwrap_or_else(|p| p.into_inner()).replace(loaded.state);
            self.next_snapshot_id.fetch_max(loaded.next_snapshot_id, Ordering::SeqCst);
            self.durable_seq.fetch_max(loaded.commit_seq, Ordering::SeqCst);
        }
        Ok(())
    }

    /// After a group's catalog commit failed: recovers the file when redb latched an I/O failure,
    /// and returns the group's results if its commit landed in the file after all (the failure
    /// came after redb's commit point), None if it did not.
    fn landed_after_failure(&self, staged: Option<Staged>) -> Option<Vec<Result<Vec<CommitRecord>>>> {
        if !self.store.failed() {
            return None;
        }
        let staged = staged?; // (the next commit recovers the file)
        self.recover_store().ok()?;
        let committed: u64 = staged.results.iter().flatten().map(|r| r.len() as u64).sum();
        let seq = self.store.commit_seq().ok()?;
        (committed > 0 && seq == staged.seq_before + committed).then_some(staged.results)
    }
}

/// Whether opening the cache `file` failed because the file itself is damaged (not redb, a page
/// redb cannot read), not because of the bucket or a newer skade's format.
fn damaged_cache(e: &Error, file: &Path) -> bool {
    let shown = file.display();
    e.kind == ErrorKind::Corrupt
        && (e.message.starts_with(&format!("skade catalog {shown} is corrupt"))
            || e.message.starts_with(&format!("{shown} is not a skade catalog")))
}

/// DATA_PATH as the catalog records it: a folder made absolute, or a bucket prefix without its
/// trailing slashes.
fn data_location(given: &str) -> Result<String> {
    if crate::io::object::is_object(given) {
        return crate::io::object::normalize(given).map_err(|e| Error::invalid(format!("DATA_PATH {}", e.message)));
    }
    super::store::utf8(&absolute(Path::new(given))?)
}

/// A second ATTACH in this process of a catalog already open: the attaches share the open
/// catalog, so the options it was opened with (DATA_PATH, DURABILITY) must be the ones given
/// again (ACTOR, TARGET_FILE_SIZE and TIMESTAMP_NS are the attach's own). The error names every
/// option that differs, with both values as ATTACH writes them.
fn shared_options_match(path: &Path, inner: &Inner, data_path: Option<&str>, options: &AttachOptions) -> Result<()> {
    let mut differ = vec![];
    if let Some(dp) = data_path.filter(|dp| *dp != inner.data_path) {
        differ.push(format!("DATA_PATH '{}' before, '{dp}' now", inner.data_path));
    }
    if inner.durability != options.durability {
        let now = match options.durability_given {
            true => format!("'{}' now", options.durability.name()),
            false => format!("'{}' now (the default, as this ATTACH gives no DURABILITY)", options.durability.name()),
        };
        differ.push(format!("DURABILITY '{}' before, {now}", inner.durability.name()));
    }
    if differ.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "skade catalog {} is already attached in this process with other options: {}. The attaches of a catalog \
         in one process share it: give the same DATA_PATH and DURABILITY, or DETACH the other attach first \
         (ACTOR, TARGET_FILE_SIZE and TIMESTAMP_NS may differ)",
        path.display(),
        differ.join("; ")
    )))
}

/// A handle that does not keep the catalog open: a background worker's (lineage delivery), which
/// must end when the last ATTACH goes away.
#[derive(Clone)]
pub struct WeakCatalog {
    inner: Weak<Inner>,
    actor: String,
    target_file_size: Option<u64>,
    nanoseconds: Nanoseconds,
    format_version: iceberg::spec::FormatVersion,
}

impl Catalog {
    pub fn downgrade(&self) -> WeakCatalog {
        WeakCatalog {
            inner: Arc::downgrade(&self.inner),
            actor: self.actor.clone(),
            target_file_size: self.target_file_size,
            nanoseconds: self.nanoseconds,
            format_version: self.format_version,
        }
    }
}

impl WeakCatalog {
    /// The catalog, while some ATTACH still holds it.
    pub fn upgrade(&self) -> Option<Catalog> {
        let inner = self.inner.upgrade()?;
        if inner.handles.load(Ordering::SeqCst) == 0 {
            return None; // closing
        }
        inner.handles.fetch_add(1, Ordering::SeqCst);
        let read_only = inner.store.read_only();
        Some(Catalog {
            inner,
            actor: self.actor.clone(),
            read_only,
            target_file_size: self.target_file_size,
            nanoseconds: self.nanoseconds,
            format_version: self.format_version,
        })
    }

    pub fn is_open(&self) -> bool {
        self.inner.upgrade().is_some_and(|i| i.handles.load(Ordering::SeqCst) > 0)
    }

    /// Whether both are handles on the same open catalog.
    pub fn same(&self, other: &Catalog) -> bool {
        std::ptr::eq(self.inner.as_ptr(), Arc::as_ptr(&other.inner))
    }
}

impl Clone for Catalog {
    fn clone(&self) -> Self {
        self.inner.handles.fetch_add(1, Ordering::SeqCst);
        Catalog {
            inner: self.inner.clone(),
            actor: self.actor.clone(),
            read_only: self.read_only,
            target_file_size: self.target_file_size,
            nanoseconds: self.nanoseconds,
            format_version: self.format_version,
        }
    }
}

impl Drop for Catalog {
    fn drop(&mut self) {
        // The last handle going away (a connection closed without DETACH does not call it):
        // DETACH's rule, acknowledged commits that cannot be made durable stay in the process.
        // (Handles are counted apart from the Arc: the flush thread holds it now and then.)
        if self.inner.handles.fetch_sub(1, Ordering::SeqCst) != 1 || self.inner.store.read_only() {
            return;
        }
        if let Some(link) = self.inner.log.as_ref().filter(|l| l.take_checkpoint_due()) {
            // (a process that commits once and exits wins the 1,024th position as often as any)
            if let Err(e) = self.inner.usable_store().and_then(|_| link.checkpoint(&self.inner.store)) {
                eprintln!("skade: writing a checkpoint of the commit log {} at close: {e}", link.location);
            }
        }
        let waiting = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner()).commits.len();
        if waiting == 0 {
            return;
        }
        if let Err(e) = self.flush() {
            eprintln!(
                "skade: closing catalog {}: {waiting} acknowledged commit(s) could not be made durable ({e}); \
                 they are kept in this process: ATTACH the catalog again and run CHECKPOINT",
                self.inner.store.path.display()
            );
            KEPT.lock().unwrap_or_else(|p| p.into_inner()).push(self.inner.clone());
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // DETACH (the last handle going away) is a durable point in every mode.
        if let Err(e) = self.flush() {
            eprintln!("skade: making {} durable at close failed: {e}", self.store.path.display());
        }
    }
}

/// Applies a committed request to the in-memory state.
fn apply_request(state: &mut CatalogState, request: &CommitRequest) {
    for change in &request.changes {
        state.apply(&change.effect);
    }
    for change in &request.consumers {
        state.apply_consumer(change);
    }
    for change in &request.sinks {
        state.apply_sink(change);
    }
}

/// The poll of a log-resident catalog: every `poll`, other processes' commits reach this one
/// (its state, its commit feed and the waits on it). Ends when the catalog is closed. A failing
/// poll (the log's folder unreachable a moment) is retried at the next; the first of a run of
/// failures is reported.
fn spawn_follower(inner: Weak<Inner>, poll: Duration) {
    let spawned = std::thread::Builder::new().name("skade-log-follow".into()).spawn(move || {
        let mut failing = false;
        let mut wait = poll;
        loop {
            std::thread::sleep(wait);
            wait = poll;
            let Some(inner) = inner.upgrade() else { return };
            if inner.handles.load(Ordering::SeqCst) == 0 {
                return;
            }
            let Some(link) = &inner.log else { return };
            let idle = clock_ms().saturating_sub(inner.last_used_ms.load(Ordering::Relaxed));
            if link.in_bucket() && idle > BUCKET_IDLE.as_millis() as u64 {
                continue; // (every request costs: the next transaction looks itself)
            }
            // A bucket host committing now learns each head from its own commits: its poll would
            // be one more GET. It publishes what the file holds (other processes of the host fold
            // into it too) and follows the log one poll after its last look. (A bucket log is
            // truncated by checkpoints, below.)
            let looked = link.looked_ago().filter(|ago| link.in_bucket() && *ago < poll);
            let followed = match looked {
                Some(ago) => {
                    wait = poll - ago;
                    inner.reload(link)
                }
                None => inner.follow(link),
            };
            match followed {
                Ok(()) => failing = false,
                Err(e) if !failing => {
                    failing = true;
                    eprintln!("skade: following the commit log of {}: {e}", inner.store.path.display());
                }
                Err(_) => {}
            }
            if link.take_checkpoint_due() {
                // (after the commit that called for it was acknowledged; a failure fails nothing:
                // the next multiple writes one)
                if let Err(e) = inner.usable_store().and_then(|_| link.checkpoint(&inner.store)) {
                    eprintln!("skade: writing a checkpoint of the commit log {}: {e}", link.location);
                }
            }
        }
    });
    if let Err(e) = spawned {
        eprintln!(
            "skade: cannot start the commit log poll ({e}); other processes' commits show at the next own commit"
        );
    }
}

/// How often the background flush looks at the oldest pending commit.
const FLUSH_TICK: Duration = Duration::from_millis(5);

/// The flush of DURABILITY 'eventual' aims to have every commit durable this long after its
/// acknowledgment: half the documented bound ([`EVENTUAL_FLUSH_INTERVAL`]). The other half is
/// margin for what the flush thread cannot control on a loaded machine: being scheduled late, and
/// fsyncs slower than the recent ones (aiming at the bound itself lost commits acknowledged 231 ms
/// before a SIGKILL, issue 42).
const FLUSH_AIM: Duration = Duration::from_millis(EVENTUAL_FLUSH_INTERVAL.as_millis() as u64 / 2);

/// The background flush of DURABILITY 'eventual': ends when the catalog is closed. A commit
/// must be durable within [`FLUSH_AIM`] of its acknowledgment, and a flush takes time (fsyncs):
/// each flush starts when the oldest pending commit is that old, less the longest recent flush
/// and a tick.
fn spawn_flusher(inner: Weak<Inner>) {
    let spawned = std::thread::Builder::new().name("skade-flush".into()).spawn(move || {
        // The longest of the recent flushes, decaying so that one slow flush is forgotten.
        let mut flush_cost = Duration::ZERO;
        let mut backoff = EVENTUAL_FLUSH_INTERVAL / 4;
        loop {
            std::thread::sleep(FLUSH_TICK);
            let Some(inner) = inner.upgrade() else { return };
            let since = inner.pending.lock().unwrap_or_else(|p| p.into_inner()).since;
            let Some(since) = since else { continue };
            let lead = (flush_cost + FLUSH_TICK).min(FLUSH_AIM / 2);
            if since.elapsed() + lead < FLUSH_AIM {
                continue;
            }
            let start = Instant::now();
            let flushed = inner.flush();
            flush_cost = start.elapsed().max(flush_cost.mul_f64(0.9));
            if flushed.is_err() {
                drop(inner);
                // retried, backing off to a second while it keeps failing (a full disk)
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(1));
            } else {
                backoff = EVENTUAL_FLUSH_INTERVAL / 4;
            }
        }
    });
    if let Err(e) = spawned {
        eprintln!("skade: cannot start the flush thread ({e}); commits stay non-durable until DETACH");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_attach_with_other_options_names_them() {
        let dir = std::env::temp_dir().join(format!("skade-open-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.skade");
        let attach =
            |pairs: &[(&str, &str)]| Catalog::open(&path, AttachOptions::parse(pairs.to_vec(), false).unwrap());
        let first = attach(&[("DURABILITY", "none")]).unwrap();
        // ACTOR may differ; the DURABILITY the user did not give is its default, and named so
        let err = attach(&[("ACTOR", "bob")]).err().unwrap().message;
        assert!(
            err.contains("DURABILITY 'none' before, 'immediate' now (the default, as this ATTACH gives no DURABILITY)"),
            "{err}"
        );
        assert!(!err.contains("ACTOR 'bob'") && !err.contains("None"), "{err}");
        let err = attach(&[("durability", "EVENTUAL"), ("data_path", dir.join("other").to_str().unwrap())])
            .err()
            .unwrap()
            .message;
        assert!(err.contains("DURABILITY 'none' before, 'eventual' now."), "{err}");
        assert!(err.contains("m.skade.data' before") && err.contains("other' now"), "{err}");
        // the same options (ACTOR and TIMESTAMP_NS of its own) share the open catalog
        let second = attach(&[("durability", "None"), ("ACTOR", "bob"), ("TIMESTAMP_NS", "microseconds")]).unwrap();
        assert_eq!(second.actor(), "bob");
        drop((first, second));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
