//! The redb file: the catalog's single source of truth.
//!
//! Tables (format `skade-catalog-2`; `migrate` keeps the version):
//! - `meta`: format stamp, data path, creation time, `catalog_uuid` (its identity; absent in files
//!   made before it was kept, until one is adopted by a log), `commit_log` (a log-resident
//!   catalog's stamp: [`LogStamp`]).
//! - `counters`: `commit_seq` (last assigned, gapless from 1), `next_snapshot_id`, and in a
//!   log-resident catalog `log_position` (the last position of its log folded into the file).
//! - `schemas`: schema key -> [`SchemaRecord`] (JSON).
//! - `tables`: (schema key, table key) -> [`TableRecord`] (JSON): the current metadata pointer.
//! - `commits`: (table uuid, snapshot id) -> commit_seq.
//! - `commit_log`: commit_seq -> [`CommitRecord`] (JSON).
//! - `consumers` (format 2): name key -> [`ConsumerRecord`] (JSON).
//! - `lineage_sinks`: sink name -> [`SinkRecord`] (JSON); made by the first sink's write (a file
//!   without it has no sink, and older versions of skade ignore it).
//! - `macros`: (schema key, kind, macro key) -> [`MacroRecord`] (JSON); made when a commit first
//!   needs it, the same way (a file without it has no macro). A macro whose schema the file does
//!   not hold (a DROP SCHEMA of a build from before macros) is not loaded.
//!
//! Pointers, log rows and counters advance together in one write transaction and one fsync.
//!
//! Every access goes through [`Store::read`] or [`Store::write`], which make two promises redb
//! alone does not: a damaged file is an error naming it (redb panics on some damaged pages; the
//! panic is caught here, quietly), and an I/O failure (a full disk) does not disable the catalog
//! until DETACH (redb latches it; the file is reopened before the next access).

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, RwLock};

use redb::{Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::migrate::{
    migrate, readable, stamp, version_of, FORMAT_VERSION, LOG_RESIDENT_VERSION, MIGRATIONS, READ_VERSION,
};
use super::names::DEFAULT_SCHEMA;
use super::state::{CatalogState, MacroRecord, SchemaRecord, TableRecord};
use crate::error::{Error, ErrorKind, Result};

/// Where the catalog file was created (canonical): Iceberg metadata holds absolute paths, so a
/// catalog file found elsewhere is a copy (or a move) whose tables still name the original's files.
const CREATED_AS: &str = "created_as";

use super::consumers::ConsumerRecord;
use super::sinks::SinkRecord;
use super::tables::{
    COMMITS, COMMIT_LOG, COMMIT_SEQ, CONSUMERS, COUNTERS, LINEAGE_SINKS, LOG_POSITION, MACROS, META, NEXT_SNAPSHOT_ID,
    SCHEMAS, TABLES,
};

/// redb's file header starts with these bytes; anything else is not ours and is left untouched.
const REDB_MAGIC: &[u8] = b"redb";

/// One row of the commit log: a committed change to one table or schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitRecord {
    pub seq: u64,
    pub committed_at_us: i64,
    pub schema: String,
    pub table: Option<String>,
    pub table_uuid: Option<String>,
    pub snapshot_id: Option<i64>,
    pub operation: String,
    pub actor: String,
    pub metadata_location: Option<String>,
    /// The commit_seq of the first record of the transaction that wrote this one, when it wrote
    /// more than one (a transaction over two tables): a consumer delivers such a transaction whole.
    /// Absent in records written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction: Option<u64>,
    /// What the transaction read (its lineage inputs; a table it wrote too, when it read it), on
    /// each of its records. Absent in records written before they were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputRecord>,
}

/// A dataset a committing transaction read: a table of this catalog (its uuid set, `namespace`
/// its schema, `name` the table's) at a snapshot, or something outside it (named as OpenLineage
/// names datasets; `table` the `schema.table` of another skade catalog's table).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct InputRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table_uuid: Option<String>,
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// A table of this catalog: the metadata.json it was read through (its schema at the read;
    /// absent in records written before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_location: Option<String>,
    /// A table of another DuckDB database: its columns at the read (its schema facet; a skade
    /// table's schema is in its metadata).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<ColumnRecord>,
}

/// A column of an input outside skade: its name and type as its database names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ColumnRecord {
    pub name: String,
    #[serde(rename = "type")]
    pub data_type: String,
}

enum Db {
    ReadWrite(Database),
    ReadOnly(ReadOnlyDatabase),
}

pub struct Store {
    /// None only while the file is being reopened.
    db: RwLock<Option<Db>>,
    pub path: PathBuf,
    read_only: bool,
    /// Opened for several processes at once (redb's multi-writer mode): a log-resident catalog.
    shared: bool,
    /// redb latched an I/O failure (it then refuses every access): reopen before the next one.
    failed: AtomicBool,
}

/// What the file holds when it is opened.
pub struct Loaded {
    pub state: CatalogState,
    /// A folder's absolute path, or an `s3://` prefix.
    pub data_path: String,
    pub commit_seq: u64,
    pub next_snapshot_id: i64,
    /// The last log position folded into the file (0 for a plain catalog).
    pub log_position: u64,
}

