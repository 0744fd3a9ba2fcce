//! A catalog transaction: the unit DuckDB commits. It reads a consistent view of the catalog
//! (plus its own staged changes), stages DDL and written data files, and commits them as ONE
//! group-commit request, so every table it wrote advances together or none does.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use arrow::array::{ArrayRef, RecordBatch, StructArray};
use arrow::datatypes::Schema as ArrowSchema;
use iceberg::spec::{DataFile, Operation, Struct, TableMetadata};
use uuid::Uuid;

use super::chains::{self, Tentative};
use super::commit::{Awaited, Change, CommitRequest, Expect};
use super::consumers::{staged_consumer_changes, StagedConsumer};
use super::names::{self, key, DEFAULT_SCHEMA};
use super::open::Catalog;
use super::pinned::{lookup_rows, pinned_keys};
use super::rebase::deletes_rebase;
use super::sinks::SinkChange;
use super::state::{CatalogState, EntryKind, MacroRecord, SchemaRecord, StateChange, TableRecord};
use super::store::{CommitRecord, InputRecord};
use crate::error::{Error, ErrorKind, Result};
use crate::format::evolve::SchemaChange;
use crate::format::name_mapping::FileNames;
use crate::format::partition::{self, PartitionKey};
use crate::format::snapshot::{produce, stage_snapshot, write_all, KeyCheck, StagedSnapshot, TableDelta, Unwritten};
use crate::format::sort_order::{self, SortKey};
use crate::format::{metadata, schema};
use crate::io::{remove_files, sync_files, sync_files_but};
use crate::lookup::{lookup, Found, LookupRequest};
use crate::read::column_stats::FileStats;
use crate::read::filter::Prune;
use crate::read::keys::{ranges_may_overlap, KeyColumns, PackedKeys};
use crate::read::scan::{split_row_id, ScanPlan, ScanRequest};
use crate::read::time_travel::{self, Version};
use crate::runtime::block_on;
use crate::write::delete_writer;
use crate::write::key_check::{check_partitioned, find_live, KeyBudget, KeyClash};
use crate::write::writer::{Carries, TableWriter, Written};

/// How often an append-only commit rebases onto a newer head before giving up.
const MAX_REBASES: usize = 32;

/// A table as a transaction sees it.
#[derive(Clone)]
pub struct TableInfo {
    pub record: Arc<TableRecord>,
    pub metadata: Arc<TableMetadata>,
    /// The version a read of this table sees (AT clauses pin an older one).
    pub version: Version,
    /// The name the catalog is attached under in DuckDB, as the transaction that read the table
    /// was begun with (see [`Catalog::begin_as`]): messages name the table in it.
    pub database: Option<Arc<str>>,
}

impl TableInfo {
    /// The same table read at an AT clause (see [`time_travel::resolve`]).
    pub fn at(&self, unit: &str, value: i64) -> Result<TableInfo> {
        let version = time_travel::resolve(&self.metadata, &self.shown_name(), unit, value)?;
        Ok(TableInfo { version, ..self.clone() })
    }

    /// The table as messages name it (`lake.orders`: see [`names::table_shown`]).
    pub fn shown_name(&self) -> String {
        names::table_shown(self.database.as_deref(), &self.record.schema, &self.record.name)
    }

    /// The columns a read of this table sees: its current schema, or the schema a snapshot an AT
    /// clause pins was written with.
    pub fn schema(&self) -> Result<iceberg::spec::SchemaRef> {
        Ok(time_travel::snapshot_and_schema(&self.metadata, self.version)?.1)
    }

    /// How this table's rows leave for DuckDB (the DuckDB types kept: the table's, or those a
    /// snapshot an AT clause pins was written with).
    pub fn facing(&self) -> Result<crate::format::duckdb_types::Facing> {
        use crate::format::duckdb_types::Facing;
        match self.version {
            Version::Snapshot(id) => Facing::at(&self.metadata, id),
            _ => Facing::of(&self.metadata),
        }
    }

    /// What the columns DuckDB sees depend on: the schema read and the DuckDB types kept (an
    /// ALTER of a kept type alone keeps the Iceberg schema). Equal ids, equal columns. The
    /// schema's columns themselves count, not only its id: an ALTER rolled back (or lost to a
    /// conflict) frees its schema id for the next ALTER's different columns.
    pub fn shape_id(&self) -> Result<i32> {
        // A metadata file never changes: its id is computed once per version read.
        static SHAPE_IDS: Mutex<Option<HashMap<(String, Version), i32>>> = Mutex::new(None);
        let name = (self.record.metadata_location.clone(), self.version);
        if let Some(id) = SHAPE_IDS.lock().unwrap().as_ref().and_then(|ids| ids.get(&name)) {
            return Ok(*id);
        }
        let id = self.compute_shape_id()?;
        let mut ids = SHAPE_IDS.lock().unwrap();
        let ids = ids.get_or_insert_with(HashMap::new);
        if ids.len() >= 4096 {
            ids.clear();
        }
        ids.insert(name, id);
        Ok(id)
    }

