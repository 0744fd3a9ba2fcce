//! Scans: plan the data files a read needs (manifests from the cache, files pruned by their
//! column bounds), then read each file as its own Arrow stream so DuckDB's threads can read
//! files in parallel. Parquet footers are cached per file (files are immutable).

use std::collections::HashMap;
use std::fs::File;
use std::sync::{Arc, Mutex};

use arrow::array::{new_null_array, ArrayRef, RecordBatch, RecordBatchOptions, RecordBatchReader};
use arrow::datatypes::{Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use arrow::error::ArrowError;
use iceberg::spec::{DataFile, TableMetadata};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;

use super::filter::Prune;
use super::manifests::ManifestCache;
use super::schema::{arrow_schema, conform_array};
use crate::error::{Error, Result};
use crate::io::local_path;

/// Rows per Arrow batch handed to DuckDB: a multiple of its 2,048-row vectors.
const BATCH_ROWS: usize = 8 * 2048;

/// What a read needs from every scan: parsed manifests and Parquet footers, by immutable path.
#[derive(Default)]
pub struct ReadCaches {
    pub manifests: ManifestCache,
    footers: Mutex<HashMap<String, ArrowReaderMetadata>>,
}

const MAX_CACHED_FOOTERS: usize = 65_536;

impl ReadCaches {
    fn footer(&self, path: &str, file: &File) -> Result<ArrowReaderMetadata> {
        if let Some(m) = self.footers.lock().unwrap().get(path) {
            return Ok(m.clone());
        }
        let m = ArrowReaderMetadata::load(file, ArrowReaderOptions::new())
            .map_err(|e| Error::corrupt(format!("data file {path} is not readable Parquet: {e}")))?;
        let mut footers = self.footers.lock().unwrap();
        if footers.len() >= MAX_CACHED_FOOTERS {
            footers.clear();
        }
        footers.insert(path.to_string(), m.clone());
        Ok(m)
    }
}

pub struct ScanRequest<'a> {
    pub snapshot_id: Option<i64>,
    /// Top-level column indexes, in output order. Empty: only row counts are needed.
    pub columns: Vec<usize>,
    pub prune: Option<Prune>,
    /// Files this transaction wrote and has not committed: it reads its own writes.
    pub staged: &'a [DataFile],
}

struct ScanTask {
    path: String,
    record_count: u64,
}

pub struct ScanPlan {
    tasks: Vec<ScanTask>,
    schema: ArrowSchemaRef,
    field_ids: Vec<i32>,
    caches: Arc<ReadCaches>,
}

impl ScanPlan {
    pub fn plan(metadata: &TableMetadata, caches: Arc<ReadCaches>, req: ScanRequest<'_>) -> Result<ScanPlan> {
        let snapshot = match req.snapshot_id {
            Some(id) => Some(
                metadata
                    .snapshot_by_id(id)
                    .ok_or_else(|| Error::catalog(format!("snapshot {id} does not exist")))?
                    .clone(),
            ),
            None => metadata.current_snapshot().cloned(),
        };
        let schema = match &snapshot {
            Some(s) => s.schema(metadata)?,
            None => metadata.current_schema().clone(),
        };
        let fields = schema.as_struct().fields();
        let mut field_ids = Vec::with_capacity(req.columns.len());
        for &c in &req.columns {
            let f = fields.get(c).ok_or_else(|| Error::internal(format!("column index {c} out of range")))?;
            field_ids.push(f.id);
        }
        let out_schema = Arc::new(arrow_schema(&schema)?.project(&req.columns)?);

        let committed = match &snapshot {
            Some(s) => caches.manifests.snapshot_files(metadata, s)?,
            None => Default::default(),
        };
        if !committed.deletes.is_empty() {
            return Err(Error::not_implemented(
                "this table has delete files (written by another engine); skade cannot read them yet",
            ));
        }
        let may_match = |f: &DataFile| req.prune.as_ref().is_none_or(|p| p.may_match(f));
        let tasks = committed
            .data
            .iter()
            .map(|e| e.file())
            .chain(req.staged.iter())
            .filter(|f| may_match(f))
            .map(|f| ScanTask { path: f.file_path().to_string(), record_count: f.record_count() })
            .collect();
        Ok(ScanPlan { tasks, schema: out_schema, field_ids, caches })
    }

