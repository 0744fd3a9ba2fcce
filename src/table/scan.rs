//! Scans: plan the data files a read needs (pruned by manifest and file bounds), then read each
//! file as its own Arrow stream so DuckDB's threads can scan files in parallel.

use std::sync::Arc;

use arrow::array::{RecordBatch, RecordBatchOptions, RecordBatchReader};
use arrow::datatypes::{Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use arrow::error::ArrowError;
use futures::{StreamExt, TryStreamExt};
use iceberg::expr::Predicate;
use iceberg::io::FileIO;
use iceberg::scan::{ArrowRecordBatchStream, FileScanTask};
use iceberg::spec::{DataFile, TableMetadata};
use iceberg::table::Table;
use iceberg::TableIdent;

use super::schema::arrow_schema;
use crate::error::{Error, Result};
use crate::runtime::{block_on, iceberg_runtime};

/// Rows per Arrow batch handed to DuckDB: a multiple of its 2,048-row vectors.
const BATCH_ROWS: usize = 8 * 2048;

pub struct ScanRequest<'a> {
    pub snapshot_id: Option<i64>,
    /// Top-level column indexes, in output order. Empty: only row counts are needed.
    pub columns: Vec<usize>,
    pub predicate: Option<Predicate>,
    /// Files this transaction wrote and has not committed: it reads its own writes.
    pub staged: &'a [DataFile],
}

pub struct ScanPlan {
    table: Table,
    tasks: Vec<FileScanTask>,
    schema: ArrowSchemaRef,
    /// Count-only scans read one column and drop it.
    count_only: bool,
}

impl ScanPlan {
    pub fn plan(
        metadata: Arc<TableMetadata>,
        metadata_location: &str,
        ident: TableIdent,
        file_io: &FileIO,
        req: ScanRequest<'_>,
    ) -> Result<ScanPlan> {
        let table = Table::builder()
            .metadata(metadata.clone())
            .metadata_location(metadata_location)
            .identifier(ident)
            .file_io(file_io.clone())
            .readonly(true)
            .runtime(iceberg_runtime())
            .build()?;
        let schema = match req.snapshot_id {
            Some(id) => metadata
                .snapshot_by_id(id)
                .ok_or_else(|| Error::catalog(format!("snapshot {id} does not exist")))?
                .schema(&metadata)?,
            None => metadata.current_schema().clone(),
        };
        let fields = schema.as_struct().fields();
        if fields.is_empty() {
            return Err(Error::internal("table has no columns"));
        }
        let count_only = req.columns.is_empty();
        let columns = if count_only {
            vec![0]
        } else {
            req.columns.clone()
        };
        let mut names = Vec::with_capacity(columns.len());
        for &c in &columns {
            let f = fields
                .get(c)
                .ok_or_else(|| Error::internal(format!("column index {c} out of range")))?;
            names.push(f.name.clone());
        }
        let full = arrow_schema(&schema)?;
        let out_schema: ArrowSchemaRef = if count_only {
            Arc::new(ArrowSchema::empty())
        } else {
            Arc::new(full.project(&columns)?)
        };

        let mut tasks = plan_files(&table, req.snapshot_id, &names, req.predicate.clone())
            .or_else(|e| match req.predicate {
                // A predicate that does not bind (an unusual type) only loses pruning.
                Some(_) => plan_files(&table, req.snapshot_id, &names, None),
                None => Err(e),
            })?;
        let project_field_ids: Vec<i32> = columns.iter().map(|&c| fields[c].id).collect();
        for f in req.staged {
            tasks.push(FileScanTask {
                file_size_in_bytes: f.file_size_in_bytes(),
                start: 0,
                length: 0,
                record_count: Some(f.record_count()),
                data_file_path: f.file_path().to_string(),
                data_file_format: f.file_format(),
                schema: schema.clone(),
                project_field_ids: project_field_ids.clone(),
                predicate: None,
                deletes: vec![],
                partition: None,
                partition_spec: None,
                name_mapping: None,
                case_sensitive: false,
            });
        }
        Ok(ScanPlan {
            table,
            tasks,
            schema: out_schema,
            count_only,
        })
    }

    pub fn schema(&self) -> ArrowSchemaRef {
        self.schema.clone()
    }

    pub fn task_count(&self) -> usize {
        self.tasks.len()
    }

    /// Rows in the planned files, before deletes and row filters.
    pub fn estimated_rows(&self) -> u64 {
        self.tasks.iter().map(|t| t.record_count.unwrap_or(0)).sum()
    }

    pub fn task_rows(&self, task: usize) -> u64 {
        self.tasks
            .get(task)
            .and_then(|t| t.record_count)
            .unwrap_or(0)
    }

    /// A blocking reader over one planned file.
    pub fn open(&self, task: usize) -> Result<TaskReader> {
        let task = self
            .tasks
            .get(task)
            .cloned()
            .ok_or_else(|| Error::internal(format!("scan task {task} out of range")))?;
        let reader = self
            .table
            .reader_builder()
            .with_batch_size(BATCH_ROWS)
            .with_data_file_concurrency_limit(1)
            .with_row_selection_enabled(false)
            .build();
        let tasks = futures::stream::iter([Ok(task)]).boxed();
        let stream = reader.read(tasks)?.stream();
        Ok(TaskReader {
            stream,
            schema: self.schema.clone(),
            count_only: self.count_only,
        })
    }
}

fn plan_files(
    table: &Table,
    snapshot_id: Option<i64>,
    names: &[String],
    predicate: Option<Predicate>,
) -> Result<Vec<FileScanTask>> {
    let mut builder = table.scan().select(names.iter().cloned());
    if let Some(id) = snapshot_id {
        builder = builder.snapshot_id(id);
    }
    if let Some(p) = predicate {
        builder = builder.with_filter(p);
    }
    let scan = builder.build()?;
    Ok(block_on(async {
        scan.plan_files().await?.try_collect::<Vec<_>>().await
    })?)
}

/// Blocks on the extension's runtime for each batch: DuckDB threads call it directly.
pub struct TaskReader {
    stream: ArrowRecordBatchStream,
    schema: ArrowSchemaRef,
    count_only: bool,
}

impl Iterator for TaskReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = block_on(self.stream.next())?;
        Some(match next {
            Err(e) => Err(ArrowError::ExternalError(Box::new(Error::from(e)))),
            Ok(b) if self.count_only => RecordBatch::try_new_with_options(
                self.schema.clone(),
                vec![],
                &RecordBatchOptions::new().with_row_count(Some(b.num_rows())),
            ),
            Ok(b) => Ok(b),
        })
    }
}

impl RecordBatchReader for TaskReader {
    fn schema(&self) -> ArrowSchemaRef {
        self.schema.clone()
    }
}