    fn compute_shape_id(&self) -> Result<i32> {
        let schema = self.schema()?;
        let kept = format!("{:?}", self.facing()?);
        let mut key: Vec<i32> = schema.identifier_field_ids().collect();
        key.sort_unstable();
        let text = format!("{}/{kept}/{:?}/{key:?}", schema.schema_id(), schema.as_struct());
        Ok(twox_hash::XxHash3_64::oneshot(text.as_bytes()) as i32)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnConflict {
    Error,
    Ignore,
    Replace,
}

pub(super) enum Ddl {
    CreateSchema(SchemaRecord),
    /// Another engine's change of a namespace's properties.
    AlterSchema {
        before: Arc<SchemaRecord>,
        after: SchemaRecord,
    },
    DropSchema(String),
    CreateTable(TableRecord),
    DropTable(Arc<TableRecord>),
    /// A change of a table's columns (`transaction_alter`), or another engine's commit
    /// (`transaction_external`): its pointer from `before` to `after`, and the newest snapshot
    /// the change added (another engine's appends and deletes; none for DDL).
    AlterTable {
        before: Arc<TableRecord>,
        after: TableRecord,
        operation: &'static str,
        snapshot_id: Option<i64>,
        /// The change of columns, when it may be made again on a newer head at commit (see
        /// `transaction_alter::rebuild_alters`); none: the pointer read is its premise.
        replay: Option<SchemaChange>,
    },
    /// RENAME TO: the same table (uuid, location) under another name.
    RenameTable {
        before: Arc<TableRecord>,
        after: TableRecord,
    },
    /// CREATE MACRO (`before`: None), CREATE OR REPLACE MACRO of an existing one (Some: the
    /// macro read, which must still be there at commit).
    PutMacro {
        before: Option<Arc<MacroRecord>>,
        after: MacroRecord,
    },
    DropMacro(Arc<MacroRecord>),
}

impl Ddl {
    /// The table this DDL creates, drops, alters or renames.
    pub(super) fn table_uuid(&self) -> Option<&str> {
        match self {
            Ddl::CreateTable(t) => Some(&t.uuid),
            Ddl::DropTable(t) | Ddl::AlterTable { before: t, .. } | Ddl::RenameTable { before: t, .. } => Some(&t.uuid),
            _ => None,
        }
    }
}

pub(super) struct TxnState {
    /// The catalog as this transaction sees it: shared with the committed state until the
    /// transaction's first DDL copies it.
    pub(super) view: Arc<CatalogState>,
    pub(super) ddl: Vec<Ddl>,
    /// Staged changes to named consumers, by name key (see `transaction_consumers`).
    pub(super) consumers: BTreeMap<String, StagedConsumer>,
    /// The statement (query id) that last read each consumer, by name key.
    pub(super) consumed_in: BTreeMap<String, u64>,
    /// Uncommitted data and delete files per table uuid.
    pub(super) changes: BTreeMap<String, TableChanges>,
    /// Those of tables this transaction dropped (or replaced): never committed, but a statement
    /// already reading the table sees them (CREATE OR REPLACE TABLE t AS SELECT ... FROM t creates
    /// the new table before the old one is read).
    dropped: BTreeMap<String, TableChanges>,
    /// Numbers for the data files this transaction's scans read, for row ids.
    pub(super) file_ids: FileIds,
    /// Files this transaction created; removed if it does not commit.
    pub(super) written: Vec<String>,
    /// Staged moves of lineage sinks' cursors, by sink name.
    sinks: BTreeMap<String, SinkChange>,
    /// What its statements read (lineage inputs), each once (a few: found by a scan, no key to
    /// allocate on a lookup's hot path).
    reads: Vec<InputRecord>,
    finished: bool,
}

impl TxnState {
    /// This transaction's moves of a table's pointer (ALTER TABLE, another engine's commit):
    /// the pointer read, the new one, and whether it may be made again on a newer head at commit
    /// (see `transaction_alter::rebuild_alters`).
    fn alters(&self) -> impl Iterator<Item = (&TableRecord, &str, bool)> {
        self.ddl.iter().filter_map(|d| match d {
            Ddl::AlterTable { before, after, replay, .. } => {
                Some((before.as_ref(), after.metadata_location.as_str(), replay.is_some()))
            }
            _ => None,
        })
    }

    /// Notes a read of `table` (a lineage input of the commit).
    fn read(&mut self, table: &TableInfo) {
        let snapshot_id = match table.version {
            Version::Current => table.metadata.current_snapshot_id(),
            Version::Snapshot(id) => Some(id),
            Version::Empty => None,
        };
        let record = &table.record;
        let noted =
            |r: &InputRecord| r.table_uuid.as_deref() == Some(record.uuid.as_str()) && r.snapshot_id == snapshot_id;
        if !self.reads.iter().any(noted) {
            // a table of this catalog: `namespace` is its schema, `name` the table's
            self.reads.push(InputRecord {
                table_uuid: Some(record.uuid.clone()),
                namespace: record.schema.clone(),
                name: record.name.clone(),
                snapshot_id,
                table: None,
                metadata_location: Some(record.metadata_location.clone()),
                columns: vec![],
            });
        }
    }

    /// Notes an input (another catalog's, or a table of this one read through a consumer).
    fn read_input(&mut self, input: InputRecord) {
        let same = |r: &InputRecord| {
            r.table_uuid == input.table_uuid
                && r.namespace == input.namespace
                && r.name == input.name
                && r.snapshot_id == input.snapshot_id
        };
        if !self.reads.iter().any(same) {
            self.reads.push(input);
        }
    }

    /// This transaction's uncommitted files of table `uuid`, dropped tables' included.
    pub(super) fn staged(&self, uuid: &str) -> Option<&TableChanges> {
        self.changes.get(uuid).or_else(|| self.dropped.get(uuid))
    }

    /// Whether this transaction wrote to table `uuid` (files or deletes staged).
    pub(super) fn wrote_to(&self, uuid: &str) -> bool {
        self.changes.get(uuid).is_some_and(|c| !c.is_empty())
    }
}

#[derive(Default)]
pub(super) struct TableChanges {
    pub(super) appends: Vec<DataFile>,
    pub(super) deletes: Vec<DataFile>,
    /// The metadata location the deletes were computed on: they may be rebased over concurrent
    /// appends, never over concurrent deletes.
    pub(super) delete_base: Option<String>,
    /// Committed deletion vectors (v3) this transaction's merged ones replace: (Puffin file, data
    /// file), removed from the table by the commit.
    pub(super) replaced_dvs: Vec<(String, String)>,
    /// How many deleted positions of each data file its new deletion vector carries from deletes
    /// committed before (they delete nothing new: a consumer's estimate of rows behind).
    pub(super) carried_deletes: HashMap<String, u64>,
    /// Files the running statement wrote, and their keys: they join `appends` when the statement
    /// ends and its keys proved unique ([`Transaction::end_statement`]).
    pub(super) pending: Vec<DataFile>,
    pending_keys: PackedKeys,
    /// What the running statement's writers may hold of their rows' keys.
    statement_budget: Option<Arc<KeyBudget>>,
    /// Live files a rewrite removes (computed on `delete_base`), and its operation.
    removed: Vec<String>,
    operation: Option<Operation>,
    /// The partition spec of each delete file not of the table's default spec, by path.
    pub(super) spec_ids: HashMap<String, i32>,
    /// The statistics of `appends[..n]` (scans ask for them per statement; `appends` only grows
    /// while the transaction runs, so the first `n` are the same files).
    appends_stats: (usize, FileStats),
    /// The column names files adopted by `skade_add_files` use, by field id (into the table's
    /// name mapping at commit; reads in the transaction use them before).
    names: BTreeMap<String, i32>,
    /// Those files' paths: the user's, never removed when the transaction fails or drops the table.
    adopted: HashSet<String>,
}

impl TableChanges {
    fn is_empty(&self) -> bool {
        self.appends.is_empty()
            && self.deletes.is_empty()
            && self.pending.is_empty()
            && self.removed.is_empty()
            && self.replaced_dvs.is_empty()
    }
}

#[derive(Default)]
pub(super) struct FileIds {
    pub(super) paths: Vec<String>,
    ids: HashMap<String, u32>,
}

impl FileIds {
    /// The files and positions (ascending, distinct) the row ids `row_ids` name.
    pub(super) fn positions(&self, row_ids: &[i64]) -> Result<BTreeMap<String, Vec<u64>>> {
        let mut by_path: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for &id in row_ids {
            let (file, pos) = split_row_id(id);
            let path = self
                .paths
                .get(file as usize)
                .ok_or_else(|| Error::internal(format!("row id {id} names no file of this transaction")))?;
            by_path.entry(path.clone()).or_default().push(pos);
        }
        for positions in by_path.values_mut() {
            positions.sort_unstable();
            positions.dedup();
        }
        Ok(by_path)
    }

    fn id(&mut self, path: &str) -> u32 {
        if let Some(id) = self.ids.get(path) {
            return *id;
        }
        let id = self.paths.len() as u32;
        self.paths.push(path.to_string());
        self.ids.insert(path.to_string(), id);
        id
    }
}

pub struct Transaction {
    catalog: Catalog,
    /// The name the catalog is attached under in the DuckDB that began this transaction (None: a
    /// transaction of the Rust API or of skade itself): messages name tables in it.
    database: Option<Arc<str>>,
    state: Mutex<TxnState>,
    /// DuckDB's memory_limit, bytes (bounds what a statement's key check holds).
    memory_limit: AtomicU64,
    /// skade's own writer of its reserved schema (the lineage history), not a user's.
    system: bool,
    /// The generation of the committed state this transaction reads (see [`Transaction::generation`]).
    generation: u64,
}

impl Catalog {
    pub fn begin(&self) -> Transaction {
        Transaction::new(self.clone())
    }

    /// A transaction of the catalog as DuckDB attached it under the name `database` (several
    /// ATTACHes of one file share the catalog under their own names): its messages name tables
    /// as a user there writes them (`lake.orders`, `lake.sales.orders`).
    pub fn begin_as(&self, database: &str) -> Transaction {
        self.begin().attached_as(Some(database))
    }

    /// A transaction of skade itself: the lineage history's writer, compaction (which changes no row),
    /// the ones allowed to write to its reserved schema.
    pub fn begin_system(&self) -> Transaction {
        let mut txn = Transaction::new(self.clone());
        txn.system = true;
        txn
    }
}

impl Transaction {
    pub(crate) fn new(catalog: Catalog) -> Self {
        // Other processes' commits, folded into the shared file since the last poll, are seen at
        // once (a failure here leaves the view as of the last poll, which reports it).
        let _ = catalog.catch_up();
        let (view, generation) = catalog.state_and_generation();
        Transaction {
            catalog,
            database: None,
            state: Mutex::new(TxnState {
                view,
                ddl: vec![],
                consumers: BTreeMap::new(),
                consumed_in: BTreeMap::new(),
                changes: BTreeMap::new(),
                dropped: BTreeMap::new(),
                file_ids: FileIds::default(),
                written: vec![],
                sinks: BTreeMap::new(),
                reads: vec![],
                finished: false,
            }),
            memory_limit: AtomicU64::new(u64::MAX),
            system: false,
            generation,
        }
    }

    /// The generation of the committed state this transaction began on: two transactions of one
    /// catalog with the same generation read the same committed state (their own changes aside).
    /// The shim shares catalog entries between them, and reports it as DuckDB's catalog version.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The same transaction, its messages naming tables in the attached database `database`.
    pub(super) fn attached_as(mut self, database: Option<&str>) -> Transaction {
        self.database = database.map(Arc::from);
        self
    }

    /// The name the catalog is attached under in the DuckDB that began this transaction.
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// The table `record` as this transaction's messages name it (see [`names::table_shown`]).
    pub fn shown_name(&self, record: &TableRecord) -> String {
        names::table_shown(self.database(), &record.schema, &record.name)
    }

    /// DuckDB's memory_limit (bytes): a statement's primary-key check holds its keys within a
    /// share of it (see `table::key_check`).
    pub fn set_memory_limit(&self, bytes: u64) {
        self.memory_limit.store(bytes, Ordering::Relaxed);
    }

    /// DuckDB's memory_limit as last set (bytes; unlimited until set).
    pub(super) fn memory_limit(&self) -> u64 {
        self.memory_limit.load(Ordering::Relaxed)
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    pub(super) fn lock(&self) -> Result<MutexGuard<'_, TxnState>> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.finished {
            return Err(Error::internal("the transaction has already ended"));
        }
        Ok(st)
    }

    /// Refuses a user's change to skade's reserved schema (the lineage history).
    pub(super) fn check_not_reserved(&self, schema: &str, what: &str) -> Result<()> {
        if names::is_reserved(schema) && !self.system {
            return Err(Error::permission(format!(
                "cannot {what}: schema \"{}\" is skade's lineage history, written by skade only (read it, \
                 follow it with a consumer; skade_compact and skade_expire_snapshots maintain it)",
                names::LINEAGE_SCHEMA
            )));
        }
        Ok(())
    }

    /// Refuses a user's write to a table of skade's reserved schema.
    pub(super) fn check_table_writable(&self, table: &TableInfo) -> Result<()> {
        self.check_not_reserved(&table.record.schema, &format!("write to table {}", table.shown_name()))
    }

    /// Stages a lineage sink's cursor move (see `sinks`): it commits with the transaction.
    pub fn stage_sink(&self, change: SinkChange) -> Result<()> {
        self.check_writable()?;
        self.lock()?.sinks.insert(change.name.clone(), change);
        Ok(())
    }

    pub fn check_writable(&self) -> Result<()> {
        if self.catalog.read_only() {
            return Err(Error::permission(format!(
                "skade catalog {} is attached read-only",
                self.catalog.path().display()
            )));
        }
        Ok(())
    }

    // ---- reads -------------------------------------------------------------------------

    pub fn schemas(&self) -> Result<Vec<Arc<SchemaRecord>>> {
        Ok(self.lock()?.view.schemas.values().cloned().collect())
    }

    pub fn schema(&self, name: &str) -> Result<Option<Arc<SchemaRecord>>> {
        Ok(self.lock()?.view.schema(name).cloned())
    }

    pub fn tables(&self, schema: &str) -> Result<Vec<Arc<TableRecord>>> {
        Ok(self.lock()?.view.tables_in(schema).cloned().collect())
    }

    pub fn table(&self, schema: &str, name: &str) -> Result<Option<TableInfo>> {
        let record = self.lock()?.view.table(schema, name).cloned();
        record.map(|r| self.info(r)).transpose()
    }

    pub fn table_by_uuid(&self, uuid: &str) -> Result<TableInfo> {
        let record = self.lock()?.view.table_by_uuid(uuid).cloned();
        let record =
            record.ok_or_else(|| Error::catalog(format!("table {uuid} no longer exists in this transaction")))?;
        self.info(record)
    }

    pub(super) fn info(&self, record: Arc<TableRecord>) -> Result<TableInfo> {
        let metadata = self
            .catalog
            .inner
            .metadata
            .get(&record.metadata_location)
            .map_err(|e| e.context(format!("table {}", self.shown_name(&record))))?;
        Ok(TableInfo { record, metadata, version: Version::Current, database: self.database.clone() })
    }

    /// Plans a scan of `table` (as the statement bound it, at its version). The current version
    /// includes this transaction's own uncommitted files; an older one only what was committed then.
    pub fn scan(
        &self,
        table: &TableInfo,
        columns: Vec<usize>,
        prune: Option<Prune>,
        row_ids: bool,
    ) -> Result<ScanPlan> {
        self.scan_with_lineage(table, columns, prune, row_ids, false)
    }

    /// [`Self::scan`], with Iceberg v3's `_row_id` and `_last_updated_sequence_number` after the
    /// columns when `lineage` (see [`ScanPlan::with_lineage`]; a v2 table refuses them).
    pub fn scan_with_lineage(
        &self,
        table: &TableInfo,
        columns: Vec<usize>,
        prune: Option<Prune>,
        row_ids: bool,
        lineage: bool,
    ) -> Result<ScanPlan> {
        if lineage && table.metadata.format_version() < iceberg::spec::FormatVersion::V3 {
            return Err(Error::invalid(format!(
                "table {} is an Iceberg v2 table: _row_id and _last_updated_sequence_number are Iceberg v3's row \
                 lineage (upgrade it with CALL skade_upgrade_table('{}', 3))",
                table.shown_name(),
                table.shown_name()
            )));
        }
        let mut st = self.lock()?;
        st.read(table);
        let (staged, staged_deletes, staged_names) = match (table.version, st.staged(&table.record.uuid)) {
            (Version::Current, Some(c)) => (c.appends.clone(), c.deletes.clone(), c.names.clone()),
            _ => (vec![], vec![], BTreeMap::new()),
        };
        let file_ids = std::cell::RefCell::new(&mut st.file_ids);
        let number = |path: &str| file_ids.borrow_mut().id(path);
        let inner = &self.catalog.inner;
        let request = ScanRequest {
            version: table.version,
            columns,
            prune,
            staged: &staged,
            staged_deletes: &staged_deletes,
            row_ids: row_ids.then_some(&number as &dyn Fn(&str) -> u32),
        };
        let planned = (|| {
            let (plan, snapshot) = ScanPlan::prepare(&table.metadata, inner.read_caches.clone(), &request)?;
            let plan = plan.with_names(&staged_names);
            if lineage {
                // (a lookup's rows carry no positions to compute row ids from: the files are read)
                return plan.with_lineage().plan_files(&table.metadata, snapshot.as_deref(), request);
            }
            // Filters that pin the primary key: a lookup of those keys, not a read of every file.
            if let Some(keys) = request.prune.as_ref().zip(plan.key()).and_then(|(p, key)| pinned_keys(p, key)) {
                let caches = (inner.read_caches.as_ref(), &inner.lookup_cache);
                let schema = plan.iceberg_schema().clone();
                let names = plan.names();
                let rows =
                    lookup_rows(&table.metadata, caches, &request, &schema, &keys, plan.schema(), names.as_deref())?;
                return Ok(plan.with_rows(rows));
            }
            plan.plan_files(&table.metadata, snapshot.as_deref(), request)
        })();
        planned.map_err(|e| e.context(format!("table {}", table.shown_name())))
    }

    /// The statistics of a scan of `table` (see [`crate::read::column_stats`]), from its
    /// version's data files and, at the current version, the ones this transaction wrote: the
    /// columns' bounds (a two-row batch), whether each holds no NULL, and the files' rows (at
    /// least the rows the scan returns). A read of the table: the optimizer may answer the
    /// statement from them alone.
    pub fn column_stats(&self, table: &TableInfo) -> Result<(RecordBatch, Vec<bool>, u64)> {
        use crate::read::column_stats::for_schema;
        let staged = {
            let mut st = self.lock()?;
            st.read(table);
            let uuid = table.record.uuid.as_str();
            // (as `staged`: a table this transaction dropped is still read as it left it)
            let changes =
                if st.changes.contains_key(uuid) { st.changes.get_mut(uuid) } else { st.dropped.get_mut(uuid) };
            match (table.version, changes) {
                (Version::Current, Some(c)) if !c.appends.is_empty() => {
                    let (folded, stats) = &mut c.appends_stats;
                    if *folded > c.appends.len() {
                        (*folded, *stats) = (0, FileStats::default());
                    }
                    stats.add(&c.appends[*folded..]);
                    *folded = c.appends.len();
                    Some(stats.clone())
                }
                _ => None,
            }
        };
        let caches = &self.catalog.inner.read_caches;
        let stats = (|| {
            let (snapshot, schema) = time_travel::snapshot_and_schema(&table.metadata, table.version)?;
            if let (Some(s), None) = (&snapshot, &staged) {
                let c = caches.snapshot_columns(&table.metadata, s, &schema)?;
                return Ok((c.bounds.clone(), c.null_free.clone(), c.rows));
            }
            let committed = match &snapshot {
                Some(s) => caches.file_stats(&table.metadata, s)?,
                None => Arc::new(FileStats::default()),
            };
            let stats = match staged {
                Some(staged) => Arc::new(committed.merged(&staged)),
                None => committed,
            };
            let (bounds, null_free) = for_schema(&stats, &schema, &caches.shape(&table.metadata, &schema)?.arrow)?;
            Ok((bounds, null_free, stats.rows))
        })();
        stats.map_err(|e: Error| e.context(format!("table {}", table.shown_name())))
    }

    /// Notes that a statement read something outside this catalog (a file, another database's
    /// table): a lineage input of this transaction's commit.
    pub fn note_input(&self, input: InputRecord) -> Result<()> {
        self.lock()?.read_input(input);
        Ok(())
    }

    /// Notes that a statement read `table` (skade_changelog, skade_lookup): a lineage input of
    /// this transaction's commit.
    pub fn note_read(&self, table: &TableInfo) -> Result<()> {
        self.lock()?.read(table);
        Ok(())
    }

    /// The live rows of table `uuid` whose primary key is one of `keys` (arrays in key-column
    /// order), at snapshot `as_of` or as this transaction sees the table now; in the table's
    /// current columns.
    pub fn lookup(&self, uuid: &str, as_of: Option<i64>, keys: &StructArray) -> Result<Found> {
        let table = self.table_by_uuid(uuid)?;
        let name = table.shown_name();
        let current = table.metadata.current_schema();
        let shape = self.catalog.inner.read_caches.shape(&table.metadata, current)?;
        let key = shape
            .key
            .as_ref()
            .ok_or_else(|| Error::invalid(format!("table {name} has no primary key: skade_lookup needs one")))?;
        // The key columns by name, in key order.
        let keys: Vec<ArrayRef> = key
            .names
            .iter()
            .map(|n| {
                keys.column_by_name(n).cloned().ok_or_else(|| {
                    Error::invalid(format!("a key of table {name} needs a value for primary-key column {n}"))
                })
            })
            .collect::<Result<_>>()?;
        let version = match as_of {
            Some(id) if table.metadata.snapshot_by_id(id).is_none() => {
                let call = time_travel::snapshots_call(&name);
                return Err(Error::catalog(format!("table {name} has no snapshot {id} ({call} lists them)")));
            }
            Some(id) => Version::Snapshot(id),
            None => Version::Current,
        };
        self.note_read(&TableInfo { version, ..table.clone() })?;
        let (staged, staged_deletes, staged_names) = match (version, self.lock()?.staged(uuid)) {
            (Version::Current, Some(c)) => (c.appends.clone(), c.deletes.clone(), c.names.clone()),
            _ => (vec![], vec![], BTreeMap::new()),
        };
        let names = FileNames::with(FileNames::of(&table.metadata)?.as_deref(), &staged_names);
        let request = LookupRequest {
            metadata: &table.metadata,
            version,
            staged: &staged,
            staged_deletes: &staged_deletes,
            output: current,
            names: names.as_deref(),
        };
        lookup(&self.catalog.inner.read_caches, &self.catalog.inner.lookup_cache, &request, &keys)
            .map_err(|e| e.context(format!("table {name}")))
    }

    // ---- DDL ---------------------------------------------------------------------------

    pub fn create_schema(&self, name: &str, if_not_exists: bool) -> Result<()> {
        self.check_writable()?;
        names::validate("schema", name)?;
        self.check_not_reserved(name, &format!("create schema {}", names::shown(name)))?;
        let mut st = self.lock()?;
        if st.view.schema(name).is_some() {
            return if if_not_exists {
                Ok(())
            } else {
                Err(Error::catalog(format!("Schema with name \"{name}\" already exists!")))
            };
        }
        let record = SchemaRecord::named(name);
        Arc::make_mut(&mut st.view).apply(&StateChange::PutSchema(record.clone()));
        st.ddl.push(Ddl::CreateSchema(record));
        Ok(())
    }

    pub fn drop_schema(&self, name: &str, if_exists: bool, cascade: bool) -> Result<()> {
        self.check_writable()?;
        self.check_not_reserved(name, &format!("drop schema {}", names::shown(name)))?;
        let mut st = self.lock()?;
        let Some(schema) = st.view.schema(name).cloned() else {
            return if if_exists {
                Ok(())
            } else {
                Err(Error::catalog(format!("Schema with name \"{name}\" does not exist!")))
            };
        };
        if key(name) == DEFAULT_SCHEMA {
            return Err(Error::catalog("cannot drop the default schema \"main\""));
        }
        let tables: Vec<Arc<TableRecord>> = st.view.entries_in(name).cloned().collect();
        let macros: Vec<Arc<MacroRecord>> = st.view.macros_in(name).cloned().collect();
        let example = tables.first().map(|t| &t.name).or(macros.first().map(|m| &m.name));
        if let (Some(example), false) = (example, cascade) {
            return Err(Error::catalog(format!(
                "cannot drop schema \"{}\" because it still holds {} table(s), view(s) or macro(s) (for example \"{}\"); use DROP SCHEMA ... CASCADE",
                schema.name,
                tables.len() + macros.len(),
                example
            )));
        }
        for t in tables {
            Self::stage_drop_table(&mut st, t);
        }
        for m in macros {
            Self::stage_drop_macro(&mut st, m);
        }
        Arc::make_mut(&mut st.view).apply(&StateChange::DropSchema(schema.name.clone()));
        st.ddl.push(Ddl::DropSchema(schema.name.clone()));
        Ok(())
    }

    /// Creates a table. `arrow` is DuckDB's Arrow export of the columns, `duckdb_types` their
    /// DuckDB type names (for messages), `partitioned_by` its partition spec (CREATE TABLE ...
    /// PARTITIONED BY; none: unpartitioned), `sorted_by` its sort order (SORTED BY; none:
    /// unsorted). Returns the table, or None when it existed and `on_conflict` is Ignore.
    #[allow(clippy::too_many_arguments)]
    pub fn create_table(
        &self,
        schema_name: &str,
        name: &str,
        arrow: &ArrowSchema,
        duckdb_types: &[String],
        not_null: &[String],
        primary_key: &[String],
        partitioned_by: &[PartitionKey],
        sorted_by: &[SortKey],
        on_conflict: OnConflict,
    ) -> Result<Option<TableInfo>> {
        self.check_writable()?;
        self.check_not_reserved(schema_name, &format!("create table {}", names::shown(name)))?;
        let location = names::table_location(self.catalog.data_path(), schema_name, name)?;
        let (iceberg_schema, kept) =
            schema::iceberg_schema(arrow, duckdb_types, not_null, primary_key, self.catalog.nanoseconds())?;
        let stored_schema_name = {
            let st = self.lock()?;
            let Some(schema) = st.view.schema(schema_name) else {
                return Err(Error::catalog(format!("Schema with name \"{schema_name}\" does not exist!")));
            };
            if let Some(existing) = st.view.entry(schema_name, name) {
                match on_conflict {
                    OnConflict::Ignore => return Ok(None),
                    OnConflict::Error => {
                        return Err(Error::catalog(format!(
                            "{} with name \"{}\" already exists!",
                            existing.kind.shown(),
                            existing.name
                        )))
                    }
                    OnConflict::Replace if existing.kind != EntryKind::Table => {
                        return Err(existing.kind.mismatch(&existing.name, "replace with", EntryKind::Table))
                    }
                    OnConflict::Replace => {} // dropped below, once the new table exists
                }
            }
            schema.name.clone()
        };
        let table_uuid = Uuid::new_v4();
        let shown = names::table_shown(self.database(), &stored_schema_name, name);
        let spec = partition::unbound_spec(&iceberg_schema, partitioned_by, &shown)?;
        let order = sort_order::sort_order(&iceberg_schema, sorted_by, &shown)?;
        let md = metadata::new_table_with(
            iceberg_schema,
            spec,
            order,
            &location,
            table_uuid,
            &kept,
            primary_key,
            Default::default(),
            // (skade's own lineage history stays v2: its maintenance compacts it, which v3
            // tables do not take yet)
            match names::is_reserved(schema_name) {
                true => iceberg::spec::FormatVersion::V2,
                false => self.catalog.format_version(),
            },
        )?;
        let md_location = metadata::metadata_location(&location, 0);
        self.lock()?.written.push(md_location.clone());
        self.catalog.inner.metadata.write(&md_location, &md)?;
        self.catalog.inner.metadata.insert(&md_location, Arc::new(md));
        let record = TableRecord {
            schema: stored_schema_name,
            name: name.to_string(),
            uuid: table_uuid.to_string(),
            metadata_location: md_location,
            kind: EntryKind::Table,
        };
        {
            let mut st = self.lock()?;
            if let Some(existing) = st.view.table(schema_name, name).cloned() {
                Self::stage_drop_table(&mut st, existing); // OR REPLACE
            }
            Arc::make_mut(&mut st.view).apply(&StateChange::PutTable(record.clone()));
            st.ddl.push(Ddl::CreateTable(record.clone()));
        }
        self.info(Arc::new(record)).map(Some)
    }

    pub fn drop_table(&self, schema: &str, name: &str, if_exists: bool) -> Result<()> {
        self.check_writable()?;
        self.check_not_reserved(schema, &format!("drop table {}", names::shown(name)))?;
        let mut st = self.lock()?;
        match st.view.entry(schema, name).cloned() {
            Some(t) if t.kind != EntryKind::Table => Err(t.kind.mismatch(&t.name, "drop", EntryKind::Table)),
            Some(t) => {
                Self::stage_drop_table(&mut st, t);
                Ok(())
            }
            None if if_exists => Ok(()),
            None => Err(Error::catalog(format!("Table with name \"{name}\" does not exist!"))),
        }
    }

    /// Writes `md` as metadata file `location`, one of this transaction's files (removed if it
    /// does not commit), and caches it.
    pub(super) fn write_metadata(&self, location: &str, md: TableMetadata) -> Result<Arc<TableMetadata>> {
        let inner = &self.catalog.inner;
        self.lock()?.written.push(location.to_string());
        inner.metadata.write(location, &md)?;
        let md = Arc::new(md);
        inner.metadata.insert(location, md.clone());
        Ok(md)
    }

    /// Stages `before`'s pointer moving to `after` (checked at commit against the one read).
    pub(super) fn stage_alter(
        &self,
        before: Arc<TableRecord>,
        after: TableRecord,
        operation: &'static str,
        snapshot_id: Option<i64>,
        replay: Option<SchemaChange>,
    ) -> Result<()> {
        let mut st = self.lock()?;
        Arc::make_mut(&mut st.view).apply(&StateChange::PutTable(after.clone()));
        st.ddl.push(Ddl::AlterTable { before, after, operation, snapshot_id, replay });
        Ok(())
    }

    /// Stages a new table's pointer (checked at commit: the name must still be free).
    pub(super) fn stage_created(&self, record: TableRecord) -> Result<()> {
        let mut st = self.lock()?;
        Arc::make_mut(&mut st.view).apply(&StateChange::PutTable(record.clone()));
        st.ddl.push(Ddl::CreateTable(record));
        Ok(())
    }

    pub(super) fn stage_drop_table(st: &mut TxnState, table: Arc<TableRecord>) {
        Arc::make_mut(&mut st.view)
            .apply(&StateChange::DropTable { schema: table.schema.clone(), name: table.name.clone() });
        if let Some(changes) = st.changes.remove(&table.uuid) {
            st.dropped.insert(table.uuid.clone(), changes);
        }
        st.ddl.push(Ddl::DropTable(table));
    }

    pub(super) fn stage_drop_macro(st: &mut TxnState, m: Arc<MacroRecord>) {
        Arc::make_mut(&mut st.view).apply(&m.dropped());
        st.ddl.push(Ddl::DropMacro(m));
    }

    // ---- writes ------------------------------------------------------------------------

    /// A writer of new data files for `uuid`; hand what it wrote back with [`Self::stage_files`],
    /// then end the statement with [`Self::end_statement`].
    pub fn writer(&self, uuid: &str) -> Result<TableWriter> {
        self.writer_carrying(uuid, Carries::Nothing)
    }

    /// [`Self::writer`] of rows that carry rows over (see [`Carries`]): on an Iceberg v3 table,
    /// the writer stores the lineage it is handed.
    pub fn writer_carrying(&self, uuid: &str, carries: Carries) -> Result<TableWriter> {
        self.check_writable()?;
        let table = self.table_by_uuid(uuid)?;
        self.check_table_writable(&table)?;
        let budget = {
            let mut st = self.lock()?;
            let limit = self.memory_limit.load(Ordering::Relaxed);
            let changes = st.changes.entry(uuid.to_string()).or_default();
            changes.statement_budget.get_or_insert_with(|| KeyBudget::for_memory_limit(limit)).clone()
        };
        let target = self.catalog.target_file_size;
        // (the writer's name is for its messages only; on a v3 table, the writer of an UPDATE
        // or a compaction stores the row lineage it carries over)
        let carries = match table.metadata.format_version() >= iceberg::spec::FormatVersion::V3 {
            true => carries,
            false => Carries::Nothing,
        };
        TableWriter::new(&table.metadata, &self.catalog.inner.file_io, &table.shown_name(), budget, target, carries)
    }

    /// Adds one writer's files to the running statement (several writers may share a statement).
    pub fn stage_files(&self, uuid: &str, written: Written) -> Result<()> {
        let mut st = self.lock()?;
        st.written.extend(written.files.iter().map(|f| f.file_path().to_string()));
        if st.view.table_by_uuid(uuid).is_none() {
            return Err(Error::catalog("the table was dropped in this transaction"));
        }
        let changes = st.changes.entry(uuid.to_string()).or_default();
        changes.pending.extend(written.files);
        if let Some(keys) = written.keys {
            changes.pending_keys.append(keys);
        }
        Ok(())
    }

    /// Stages data files written elsewhere (`skade_add_files`) as one statement's new files of
    /// `uuid`, read by the column names `names` (file column name -> field id: into the table's
    /// name mapping at commit), and ends the statement: on a table with a primary key their keys
    /// are read back from them and checked as any statement's are. They are the user's files:
    /// nothing this transaction does on failure, rollback or DROP TABLE removes them.
    pub(super) fn stage_adopted(&self, uuid: &str, files: Vec<DataFile>, names: BTreeMap<String, i32>) -> Result<()> {
        let before = {
            let mut st = self.lock()?;
            let Some(record) = st.view.table_by_uuid(uuid).cloned() else {
                return Err(Error::catalog("the table was dropped in this transaction"));
            };
            let changes = st.changes.entry(uuid.to_string()).or_default();
            if !changes.pending.is_empty() {
                return Err(Error::internal("a statement of this transaction is still writing the table"));
            }
            if let Some(f) = files.iter().find(|f| changes.adopted.contains(f.file_path())) {
                return Err(Error::invalid(format!(
                    "cannot add {} to table {}: this transaction added it already",
                    f.file_path(),
                    self.shown_name(&record)
                )));
            }
            let before = (changes.names.clone(), changes.adopted.clone());
            changes.names.extend(names);
            changes.adopted.extend(files.iter().map(|f| f.file_path().to_string()));
            changes.pending.extend(files);
            // (no writer collected their keys: the check reads them from the files)
            changes.statement_budget = Some(KeyBudget::exhausted(self.memory_limit()));
            before
        };
        let ended = self.end_statement(uuid);
        if ended.is_err() {
            // (the statement's files left the changes: so do the names they brought)
            if let Some(changes) = self.lock()?.changes.get_mut(uuid) {
                (changes.names, changes.adopted) = before;
            }
        }
        ended
    }

    /// Ends a statement that wrote rows to `uuid`: on a table with a primary key its new keys must
    /// be distinct and not live in the table (committed or staged, after deletes), else nothing
    /// of the statement stays. Files whose key bounds cannot overlap the new keys are not read.
    pub fn end_statement(&self, uuid: &str) -> Result<()> {
        let table = self.table_by_uuid(uuid)?;
        let mut st = self.lock()?;
        let Some(changes) = st.changes.get_mut(uuid) else {
            return Ok(());
        };
        let pending = std::mem::take(&mut changes.pending);
        let keys = std::mem::take(&mut changes.pending_keys);
        let budget = changes.statement_budget.take();
        let staged_names = changes.names.clone();
        if let Some(key) = KeyColumns::of(table.metadata.current_schema())? {
            let duplicate = |k: &[u8]| {
                let shown = key.converter().map(|c| key.describe(&c, k)).unwrap_or_default();
                Error::constraint(format!(
                    "Duplicate key \"{shown}\" violates primary key constraint on table {}",
                    table.shown_name()
                ))
            };
            let caches = self.catalog.inner.read_caches.clone();
            let existing = |prune| {
                let request = ScanRequest {
                    version: Version::Current,
                    columns: key.indexes.clone(),
                    prune,
                    staged: &changes.appends,
                    staged_deletes: &changes.deletes,
                    row_ids: None,
                };
                // (the mapping reads this transaction's adopted files, the statement's own too)
                Ok::<_, Error>(ScanPlan::plan(&table.metadata, caches.clone(), request)?.with_names(&staged_names))
            };
            match budget.filter(|b| b.exceeded()) {
                // The writers dropped the keys: read them back, a partition at a time.
                Some(budget) => {
                    let plan = existing(key.overlap_prune(&pending))?;
                    let schema = table.metadata.current_schema().clone();
                    match check_partitioned(schema, caches.clone(), &key, &pending, &plan, budget.limit())? {
                        Some(KeyClash::Repeated(k) | KeyClash::Live(k)) => return Err(duplicate(&k)),
                        None => {}
                    }
                }
                None => {
                    let set = keys.unique().map_err(duplicate)?;
                    if !set.is_empty() {
                        let plan = existing(key.overlap_prune(&pending))?;
                        if let Some(live) = find_live(&plan, &key, &set)? {
                            return Err(duplicate(&live));
                        }
                    }
                }
            }
        }
        changes.appends.extend(pending);
        Ok(())
    }

    /// Deletes the rows `row_ids` (from this transaction's scans of `uuid`) with one position-delete
    /// file: a row id names its data file and position, so skade never needs equality deletes
    /// (Iceberg readers such as PyIceberg cannot apply them, and a scan applies positions without
    /// reading a key column). Returns how many rows were deleted.
    pub fn delete_rows(&self, uuid: &str, row_ids: &[i64]) -> Result<u64> {
        self.check_writable()?;
        let table = self.table_by_uuid(uuid)?;
        self.check_table_writable(&table)?;
        let inner = &self.catalog.inner;
        let mut st = self.lock()?;
        let by_path = st.file_ids.positions(row_ids)?;
        let count = by_path.values().map(|p| p.len() as u64).sum();
        if count == 0 {
            return Ok(0);
        }
        if table.metadata.format_version() >= iceberg::spec::FormatVersion::V3 {
            self.stage_deletion_vectors(&table, &mut st, by_path)?;
            return Ok(count);
        }
        // (a position delete file is in the partition of the data files it deletes from: Iceberg
        // readers such as PyIceberg match them by partition)
        let partitions = self.partitions_of(&table, &st, by_path.keys())?;
        let mut groups: HashMap<(i32, Struct), BTreeMap<String, Vec<u64>>> = HashMap::new();
        let default_spec = table.metadata.default_partition_spec_id();
        for (path, positions) in by_path {
            let partition = partitions.get(&path).cloned().unwrap_or((default_spec, Struct::empty()));
            groups.entry(partition).or_default().insert(path, positions);
        }
        let mut files = vec![];
        for ((spec_id, partition), positions) in groups {
            let mut written = vec![];
            let result = block_on(delete_writer::position_deletes(
                &inner.file_io,
                &table.metadata,
                &positions,
                (spec_id, partition),
                &mut written,
            ));
            st.written.extend(written);
            files.push((result?, spec_id));
        }
        let changes = st.changes.entry(uuid.to_string()).or_default();
        for (file, spec_id) in files {
            if spec_id != default_spec {
                changes.spec_ids.insert(file.file_path().to_string(), spec_id);
            }
            changes.deletes.push(file);
        }
        changes.delete_base.get_or_insert_with(|| table.record.metadata_location.clone());
        Ok(count)
    }

    /// The partition spec and values of data files `paths` of `table` (its live files, and this
    /// transaction's own); empty when the table was never partitioned.
    pub(super) fn partitions_of<'a>(
        &self,
        table: &TableInfo,
        st: &TxnState,
        paths: impl Iterator<Item = &'a String>,
    ) -> Result<HashMap<String, (i32, Struct)>> {
        let md = &table.metadata;
        if md.partition_specs_iter().all(|s| s.is_unpartitioned()) {
            return Ok(HashMap::new());
        }
        let wanted: HashSet<&str> = paths.map(String::as_str).collect();
        let mut out = HashMap::new();
        if let Some(c) = st.staged(&table.record.uuid) {
            for f in c.appends.iter().chain(&c.pending).filter(|f| wanted.contains(f.file_path())) {
                out.insert(f.file_path().to_string(), (md.default_partition_spec_id(), f.partition().clone()));
            }
        }
        if let Some(snapshot) = md.current_snapshot() {
            let files = self.catalog.inner.read_caches.manifests.snapshot_files(md, snapshot)?;
            for e in files.data.iter().filter(|e| wanted.contains(e.file().file_path())) {
                out.insert(e.file().file_path().to_string(), (e.spec_id, e.file().partition().clone()));
            }
        }
        Ok(out)
    }

