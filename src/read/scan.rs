//! Scans: plan the data files a read needs (manifests from the cache, files pruned by their
//! column bounds, the deletes that apply to each), cut each file into tasks of about a DuckDB row
//! group's rows, then read each task as its own Arrow stream so DuckDB's threads read in parallel
//! within a file as well as across files.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, AsArray, Int64Array, RecordBatch, RecordBatchOptions, RecordBatchReader,
};
use arrow::datatypes::Int64Type;
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use arrow::error::ArrowError;
use iceberg::spec::{DataFile, NestedFieldRef, SchemaRef, Snapshot, SnapshotRef, TableMetadata};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::arrow::ProjectionMask;
use parquet::file::reader::ChunkReader;

use super::caches::{ReadCaches, Shape};
use super::deletes::{with_sequence, DeleteIndex, EqualityDeletes, FileDeletes};
use super::filter::Prune;
use super::keys::probe;
use super::keys::KeyColumns;
use super::partition_prune;
use super::row_groups::row_group_stats;
use super::select::kept_rows;
use super::skippable::group_can_skip;
use super::time_travel::{snapshot_and_schema, Version};
use crate::error::{Error, Result};
use crate::format::defaults::missing_column;
use crate::format::name_mapping::FileNames;
use crate::format::schema::{arrow_schema, conform_array, roots_by_field_id};
use crate::io::input::InputFile;
use crate::io::ranges::{chunk_range, FileRanges};

/// Rows per Arrow batch handed to DuckDB: a multiple of its 2,048-row vectors.
const BATCH_ROWS: usize = 8 * 2048;

/// Rows of a file per scan task: DuckDB's row-group size, the unit its own Parquet reader hands
/// its threads. A task reads the row groups that start among its positions, so the tasks of a
/// file are known from the manifest's row count alone (no footer is read to plan), and each row
/// group is read by exactly one task.
pub const TASK_ROWS: u64 = 122_880;

/// The name of the row-id column a DML scan appends (see [`row_id`]).
pub const ROW_ID_COLUMN: &str = "__skade_row_id";

/// A row id names a row of a transaction's scans: (file id << 32) | position in the file. File
/// ids come from the transaction's registry, so DELETE and UPDATE can map them back.
pub fn row_id(file_id: u32, position: u64) -> i64 {
    ((file_id as i64) << 32) | position as i64
}

pub fn split_row_id(row_id: i64) -> (u32, u64) {
    ((row_id >> 32) as u32, (row_id & 0xFFFF_FFFF) as u64)
}

pub struct ScanRequest<'a> {
    pub version: Version,
    /// Top-level column indexes, in output order. Empty: only row counts (or row ids) are needed.
    pub columns: Vec<usize>,
    pub prune: Option<Prune>,
    /// Files this transaction wrote and has not committed: it reads its own writes.
    pub staged: &'a [DataFile],
    /// Delete files this transaction wrote and has not committed.
    pub staged_deletes: &'a [DataFile],
    /// Append a row-id column (DELETE/UPDATE); `file_id` numbers the files.
    pub row_ids: Option<&'a dyn Fn(&str) -> u32>,
}

/// The field id of an output column a plan does not read (no file has it: it reads as NULL).
const NOT_READ: i32 = i32::MIN;

/// Iceberg v3 row lineage: the reserved field ids of `_row_id` and
/// `_last_updated_sequence_number`, the names a scan gives them, and what a task knows to
/// compute them for rows whose file does not hold them (see [`ScanPlan::with_lineage`]).
pub const ROW_ID_FIELD_ID: i32 = 2147483540;
pub const LAST_UPDATED_FIELD_ID: i32 = 2147483539;
pub const ROW_ID_NAME: &str = "_row_id";
pub const LAST_UPDATED_NAME: &str = "_last_updated_sequence_number";

/// A data file's row lineage: its first row's id (inherited from its manifest; none for a file
/// not committed yet, or committed before its table became v3) and its data sequence number.
#[derive(Clone, Copy, Default, Debug)]
pub struct FileLineage {
    pub first_row_id: Option<i64>,
    pub sequence_number: Option<i64>,
}

/// Sequence number of uncommitted files: newer than everything committed.
pub(crate) const STAGED_SEQUENCE: i64 = i64::MAX;

struct ScanTask {
    path: String,
    /// The file positions this task reads: the row groups starting in `first..end` (and, for the
    /// file's `last` task, any past `end`: a manifest's row count is not trusted to be right).
    first: u64,
    end: u64,
    last: bool,
    file_id: u32,
    deletes: FileDeletes,
    lineage: FileLineage,
    /// The rows themselves, when a lookup found them at planning.
    rows: Option<RecordBatch>,
}

pub struct ScanPlan {
    tasks: Vec<ScanTask>,
    /// Row groups are pruned with it too (files already were).
    prune: Option<Prune>,
    iceberg_schema: SchemaRef,
    schema: ArrowSchemaRef,
    field_ids: Vec<i32>,
    row_ids: bool,
    /// The output index of `_row_id` (`_last_updated_sequence_number` follows it), when asked.
    lineage: Option<usize>,
    /// The Arrow shape and key of `iceberg_schema` (plans of given files have none).
    shape: Option<Arc<Shape>>,
    caches: Arc<ReadCaches>,
    /// Whether tasks may stream DuckDB's fastest Arrow types (see [`Self::with_duckdb_types`]).
    duckdb_types: bool,
    /// The table's name mapping: the field ids of the columns of files without their own (files
    /// adopted by `skade_add_files`).
    names: Option<Arc<FileNames>>,
}