impl Store {
    /// Opens the catalog file at `path`, creating it (with `data_path`) when absent and writable;
    /// `shared` opens it for several processes at once (a log-resident catalog's). Nothing else
    /// is written: see [`Self::residency`], then [`Self::migrate`] and [`Self::load`]. Returns
    /// the store and whether it was created.
    pub fn open(path: &Path, read_only: bool, data_path: Option<&str>, shared: bool) -> Result<(Store, bool)> {
        install_quiet_panics();
        let mut created = false;
        if !path.exists() {
            if read_only {
                return Err(Error::catalog(format!(
                    "cannot open skade catalog {} read-only: the file does not exist",
                    path.display()
                )));
            }
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    return Err(Error::io(format!(
                        "cannot create skade catalog {}: directory {} does not exist",
                        path.display(),
                        dir.display()
                    )));
                }
            }
            let data_path = match data_path {
                Some(d) => d.to_string(),
                None => utf8(&default_data_path(path))?,
            };
            created = create(path, &data_path)?;
        }
        check_magic(path)?;
        let db = open_db(path, read_only, false, shared)?;
        let store = Store {
            db: RwLock::new(Some(db)),
            path: path.to_path_buf(),
            read_only,
            shared,
            failed: AtomicBool::new(false),
        };
        Ok((store, created))
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The file's commit log stamp, if it is log-resident (its commits go through a commit log,
    /// issue 23). A format newer than this build's is refused first, and a damaged stamp is named.
    pub fn residency(&self) -> Result<Option<LogStamp>> {
        let (format, stamp) = self.read(|tx| {
            let Ok(meta) = tx.open_table(META) else {
                return Ok((None, None)); // not ours: `load` says so
            };
            let format = meta.get("format")?.map(|v| v.value().to_string());
            Ok((format, meta.get(COMMIT_LOG_STAMP)?.map(|v| v.value().to_string())))
        })?;
        let version = match &format {
            Some(format) => Some(version_of(format, &self.path.display().to_string(), READ_VERSION)?),
            None => None,
        };
        let stamp = stamp.map(|s| LogStamp::parse(&s, &self.path)).transpose()?;
        if version == Some(LOG_RESIDENT_VERSION) && stamp.is_none() {
            return Err(self.corrupt(&format!(
                "its format {LOG_RESIDENT_VERSION} marks it log-resident, but it has no commit_log stamp"
            )));
        }
        Ok(stamp)
    }

    /// The catalog's identity (meta `catalog_uuid`), made when the file has none yet (it was
    /// created before identities were kept).
    pub fn catalog_uuid(&self) -> Result<String> {
        let stored = self.read(|tx| Ok(tx.open_table(META)?.get(CATALOG_UUID)?.map(|v| v.value().to_string())))?;
        if let Some(uuid) = stored {
            return Ok(uuid);
        }
        self.write(true, |tx| {
            let mut meta = tx.open_table(META)?;
            let existing = meta.get(CATALOG_UUID)?.map(|v| v.value().to_string());
            if let Some(uuid) = existing {
                return Ok(uuid); // another process made it meanwhile
            }
            let uuid = uuid::Uuid::new_v4().to_string();
            meta.insert(CATALOG_UUID, uuid.as_str())?;
            Ok(uuid)
        })
    }

    /// Makes this catalog, which holds no commit, another copy of the catalog `uuid` (a host that
    /// lost the race to create a lake in a bucket joins the winner's instead).
    pub fn become_copy_of(&self, uuid: &str) -> Result<()> {
        self.write(true, |tx| {
            let seq = tx.open_table(COUNTERS)?.get(COMMIT_SEQ)?.map(|v| v.value()).unwrap_or(0);
            if seq != 0 {
                return Err(Error::internal("a catalog with commits cannot become a copy of another"));
            }
            tx.open_table(META)?.insert(CATALOG_UUID, uuid)?;
            Ok(())
        })
    }

    /// Stamps the file log-resident (one durable transaction): from now on it opens only through
    /// the log, and its fold starts after position 0 (the log's adoption stamp).
    pub fn stamp_log_resident(&self, stamp: &LogStamp) -> Result<()> {
        self.write(true, |tx| {
            let mut meta = tx.open_table(META)?;
            let existing = meta.get(COMMIT_LOG_STAMP)?.map(|v| v.value().to_string());
            if existing.is_none() {
                meta.insert(COMMIT_LOG_STAMP, serde_json::to_string(stamp)?.as_str())?;
                meta.insert("format", super::migrate::stamp(LOG_RESIDENT_VERSION).as_str())?;
                tx.open_table(COUNTERS)?.insert(LOG_POSITION, 0)?;
            }
            Ok(())
        })
    }

    /// The last log position folded into the file (0 for a plain catalog).
    pub fn log_position(&self) -> Result<u64> {
        self.read(|tx| Ok(tx.open_table(COUNTERS)?.get(LOG_POSITION)?.map(|v| v.value()).unwrap_or(0)))
    }

    /// The metadata location the file's pointer of a table names (by its keys).
    pub fn table_location(&self, schema: &str, name: &str) -> Result<Option<String>> {
        self.read(|tx| {
            let tables = tx.open_table(TABLES)?;
            let Some(row) = tables.get((schema, name))? else { return Ok(None) };
            Ok(Some(serde_json::from_slice::<TableRecord>(row.value())?.metadata_location))
        })
    }

    /// Runs `f` in a read transaction.
    pub fn read<T>(&self, f: impl FnOnce(&ReadTransaction) -> Result<T>) -> Result<T> {
        self.access(|db| {
            let tx = match db {
                Db::ReadWrite(db) => db.begin_read()?,
                Db::ReadOnly(db) => db.begin_read()?,
            };
            f(&tx)
        })
    }

    /// Runs `f` in a write transaction and commits it (fsynced when `durable`). Nothing is
    /// committed when `f` fails.
    pub fn write<T>(&self, durable: bool, f: impl FnOnce(&WriteTransaction) -> Result<T>) -> Result<T> {
        self.write_if_changed(durable, |tx| Ok((f(tx)?, true)))
    }

    /// [`write`](Self::write), committed only when `f` says it changed the file (its flag);
    /// otherwise aborted: a commit that changes nothing still costs a sync, and on a file that
    /// several processes fold one log into, most folds find the positions folded already.
    pub fn write_if_changed<T>(
        &self,
        durable: bool,
        f: impl FnOnce(&WriteTransaction) -> Result<(T, bool)>,
    ) -> Result<T> {
        if self.read_only {
            return Err(Error::permission(format!("skade catalog {} is attached read-only", self.path.display())));
        }
        self.access(|db| {
            let Db::ReadWrite(db) = db else {
                return Err(Error::internal("a read-only store was opened writable"));
            };
            let mut tx = db.begin_write()?;
            // (a shared file's commits are durable whatever is asked: redb allows no other)
            if !self.shared {
                tx.set_durability(if durable { redb::Durability::Immediate } else { redb::Durability::None })?;
            }
            let (out, changed) = f(&tx)?;
            match changed {
                true => tx.commit()?,
                false => tx.abort()?,
            }
            Ok(out)
        })
    }

    /// Runs `f` in a write transaction and aborts it: what `f` wrote is seen by `f` alone. On a
    /// shared file the transaction holds every other process's writes off while it runs.
    pub fn write_aborted<T>(&self, f: impl FnOnce(&WriteTransaction) -> Result<T>) -> Result<T> {
        if self.read_only {
            return Err(Error::permission(format!("skade catalog {} is attached read-only", self.path.display())));
        }
        self.access(|db| {
            let Db::ReadWrite(db) = db else {
                return Err(Error::internal("a read-only store was opened writable"));
            };
            let tx = db.begin_write()?;
            let out = f(&tx);
            tx.abort()?;
            out
        })
    }

    /// One guarded access: reopens a file whose previous access failed on I/O, catches redb's
    /// panics on damaged pages, and says which file an error is about.
    fn access<T>(&self, f: impl FnOnce(&Db) -> Result<T>) -> Result<T> {
        if self.failed.load(Ordering::SeqCst) {
            // The catalog reopens it (`Inner::recover_store`), knowing what it must restore.
            return Err(Error::io(format!(
                "skade catalog {}: an earlier I/O error left it unusable until it is reopened",
                self.path.display()
            )));
        }
        let guard = self.db.read().unwrap_or_else(|p| p.into_inner());
        let Some(db) = guard.as_ref() else {
            return Err(Error::io(format!("skade catalog {} could not be reopened", self.path.display())));
        };
        LATCHED.with(|l| l.set(false));
        QUIET.with(|q| q.set(q.get() + 1));
        let result = catch_unwind(AssertUnwindSafe(|| f(db)));
        QUIET.with(|q| q.set(q.get() - 1));
        let result = match result {
            Ok(r) => r,
            Err(panic) => {
                let location = PANICKED_AT.with(|p| p.take()).unwrap_or_default();
                if !location.contains("/redb-") {
                    // not redb's: a bug of skade's own, reported as one
                    return Err(Error::internal(format!(
                        "skade internal error (a bug, please report it): {} at {location}",
                        panic_text(&panic)
                    )));
                }
                // redb panics where a damaged page makes no sense to it (its message, "entered
                // unreachable code" and the like, says nothing to a user); the transaction the
                // panic unwound through is abandoned.
                return Err(Error::corrupt(format!(
                    "skade catalog {} is corrupt: a page of it cannot be read (skade_check on the attached \
                     catalog lists which parts are damaged); restore it from a copy",
                    self.path.display()
                )));
            }
        };
        if LATCHED.with(|l| l.replace(false)) {
            self.failed.store(true, Ordering::SeqCst);
        }
        result.map_err(|e| match e.message.strip_prefix(STORE_ERROR) {
            Some(what) if e.kind == ErrorKind::Corrupt => self.corrupt(&what),
            Some(what) => Error::new(e.kind, format!("skade catalog {}: {what}", self.path.display())),
            None => e,
        })
    }

    /// Closes and opens the file again: redb refuses every access after an I/O failure until then.
    /// Waits for the accesses still running; the file then holds its last durable state (commits
    /// that were not durable yet are gone from it).
    pub fn reopen(&self) -> Result<()> {
        let mut guard = self.db.write().unwrap_or_else(|p| p.into_inner());
        if !self.failed.load(Ordering::SeqCst) && guard.is_some() {
            return Ok(()); // another thread reopened it meanwhile
        }
        close_quietly(guard.take());
        let db = open_db(&self.path, self.read_only, false, self.shared)?;
        *guard = Some(db);
        self.failed.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Whether the last access failed on I/O (the file is reopened before the next one).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::SeqCst)
    }

    fn initialize(&self, data_path: &str, created_as: Option<&Path>, uuid: Option<&str>) -> Result<()> {
        self.write(true, |tx| {
            let mut meta = tx.open_table(META)?;
            meta.insert("format", stamp(FORMAT_VERSION).as_str())?;
            meta.insert("data_path", data_path)?;
            if let Some(created_as) = created_as.and_then(Path::to_str) {
                meta.insert(CREATED_AS, created_as)?;
            }
            meta.insert("created_at", chrono::Utc::now().to_rfc3339().as_str())?;
            let fresh = uuid::Uuid::new_v4().to_string();
            meta.insert(CATALOG_UUID, uuid.unwrap_or(&fresh))?;
            let mut counters = tx.open_table(COUNTERS)?;
            counters.insert(COMMIT_SEQ, 0)?;
            counters.insert(NEXT_SNAPSHOT_ID, 1)?;
            let mut schemas = tx.open_table(SCHEMAS)?;
            let main = SchemaRecord::named(DEFAULT_SCHEMA);
            schemas.insert(DEFAULT_SCHEMA, serde_json::to_vec(&main)?.as_slice())?;
            tx.open_table(TABLES)?;
            tx.open_table(COMMITS)?;
            tx.open_table(COMMIT_LOG)?;
            tx.open_table(CONSUMERS)?;
            tx.open_table(MACROS)?;
            Ok(())
        })
    }

    /// Brings an older file to this build's format (one durable transaction with its new stamp).
    /// Only an older file is written to: an up-to-date one (or one that is not ours) is left as
    /// it is, without a write transaction.
    pub fn migrate(&self) -> Result<()> {
        let path = self.path.display().to_string();
        let stamp = self.read(|tx| match tx.open_table(META) {
            Ok(meta) => Ok(meta.get("format").ok().flatten().map(|v| v.value().to_string())),
            Err(_) => Ok(None),
        })?;
        match stamp.map(|s| version_of(&s, &path, READ_VERSION)) {
            Some(Ok(version)) if version < FORMAT_VERSION => {}
            _ => return Ok(()), // current, newer or not ours: `load` says which
        }
        self.write(true, |tx| {
            let Some(format) = super::migrate::stamped(tx)? else {
                return Ok(()); // not ours: `load` says so
            };
            let version = version_of(&format, &path, READ_VERSION)?;
            if version >= FORMAT_VERSION {
                return Ok(()); // another process migrated it meanwhile (or made it log-resident)
            }
            migrate(tx, version, FORMAT_VERSION, MIGRATIONS).map(drop)
        })
    }

    pub(crate) fn load(&self, requested_data_path: Option<&str>) -> Result<Loaded> {
        let path = &self.path;
        let not_ours = || {
            Error::corrupt(format!(
                "{} is not a skade catalog (it is a redb database without a skade format stamp)",
                path.display()
            ))
        };
        self.read(|tx| {
            let meta = tx.open_table(META).map_err(|_| not_ours())?;
            let format = meta.get("format")?.ok_or_else(not_ours)?.value().to_string();
            let version = version_of(&format, &path.display().to_string(), READ_VERSION)?;
            if version < FORMAT_VERSION {
                readable(version, MIGRATIONS, &path.display().to_string())?;
            }
            let data_path = meta
                .get("data_path")?
                .ok_or_else(|| self.corrupt(&"its meta table has no data_path"))?
                .value()
                .to_string();
            if let Some(req) = requested_data_path {
                if req != data_path {
                    return Err(Error::invalid(format!(
                        "DATA_PATH {req} differs from the data path {data_path} this catalog was created with"
                    )));
                }
            }
            // (a warehouse in a bucket is named by URL, never by this file's path: any copy may write)
            let in_bucket = crate::io::object::is_object(&data_path);
            if let (Some(created_as), false, false) = (meta.get(CREATED_AS)?, self.read_only, in_bucket) {
                let created_as = PathBuf::from(created_as.value());
                if path.canonicalize().is_ok_and(|here| here != created_as) {
                    return Err(Error::invalid(format!(
                        "skade catalog {} was created as {}: its tables' Iceberg metadata names their files by \
                         absolute path under {}, so a writable copy would change and remove the original's files; \
                         attach {} instead, or attach this copy READ_ONLY",
                        path.display(),
                        created_as.display(),
                        data_path,
                        created_as.display()
                    )));
                }
            }
            let counters = tx.open_table(COUNTERS)?;
            let (commit_seq, next_snapshot_id) = read_counters(&counters).map_err(|e| self.corrupt(&e))?;
            let log_position = counters.get(LOG_POSITION)?.map(|v| v.value()).unwrap_or(0);
            let mut state = CatalogState::default();
            for row in tx.open_table(SCHEMAS)?.iter()? {
                let (k, v) = row?;
                let rec: SchemaRecord = self.parse(v.value(), || format!("schemas row \"{}\"", k.value()))?;
                state.schemas.insert(k.value().to_string(), rec.into());
            }
            for row in tx.open_table(TABLES)?.iter()? {
                let (k, v) = row?;
                let (s, t) = k.value();
                let rec: TableRecord = self.parse(v.value(), || format!("tables row \"{s}.{t}\""))?;
                state.tables.insert(rec.key(), rec.into());
            }
            // (a version-1 file read unmigrated has no consumers table, and no consumers)
            match tx.open_table(CONSUMERS) {
                Ok(consumers) => {
                    for row in consumers.iter()? {
                        let (k, v) = row?;
                        let rec: ConsumerRecord =
                            self.parse(v.value(), || format!("consumers row \"{}\"", k.value()))?;
                        state.consumers.insert(k.value().to_string(), rec.into());
                    }
                }
                Err(redb::TableError::TableDoesNotExist(_)) if version < 2 => {}
                Err(e) => return Err(e.into()),
            }
            match tx.open_table(LINEAGE_SINKS) {
                Ok(sinks) => {
                    for row in sinks.iter()? {
                        let (k, v) = row?;
                        let rec: SinkRecord =
                            self.parse(v.value(), || format!("lineage_sinks row \"{}\"", k.value()))?;
                        state.sinks.insert(k.value().to_string(), rec.into());
                    }
                }
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(e.into()),
            }
            match tx.open_table(MACROS) {
                Ok(macros) => {
                    for row in macros.iter()? {
                        let (k, v) = row?;
                        let (s, _, n) = k.value();
                        let rec: MacroRecord = self.parse(v.value(), || format!("macros row \"{s}.{n}\""))?;
                        if state.schemas.contains_key(s) {
                            state.macros.insert(rec.key(), rec.into());
                        }
                    }
                }
                Err(redb::TableError::TableDoesNotExist(_)) => {}
                Err(e) => return Err(e.into()),
            }
            Ok(Loaded { state, data_path, commit_seq, next_snapshot_id, log_position })
        })
    }

    /// The catalog is damaged where `what` says.
    pub fn corrupt(&self, what: &dyn std::fmt::Display) -> Error {
        Error::corrupt(format!("skade catalog {} is corrupt: {what}", self.path.display()))
    }

    /// A JSON record of the file; `what` names it for the error when it does not parse.
    pub fn parse<T: serde::de::DeserializeOwned>(&self, bytes: &[u8], what: impl FnOnce() -> String) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|e| self.corrupt(&format!("its {} does not parse ({e})", what())))
    }

    /// An empty durable commit: makes every earlier non-durable commit durable.
    pub fn make_durable(&self) -> Result<()> {
        self.write(true, |_| Ok(()))
    }

    /// The last commit_seq the file holds.
    pub fn commit_seq(&self) -> Result<u64> {
        self.read(|tx| read_counters(&tx.open_table(COUNTERS)?).map(|(seq, _)| seq).map_err(|e| self.corrupt(&e)))
    }

    /// Commit log rows with `seq > since`, in order, at most `limit`.
    pub fn commits_since(&self, since: u64, limit: usize) -> Result<Vec<CommitRecord>> {
        self.read(|tx| {
            let log = tx.open_table(COMMIT_LOG)?;
            let mut out = Vec::new();
            for row in log.range(since.saturating_add(1)..)?.take(limit) {
                let (k, v) = row?;
                out.push(self.parse(v.value(), || format!("commit_log row {}", k.value()))?);
            }
            Ok(out)
        })
    }

    /// The commit_seq that produced `snapshot_id` of the table `uuid`, if skade committed it.
    pub fn commit_seq_of(&self, uuid: &str, snapshot_id: i64) -> Result<Option<u64>> {
        self.read(|tx| Ok(tx.open_table(COMMITS)?.get((uuid, snapshot_id))?.map(|v| v.value())))
    }

    /// The last commit with a snapshot of the table `uuid`.
    pub fn last_commit_of(&self, uuid: &str) -> Result<Option<CommitRecord>> {
        self.read(|tx| {
            let commits = tx.open_table(COMMITS)?;
            let mut last = None;
            for row in commits.range((uuid, i64::MIN)..=(uuid, i64::MAX))? {
                last = last.max(Some(row?.1.value()));
            }
            let Some(seq) = last else {
                return Ok(None);
            };
            let log = tx.open_table(COMMIT_LOG)?;
            let row = log.get(seq)?.ok_or_else(|| self.corrupt(&format!("its commit_log has no row {seq}")))?;
            Ok(Some(self.parse(row.value(), || format!("commit_log row {seq}"))?))
        })
    }

    /// Writes `state` and the commits `records` (those after what the file holds) durably, as
    /// if they had been committed on it: after a reopen lost commits that were acknowledged but
    /// not yet durable (DURABILITY 'eventual' or 'none'), the file catches up with them.
    pub fn restore(&self, state: &CatalogState, records: &[CommitRecord], next_snapshot_id: i64) -> Result<()> {
        if self.shared {
            // (a log-resident catalog commits durably, so nothing is ever restored; and the file
            // is every process's fold, never one process's memory)
            return Err(Error::internal("a shared catalog file is never restored from one process's memory"));
        }
        self.write(true, |tx| {
            let (file_seq, file_next) = read_counters(&tx.open_table(COUNTERS)?).map_err(|e| self.corrupt(&e))?;
            let mut schemas = tx.open_table(SCHEMAS)?;
            schemas.retain(|_, _| false)?;
            for (k, s) in &state.schemas {
                schemas.insert(k.as_str(), serde_json::to_vec(&**s)?.as_slice())?;
            }
            let mut tables = tx.open_table(TABLES)?;
            tables.retain(|_, _| false)?;
            for ((s, n), t) in &state.tables {
                tables.insert((s.as_str(), n.as_str()), serde_json::to_vec(&**t)?.as_slice())?;
            }
            let mut consumers = tx.open_table(CONSUMERS)?;
            consumers.retain(|_, _| false)?;
            for (k, c) in &state.consumers {
                consumers.insert(k.as_str(), serde_json::to_vec(&**c)?.as_slice())?;
            }
            // (rewritten whole even when the state holds none: a macro dropped since must go)
            let mut macros = tx.open_table(MACROS)?;
            macros.retain(|_, _| false)?;
            for ((s, kind, n), m) in &state.macros {
                macros.insert((s.as_str(), kind.as_str(), n.as_str()), serde_json::to_vec(&**m)?.as_slice())?;
            }
            if !state.sinks.is_empty() {
                let mut sinks = tx.open_table(LINEAGE_SINKS)?;
                sinks.retain(|_, _| false)?;
                for (k, c) in &state.sinks {
                    sinks.insert(k.as_str(), serde_json::to_vec(&**c)?.as_slice())?;
                }
            }
            let mut log = tx.open_table(COMMIT_LOG)?;
            let mut commits = tx.open_table(COMMITS)?;
            let mut seq = file_seq;
            for r in records.iter().filter(|r| r.seq > file_seq) {
                log.insert(r.seq, serde_json::to_vec(r)?.as_slice())?;
                if let (Some(uuid), Some(sid)) = (&r.table_uuid, r.snapshot_id) {
                    commits.insert((uuid.as_str(), sid), r.seq)?;
                }
                seq = seq.max(r.seq);
            }
            let mut counters = tx.open_table(COUNTERS)?;
            counters.insert(COMMIT_SEQ, seq)?;
            counters.insert(NEXT_SNAPSHOT_ID, (file_next.max(next_snapshot_id).max(1)) as u64)?;
            Ok(())
        })
    }
}