    /// Adds delete files written elsewhere (another Iceberg writer) to this transaction's changes
    /// to `uuid`, as a row delta: they commit with the transaction's other changes to the table.
    pub fn add_delete_files(&self, uuid: &str, files: Vec<DataFile>) -> Result<()> {
        self.check_writable()?;
        let table = self.table_by_uuid(uuid)?;
        self.check_table_writable(&table)?;
        if table.metadata.format_version() >= iceberg::spec::FormatVersion::V3 {
            return Err(Error::invalid(format!(
                "table {} is an Iceberg v3 table: it takes deletion vectors, not position delete files",
                table.shown_name()
            )));
        }
        if let Some(f) = files.iter().find(|f| f.content_type() == iceberg::spec::DataContentType::Data) {
            return Err(Error::invalid(format!("{} is a data file, not a delete file", f.file_path())));
        }
        let mut st = self.lock()?;
        let changes = st.changes.entry(uuid.to_string()).or_default();
        changes.deletes.extend(files);
        changes.delete_base.get_or_insert_with(|| table.record.metadata_location.clone());
        Ok(())
    }

    /// Stages a rewrite of `uuid` computed at its current snapshot: `added` data files (fsynced
    /// by the commit) replace the live files `removed`, as one snapshot of `operation`. It may
    /// rebase over concurrent appends only. The table must have no other change in this
    /// transaction (its scans would not see the removal).
    pub fn rewrite_files(
        &self,
        uuid: &str,
        added: Vec<DataFile>,
        removed: Vec<String>,
        operation: Operation,
    ) -> Result<()> {
        self.check_writable()?;
        let table = self.table_by_uuid(uuid)?;
        let mut st = self.lock()?;
        st.written.extend(added.iter().map(|f| f.file_path().to_string()));
        let changes = st.changes.entry(uuid.to_string()).or_default();
        if !changes.is_empty() {
            return Err(Error::invalid(format!(
                "table {} has uncommitted changes in this transaction; commit them before rewriting it",
                table.shown_name()
            )));
        }
        changes.appends = added;
        changes.removed = removed;
        changes.operation = Some(operation);
        changes.delete_base = Some(table.record.metadata_location.clone());
        Ok(())
    }