impl ScanPlan {
    /// The plan of `req`: its output columns, and the files to read with their deletes.
    pub fn plan(metadata: &TableMetadata, caches: Arc<ReadCaches>, req: ScanRequest<'_>) -> Result<ScanPlan> {
        let (plan, snapshot) = Self::prepare(metadata, caches, &req)?;
        plan.plan_files(metadata, snapshot.as_deref(), req)
    }

    /// The plan of `req`'s output columns, reading nothing yet, and the snapshot it reads: next,
    /// [`Self::plan_files`] or [`Self::with_rows`].
    pub fn prepare(
        metadata: &TableMetadata,
        caches: Arc<ReadCaches>,
        req: &ScanRequest<'_>,
    ) -> Result<(ScanPlan, Option<SnapshotRef>)> {
        let (snapshot, schema) = snapshot_and_schema(metadata, req.version)?;
        let fields = schema.as_struct().fields();
        let mut field_ids = Vec::with_capacity(req.columns.len());
        for &c in &req.columns {
            let f = fields.get(c).ok_or_else(|| Error::internal(format!("column index {c} out of range")))?;
            field_ids.push(f.id);
        }
        // The Arrow schema and the key, derived once per table and schema id (shared with lookups).
        let shape = caches.shape(metadata, &schema)?;
        let mut out_fields: Vec<Field> =
            shape.arrow.project(&req.columns)?.fields().iter().map(|f| f.as_ref().clone()).collect();
        if req.row_ids.is_some() {
            out_fields.push(Field::new(ROW_ID_COLUMN, DataType::Int64, false));
        }
        let plan = ScanPlan {
            tasks: vec![],
            prune: None,
            iceberg_schema: schema,
            schema: Arc::new(ArrowSchema::new(out_fields)),
            field_ids,
            row_ids: req.row_ids.is_some(),
            lineage: None,
            shape: Some(shape),
            caches,
            duckdb_types: false,
            // (the current mapping reads every snapshot's files: a name, once mapped, keeps its id)
            names: FileNames::of(metadata)?,
        };
        Ok((plan, snapshot))
    }

    /// The files of `snapshot` (the one [`Self::prepare`] returned) and the request's staged
    /// ones that its filters may match, each with the deletes that apply to it.
    pub fn plan_files(
        mut self,
        metadata: &TableMetadata,
        snapshot: Option<&Snapshot>,
        req: ScanRequest<'_>,
    ) -> Result<ScanPlan> {
        let caches = self.caches.clone();
        let committed = match snapshot {
            Some(s) => caches.manifests.snapshot_files(metadata, s)?,
            None => Default::default(),
        };
        let mut delete_files = with_sequence(&committed.deletes);
        delete_files.extend(req.staged_deletes.iter().map(|f| (STAGED_SEQUENCE, f)));
        let index = DeleteIndex::load(&caches.deletes, &self.iceberg_schema, &delete_files)?;

        // (by the file's column bounds, and a committed file by its partition values too)
        let may_match = |f: &DataFile, spec_id: Option<i32>| {
            req.prune.as_ref().is_none_or(|p| {
                p.may_match(f)
                    && spec_id
                        .and_then(|id| metadata.partition_spec_by_id(id))
                        .is_none_or(|spec| partition_prune::may_match(p, spec, f.partition()))
            })
        };
        // Oldest commit first (manifest lists name the newest first): tasks are batch indexes,
        // so a plain SELECT returns the rows of several INSERTs in the order they were inserted.
        let mut oldest_first: Vec<_> =
            committed.data.iter().map(|e| (e.sequence_number, e.file(), Some(e.spec_id))).collect();
        let first_row_ids: HashMap<&str, i64> = match self.lineage {
            Some(_) => committed.data.iter().filter_map(|e| Some((e.file().file_path(), e.first_row_id?))).collect(),
            None => HashMap::new(),
        };
        oldest_first.sort_by_key(|(seq, _, _)| *seq);
        let data = oldest_first.into_iter().chain(req.staged.iter().map(|f| (STAGED_SEQUENCE, f, None)));
        for (seq, f, _) in data.filter(|(_, f, spec)| may_match(f, *spec)) {
            let path = f.file_path().to_string();
            let file_id = req.row_ids.map(|ids| ids(&path)).unwrap_or(0);
            let deletes = if index.is_empty() { FileDeletes::default() } else { index.for_file(&path, seq) };
            let lineage = match seq {
                STAGED_SEQUENCE => FileLineage::default(),
                _ => {
                    FileLineage { first_row_id: first_row_ids.get(f.file_path()).copied(), sequence_number: Some(seq) }
                }
            };
            push_file_tasks(&mut self.tasks, path, f.record_count(), file_id, deletes, lineage);
        }
        self.prune = req.prune;
        Ok(self)
    }

    /// The same plan answering with `rows` (in the plan's columns: a lookup found them) instead
    /// of reading files.
    pub fn with_rows(mut self, rows: RecordBatch) -> ScanPlan {
        let task = ScanTask {
            path: String::new(),
            first: 0,
            end: rows.num_rows() as u64,
            last: true,
            file_id: 0,
            deletes: FileDeletes::default(),
            lineage: FileLineage::default(),
            rows: Some(rows),
        };
        self.tasks = vec![task];
        self.prune = None;
        self
    }