/// The file's (commit_seq, next_snapshot_id), or what is wrong with them.
fn read_counters(counters: &impl ReadableTable<&'static str, u64>) -> std::result::Result<(u64, i64), String> {
    let counter = |name: &str| -> std::result::Result<u64, String> {
        counters
            .get(name)
            .map_err(|e| format!("its counter {name} cannot be read ({e})"))?
            .map(|v| v.value())
            .ok_or_else(|| format!("it has no counter {name}"))
    };
    Ok((counter(COMMIT_SEQ)?, counter(NEXT_SNAPSHOT_ID)? as i64))
}

fn open_db(path: &Path, read_only: bool, create: bool, shared: bool) -> Result<Db> {
    let mut builder = redb::Builder::new();
    builder.set_cache_size(16 << 20);
    if shared {
        builder.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    }
    QUIET.with(|q| q.set(q.get() + 1));
    let opened = catch_unwind(AssertUnwindSafe(|| -> Result<Db> {
        Ok(if read_only {
            Db::ReadOnly(builder.open_read_only(path).map_err(|e| open_error(path, e, true, shared))?)
        } else if create {
            Db::ReadWrite(builder.create(path).map_err(|e| open_error(path, e, false, shared))?)
        } else {
            Db::ReadWrite(builder.open(path).map_err(|e| open_error(path, e, false, shared))?)
        })
    }));
    QUIET.with(|q| q.set(q.get() - 1));
    opened.unwrap_or_else(|_| {
        Err(Error::corrupt(format!(
            "skade catalog {} is corrupt: a page redb needs to open it cannot be read; restore it from a copy",
            path.display()
        )))
    })
}