    /// Whether this transaction staged rows or deletes for table `uuid`.
    pub fn wrote_to_table(&self, uuid: &str) -> Result<bool> {
        Ok(self.lock()?.wrote_to(uuid))
    }

    pub fn has_changes(&self) -> bool {
        self.lock()
            .map(|st| {
                !st.ddl.is_empty()
                    || !st.consumers.is_empty()
                    || !st.sinks.is_empty()
                    || st.changes.values().any(|c| !c.is_empty())
            })
            .unwrap_or(false)
    }

    // ---- end ---------------------------------------------------------------------------

    /// Commits everything staged as one atomic release. On failure nothing is visible and the
    /// files this transaction wrote are removed.
    pub fn commit(&self) -> Result<Vec<CommitRecord>> {
        let mut st = self.lock()?;
        st.finished = true;
        if st.ddl.is_empty()
            && st.consumers.is_empty()
            && st.sinks.is_empty()
            && st.changes.values().all(TableChanges::is_empty)
        {
            return Ok(vec![]);
        }
        if st.changes.values().any(|c| !c.pending.is_empty()) {
            self.rollback_locked(&mut st);
            return Err(Error::internal("a statement of this transaction did not finish; nothing was committed"));
        }
        let mut written = std::mem::take(&mut st.written);
        // (the files of attempts a rebase replaced, removed once the race is over: in a bucket,
        // one request for all of them, and none between losing a race and running again)
        let mut superseded = vec![];
        let result = self.commit_staged(&mut st, &mut written, &mut superseded);
        if result.is_err() {
            superseded.append(&mut written);
        }
        // Files written for tables this transaction dropped belong to no snapshot, whatever the
        // outcome.
        let dropped: Vec<String> = std::mem::take(&mut st.dropped)
            .into_values()
            .flat_map(|c| {
                let adopted = c.adopted; // (the user's files stay)
                c.appends
                    .into_iter()
                    .chain(c.deletes)
                    .chain(c.pending)
                    .map(|f| f.file_path().to_string())
                    .filter(move |p| !adopted.contains(p))
            })
            .chain(superseded)
            .collect();
        self.discard(&dropped);
        result
    }