    /// The `_row_id` of the rows at `positions` (ascending, distinct) of one data file with
    /// `lineage`, in that order: the id the file stores for a row (one an UPDATE or a compaction
    /// carried over), else its first row id plus the position (None: it has no ids). Only the
    /// stored column's pages holding those rows are read.
    pub fn row_ids_of(
        caches: &ReadCaches,
        path: &str,
        positions: &[u64],
        lineage: FileLineage,
        names: Option<&FileNames>,
    ) -> Result<Vec<Option<i64>>> {
        let computed = |p: u64| lineage.first_row_id.and_then(|f| f.checked_add(p as i64));
        let file = InputFile::open(path, "data file")?;
        let footer = caches.footer(path, &file, names)?;
        let Some(&root) = roots_by_field_id(footer.parquet_schema()).get(&ROW_ID_FIELD_ID) else {
            return Ok(positions.iter().map(|&p| computed(p)).collect());
        };
        // The row groups holding a wanted position, and a selection of exactly those rows.
        let mut groups = vec![];
        let mut selectors = vec![];
        let mut wanted = positions.iter().copied().peekable();
        let mut start = 0u64;
        for (g, rg) in footer.metadata().row_groups().iter().enumerate() {
            let end = start + rg.num_rows().max(0) as u64;
            let mut at = start;
            while let Some(p) = wanted.next_if(|p| *p < end) {
                if !groups.contains(&g) {
                    groups.push(g);
                }
                if p > at {
                    selectors.push(RowSelector::skip((p - at) as usize));
                }
                selectors.push(RowSelector::select(1));
                at = p + 1;
            }
            if groups.last() == Some(&g) && end > at {
                selectors.push(RowSelector::skip((end - at) as usize));
            }
            start = end;
        }
        if wanted.next().is_some() {
            return Err(Error::corrupt(format!("data file {path} has fewer rows than its manifest says")));
        }
        let mask = ProjectionMask::roots(footer.parquet_schema(), [root]);
        let reader = build_reader(file, footer, mask, groups, Some(RowSelection::from(selectors)), path)?;
        let mut stored: Vec<Option<i64>> = Vec::with_capacity(positions.len());
        for batch in reader {
            let batch = batch.map_err(|e| Error::corrupt(format!("data file {path} is not readable: {e}")))?;
            let ids = conform_array(batch.column(0), &DataType::Int64)?;
            stored.extend(ids.as_primitive::<Int64Type>().iter());
        }
        if stored.len() != positions.len() {
            return Err(Error::corrupt(format!("data file {path} has fewer rows than its manifest says")));
        }
        Ok(stored.into_iter().zip(positions).map(|(s, &p)| s.or_else(|| computed(p))).collect())
    }

    /// The same plan with Iceberg v3's row lineage columns, `_row_id` and
    /// `_last_updated_sequence_number`, after the plan's columns (before the row id a DML scan
    /// appends): a file's own values where it holds them (rows an UPDATE or a compaction
    /// carried over), else its first row id plus the row's position, and its data sequence
    /// number (null for files not committed yet, or committed before the table became v3).
    /// Before [`Self::plan_files`], which gives each task its file's lineage.
    pub fn with_lineage(mut self) -> ScanPlan {
        let at = self.field_ids.len();
        self.field_ids.extend([ROW_ID_FIELD_ID, LAST_UPDATED_FIELD_ID]);
        let mut fields: Vec<Field> = self.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        fields.insert(at, Field::new(ROW_ID_NAME, DataType::Int64, true));
        fields.insert(at + 1, Field::new(LAST_UPDATED_NAME, DataType::Int64, true));
        self.schema = Arc::new(ArrowSchema::new_with_metadata(fields, self.schema.metadata().clone()));
        self.lineage = Some(at);
        self
    }

    /// [`Self::with_lineage`] for a plan of given files (see [`Self::for_files`]): each task
    /// takes its file's lineage from `lineage`, by path (none there: a file without row ids).
    pub fn with_file_lineage(mut self, lineage: &HashMap<String, FileLineage>) -> ScanPlan {
        for task in &mut self.tasks {
            task.lineage = lineage.get(&task.path).copied().unwrap_or_default();
        }
        self.with_lineage()
    }

    /// The primary key of the schema the plan reads (None: the table has none).
    pub fn key(&self) -> Option<&KeyColumns> {
        self.shape.as_ref().and_then(|s| s.key.as_ref())
    }

    /// The table schema the plan reads (the snapshot's).
    pub fn iceberg_schema(&self) -> &SchemaRef {
        &self.iceberg_schema
    }

    /// A plan over given files with given deletes (the changelog reads the files one snapshot
    /// added, with that snapshot's own deletes): every column, no row ids, no pruning. Every
    /// column reads as nullable: the files may predate `schema`'s constraints (ADD PRIMARY KEY
    /// makes a column required; rows an older snapshot added may hold NULL in it). `names`: the
    /// table's name mapping (`FileNames::of`), for files without field ids.
    pub fn for_files(
        schema: SchemaRef,
        caches: Arc<ReadCaches>,
        files: Vec<(String, u64, FileDeletes)>,
        names: Option<Arc<FileNames>>,
    ) -> Result<ScanPlan> {
        let arrow = arrow_schema(&schema)?;
        let nullable: Vec<Field> = arrow.fields().iter().map(|f| f.as_ref().clone().with_nullable(true)).collect();
        let arrow = Arc::new(ArrowSchema::new_with_metadata(nullable, arrow.metadata().clone()));
        let field_ids = schema.as_struct().fields().iter().map(|f| f.id).collect();
        let mut tasks = vec![];
        for (path, record_count, deletes) in files {
            push_file_tasks(&mut tasks, path, record_count, 0, deletes, FileLineage::default());
        }
        Ok(ScanPlan {
            tasks,
            prune: None,
            iceberg_schema: schema,
            schema: arrow,
            field_ids,
            row_ids: false,
            lineage: None,
            shape: None,
            caches,
            duckdb_types: false,
            names,
        })
    }