impl Drop for Store {
    fn drop(&mut self) {
        let db = self.db.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        close_quietly(db);
    }
}

/// Closes a file: redb walks its trees as it closes, and panics there on a damaged page, which
/// must neither print nor unwind into the caller (a DETACH, a failed ATTACH).
fn close_quietly(db: Option<Db>) {
    QUIET.with(|q| q.set(q.get() + 1));
    let _ = catch_unwind(AssertUnwindSafe(move || drop(db)));
    QUIET.with(|q| q.set(q.get() - 1));
}

/// Makes a new catalog at `path`: whole under a staging name, then published by a link, so that
/// processes creating one lake at once (each ATTACHing it with COMMIT_LOG) agree on one file and
/// none sees it half made. Whether this call made it (false: another process did first).
fn create(path: &Path, data_path: &str) -> Result<bool> {
    create_as(path, data_path, None)
}

/// Makes a new, empty catalog file at `path` that is another copy of the catalog `uuid` (a host
/// joining a lake in a bucket, see `residency::join`). Whether this call made it.
pub(crate) fn create_joining(path: &Path, data_path: &str, uuid: &str) -> Result<bool> {
    if path.exists() {
        return Ok(false);
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        crate::io::create_dirs(dir)?;
    }
    create_as(path, data_path, Some(uuid))
}