    pub fn schema(&self) -> ArrowSchemaRef {
        self.schema.clone()
    }

    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// Rows in the planned files, before row filters.
    pub fn estimated_rows(&self) -> u64 {
        self.tasks.iter().map(|t| t.record_count).sum()
    }

    pub fn task_rows(&self, task: usize) -> u64 {
        self.tasks.get(task).map(|t| t.record_count).unwrap_or(0)
    }

    /// A blocking reader over one planned file.
    pub fn open(&self, task: usize) -> Result<TaskReader> {
        let task = self.tasks.get(task).ok_or_else(|| Error::internal(format!("scan task {task} out of range")))?;
        if self.field_ids.is_empty() {
            // count(*): the row count is in the manifest; the file is not even opened.
            return Ok(TaskReader { schema: self.schema.clone(), source: Source::Count(Some(task.record_count)) });
        }
        let file = File::open(local_path(&task.path))
            .map_err(|e| Error::io(format!("data file {} cannot be opened: {e}", task.path)))?;
        let footer = self.caches.footer(&task.path, &file)?;
        let parquet_schema = footer.parquet_schema();
        let roots_by_id: HashMap<i32, usize> = parquet_schema
            .root_schema()
            .get_fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| f.get_basic_info().has_id())
            .map(|(i, f)| (f.get_basic_info().id(), i))
            .collect();
        let mut roots: Vec<usize> = self.field_ids.iter().filter_map(|id| roots_by_id.get(id).copied()).collect();
        roots.sort_unstable();
        roots.dedup();
        let columns =
            self.field_ids.iter().map(|id| roots_by_id.get(id).map(|r| roots.binary_search(r).unwrap())).collect();
        let mask = ProjectionMask::roots(parquet_schema, roots.iter().copied());
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, footer)
            .with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| Error::corrupt(format!("data file {} is not readable: {e}", task.path)))?;
        Ok(TaskReader {
            schema: self.schema.clone(),
            source: Source::File { reader, columns, path: task.path.clone() },
        })
    }
}

enum Source {
    /// Only a row count is needed.
    Count(Option<u64>),
    /// `columns[j]`: the position of output column j in the file's batches (None: not in the
    /// file, as after a column was added; it reads as NULL).
    File { reader: ParquetRecordBatchReader, columns: Vec<Option<usize>>, path: String },
}

pub struct TaskReader {
    schema: ArrowSchemaRef,
    source: Source,
}

impl TaskReader {
    fn project(&self, batch: RecordBatch, columns: &[Option<usize>]) -> Result<RecordBatch> {
        let rows = batch.num_rows();
        let arrays = columns
            .iter()
            .zip(self.schema.fields())
            .map(|(c, field)| match c {
                Some(i) => conform_array(batch.column(*i), field.data_type()),
                None => Ok(new_null_array(field.data_type(), rows)),
            })
            .collect::<Result<Vec<ArrayRef>>>()?;
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            arrays,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }
}

impl Iterator for TaskReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.source {
            Source::Count(rows) => {
                let rows = rows.take()? as usize;
                Some(RecordBatch::try_new_with_options(
                    Arc::new(ArrowSchema::empty()),
                    vec![],
                    &RecordBatchOptions::new().with_row_count(Some(rows)),
                ))
            }
            Source::File { reader, columns, path } => {
                let batch = match reader.next()? {
                    Ok(b) => b,
                    Err(e) => {
                        let e = Error::corrupt(format!("data file {path} is not readable: {e}"));
                        return Some(Err(ArrowError::ExternalError(Box::new(e))));
                    }
                };
                let columns = columns.clone();
                Some(self.project(batch, &columns).map_err(|e| ArrowError::ExternalError(Box::new(e))))
            }
        }
    }
}

impl RecordBatchReader for TaskReader {
    fn schema(&self) -> ArrowSchemaRef {
        self.schema.clone()
    }
}