    /// The same plan, also reading files without field ids by `more` (file column name -> field
    /// id: a transaction's own adopted files, whose names are not in the table's mapping yet).
    pub fn with_names(mut self, more: &std::collections::BTreeMap<String, i32>) -> ScanPlan {
        if !more.is_empty() {
            self.names = FileNames::with(self.names.as_deref(), more);
        }
        self
    }

    /// The name mapping the plan reads files without field ids by.
    pub fn names(&self) -> Option<Arc<FileNames>> {
        self.names.clone()
    }

    pub fn schema(&self) -> ArrowSchemaRef {
        self.schema.clone()
    }

    /// Reads only the output columns `columns` (indexes into the plan's columns; None: all of
    /// them); the others keep their place and type but are NULL (hence nullable), never read.
    pub fn read_only(mut self, columns: Option<&[usize]>) -> ScanPlan {
        let Some(columns) = columns else {
            return self;
        };
        // (the lineage columns are read whatever the columns asked: they are not the table's)
        let lineage = self.lineage;
        let wanted = |i: usize| columns.contains(&i) || lineage.is_some_and(|at| i >= at);
        for (i, id) in self.field_ids.iter_mut().enumerate() {
            if !wanted(i) {
                *id = NOT_READ;
            }
        }
        let fields: Vec<arrow::datatypes::Field> = self
            .schema
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| f.as_ref().clone().with_nullable(f.is_nullable() || !wanted(i)))
            .collect();
        self.schema = Arc::new(arrow::datatypes::Schema::new_with_metadata(fields, self.schema.metadata().clone()));
        self
    }

    /// The same plan, each task streaming the Arrow types DuckDB converts fastest where its
    /// file allows (see `task_types`): small-dictionary strings as dictionaries, which DuckDB
    /// turns into its own dictionary vectors (a GROUP BY over a low-cardinality string column was
    /// 4x slower than DuckDB's reader with plain strings), and decimals as stored. Each task's
    /// stream then has its own schema: only the shim's table scan, which converts per stream,
    /// asks for it.
    pub fn with_duckdb_types(mut self) -> ScanPlan {
        self.duckdb_types = true;
        self
    }

    /// The same plan, its row groups also pruned with `prune` (for plans built from files).
    pub fn with_prune(mut self, prune: Option<Prune>) -> ScanPlan {
        self.prune = Prune::and(self.prune.take(), prune);
        self
    }

    /// The same plan without the tasks of `paths`.
    pub fn without_files(mut self, paths: &std::collections::HashSet<&str>) -> ScanPlan {
        self.tasks.retain(|t| !paths.contains(t.path.as_str()));
        self
    }

    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// Rows in the planned files, before deletes and row filters.
    pub fn estimated_rows(&self) -> u64 {
        self.tasks.iter().map(|t| t.end - t.first).sum()
    }

    pub fn task_rows(&self, task: usize) -> u64 {
        self.tasks.get(task).map(|t| t.end - t.first).unwrap_or(0)
    }

    /// The positions the equality deletes of `task` remove from its file (None: it has none):
    /// found once per file and set of delete files (cached), by reading the file's key columns.
    fn equality_removed(&self, task: &ScanTask) -> Result<Option<Arc<Vec<u64>>>> {
        if task.deletes.equality.is_empty() {
            return Ok(None);
        }
        let slot = self.caches.deletes.resolved_slot(&task.path, &task.deletes.equality);
        let mut slot = slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(removed) = &*slot {
            return Ok(Some(removed.clone()));
        }
        let removed =
            Arc::new(equality_positions(&self.caches, &task.path, &task.deletes.equality, self.names.as_deref())?);
        *slot = Some(removed.clone());
        Ok(Some(removed))
    }

    /// The deletes of `task` as positions only, for the rows it reads at positions `from..to`:
    /// its position deletes, and those its equality deletes remove (`removed`) in that range.
    fn task_deletes(task: &ScanTask, removed: &Option<Arc<Vec<u64>>>, from: u64, to: u64) -> FileDeletes {
        let Some(removed) = removed else {
            return task.deletes.clone();
        };
        let within = |p: &[u64]| p[p.partition_point(|&x| x < from)..p.partition_point(|&x| x < to)].to_vec();
        let mut positions = within(&task.deletes.positions);
        positions.extend(within(removed));
        positions.sort_unstable();
        positions.dedup();
        FileDeletes { positions: Arc::new(positions), equality: vec![] }
    }

    /// The output columns' fields, where one has an initial default (see [`TaskReader`]).
    fn defaults(&self) -> Vec<Option<NestedFieldRef>> {
        let field = |id: &i32| self.iceberg_schema.field_by_id(*id).filter(|f| f.initial_default.is_some()).cloned();
        let fields: Vec<Option<NestedFieldRef>> = self.field_ids.iter().map(field).collect();
        match fields.iter().any(Option::is_some) {
            true => fields,
            false => vec![],
        }
    }

    /// A blocking reader over one planned task.
    pub fn open(&self, task: usize) -> Result<TaskReader> {
        let task = self.tasks.get(task).ok_or_else(|| Error::internal(format!("scan task {task} out of range")))?;
        let removed = self.equality_removed(task)?;
        let base = TaskReader {
            schema: self.schema.clone(),
            row_ids: self.row_ids,
            lineage: self.lineage.map(|at| (at, task.lineage)),
            file_id: task.file_id,
            // set below, for the positions the task reads (rows found at planning need none)
            deletes: FileDeletes::default(),
            runs: VecDeque::from([(task.first, task.end - task.first)]),
            deleted_cursor: 0,
            source: Source::Positions { remaining: task.end - task.first },
            pending: VecDeque::new(),
            defaults: self.defaults(),
        };
        if let Some(rows) = &task.rows {
            return Ok(TaskReader { source: Source::Rows(Some(rows.clone())), runs: VecDeque::new(), ..base });
        }
        if self.field_ids.is_empty() {
            // count(*), or row ids only: the manifest's row count is enough, the file stays shut,
            // and the task reads exactly its positions.
            let deletes = Self::task_deletes(task, &removed, task.first, task.end);
            return Ok(TaskReader { deletes, ..base });
        }
        let file = InputFile::open(&task.path, "data file")?;
        let footer = self.caches.footer(&task.path, &file, self.names.as_deref())?;
        let parquet_schema = footer.parquet_schema();
        let (roots, column_of) = read_roots(parquet_schema, &self.field_ids);
        let columns: Vec<Option<usize>> = self.field_ids.iter().map(column_of).collect();
        let mask = ProjectionMask::roots(parquet_schema, roots.iter().copied());
        // The task's row groups, less those the filters cannot match; `runs` keeps the file
        // positions of the rows that are read (for position deletes and row ids).
        let mut selected = vec![];
        let mut runs = VecDeque::new();
        let mut start = 0u64;
        let groups = footer.metadata().row_groups();
        let stats =
            self.prune.as_ref().map(|p| (p, row_group_stats(&self.iceberg_schema, footer.metadata(), &p.field_ids())));
        for (i, rg) in groups.iter().enumerate() {
            let rows = rg.num_rows().max(0) as u64;
            let mine = start >= task.first && (start < task.end || task.last);
            if mine && stats.as_ref().is_none_or(|(p, s)| p.may_match_stats(&s[i])) {
                selected.push(i);
                runs.push_back((start, rows));
            }
            start += rows;
        }
        // A row group may run past the task's positions (another writer's larger row groups):
        // the deletes are those of the positions the task really reads.
        let read_end = runs.back().map_or(task.first, |&(start, len)| start + len);
        let deletes = Self::task_deletes(task, &removed, task.first, read_end);
        // When position deletes remove most of the rows (the changelog reading what a delete
        // removed), only the survivors are selected: the reader skips the rest, whole pages
        // where the offset index allows, instead of decoding rows only to drop them.
        // (Not in chunks the Parquet crate cannot skip in: see `skippable`.)
        let descr = footer.metadata().file_metadata().schema_descr();
        let leaves: Vec<usize> =
            (0..descr.num_columns()).filter(|&l| roots.binary_search(&descr.get_column_root_idx(l)).is_ok()).collect();
        let mut selection = None;
        if !deletes.positions.is_empty() && selected.iter().all(|&g| group_can_skip(&groups[g], Some(&leaves))) {
            let (kept, selectors) = survivors(&runs, &deletes.positions);
            let total: u64 = runs.iter().map(|r| r.1).sum();
            if kept.iter().map(|r| r.1).sum::<u64>() * 2 <= total {
                runs = kept;
                selection = Some(RowSelection::from(selectors));
            }
        }
        // The column chunks to read, read ahead in a few large reads when they are not too big.
        let ranges = selected
            .iter()
            .flat_map(|&g| leaves.iter().map(move |&l| chunk_range(groups[g].column(l), &task.path)))
            .collect::<Result<Vec<_>>>()?;
        let (footer, schema) = if self.duckdb_types {
            self.task_types(footer, &roots, &columns, &selected, &task.path)?
        } else {
            (footer, self.schema.clone())
        };
        let (first, end) = ranges.iter().fold((u64::MAX, 0), |(a, b), &(s, n)| (a.min(s), b.max(s + n)));
        let reader = if end.saturating_sub(first) <= READ_AHEAD_MAX_BYTES {
            let ranges = FileRanges::read(&file, file.size()?, ranges, READ_AHEAD_MAX_GAP, &task.path, |_| {})?;
            build_reader(ranges, footer, mask, selected, selection, &task.path)?
        } else {
            build_reader(file, footer, mask, selected, selection, &task.path)?
        };
        Ok(TaskReader {
            source: Source::File { reader, columns, path: task.path.clone() },
            runs,
            schema,
            deletes,
            ..base
        })
    }

    /// The footer and output schema of a task, with the Arrow types DuckDB converts fastest where
    /// the task's chunks (in `selected`) allow: string columns all dictionary-encoded with
    /// dictionary pages of at most [`SMALL_DICTIONARY_BYTES`] as `Dictionary(Int32, Utf8)`
    /// (DuckDB converts a dictionary once per Arrow batch: a large one would cost more than the
    /// strings); decimals stored as INT32/INT64 as `Decimal32`/`Decimal64` (the values as stored,
    /// which DuckDB takes without a copy; as `Decimal128` it cast each one).
    fn task_types(
        &self,
        footer: ArrowReaderMetadata,
        roots: &[usize],
        columns: &[Option<usize>],
        selected: &[usize],
        path: &str,
    ) -> Result<(ArrowReaderMetadata, ArrowSchemaRef)> {
        use parquet::basic::{Encoding, Type as Physical};
        let metadata = footer.metadata();
        let descr = metadata.file_metadata().schema_descr();
        let small_dictionary = |leaf: usize| {
            !selected.is_empty()
                && selected.iter().all(|&g| {
                    let c = metadata.row_group(g).column(leaf);
                    let all_dictionary = c
                        .page_encoding_stats_mask()
                        .is_some_and(|m| m.is_only(Encoding::RLE_DICTIONARY) || m.is_only(Encoding::PLAIN_DICTIONARY));
                    c.dictionary_page_offset()
                        .is_some_and(|d| all_dictionary && c.data_page_offset() - d <= SMALL_DICTIONARY_BYTES)
                })
        };
        let file_fields = footer.schema().fields();
        let mut hinted: HashMap<usize, DataType> = HashMap::new();
        let mut out: Vec<Field> = self.schema.fields().iter().map(|f| f.as_ref().clone()).collect();
        for (j, c) in columns.iter().enumerate() {
            let Some(c) = c else { continue };
            let root = roots[*c];
            let leaves: Vec<usize> =
                (0..descr.num_columns()).filter(|&l| descr.get_column_root_idx(l) == root).collect();
            let [leaf] = leaves[..] else { continue };
            let stored = descr.column(leaf).physical_type();
            let faster = match (out[j].data_type(), file_fields[root].data_type()) {
                (DataType::Utf8, DataType::Utf8) if small_dictionary(leaf) => Some(dictionary_of_strings()),
                (DataType::Decimal128(p, s), DataType::Decimal128(fp, fs)) if (p, s) == (fp, fs) => match stored {
                    Physical::INT32 if *p <= 9 => Some(DataType::Decimal32(*p, *s)),
                    Physical::INT64 if *p <= 18 => Some(DataType::Decimal64(*p, *s)),
                    _ => None,
                },
                _ => None,
            };
            if let Some(ty) = faster {
                out[j] = out[j].clone().with_data_type(ty.clone());
                hinted.insert(root, ty);
            }
        }
        if hinted.is_empty() {
            return Ok((footer, self.schema.clone()));
        }
        let hint: Vec<Field> = file_fields
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let f = f.as_ref().clone();
                match hinted.get(&i) {
                    Some(ty) => f.with_data_type(ty.clone()),
                    None => f,
                }
            })
            .collect();
        let hint = Arc::new(ArrowSchema::new_with_metadata(hint, footer.schema().metadata().clone()));
        let options = parquet::arrow::arrow_reader::ArrowReaderOptions::new().with_schema(hint);
        let footer = ArrowReaderMetadata::try_new(metadata.clone(), options)
            .map_err(|e| Error::corrupt(format!("data file {path} is not readable Parquet: {e}")))?;
        let schema = Arc::new(ArrowSchema::new_with_metadata(out, self.schema.metadata().clone()));
        Ok((footer, schema))
    }
}