fn create_as(path: &Path, data_path: &str, uuid: Option<&str>) -> Result<bool> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
        crate::io::remove_stale_staging(dir, &format!(".{name}."));
    }
    let staging = crate::io::staging_beside(path);
    // (the file's own canonical path, recorded to recognise copies: its folder's and its name)
    let created_as = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let created_as = created_as.canonicalize().ok().zip(path.file_name()).map(|(dir, name)| dir.join(name));
    let made = open_db(&staging, false, true, false).and_then(|db| {
        let store = Store {
            db: RwLock::new(Some(db)),
            path: staging.clone(),
            read_only: false,
            shared: false,
            failed: AtomicBool::new(false),
        };
        store.initialize(data_path, created_as.as_deref(), uuid)
    });
    if let Err(e) = made {
        crate::io::remove_file(&staging);
        let message = e.message.replace(&staging.display().to_string(), &path.display().to_string());
        return Err(Error::new(e.kind, message));
    }
    crate::io::publish_file(&staging, path)
}

/// The commit log stamp of a catalog file that other processes hold open through their commit
/// log (an open without one finds it busy): read through a read-only handle of the same kind.
pub fn peek_stamp(path: &Path) -> Option<LogStamp> {
    let Ok(Db::ReadOnly(db)) = open_db(path, true, false, true) else {
        return None;
    };
    let tx = db.begin_read().ok()?;
    let meta = tx.open_table(META).ok()?;
    let text = meta.get(COMMIT_LOG_STAMP).ok()??.value().to_string();
    LogStamp::parse(&text, path).ok()
}

