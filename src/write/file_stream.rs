//! A stream of data files being written: one partition's, or an unpartitioned table's. On a table
//! with a primary key its rows are handed to the Parquet writer sorted by key, a row group at a
//! time (`key_order`).

use arrow::array::RecordBatch;
use iceberg::spec::{DataFile, PartitionKey};
use iceberg::writer::base_writer::data_file_writer::{DataFileWriter, DataFileWriterBuilder};
use iceberg::writer::file_writer::location_generator::{DefaultFileNameGenerator, LocationGenerator};
use iceberg::writer::file_writer::ParquetWriterBuilder;
use iceberg::writer::{IcebergWriter, IcebergWriterBuilder};

use super::key_order::KeyOrder;
use crate::error::Result;
use crate::read::keys::KeyColumns;
use crate::runtime::block_on;

/// Rows per row group: DuckDB's own row-group size.
pub const ROW_GROUP_ROWS: usize = 122_880;

type Inner = DataFileWriter<ParquetWriterBuilder, FlatLocations, DefaultFileNameGenerator>;
pub type InnerBuilder = DataFileWriterBuilder<ParquetWriterBuilder, FlatLocations, DefaultFileNameGenerator>;

/// Data files go to the table's `data/` folder whatever their partition (Iceberg finds files by
/// their manifests, never by path; a partition value in a path would need escaping).
#[derive(Clone)]
pub struct FlatLocations(pub String);

impl LocationGenerator for FlatLocations {
    fn generate_location(&self, _partition: Option<&PartitionKey>, file_name: &str) -> String {
        format!("{}/{file_name}", self.0)
    }
}

/// The files of one partition (or of an unpartitioned table) being written.
pub struct FileStream {
    inner: Inner,
    /// On a table with a primary key: rows are written sorted by key, a row group at a time.
    key_order: Option<KeyOrder>,
}

impl FileStream {
    pub fn new(builder: &InnerBuilder, partition: Option<PartitionKey>, key: Option<&KeyColumns>) -> Result<Self> {
        let inner = block_on(builder.build(partition))?;
        let key_order = key.map(|k| KeyOrder::new(k.indexes.clone(), ROW_GROUP_ROWS));
        Ok(FileStream { inner, key_order })
    }

    pub fn write(&mut self, batch: RecordBatch) -> Result<()> {
        let runs = match &mut self.key_order {
            Some(order) => order.push(batch)?,
            None => vec![batch],
        };
        for run in runs {
            block_on(self.inner.write(run))?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<Vec<DataFile>> {
        if let Some(order) = self.key_order.take() {
            for run in order.finish()? {
                block_on(self.inner.write(run))?;
            }
        }
        Ok(block_on(self.inner.close())?)
    }
}