/// Dictionary pages up to this size are read as Arrow dictionaries (see `task_types`).
const SMALL_DICTIONARY_BYTES: i64 = 16 << 10;

fn dictionary_of_strings() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// The root columns of a file to read for the columns with field ids `field_ids` (sorted; at least
/// one, as something must be read to learn each batch's row count), and where each field id's
/// column is among them (None: not in the file, as after a column was added).
fn read_roots(
    parquet_schema: &parquet::schema::types::SchemaDescriptor,
    field_ids: &[i32],
) -> (Vec<usize>, impl Fn(&i32) -> Option<usize>) {
    let roots_by_id = roots_by_field_id(parquet_schema);
    let mut roots: Vec<usize> = field_ids.iter().filter_map(|id| roots_by_id.get(id).copied()).collect();
    if roots.is_empty() {
        roots.push(0);
    }
    roots.sort_unstable();
    roots.dedup();
    let sorted = roots.clone();
    (roots, move |id: &i32| roots_by_id.get(id).map(|r| sorted.binary_search(r).unwrap()))
}

/// The positions of the rows of the data file at `path` whose keys one of the equality-delete
/// sets `sets` holds (sorted): its key columns are read whole, each batch's first key column
/// compared with a set's key range before any key is encoded and probed.
fn equality_positions(
    caches: &ReadCaches,
    path: &str,
    sets: &[Arc<EqualityDeletes>],
    names: Option<&FileNames>,
) -> Result<Vec<u64>> {
    let file = InputFile::open(path, "data file")?;
    let footer = caches.footer(path, &file, names)?;
    let parquet_schema = footer.parquet_schema();
    let key_ids: Vec<i32> = sets.iter().flat_map(|e| e.field_ids.iter().copied()).collect();
    let (roots, column_of) = read_roots(parquet_schema, &key_ids);
    let keys = sets
        .iter()
        .map(|e| Ok((e.field_ids.iter().map(&column_of).collect::<Vec<_>>(), e.converter()?)))
        .collect::<Result<Vec<_>>>()?;
    let mask = ProjectionMask::roots(parquet_schema, roots.iter().copied());
    let groups = (0..footer.metadata().num_row_groups()).collect();
    let reader = build_reader(file, footer, mask, groups, None, path)?;
    let mut removed = vec![];
    let mut at = 0u64;
    for batch in reader {
        let batch = batch.map_err(|e| Error::corrupt(format!("data file {path} is not readable: {e}")))?;
        let rows = batch.num_rows();
        for ((key_columns, converter), set) in keys.iter().zip(sets) {
            let Some(range) = &set.range else {
                continue;
            };
            let key_arrays = key_columns
                .iter()
                .zip(&set.types)
                .map(|(c, t)| match c {
                    Some(i) => conform_array(batch.column(*i), t),
                    None => Ok(new_null_array(t, rows)),
                })
                .collect::<Result<Vec<ArrayRef>>>()?;
            probe(converter, range, &key_arrays, |i, k| {
                if set.keys.contains(k) {
                    removed.push(at + i as u64);
                }
                true
            })?;
        }
        at += rows as u64;
    }
    removed.sort_unstable();
    removed.dedup();
    Ok(removed)
}