/// A path as the catalog records it (UTF-8).
pub fn utf8(path: &Path) -> Result<String> {
    path.to_str().map(str::to_string).ok_or_else(|| Error::invalid(format!("{} is not a UTF-8 path", path.display())))
}

/// `lake.skade` -> `lake.skade.data/`, beside the file.
pub fn default_data_path(catalog: &Path) -> PathBuf {
    let mut name = catalog.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".data");
    catalog.with_file_name(name)
}

fn check_magic(path: &Path) -> Result<()> {
    let location = path.to_str().ok_or_else(|| Error::invalid(format!("{} is not valid UTF-8", path.display())))?;
    let head = crate::io::input::read_head(location, REDB_MAGIC.len() as u64)?;
    if head != REDB_MAGIC {
        return Err(Error::corrupt(format!(
            "{} is not a skade catalog (it exists but is not a redb database); it was left untouched",
            path.display()
        )));
    }
    Ok(())
}

/// Why `path` cannot be opened (`read_only`: for a READ_ONLY attach; `shared`: through a commit
/// log). A file another process holds says what is allowed: without a commit log, one process
/// that writes or any number that read (redb's file locks), and several of either kind through a
/// commit log.
fn open_error(path: &Path, e: redb::DatabaseError, read_only: bool, shared: bool) -> Error {
    const ALLOWED: &str = "without a commit log, a catalog is open to one process that writes to it, or to any \
                           number of processes that attach it READ_ONLY";
    const THROUGH_A_LOG: &str = "several processes, read-write or READ_ONLY, share a catalog through a commit log: \
                                 ATTACH ... (TYPE skade, COMMIT_LOG '<folder>') in each of them";
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen if shared => Error::permission(format!(
            "skade catalog {} is already open in another process that attached it without a commit log ({ALLOWED}): \
             DETACH it there first",
            path.display()
        )),
        // (readers share the file: the holder writes to it)
        redb::DatabaseError::DatabaseAlreadyOpen if read_only => Error::permission(format!(
            "skade catalog {} is already open in another process, which writes to it: {ALLOWED}, never both; \
             {THROUGH_A_LOG}",
            path.display()
        )),
        redb::DatabaseError::DatabaseAlreadyOpen => Error::permission(format!(
            "skade catalog {} is already open in another process: {ALLOWED}; {THROUGH_A_LOG}",
            path.display()
        )),
        // (a read-only open cannot do the recovery a file left by a killed writer needs)
        redb::DatabaseError::RepairAborted if read_only => Error::permission(format!(
            "skade catalog {} was not closed by the process that last wrote to it (it was killed or crashed), and \
             a READ_ONLY attach cannot recover it: ATTACH it once without READ_ONLY (that recovers every commit it \
             acknowledged), DETACH, then attach it READ_ONLY",
            path.display()
        )),
        redb::DatabaseError::Storage(redb::StorageError::Corrupted(why)) => {
            Error::corrupt(format!("skade catalog {} is corrupt: {why}; restore it from a copy", path.display()))
        }
        other => Error::io(format!("cannot open skade catalog {}: {}", path.display(), describe(&other.into()))),
    }
}

