//! A stream of data files being written: one partition's, or an unpartitioned table's. Its rows
//! go to the Parquet writer in the order the table asks for (`FileOrder`): as they come, sorted by
//! primary key a row group at a time, or sorted by the table's sort order a file at a time
//! (`sorted_runs`).
//!
//! Files are rolled here rather than by the iceberg crate's data file writer, which neither ends a
//! file on request (a sorted run must be a file of its own) nor records a file's sort order id.

use arrow::array::RecordBatch;
use iceberg::spec::{DataContentType, DataFile, PartitionKey};
use iceberg::writer::file_writer::location_generator::{DefaultFileNameGenerator, LocationGenerator};
use iceberg::writer::file_writer::rolling_writer::{RollingFileWriter, RollingFileWriterBuilder};
use iceberg::writer::file_writer::ParquetWriterBuilder;

use super::row_order::RowOrder;
use super::sorted_runs::{Run, SortedRuns, RUN_BYTES, SORTED_RUN_BYTES};
use crate::error::{Error, Result};
use crate::runtime::block_on;

/// Rows per row group: DuckDB's own row-group size.
pub const ROW_GROUP_ROWS: usize = 122_880;

type Inner = RollingFileWriter<ParquetWriterBuilder, FlatLocations, DefaultFileNameGenerator>;
pub type InnerBuilder = RollingFileWriterBuilder<ParquetWriterBuilder, FlatLocations, DefaultFileNameGenerator>;

/// Data files go to the table's `data/` folder whatever their partition (Iceberg finds files by
/// their manifests, never by path; a partition value in a path would need escaping).
#[derive(Clone)]
pub struct FlatLocations(pub String);

impl LocationGenerator for FlatLocations {
    fn generate_location(&self, _partition: Option<&PartitionKey>, file_name: &str) -> String {
        format!("{}/{file_name}", self.0)
    }
}

/// The order a table's files hold their rows in.
#[derive(Clone, Debug)]
pub enum FileOrder {
    /// As written.
    Arrival,
    /// A table with a primary key: each row group sorted by key.
    Key(RowOrder),
    /// A table with a sort order (order id `id`): each file sorted by it.
    Sorted { order: RowOrder, id: i32 },
}

/// The files of one partition (or of an unpartitioned table) being written.
pub struct FileStream {
    builder: InnerBuilder,
    partition: Option<PartitionKey>,
    /// The file being written (it rolls to the next at the target size), if one is open.
    inner: Option<Inner>,
    /// Rows held to be sorted (none: written as they come).
    runs: Option<SortedRuns>,
    /// Whether each run is a file of its own (a table with a sort order).
    run_per_file: bool,
    /// The sort order id the files record.
    sort_order_id: Option<i32>,
    files: Vec<DataFile>,
}

impl FileStream {
    pub fn new(builder: &InnerBuilder, partition: Option<PartitionKey>, order: &FileOrder) -> Self {
        let (runs, run_per_file, sort_order_id) = match order {
            FileOrder::Arrival => (None, false, None),
            FileOrder::Key(key) => (Some(SortedRuns::new(key.clone(), ROW_GROUP_ROWS, RUN_BYTES)), false, None),
            FileOrder::Sorted { order, id } => {
                (Some(SortedRuns::new(order.clone(), usize::MAX, SORTED_RUN_BYTES)), true, Some(*id))
            }
        };
        FileStream {
            builder: builder.clone(),
            partition,
            inner: None,
            runs,
            run_per_file,
            sort_order_id,
            files: vec![],
        }
    }

    pub fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let runs = match &mut self.runs {
            Some(runs) => runs.push(batch)?,
            None => vec![vec![batch]],
        };
        for run in runs {
            self.write_run(run)?;
        }
        Ok(())
    }

    /// The bytes of the rows held to be sorted.
    pub fn held_bytes(&self) -> usize {
        self.runs.as_ref().map_or(0, |r| r.held_bytes())
    }

    /// Writes the rows held as a run of their own (on a table with a sort order: a file), to
    /// free their memory.
    pub fn end_run(&mut self) -> Result<()> {
        if let Some(run) = self.runs.as_mut().map(|r| r.take()).transpose()?.flatten() {
            self.write_run(run)?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<Vec<DataFile>> {
        self.end_run()?;
        self.close_file()?;
        Ok(self.files)
    }

    /// Hands `run` to the Parquet writer a row group at most at a time (the writer rolls to a new
    /// file between writes only: a large run still rolls at the target size), then ends the file
    /// if a run is one.
    fn write_run(&mut self, run: Run) -> Result<()> {
        let inner = self.inner.get_or_insert_with(|| self.builder.build());
        for batch in run {
            let mut at = 0;
            while at < batch.num_rows() {
                let rows = ROW_GROUP_ROWS.min(batch.num_rows() - at);
                block_on(inner.write(&self.partition, &batch.slice(at, rows)))?;
                at += rows;
            }
        }
        if self.run_per_file {
            self.close_file()?;
        }
        Ok(())
    }

    /// Closes the open file (and those it rolled over from), describing each.
    fn close_file(&mut self) -> Result<()> {
        let Some(inner) = self.inner.take() else {
            return Ok(());
        };
        for mut file in block_on(inner.close())? {
            file.content(DataContentType::Data);
            if let Some(partition) = &self.partition {
                file.partition(partition.data().clone()).partition_spec_id(partition.spec().spec_id());
            }
            if let Some(id) = self.sort_order_id {
                file.sort_order_id(id);
            }
            self.files.push(file.build().map_err(|e| Error::internal(format!("cannot describe a data file: {e}")))?);
        }
        Ok(())
    }
}