/// The tasks of one file of `record_count` rows: one per [`TASK_ROWS`] positions (one for an
/// empty file, whose footer still says how many rows it has).
fn push_file_tasks(
    tasks: &mut Vec<ScanTask>,
    path: String,
    record_count: u64,
    file_id: u32,
    deletes: FileDeletes,
    lineage: FileLineage,
) {
    let mut first = 0;
    loop {
        let end = (first + TASK_ROWS).min(record_count);
        let last = end >= record_count;
        let deletes = deletes.clone();
        tasks.push(ScanTask { path: path.clone(), first, end, last, file_id, deletes, lineage, rows: None });
        if last {
            return;
        }
        first = end;
    }
}

/// `_row_id` and `_last_updated_sequence_number` of rows at `positions` (runs) of a file with
/// `lineage`, from the values the file holds (`stored_ids`, `stored_sequences`: null where it
/// holds none), as Iceberg's spec computes them: a stored value wins; else the file's first
/// row id plus the position, and its data sequence number; null when the file has no row ids.
fn lineage_columns(
    stored_ids: &ArrayRef,
    stored_sequences: &ArrayRef,
    positions: &[(u64, u64)],
    lineage: FileLineage,
) -> Result<(ArrayRef, ArrayRef)> {
    let stored_ids = conform_array(stored_ids, &DataType::Int64)?;
    let stored_ids = stored_ids.as_primitive::<Int64Type>();
    let stored_sequences = conform_array(stored_sequences, &DataType::Int64)?;
    let stored_sequences = stored_sequences.as_primitive::<Int64Type>();
    let at_positions = positions.iter().flat_map(|&(start, len)| start..start + len);
    let ids: Int64Array = at_positions
        .enumerate()
        .map(|(i, p)| match stored_ids.is_valid(i) {
            true => Some(stored_ids.value(i)),
            false => lineage.first_row_id.and_then(|first| first.checked_add(p as i64)),
        })
        .collect();
    let sequences: Int64Array = (0..stored_sequences.len())
        .map(|i| match stored_sequences.is_valid(i) {
            true => Some(stored_sequences.value(i)),
            false => lineage.first_row_id.and(lineage.sequence_number),
        })
        .collect();
    Ok((Arc::new(ids), Arc::new(sequences)))
}