/// The prefix of a redb error's message before [`Store::access`] names the file.
pub(crate) const STORE_ERROR: &str = "catalog store: ";

thread_local! {
    /// Set while this thread is inside a store access: a panic there is reported as a damaged
    /// file by the access, not printed.
    static QUIET: Cell<u32> = const { Cell::new(0) };
    /// Where the last quiet panic on this thread happened (file:line).
    static PANICKED_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
    /// Set when an error converted on this thread means redb latched an I/O failure.
    static LATCHED: Cell<bool> = const { Cell::new(false) };
}

/// Installs (once) a panic hook that stays silent for panics inside store accesses and defers to
/// the previous hook for every other panic.
fn install_quiet_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(|q| q.get()) == 0 {
                previous(info);
            } else {
                let at = info.location().map(|l| format!("{}:{}", l.file(), l.line()));
                PANICKED_AT.with(|p| *p.borrow_mut() = at);
            }
        }));
    });
}

/// A redb error as a message, saying what ran out when the disk did; notes (for
/// [`Store::access`]) when redb latched an I/O failure.
pub(crate) fn describe(e: &redb::Error) -> String {
    let io = match e {
        redb::Error::Io(io) => Some(io),
        _ => None,
    };
    if io.is_some() || matches!(e, redb::Error::PreviousIo) {
        LATCHED.with(|l| l.set(true));
    }
    match io {
        Some(io) if io.raw_os_error() == Some(libc::ENOSPC) => {
            "no space left on the device holding it (ENOSPC); nothing was committed: free space, then retry".to_string()
        }
        Some(io) if io.raw_os_error() == Some(libc::EDQUOT) => {
            "the disk quota of its device is exhausted (EDQUOT); nothing was committed: free space, then retry"
                .to_string()
        }
        Some(io) => format!("I/O error: {}", crate::error::io_message(io)),
        None if matches!(e, redb::Error::PreviousIo) => {
            "an earlier I/O error left it unusable until it is reopened".to_string()
        }
        None => e.to_string(),
    }
}

