//! Writes Iceberg v2 position-delete files (`file_path`, `pos`, Iceberg's reserved field ids).
//! iceberg 0.10 has no position-delete writer; they go through its Parquet writer so they carry
//! the same statistics as data files. skade writes no equality deletes: every row it deletes came
//! from a scan that named its file and position (docs/design/row-level-writes.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use iceberg::io::FileIO;
use iceberg::spec::{DataContentType, DataFile, NestedField, PrimitiveType, Schema, Struct, TableMetadata, Type};
use iceberg::writer::file_writer::{FileWriter, FileWriterBuilder, ParquetWriterBuilder};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::format::schema::arrow_schema;
use crate::read::deletes::{DELETE_FILE_PATH_ID, DELETE_POS_ID};

/// A position-delete file for `positions` (data file path -> sorted positions): sorted by path
/// then position, as the spec asks; in partition `partition` of spec `spec_id` (the data files').
pub async fn position_deletes(
    file_io: &FileIO,
    table: &TableMetadata,
    positions: &BTreeMap<String, Vec<u64>>,
    (spec_id, partition): (i32, Struct),
    written: &mut Vec<String>,
) -> Result<DataFile> {
    let schema = Schema::builder()
        .with_fields(vec![
            Arc::new(NestedField::required(DELETE_FILE_PATH_ID, "file_path", Type::Primitive(PrimitiveType::String))),
            Arc::new(NestedField::required(DELETE_POS_ID, "pos", Type::Primitive(PrimitiveType::Long))),
        ])
        .build()?;
    let paths: StringArray = positions.iter().flat_map(|(p, ps)| ps.iter().map(move |_| Some(p.as_str()))).collect();
    let pos: Int64Array = positions.values().flat_map(|ps| ps.iter().map(|&p| p as i64)).collect();
    let columns: Vec<ArrayRef> = vec![Arc::new(paths), Arc::new(pos)];
    let batch = RecordBatch::try_new(arrow_schema(&schema)?, columns)?;
    let path = format!("{}/data/{}-deletes.parquet", table.location(), Uuid::now_v7());
    written.push(path.clone());
    let props = WriterProperties::builder().set_compression(Compression::SNAPPY).build();
    let mut writer = ParquetWriterBuilder::new(props, Arc::new(schema)).build(file_io.new_output(&path)?).await?;
    writer.write(&batch).await?;
    let mut builders = writer.close().await?;
    let mut builder = builders.pop().ok_or_else(|| Error::internal("a delete file with no rows"))?;
    builder.content(DataContentType::PositionDeletes).partition(partition).partition_spec_id(spec_id);
    builder.build().map_err(|e| Error::internal(format!("cannot describe delete file {path}: {e}")))
}