/// Files whose wanted column chunks span at most this many bytes are read ahead.
const READ_AHEAD_MAX_BYTES: u64 = 64 << 20;
/// Wanted column chunks closer than this are read together (with what lies between).
const READ_AHEAD_MAX_GAP: u64 = 256 << 10;

fn build_reader<T: ChunkReader + 'static>(
    input: T,
    footer: ArrowReaderMetadata,
    mask: ProjectionMask,
    row_groups: Vec<usize>,
    selection: Option<RowSelection>,
    path: &str,
) -> Result<ParquetRecordBatchReader> {
    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(input, footer)
        .with_projection(mask)
        .with_row_groups(row_groups)
        .with_batch_size(BATCH_ROWS);
    if let Some(selection) = selection {
        builder = builder.with_row_selection(selection);
    }
    builder.build().map_err(|e| Error::corrupt(format!("data file {path} is not readable: {e}")))
}

/// The file positions of `runs` (in order) without the `deleted` ones (sorted), and the row
/// selection that reads exactly them out of the rows of `runs`.
fn survivors(runs: &VecDeque<(u64, u64)>, deleted: &[u64]) -> (VecDeque<(u64, u64)>, Vec<RowSelector>) {
    let mut kept = VecDeque::new();
    let mut selectors = vec![];
    let mut cursor = deleted.partition_point(|&p| p < runs.front().map_or(0, |r| r.0));
    for &(start, len) in runs {
        let end = start + len;
        let mut at = start;
        while cursor < deleted.len() && deleted[cursor] < end {
            let d = deleted[cursor];
            cursor += 1;
            if d < at {
                continue; // (duplicates, or before this run)
            }
            if d > at {
                kept.push_back((at, d - at));
                selectors.push(RowSelector::select((d - at) as usize));
            }
            // consecutive deleted positions are one skip
            match selectors.last_mut() {
                Some(last) if last.skip => last.row_count += 1,
                _ => selectors.push(RowSelector::skip(1)),
            }
            at = d + 1;
        }
        if end > at {
            kept.push_back((at, end - at));
            selectors.push(RowSelector::select((end - at) as usize));
        }
    }
    (kept, selectors)
}

enum Source {
    /// Rows found at planning, with the plan's columns.
    Rows(Option<RecordBatch>),
    /// Nothing to read: positions 0..record_count (minus position deletes).
    Positions { remaining: u64 },
    /// `columns[j]`: the position of output column j in the file's batches (None: not in the
    /// file, as after a column was added; it reads as NULL).
    File { reader: ParquetRecordBatchReader, columns: Vec<Option<usize>>, path: String },
}

pub struct TaskReader {
    schema: ArrowSchemaRef,
    row_ids: bool,
    /// Where the lineage columns are, and the file's lineage (see [`ScanPlan::with_lineage`]).
    lineage: Option<(usize, FileLineage)>,
    file_id: u32,
    deletes: FileDeletes,
    /// The file positions of the rows still to come, as (first position, count) runs in order
    /// (one run unless row groups were skipped).
    runs: VecDeque<(u64, u64)>,
    /// Index of the first deleted position not yet passed.
    deleted_cursor: usize,
    source: Source,
    /// Parts of a batch already read, still to be returned (see [`kept_rows`]).
    pending: VecDeque<RecordBatch>,
    /// The output columns' fields where one has an initial default (Iceberg v3: what a file
    /// without the column reads); empty when none has.
    defaults: Vec<Option<NestedFieldRef>>,
}

