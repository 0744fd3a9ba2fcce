//! The redb file: the catalog's single source of truth.
//!
//! Tables (format `skade-catalog-1`):
//! - `meta`: format stamp, data path, creation time.
//! - `counters`: `commit_seq` (last assigned, gapless from 1), `next_snapshot_id`.
//! - `schemas`: schema key -> [`SchemaRecord`] (JSON).
//! - `tables`: (schema key, table key) -> [`TableRecord`] (JSON): the current metadata pointer.
//! - `commits`: (table uuid, snapshot id) -> commit_seq.
//! - `commit_log`: commit_seq -> [`CommitRecord`] (JSON).
//!
//! Pointers, log rows and counters advance together in one write transaction and one fsync.

use std::io::Read;
use std::path::{Path, PathBuf};

use redb::{
    Database, ReadOnlyDatabase, ReadTransaction, ReadableDatabase, ReadableTable, ReadableTableMetadata,
    TableDefinition, WriteTransaction,
};
use serde::{Deserialize, Serialize};

use super::names::DEFAULT_SCHEMA;
use super::state::{CatalogState, SchemaRecord, TableRecord};
use crate::error::{Error, Result};

pub const FORMAT: &str = "skade-catalog-1";
/// Where the catalog file was created (canonical): Iceberg metadata holds absolute paths, so a
/// catalog file found elsewhere is a copy (or a move) whose tables still name the original's files.
const CREATED_AS: &str = "created_as";

pub(crate) const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
pub(crate) const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
pub(crate) const SCHEMAS: TableDefinition<&str, &[u8]> = TableDefinition::new("schemas");
pub(crate) const TABLES: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("tables");
pub(crate) const COMMITS: TableDefinition<(&str, i64), u64> = TableDefinition::new("commits");
pub(crate) const COMMIT_LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("commit_log");

pub(crate) const COMMIT_SEQ: &str = "commit_seq";
pub(crate) const NEXT_SNAPSHOT_ID: &str = "next_snapshot_id";

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
}

enum Db {
    ReadWrite(Database),
    ReadOnly(ReadOnlyDatabase),
}

pub struct Store {
    db: Db,
    pub path: PathBuf,
}

/// What the file holds when it is opened.
pub struct Loaded {
    pub state: CatalogState,
    pub data_path: PathBuf,
    pub commit_seq: u64,
    pub next_snapshot_id: i64,
}