    fn commit_staged(
        &self,
        st: &mut TxnState,
        written: &mut Vec<String>,
        superseded: &mut Vec<String>,
    ) -> Result<Vec<CommitRecord>> {
        self.check_writable()?;
        let inner = &self.catalog.inner;
        // Tables whose snapshots build on this transaction's own pointer: created, altered or
        // renamed here (their DDL checks the pointer read; a concurrent commit is a conflict).
        let created: HashSet<String> = st
            .ddl
            .iter()
            .filter_map(|d| match d {
                Ddl::CreateTable(t) => Some(t.uuid.clone()),
                Ddl::AlterTable { after, .. } | Ddl::RenameTable { after, .. } => Some(after.uuid.clone()),
                _ => None,
            })
            .collect();

        // Manifests are written once; only manifest lists and metadata are redone on a rebase.
        let mut staged: Vec<(Arc<TableRecord>, StagedSnapshot)> = vec![];
        for (uuid, changes) in std::mem::take(&mut st.changes) {
            if changes.is_empty() {
                continue;
            }
            let Some(record) = st.view.table_by_uuid(&uuid).cloned() else {
                continue;
            };
            let md = inner.metadata.get(&record.metadata_location)?;
            let snapshot_id = self.catalog.allocate_snapshot_id()?;
            let key_check = match KeyColumns::of(md.current_schema())? {
                // a compaction's rows are the table's own: their keys are live already
                _ if changes.operation == Some(Operation::Replace) => None,
                // (on a table without a key: none checked, which the head must agree with)
                key if !changes.appends.is_empty() => Some(KeyCheck {
                    field_ids: key.map(|k| k.field_ids).unwrap_or_default(),
                    appends: changes.appends.clone(),
                    checked_on: record.metadata_location.clone(),
                }),
                _ => None,
            };
            let delta = TableDelta {
                data: changes.appends,
                deletes: changes.deletes,
                removed: changes.removed,
                replaced_dvs: changes.replaced_dvs,
                carried_deletes: changes.carried_deletes.values().sum(),
                operation: changes.operation,
                delete_base: changes.delete_base,
                spec_ids: changes.spec_ids,
                names: changes.names,
            };
            let adopted: Vec<String> = changes.adopted.iter().cloned().collect();
            let mut snap = block_on(stage_snapshot(&inner.file_io, &md, snapshot_id, delta, written))?;
            snap.key_check = key_check;
            snap.adopted = adopted;
            staged.push((record, snap));
        }

        // Data files and manifests are this transaction's whatever head it lands on: synced
        // before any turn is taken, in this committer's own thread.
        let durable = self.catalog.durable_at_commit();
        // (an ALTER's metadata is synced once its commit knows which file it lands, if any: it
        // may be made again on a newer head, see `rebuild_alters`, and a concurrent expiry may
        // have removed the one a statement wrote, which then cannot land)
        let alter_files: HashSet<String> = st.alters().map(|(_, after, _)| after.to_string()).collect();
        let rebuildable = st.alters().any(|(_, _, rebuildable)| rebuildable);
        if durable {
            // (each table's metadata folder is synced once, with its manifest list and metadata)
            let metadata_dirs: HashSet<&std::path::Path> = staged
                .iter()
                .filter_map(|(r, _)| std::path::Path::new(crate::io::local_path(&r.metadata_location)).parent())
                .collect();
            let files = written.iter().filter(|w| !alter_files.contains(*w)).map(String::as_str);
            sync_files_but(files, |d| metadata_dirs.contains(d))?;
        }
        let mut alters_synced: HashSet<String> = HashSet::new();
        // Writers of one table take turns from reading its head to queueing their request, so
        // concurrent commits queue instead of racing and redoing their metadata; writers of
        // different tables still share group commits. Locks are taken in uuid order (no
        // deadlock). An append hands the turn on once queued, its pointer the table's tentative
        // head, which the next append builds on; anything else waits for the table to settle
        // (see `turns`). Through a commit log, processes take turns too, and chain appends the
        // same way (see `chains`).
        // (DDL of a table takes its turn too: an ALTER committing without one starved the DML of
        // other processes, which waited for the turn and then lost to it)
        // (owned: an ALTER may be rebuilt on a newer head, see `rebuild_alters`)
        let ddl_uuids: HashSet<String> = st
            .ddl
            .iter()
            .filter(|d| !matches!(d, Ddl::CreateTable(_)))
            .filter_map(|d| d.table_uuid().map(str::to_string))
            .collect();
        let mut uuids: Vec<&str> =
            staged.iter().map(|(r, _)| r.uuid.as_str()).chain(ddl_uuids.iter().map(String::as_str)).collect();
        uuids.sort_unstable();
        uuids.dedup();
        // (only when a commit syncs its files: without a sync to overlap, building on a request
        // in flight only adds work, 10% fewer commits of 8 writers under DURABILITY 'none')
        let chained = durable;
        // (in one process the chain is kept in memory; through a commit log, beside the turns)
        let local = self.catalog.chains_appends();
        let chains: HashSet<&str> = staged
            .iter()
            .filter(|(r, s)| chained && appends_only(s) && !ddl_uuids.contains(&r.uuid) && !created.contains(&r.uuid))
            .map(|(r, _)| r.uuid.as_str())
            .collect();
        let turns: Vec<_> = uuids.iter().map(|u| self.catalog.table_lock(u)).collect();
        // (set after a conflict found on a tentative head: it is decided again on the settled one)
        let mut settle_first = false;

        let consumers = staged_consumer_changes(&st.consumers);
        let sinks: Vec<SinkChange> = st.sinks.values().cloned().collect();
        let mut last_conflict = None;
        for _ in 0..MAX_REBASES {
            // An append may take a turn with a request in flight; anything else waits for the
            // table to settle, holding no turn meanwhile (a committer in flight settles its
            // tables one turn at a time: waiting while holding one could deadlock).
            let mut held = loop {
                let mut held = Vec::with_capacity(turns.len());
                let mut unsettled = None;
                for (i, (u, t)) in uuids.iter().zip(&turns).enumerate() {
                    let state = t.take();
                    let may_chain = chains.contains(u) && !settle_first && state.chainable();
                    if !state.settled() && !may_chain {
                        unsettled = Some(i);
                        break;
                    }
                    held.push(state);
                }
                match unsettled {
                    None => break held,
                    Some(i) => {
                        drop(held);
                        turns[i].wait_settled();
                    }
                }
            };
            let mut shared_turns = self.catalog.cross_process_turns(uuids.iter().copied())?;
            // (with the turns held, the head read next is the newest: nothing commits to these
            // tables meanwhile, in this process or another, but the appends in flight)
            self.catalog.catch_up()?;
            let mut head = self.catalog.state();
            // Across processes: the appends in flight other committers left, to build on.
            let mut onto: HashMap<String, Tentative> = HashMap::new();
            if shared_turns.held() {
                let pointer = |u: &str| head.table_by_uuid(u).map(|t| t.metadata_location.clone());
                let chainable = |u: &str, t: &Tentative| chains.contains(u) && !settle_first && t.chainable();
                match shared_turns.links(&uuids, chainable, pointer)? {
                    Some(links) => onto = links,
                    None => {
                        // a table must settle first: this is not an append to it (it drains the
                        // table), or nothing may build on what is in flight now
                        let drain = settle_first || uuids.iter().any(|u| !chains.contains(u));
                        drop(shared_turns);
                        shared_turns = self.catalog.settled_cross_process_turns(&uuids, drain)?;
                        self.catalog.catch_up()?;
                        head = self.catalog.state();
                    }
                }
            }
            let tentative: HashMap<String, String> = match shared_turns.held() {
                true => onto.iter().map(|(u, t)| (u.clone(), t.location.clone())).collect(),
                false => uuids
                    .iter()
                    .zip(&held)
                    .filter_map(|(u, h)| h.tentative.as_ref().map(|location| (u.to_string(), location.clone())))
                    .collect(),
            };
            // (an ALTER of a table only appended to or deleted from since is made again on the head)
            let wrote: HashSet<&str> = staged.iter().map(|(r, _)| r.uuid.as_str()).collect();
            self.rebuild_alters(st, &head, &wrote, written, superseded)?;
            if durable {
                // (when every DDL premise holds on the head: otherwise nothing of it lands)
                let lands = self.check_ddl_against(st, &head).is_ok();
                let alters: Vec<String> = st
                    .alters()
                    .filter(|(_, after, _)| lands && !alters_synced.contains(*after))
                    .map(|(_, after, _)| after.to_string())
                    .collect();
                sync_files(alters.iter().map(String::as_str))?;
                alters_synced.extend(alters);
            }
            if let Some(e) = last_conflict.take() {
                // Appends rebase; DDL whose premise no longer holds cannot, nor a consumer's change.
                self.check_ddl_against(st, &head).map_err(|_| e)?;
                for c in &consumers {
                    c.check(head.consumers.get(&c.key).map(|c| c.as_ref()))?;
                }
                for c in &sinks {
                    c.check(head.sinks.get(&c.name).map(|c| c.as_ref()))?;
                }
            }
            let mut changes = Vec::new();
            let mut dropped_uuids = std::collections::HashMap::new();
            for d in &st.ddl {
                if let Ddl::RenameTable { before, after } = d {
                    // the old name's pointer goes (naming the table's identity), the new one comes
                    dropped_uuids.insert(before.key(), before.uuid.clone());
                    changes.push(Change {
                        effect: StateChange::DropTable { schema: before.schema.clone(), name: before.name.clone() },
                        expect: Expect::TableAt(before.metadata_location.clone()),
                        operation: before.kind.operation("rename"),
                        snapshot_id: None,
                    });
                    changes.push(Change {
                        effect: StateChange::PutTable(after.clone()),
                        expect: Expect::TableAbsent,
                        operation: after.kind.operation("rename"),
                        snapshot_id: None,
                    });
                    continue;
                }
                changes.push(match d {
                    Ddl::AlterSchema { before, after } => Change {
                        effect: StateChange::PutSchema(after.clone()),
                        expect: Expect::SchemaIs((**before).clone()),
                        operation: "alter_schema".into(),
                        snapshot_id: None,
                    },
                    Ddl::CreateSchema(n) => Change {
                        effect: StateChange::PutSchema(n.clone()),
                        expect: Expect::SchemaAbsent,
                        operation: "create_schema".into(),
                        snapshot_id: None,
                    },
                    Ddl::DropSchema(n) => Change {
                        effect: StateChange::DropSchema(n.clone()),
                        expect: Expect::SchemaEmpty,
                        operation: "drop_schema".into(),
                        snapshot_id: None,
                    },
                    Ddl::CreateTable(t) => Change {
                        effect: StateChange::PutTable(t.clone()),
                        expect: Expect::TableAbsent,
                        operation: t.kind.operation("create"),
                        snapshot_id: None,
                    },
                    Ddl::DropTable(t) => {
                        dropped_uuids.insert(t.key(), t.uuid.clone());
                        Change {
                            effect: StateChange::DropTable { schema: t.schema.clone(), name: t.name.clone() },
                            expect: Expect::TableAt(t.metadata_location.clone()),
                            operation: t.kind.operation("drop"),
                            snapshot_id: None,
                        }
                    }
                    Ddl::AlterTable { before, after, operation, snapshot_id, .. } => Change {
                        effect: StateChange::PutTable(after.clone()),
                        expect: Expect::TableAt(before.metadata_location.clone()),
                        operation: (*operation).into(),
                        snapshot_id: *snapshot_id,
                    },
                    Ddl::RenameTable { .. } => unreachable!("handled above"),
                    Ddl::PutMacro { before, after } => Change {
                        effect: StateChange::PutMacro(after.clone()),
                        expect: match before {
                            None => Expect::MacroAbsent,
                            Some(m) => Expect::MacroIs((**m).clone()),
                        },
                        operation: if before.is_some() { "replace_macro" } else { "create_macro" }.into(),
                        snapshot_id: None,
                    },
                    Ddl::DropMacro(m) => Change {
                        effect: m.dropped(),
                        expect: Expect::MacroIs((**m).clone()),
                        operation: "drop_macro".into(),
                        snapshot_id: None,
                    },
                });
            }
            let mut attempt_files = vec![];
            // When it chains in one process, its manifest lists and metadata.json files are
            // written once the turns are handed on (the next committer reads them from memory:
            // `Unwritten`); across processes, before (the next one reads them from the files).
            let chains_here =
                (local || shared_turns.held()) && staged.iter().any(|(r, _)| chains.contains(r.uuid.as_str()));
            let writes_late = chains_here && local;
            // (a commit's manifests, manifest lists and metadata.json files go to a bucket at once)
            let produced = crate::io::deferred::deferring(|| {
                let unwritten =
                    self.produce_snapshots(&staged, &created, &head, &tentative, &mut changes, &mut attempt_files)?;
                if writes_late {
                    return Ok(unwritten);
                }
                block_on(write_all(unwritten, &inner.file_io))?;
                Ok(vec![])
            });
            let unwritten = match produced {
                Err(e)
                    if !tentative.is_empty()
                        && matches!(e.kind, ErrorKind::Conflict | ErrorKind::Io | ErrorKind::Corrupt) =>
                {
                    // (a conflict with a request in flight, which may yet fail, or a failure to
                    // read its files, which it may have failed to write: decided again once the
                    // table settles, on the committed head, where an error of this transaction's
                    // own recurs; any other error is this transaction's)
                    superseded.append(&mut attempt_files);
                    settle_first = true;
                    continue;
                }
                Err(e) => {
                    written.extend(attempt_files);
                    return Err(e);
                }
                Ok(unwritten) => unwritten,
            };
            let files: Vec<String> = written.iter().chain(&attempt_files).cloned().collect();
            let new_locations: HashMap<String, String> = changes
                .iter()
                .filter_map(|c| match &c.effect {
                    StateChange::PutTable(t) => Some((t.uuid.clone(), t.metadata_location.clone())),
                    _ => None,
                })
                .collect();
            let awaits = onto
                .iter()
                .filter_map(|(u, t)| {
                    let (schema, name) = head.table_by_uuid(u)?.key();
                    let (base, writer, chain) = (t.location.clone(), t.writer(), t.chain);
                    Some(Awaited { uuid: u.clone(), schema, name, base, writer, chain })
                })
                .collect();
            let request = CommitRequest {
                changes,
                actor: self.catalog.actor().to_string(),
                dropped_uuids,
                files,
                consumers: consumers.clone(),
                sinks: sinks.clone(),
                inputs: st.reads.clone(),
                database: self.database().map(str::to_string),
                awaits,
            };
            // Queued under the turns: it lands after every request queued before it. When it
            // chains, its new pointers become the tables' tentative heads, the turns are handed
            // on, and its own files are written and synced while the next committer works (the
            // queue waits for them); otherwise they are synced first, as the turns are held to
            // the end.
            if durable && !chains_here {
                if let Err(e) = sync_files(attempt_files.iter().map(String::as_str)) {
                    written.extend(attempt_files);
                    return Err(e);
                }
            }
            let ticket = self.catalog.submit(request);
            let mut in_flight = vec![];
            let mut published = vec![];
            if chains_here && local {
                for ((uuid, turn), held) in uuids.iter().zip(&turns).zip(held.iter_mut()) {
                    if let Some(location) = new_locations.get(*uuid) {
                        held.tentative = Some(location.clone());
                        in_flight.push((turn.clone(), location.clone()));
                    }
                }
            } else if chains_here {
                for (uuid, location) in &new_locations {
                    let base = onto.get(uuid);
                    let chain = base.map_or_else(chains::new_chain, |t| t.chain);
                    match shared_turns.publish(&Tentative::new(uuid, location, chain)) {
                        Ok(true) => published.push((uuid.clone(), chain, location.clone(), base.cloned())),
                        Ok(false) => {}
                        Err(e) => eprintln!("skade: {e}"), // (then nothing builds on it: it lands first)
                    }
                }
            }
            if chains_here {
                drop(held);
                drop(shared_turns);
                crate::failpoint::hit("before_chained_metadata_write");
            }
            let synced = match chains_here {
                // (to a bucket, the manifest lists and metadata.json files go at once)
                true => crate::io::deferred::deferring(|| {
                    crate::failpoint::fail("chained_metadata_write").map_err(Error::io)?; // (dropped unwritten)
                    block_on(write_all(unwritten, &inner.file_io))
                })
                .and_then(|()| match durable {
                    true => sync_files(attempt_files.iter().map(String::as_str)),
                    false => Ok(()),
                }),
                false => Ok(()),
            };
            ticket.ready(synced.clone());
            let outcome = self.catalog.finish(ticket);
            for (turn, location) in &in_flight {
                turn.settle(location, outcome.is_ok());
            }
            if outcome.is_err() && !published.is_empty() {
                // the pointers built on this one are doomed: nothing builds on them any more
                self.catalog.end_chains(&published);
            }
            if let Err(e) = synced {
                written.extend(attempt_files); // (refused: nothing landed)
                return Err(e);
            }
            match outcome {
                Ok(records) => {
                    written.clear(); // the files now belong to the committed snapshots
                    return Ok(records);
                }
                // (a lone ALTER too: on a bucket lake another host's commit may not have been
                // folded yet when it was made again; it is made again on the newer head)
                Err(e) if e.kind == ErrorKind::Conflict && (!staged.is_empty() || rebuildable) => {
                    superseded.append(&mut attempt_files);
                    last_conflict = Some(e);
                    // (the pointers built on a request that failed are doomed: rebuilt on the
                    // settled head, never on another doomed one, whose base may hold this
                    // transaction's own snapshot id already)
                    settle_first |= chains_here;
                }
                Err(e) if matches!(e.kind, ErrorKind::Conflict | ErrorKind::Permission) => {
                    written.extend(attempt_files); // refused before anything was written
                    return Err(e);
                }
                Err(e) => {
                    // The catalog write failed with an unknown outcome (an I/O error while redb
                    // committed): a pointer may reference these files, so none is removed.
                    written.clear();
                    return Err(e);
                }
            }
        }
        Err(last_conflict.unwrap_or_else(|| Error::conflict("too many concurrent commits; retry the transaction")))
    }

