//! Writes Iceberg delete files: v2 position-delete files (`file_path`, `pos`, Iceberg's reserved field ids)
//! and v3 deletion vectors.
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

/// Iceberg v3's field id of `_pos`: a deletion vector's blob names it as the column it holds.
const POS_FIELD_ID: i32 = 2147483645;

/// A deletion vector (Iceberg v3) deleting `positions` (ascending) of the data file at
/// `data_file`: a Puffin file of its own holding one blob, with an uncompressed footer (DuckDB and
/// PyIceberg read no other), in the data file's partition, as DuckDB's iceberg extension writes
/// them. Its entry carries the bounds PyIceberg matches a delete to its data file by.
pub async fn deletion_vector(
    file_io: &FileIO,
    table: &TableMetadata,
    data_file: &str,
    positions: &[u64],
    (spec_id, partition): (i32, Struct),
    written: &mut Vec<String>,
) -> Result<DataFile> {
    use iceberg::puffin::{Blob, CompressionCodec, PuffinWriter, DELETION_VECTOR_V1};
    use iceberg::spec::{DataFileBuilder, DataFileFormat, Datum};
    use std::collections::HashMap;

    if let Some(p) = positions.iter().find(|p| **p > i64::MAX as u64) {
        return Err(Error::invalid(format!("row position {p} of {data_file} is beyond what a deletion vector holds")));
    }
    let bytes = crate::format::deletion_vector::encode(positions.iter().copied())?;
    let length = bytes.len() as i64;
    let cardinality = positions.len() as u64;
    let blob = Blob::builder()
        .r#type(DELETION_VECTOR_V1.to_string())
        .fields(vec![POS_FIELD_ID])
        .snapshot_id(-1)
        .sequence_number(-1)
        .data(bytes)
        .properties(HashMap::from([
            ("referenced-data-file".to_string(), data_file.to_string()),
            ("cardinality".to_string(), cardinality.to_string()),
        ]))
        .build();
    let path = format!("{}/data/{}-dv.puffin", table.location(), Uuid::now_v7());
    written.push(path.clone());
    let output = file_io.new_output(&path)?;
    let created_by = HashMap::from([("created-by".to_string(), format!("skade {}", env!("CARGO_PKG_VERSION")))]);
    let mut writer = PuffinWriter::new(&output, created_by, false).await?;
    writer.add(blob, CompressionCodec::None).await?;
    writer.close().await?;
    let size = file_io.new_input(&path)?.metadata().await?.size;
    let bound = HashMap::from([(DELETE_FILE_PATH_ID, Datum::string(data_file))]);
    DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(path.clone())
        .file_format(DataFileFormat::Puffin)
        .partition(partition)
        .partition_spec_id(spec_id)
        .record_count(cardinality)
        .file_size_in_bytes(size)
        .lower_bounds(bound.clone())
        .upper_bounds(bound)
        .referenced_data_file(Some(data_file.to_string()))
        // (the one blob follows the file's 4-byte magic)
        .content_offset(Some(4))
        .content_size_in_bytes(Some(length))
        .build()
        .map_err(|e| Error::internal(format!("cannot describe deletion vector {path}: {e}")))
}