impl TaskReader {
    /// The file positions of the next `rows` rows, as runs.
    fn take_positions(&mut self, rows: usize) -> Vec<(u64, u64)> {
        let mut out = vec![];
        let mut left = rows as u64;
        while left > 0 {
            let Some((start, len)) = self.runs.front_mut() else {
                break;
            };
            let n = left.min(*len);
            out.push((*start, n));
            *start += n;
            *len -= n;
            left -= n;
            if *len == 0 {
                self.runs.pop_front();
            }
        }
        out
    }

    /// Which of the rows at `positions` survive the position deletes (None: all of them).
    fn position_mask(&mut self, positions: &[(u64, u64)], rows: usize) -> Option<Vec<bool>> {
        let deleted = &self.deletes.positions;
        let mut cursor = self.deleted_cursor;
        let mut keep: Option<Vec<bool>> = None;
        let mut offset = 0u64;
        for &(start, len) in positions {
            while cursor < deleted.len() && deleted[cursor] < start {
                cursor += 1;
            }
            while cursor < deleted.len() && deleted[cursor] < start + len {
                keep.get_or_insert_with(|| vec![true; rows])[(offset + deleted[cursor] - start) as usize] = false;
                cursor += 1;
            }
            offset += len;
        }
        self.deleted_cursor = cursor;
        keep
    }

    fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        if let Some(part) = self.pending.pop_front() {
            return Ok(Some(part));
        }
        let (batch_columns, rows) = match &mut self.source {
            Source::Rows(rows) => return Ok(rows.take()),
            Source::Positions { remaining } => {
                if *remaining == 0 {
                    return Ok(None);
                }
                let rows = (*remaining).min(BATCH_ROWS as u64) as usize;
                *remaining -= rows as u64;
                (None, rows)
            }
            Source::File { reader, path, .. } => match reader.next() {
                None => return Ok(None),
                Some(Err(e)) => return Err(Error::corrupt(format!("data file {path} is not readable: {e}"))),
                Some(Ok(b)) => (Some(b.columns().to_vec()), b.num_rows()),
            },
        };
        let positions = self.take_positions(rows);
        let keep = self.position_mask(&positions, rows);
        let mut arrays: Vec<ArrayRef> = vec![];
        if let (Source::File { columns, .. }, Some(cols)) = (&self.source, &batch_columns) {
            for (j, (c, field)) in columns.iter().zip(self.schema.fields()).enumerate() {
                arrays.push(match c {
                    Some(i) => conform_array(&cols[*i], field.data_type())?,
                    None => missing_column(self.defaults.get(j).and_then(Option::as_deref), field.data_type(), rows)?,
                });
            }
        }
        if let Some((at, lineage)) = self.lineage {
            if arrays.len() >= at + 2 {
                let (row_ids, sequences) = lineage_columns(&arrays[at], &arrays[at + 1], &positions, lineage)?;
                arrays[at] = row_ids;
                arrays[at + 1] = sequences;
            }
        }
        if self.row_ids {
            let file_id = self.file_id;
            let ids = positions.iter().flat_map(|&(start, len)| (start..start + len).map(|p| row_id(file_id, p)));
            arrays.push(Arc::new(Int64Array::from_iter_values(ids)));
        }
        let batch = RecordBatch::try_new_with_options(
            self.schema.clone(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?;
        let Some(keep) = keep else {
            return Ok(Some(batch));
        };
        // Deleted rows come in runs (a range delete): the rest is a few slices, not a copy.
        let mut parts = kept_rows(&batch, &keep)?.into_iter();
        let Some(first) = parts.next() else {
            return Ok(Some(batch.slice(0, 0))); // every row deleted
        };
        self.pending.extend(parts);
        Ok(Some(first))
    }
}

impl Iterator for TaskReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.next_batch() {
                Ok(Some(b)) if b.num_rows() == 0 => continue, // every row deleted: read on
                Ok(Some(b)) => return Some(Ok(b)),
                Ok(None) => return None,
                Err(e) => return Some(Err(ArrowError::ExternalError(Box::new(e)))),
            }
        }
    }
}

impl RecordBatchReader for TaskReader {
    fn schema(&self) -> ArrowSchemaRef {
        self.schema.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survivors_select_exactly_the_rows_not_deleted() {
        // two selected row groups (0..10 and 20..30; 10..20 was pruned), deletes everywhere
        let runs = VecDeque::from([(0, 10), (20, 10)]);
        let deleted = [0, 1, 5, 9, 12, 15, 20, 21, 22, 29];
        let (kept, selectors) = survivors(&runs, &deleted);
        assert_eq!(Vec::from(kept.clone()), vec![(2, 3), (6, 3), (23, 6)]);
        // the selection covers every row of the runs, in order, and selects the kept ones
        let mut at = 0usize;
        let mut selected = vec![];
        for s in &selectors {
            if !s.skip {
                selected.extend(at..at + s.row_count);
            }
            at += s.row_count;
        }
        assert_eq!(at, 20);
        let positions: Vec<u64> = runs.iter().flat_map(|&(s, n)| s..s + n).collect();
        let picked: Vec<u64> = selected.iter().map(|&i| positions[i]).collect();
        let expected: Vec<u64> = kept.iter().flat_map(|&(s, n)| s..s + n).collect();
        assert_eq!(picked, expected);
        // consecutive deleted positions, also across runs, are one skip: 2, 1, 1 + 3, 1
        let skips: Vec<usize> = selectors.iter().filter(|s| s.skip).map(|s| s.row_count).collect();
        assert_eq!(skips, vec![2, 1, 4, 1]);
        // nothing deleted in the runs: one selector per run
        let (kept, selectors) = survivors(&VecDeque::from([(100, 5)]), &[3, 200]);
        assert_eq!((Vec::from(kept), selectors.len()), (vec![(100, 5)], 1));
    }
}