impl Store {
    /// Opens the catalog at `path`, creating it (with `data_path`) when absent and writable.
    pub fn open(path: &Path, read_only: bool, data_path: Option<&Path>) -> Result<(Store, Loaded)> {
        let exists = path.exists();
        if exists {
            check_magic(path)?;
        } else if read_only {
            return Err(Error::catalog(format!(
                "cannot open skade catalog {} read-only: the file does not exist",
                path.display()
            )));
        }
        let mut builder = redb::Builder::new();
        builder.set_cache_size(16 << 20);
        let db = if read_only {
            Db::ReadOnly(builder.open_read_only(path).map_err(|e| open_error(path, e))?)
        } else if exists {
            Db::ReadWrite(builder.open(path).map_err(|e| open_error(path, e))?)
        } else {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                if !dir.is_dir() {
                    return Err(Error::io(format!(
                        "cannot create skade catalog {}: directory {} does not exist",
                        path.display(),
                        dir.display()
                    )));
                }
            }
            Db::ReadWrite(builder.create(path).map_err(|e| open_error(path, e))?)
        };
        let store = Store { db, path: path.to_path_buf() };
        if !exists {
            let data_path = match data_path {
                Some(p) => p.to_path_buf(),
                None => default_data_path(path),
            };
            store.initialize(&data_path)?;
        }
        let loaded = store.load(data_path)?;
        Ok((store, loaded))
    }

    fn initialize(&self, data_path: &Path) -> Result<()> {
        let data_path_str = data_path
            .to_str()
            .ok_or_else(|| Error::invalid(format!("DATA_PATH {} is not valid UTF-8", data_path.display())))?;
        let tx = self.begin_write()?;
        {
            let mut meta = tx.open_table(META)?;
            meta.insert("format", FORMAT)?;
            meta.insert("data_path", data_path_str)?;
            if let Some(created_as) = self.path.canonicalize().ok().as_deref().and_then(Path::to_str) {
                meta.insert(CREATED_AS, created_as)?;
            }
            meta.insert("created_at", chrono::Utc::now().to_rfc3339().as_str())?;
            let mut counters = tx.open_table(COUNTERS)?;
            counters.insert(COMMIT_SEQ, 0)?;
            counters.insert(NEXT_SNAPSHOT_ID, 1)?;
            let mut schemas = tx.open_table(SCHEMAS)?;
            let main = SchemaRecord { name: DEFAULT_SCHEMA.to_string() };
            schemas.insert(DEFAULT_SCHEMA, serde_json::to_vec(&main)?.as_slice())?;
            tx.open_table(TABLES)?;
            tx.open_table(COMMITS)?;
            tx.open_table(COMMIT_LOG)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn load(&self, requested_data_path: Option<&Path>) -> Result<Loaded> {
        let tx = self.begin_read()?;
        let not_ours = || {
            Error::corrupt(format!(
                "{} is not a skade catalog (it is a redb database without a skade format stamp)",
                self.path.display()
            ))
        };
        let meta = tx.open_table(META).map_err(|_| not_ours())?;
        let format = meta.get("format")?.ok_or_else(not_ours)?.value().to_string();
        if format != FORMAT {
            return Err(Error::corrupt(format!(
                "{} has catalog format '{format}', which this skade build cannot read (it reads '{FORMAT}')",
                self.path.display()
            )));
        }
        let data_path =
            PathBuf::from(meta.get("data_path")?.ok_or_else(|| Error::corrupt("catalog has no data_path"))?.value());
        if let Some(req) = requested_data_path {
            if req != data_path {
                return Err(Error::invalid(format!(
                    "DATA_PATH {} differs from the data path {} this catalog was created with",
                    req.display(),
                    data_path.display()
                )));
            }
        }
        if let (Some(created_as), false) = (meta.get(CREATED_AS)?, self.read_only()) {
            let created_as = PathBuf::from(created_as.value());
            if self.path.canonicalize().is_ok_and(|here| here != created_as) {
                return Err(Error::invalid(format!(
                    "skade catalog {} was created as {}: its tables' Iceberg metadata names their files by \
                     absolute path under {}, so a writable copy would change and remove the original's files; \
                     attach {} instead, or attach this copy READ_ONLY",
                    self.path.display(),
                    created_as.display(),
                    data_path.display(),
                    created_as.display()
                )));
            }
        }
        let counters = tx.open_table(COUNTERS)?;
        let counter = |name: &str| -> Result<u64> {
            Ok(counters.get(name)?.ok_or_else(|| Error::corrupt(format!("missing counter {name}")))?.value())
        };
        let commit_seq = counter(COMMIT_SEQ)?;
        let next_snapshot_id = counter(NEXT_SNAPSHOT_ID)? as i64;

        let mut state = CatalogState::default();
        for row in tx.open_table(SCHEMAS)?.iter()? {
            let (k, v) = row?;
            let rec: SchemaRecord = serde_json::from_slice(v.value())?;
            state.schemas.insert(k.value().to_string(), rec.into());
        }
        for row in tx.open_table(TABLES)?.iter()? {
            let (_, v) = row?;
            let rec: TableRecord = serde_json::from_slice(v.value())?;
            state.tables.insert(rec.key(), rec.into());
        }
        Ok(Loaded { state, data_path, commit_seq, next_snapshot_id })
    }

    pub fn read_only(&self) -> bool {
        matches!(self.db, Db::ReadOnly(_))
    }

    pub fn begin_read(&self) -> Result<ReadTransaction> {
        Ok(match &self.db {
            Db::ReadWrite(db) => db.begin_read()?,
            Db::ReadOnly(db) => db.begin_read()?,
        })
    }

    pub fn begin_write(&self) -> Result<WriteTransaction> {
        match &self.db {
            Db::ReadWrite(db) => Ok(db.begin_write()?),
            Db::ReadOnly(_) => {
                Err(Error::permission(format!("skade catalog {} is attached read-only", self.path.display())))
            }
        }
    }

    /// An empty durable commit: makes every earlier non-durable commit durable.
    pub fn make_durable(&self) -> Result<()> {
        let mut tx = self.begin_write()?;
        tx.set_durability(redb::Durability::Immediate)?;
        tx.commit()?;
        Ok(())
    }

    /// Commit log rows with `seq > since`, in order, at most `limit`.
    pub fn commits_since(&self, since: u64, limit: usize) -> Result<Vec<CommitRecord>> {
        let tx = self.begin_read()?;
        let log = tx.open_table(COMMIT_LOG)?;
        let mut out = Vec::new();
        for row in log.range(since.saturating_add(1)..)?.take(limit) {
            let (_, v) = row?;
            out.push(serde_json::from_slice(v.value())?);
        }
        Ok(out)
    }

    /// The commit_seq that produced `snapshot_id` of the table `uuid`, if skade committed it.
    pub fn commit_seq_of(&self, uuid: &str, snapshot_id: i64) -> Result<Option<u64>> {
        let tx = self.begin_read()?;
        let commits = tx.open_table(COMMITS)?;
        Ok(commits.get((uuid, snapshot_id))?.map(|v| v.value()))
    }

    pub fn commit_log_len(&self) -> Result<u64> {
        let tx = self.begin_read()?;
        Ok(tx.open_table(COMMIT_LOG)?.len()?)
    }
}

/// `lake.skade` -> `lake.skade.data/`, beside the file.
pub fn default_data_path(catalog: &Path) -> PathBuf {
    let mut name = catalog.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".data");
    catalog.with_file_name(name)
}

fn check_magic(path: &Path) -> Result<()> {
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| Error::io(format!("cannot read {}: {e}", path.display())))?;
    if n < head.len() || head != REDB_MAGIC {
        return Err(Error::corrupt(format!(
            "{} is not a skade catalog (it exists but is not a redb database); it was left untouched",
            path.display()
        )));
    }
    Ok(())
}

fn open_error(path: &Path, e: redb::DatabaseError) -> Error {
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen => Error::permission(format!(
            "skade catalog {} is already open in another process (a catalog has one writer at a time)",
            path.display()
        )),
        other => Error::io(format!("cannot open skade catalog {}: {other}", path.display())),
    }
}