// redb's errors become skade's (here, where `describe` notes a latched I/O failure).
macro_rules! redb_errors {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                let e: redb::Error = e.into();
                let message = describe(&e);
                match e {
                    redb::Error::Corrupted(_) => Error::corrupt(format!("{}{message}", STORE_ERROR)),
                    _ => Error::io(format!("{}{message}", STORE_ERROR)),
                }
            }
        }
    )*};
}
redb_errors!(
    redb::Error,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);

fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string())
}

/// The meta row that makes a catalog log-resident: its provider's name and log location (JSON).
pub const COMMIT_LOG_STAMP: &str = "commit_log";
/// The meta row holding the catalog's identity (a uuid): a commit log serves one catalog.
pub const CATALOG_UUID: &str = "catalog_uuid";

/// A log-resident catalog's stamp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogStamp {
    pub provider: String,
    pub location: String,
}

impl LogStamp {
    pub(crate) fn parse(text: &str, path: &Path) -> Result<LogStamp> {
        serde_json::from_str(text).map_err(|e| {
            Error::corrupt(format!("skade catalog {}: its commit_log stamp is damaged ({e}): {text}", path.display()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_held_elsewhere_says_what_is_allowed() {
        let dir = std::env::temp_dir().join(format!("skade-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("lake.skade");
        // (each open has its own file description, whose locks exclude the others' as another
        // process's would)
        let (writer, _) = Store::open(&path, false, None, false).unwrap();
        for read_only in [true, false] {
            let err = Store::open(&path, read_only, None, false).err().unwrap();
            assert_eq!(err.kind, ErrorKind::Permission);
            let message = err.message;
            assert!(message.contains("is already open in another process"), "{message}");
            assert!(!message.contains("one writer at a time"), "{message}");
            assert!(
                message.contains(
                    "open to one process that writes to it, or to any number of processes that attach \
                     it READ_ONLY"
                ),
                "{message}"
            );
            assert!(message.contains("COMMIT_LOG '<folder>'"), "{message}");
            assert_eq!(message.contains("which writes to it"), read_only, "{message}");
        }
        drop(writer);
        // readers share the file, as the message says; a writer waits for all of them to go
        let (a, _) = Store::open(&path, true, None, false).unwrap();
        let (b, _) = Store::open(&path, true, None, false).unwrap();
        let err = Store::open(&path, false, None, false).err().unwrap();
        assert!(err.message.contains("is already open in another process: without a commit log"), "{}", err.message);
        drop((a, b));
        drop(Store::open(&path, false, None, false).unwrap());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_write_that_changed_nothing_is_not_committed() {
        let dir = std::env::temp_dir().join(format!("skade-store-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let (store, _) = Store::open(&dir.join("lake.skade"), false, None, true).unwrap();
        let set = |to: u64, changed: bool| {
            store.write_if_changed(true, |tx| {
                tx.open_table(COUNTERS)?.insert(LOG_POSITION, to)?;
                Ok(((), changed))
            })
        };
        set(7, true).unwrap();
        assert_eq!(store.log_position().unwrap(), 7);
        // (said unchanged: aborted, whatever it wrote)
        set(9, false).unwrap();
        assert_eq!(store.log_position().unwrap(), 7);
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