    /// Produces, for each table with new files, its next snapshot on top of `head` (or of the
    /// table's `tentative` head: a request still in flight), and adds the pointer changes to
    /// `changes`. The manifest lists and metadata.json files are the caller's to write.
    fn produce_snapshots(
        &self,
        staged: &[(Arc<TableRecord>, StagedSnapshot)],
        created: &HashSet<String>,
        head: &CatalogState,
        tentative: &HashMap<String, String>,
        changes: &mut Vec<Change>,
        written: &mut Vec<String>,
    ) -> Result<Vec<Unwritten<'_>>> {
        let inner = &self.catalog.inner;
        let mut unwritten = Vec::with_capacity(staged.len());
        for (record, snap) in staged {
            let base_location = if created.contains(&record.uuid) {
                record.metadata_location.clone()
            } else if let Some(location) = tentative.get(&record.uuid) {
                location.clone() // (an append in flight: this one builds on it, see `turns`)
            } else {
                match head.table(&record.schema, &record.name) {
                    Some(t) if t.uuid == record.uuid => t.metadata_location.clone(),
                    _ => {
                        return Err(Error::conflict(format!(
                            "transaction conflict on table {}: it was dropped by a concurrent transaction; nothing was committed",
                            self.shown_name(record)
                        )))
                    }
                }
            };
            let base = inner.metadata.get(&base_location)?;
            if let Some(delete_base) = &snap.delete_base {
                if *delete_base != base_location && !created.contains(&record.uuid) {
                    // Deletes rebase only over snapshots that appended: a concurrent delete or
                    // update may have removed the same rows (and its own deletes could miss rows
                    // this transaction added or changed).
                    let at_read = self.sequence_at(delete_base, record)?;
                    let since: Vec<Operation> = base
                        .snapshots()
                        .filter(|s| s.sequence_number() > at_read)
                        .map(|s| s.summary().operation.clone())
                        .collect();
                    if !deletes_rebase(at_read, base.last_sequence_number(), &since) {
                        return Err(Error::conflict(format!(
                            "transaction conflict on table {}: a concurrent transaction deleted, updated or \
                             compacted rows of it first; nothing was committed, retry the transaction",
                            self.shown_name(record)
                        )));
                    }
                }
            }
            if let Some(check) = &snap.key_check {
                if check.checked_on != base_location && !created.contains(&record.uuid) {
                    // A key added (ALTER TABLE ... ADD PRIMARY KEY) since the rows were checked
                    // was checked against the rows before them, never against these.
                    let mut head_key: Vec<i32> = base.current_schema().identifier_field_ids().collect();
                    head_key.sort_unstable();
                    if head_key != check.field_ids {
                        return Err(Error::conflict(format!(
                            "transaction conflict on table {}: a concurrent ALTER TABLE changed its PRIMARY \
                             KEY, which this transaction's rows were not checked against; nothing was committed, \
                             retry the transaction",
                            self.shown_name(record)
                        )));
                    }
                    if !check.field_ids.is_empty() {
                        self.check_concurrent_keys(record, check, &base)?;
                    }
                }
            }
            if !snap.adopted.is_empty() && base_location != record.metadata_location {
                self.check_concurrent_adoptions(record, &snap.adopted, &base)?;
            }
            let produced = block_on(produce(
                &inner.file_io,
                &inner.read_caches.manifests,
                &inner.metadata,
                &base,
                &base_location,
                snap,
                written,
            ))?;
            changes.push(Change {
                effect: StateChange::PutTable(TableRecord {
                    metadata_location: produced.location.clone(),
                    ..(**record).clone()
                }),
                expect: Expect::TableAt(base_location),
                operation: snap.operation.as_str().to_string(),
                snapshot_id: Some(snap.snapshot_id),
            });
            unwritten.push(produced);
        }
        Ok(unwritten)
    }

    /// Appends to a table with a primary key rebase over concurrent appends only when the keys
    /// cannot collide: the key bounds of every data file committed since the keys were checked
    /// must be disjoint from those of this transaction's files.
    fn check_concurrent_keys(&self, record: &TableRecord, check: &KeyCheck, base: &TableMetadata) -> Result<()> {
        let inner = &self.catalog.inner;
        let at_read = self.sequence_at(&check.checked_on, record)?;
        let Some(current) = base.current_snapshot() else {
            return Ok(());
        };
        let files = inner.read_caches.manifests.snapshot_files(base, current)?;
        let theirs: Vec<DataFile> =
            files.data.iter().filter(|e| e.sequence_number > at_read).map(|e| e.file().clone()).collect();
        if ranges_may_overlap(&check.field_ids, &check.appends, &theirs) {
            return Err(Error::conflict(format!(
                "transaction conflict on table {}: a concurrent transaction inserted rows whose keys may \
                 collide with this one's; nothing was committed, retry the transaction",
                self.shown_name(record)
            )));
        }
        Ok(())
    }

    /// Files adopted by this transaction must not have become data files of the table since it
    /// read it (two transactions adopting one file would each hold its rows).
    fn check_concurrent_adoptions(&self, record: &TableRecord, adopted: &[String], base: &TableMetadata) -> Result<()> {
        let Some(current) = base.current_snapshot() else {
            return Ok(());
        };
        let files = self.catalog.inner.read_caches.manifests.snapshot_files(base, current)?;
        let live: HashSet<&str> = files.data.iter().map(|e| e.file().file_path()).collect();
        if let Some(path) = adopted.iter().find(|p| live.contains(p.as_str())) {
            return Err(Error::conflict(format!(
                "transaction conflict on table {}: a concurrent transaction added file {path} to it first; \
                 nothing was committed",
                self.shown_name(record)
            )));
        }
        Ok(())
    }

    /// Whether this transaction's DDL still applies on top of `head`.
    fn check_ddl_against(&self, st: &TxnState, head: &CatalogState) -> Result<()> {
        let mut view = CatalogState::clone(head);
        for d in &st.ddl {
            let ok = match d {
                Ddl::CreateSchema(n) => view.schema(&n.name).is_none(),
                Ddl::AlterSchema { before, .. } => view.schema(&before.name).is_some_and(|s| **s == **before),
                Ddl::DropSchema(n) => {
                    view.schema(n).is_some()
                        && view.entries_in(n).next().is_none()
                        && view.macros_in(n).next().is_none()
                }
                Ddl::CreateTable(t) => view.schema(&t.schema).is_some() && view.entry(&t.schema, &t.name).is_none(),
                Ddl::DropTable(t) | Ddl::AlterTable { before: t, .. } | Ddl::RenameTable { before: t, .. } => {
                    view.entry(&t.schema, &t.name).map(|h| h.metadata_location == t.metadata_location).unwrap_or(false)
                }
                Ddl::PutMacro { before: None, after } => {
                    view.schema(&after.schema).is_some()
                        && view.find_macro(&after.schema, after.kind, &after.name).is_none()
                }
                Ddl::PutMacro { before: Some(m), .. } | Ddl::DropMacro(m) => {
                    view.find_macro(&m.schema, m.kind, &m.name).is_some_and(|h| h == m)
                }
            };
            let ok = ok
                && match d {
                    Ddl::RenameTable { after, .. } => view.entry(&after.schema, &after.name).is_none(),
                    _ => true,
                };
            if !ok {
                return Err(Error::conflict("DDL premise changed"));
            }
            match d {
                Ddl::CreateSchema(n) | Ddl::AlterSchema { after: n, .. } => {
                    view.apply(&StateChange::PutSchema(n.clone()))
                }
                Ddl::DropSchema(n) => view.apply(&StateChange::DropSchema(n.clone())),
                Ddl::CreateTable(t) | Ddl::AlterTable { after: t, .. } => view.apply(&StateChange::PutTable(t.clone())),
                Ddl::DropTable(t) => {
                    view.apply(&StateChange::DropTable { schema: t.schema.clone(), name: t.name.clone() })
                }
                Ddl::RenameTable { before, after } => {
                    view.apply(&StateChange::DropTable { schema: before.schema.clone(), name: before.name.clone() });
                    view.apply(&StateChange::PutTable(after.clone()));
                }
                Ddl::PutMacro { after, .. } => view.apply(&StateChange::PutMacro(after.clone())),
                Ddl::DropMacro(m) => view.apply(&m.dropped()),
            }
        }
        Ok(())
    }

    /// Ends the transaction without committing; files it wrote are removed.
    pub fn rollback(&self) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if st.finished {
            return;
        }
        self.rollback_locked(&mut st);
    }

    fn rollback_locked(&self, st: &mut TxnState) {
        st.finished = true;
        let written = std::mem::take(&mut st.written);
        self.discard(&written);
    }

    /// Removes files this transaction wrote and will not commit (lookups may hold them open).
    pub(super) fn discard(&self, written: &[String]) {
        self.catalog.inner.lookup_cache.forget(written.iter().map(String::as_str));
        remove_files(written.iter().map(String::as_str));
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.rollback();
    }
}

impl Transaction {
    /// The last sequence number of the table's metadata at `location` (the state this transaction
    /// read). An expiry since may have removed that file: the history since is then unknown, a
    /// conflict.
    fn sequence_at(&self, location: &str, record: &TableRecord) -> Result<i64> {
        self.catalog.inner.metadata.get(location).map(|m| m.last_sequence_number()).map_err(|_| {
            Error::conflict(format!(
                "transaction conflict on table {}: its snapshots were expired since this transaction read it; \
                 nothing was committed, retry the transaction",
                self.shown_name(record)
            ))
        })
    }
}

/// Whether a staged snapshot only appends (no deletes, removals or adopted files): the only kind
/// that builds on a table's tentative head (see `turns`).
fn appends_only(snap: &StagedSnapshot) -> bool {
    snap.operation == Operation::Append
        && snap.delete_base.is_none()
        && snap.removed.is_empty()
        && snap.replaced_dvs.is_empty()
        && snap.adopted.is_empty()
}
