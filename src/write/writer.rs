//! Streams rows into Parquet data files with Iceberg field ids and per-file statistics, rolling
//! to a new file at the target size. Memory stays bounded by one row group per writer (and, on a
//! table with a primary key or a sort order, the rows held to be sorted: `sorted_runs`).

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, RecordBatch, StructArray};
use arrow::datatypes::DataType;
use arrow::datatypes::SchemaRef as ArrowSchemaRef;
use arrow::row::RowConverter;
use iceberg::io::FileIO;
use iceberg::spec::{
    DataFile, DataFileFormat, NestedField, NestedFieldRef, PrimitiveType, Schema, TableMetadata, Type,
};
use iceberg::writer::file_writer::location_generator::DefaultFileNameGenerator;
use iceberg::writer::file_writer::rolling_writer::RollingFileWriterBuilder;
use iceberg::writer::file_writer::ParquetWriterBuilder;
use parquet::basic::{Compression, Encoding};
use parquet::file::properties::{BloomFilterPosition, EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use uuid::Uuid;

pub use super::file_stream::ROW_GROUP_ROWS;
use super::file_stream::{FileOrder, FileStream, FlatLocations};
use super::key_check::{budget_bytes, KeyBudget};
use super::partitions::Partitions;
use super::row_order::RowOrder;
use crate::error::Result;
use crate::format::schema::{arrow_schema, conform};
use crate::read::keys::{KeyColumns, PackedKeys};
use crate::read::scan::{LAST_UPDATED_FIELD_ID, ROW_ID_FIELD_ID};

/// Data files roll over at this size unless the ATTACH or the table says otherwise (DuckLake's
/// and Iceberg's default too).
pub const TARGET_FILE_SIZE: u64 = 512 << 20;
/// The Iceberg table property other engines set for the same purpose.
const TARGET_FILE_SIZE_PROPERTY: &str = "write.target-file-size-bytes";
/// Data pages of a table with a primary key: a point lookup reads and decodes the page holding its
/// row in each column (the offset index locates it), so pages are kept to a few thousand rows and
/// a few KB; a key column's pages smaller still, since a probe decodes a whole key page to find
/// its row. See docs/design/lookup.md.
const KEYED_PAGE_ROWS: usize = 4096;
const KEYED_PAGE_BYTES: usize = 8 << 10;
const KEY_PAGE_BYTES: usize = 1 << 10;
/// Length the page index's string bounds are truncated to on a table with a primary key (the
/// crate's setting is per file: pages of other columns of at most 8 KB keep their index small).
const KEY_BOUND_BYTES: usize = 256;
/// Rows the writer adds before it checks those limits (pages overshoot them by at most this).
const KEYED_WRITE_BATCH: usize = 128;
/// Dictionary page limit of a keyed table's string columns: the size a scan streams as a
/// dictionary (`read::scan`), and what a lookup decodes once per row group and caches
/// (`lookup::dictionaries`); a column of more values falls back to plain.
const KEYED_STRING_DICTIONARY_BYTES: usize = 16 << 10;
/// Dictionary page limit of numeric, date and decimal columns (see `TableWriter::new`).
const SMALL_VALUE_DICTIONARY_BYTES: usize = 32 << 10;
/// False-positive rate of the key columns' bloom filters (one per row group).
const KEY_BLOOM_FPP: f64 = 0.01;

pub struct TableWriter {
    files: Files,
    schema: ArrowSchemaRef,
    /// The files' columns when the writer stores carried row lineage (Iceberg v3's `_row_id`,
    /// and `_last_updated_sequence_number`, last): see [`Carries`] and [`Self::write_carried`].
    carried: Option<(ArrowSchemaRef, usize)>,
    table_name: String,
    rows: u64,
    /// On a table with a primary key: the key of every row written, for the uniqueness check,
    /// while the statement's keys fit their budget (the check reads them back otherwise).
    keys: Option<(KeyColumns, RowConverter, PackedKeys)>,
    budget: Arc<KeyBudget>,
}

/// Where a writer's rows go: one stream of files, or one per partition.
enum Files {
    One(Box<FileStream>),
    Partitioned(Box<Partitions>),
}

/// What a writer wrote: its files (fsynced) and, on a table with a primary key, their rows' keys.
pub struct Written {
    pub files: Vec<DataFile>,
    pub keys: Option<PackedKeys>,
}

/// The order the table's new files hold their rows in: its default sort order (then its key), else
/// its key a row group at a time, else as written.
fn file_order(metadata: &TableMetadata, schema: &Schema, key: Option<&KeyColumns>) -> Result<FileOrder> {
    let key_columns = key.map(|k| k.indexes.as_slice()).unwrap_or_default();
    let sort = metadata.default_sort_order();
    if !sort.is_unsorted() {
        if let Some(order) = RowOrder::of_sort_order(schema, sort, key_columns)? {
            let id = i32::try_from(sort.order_id).map_err(|_| {
                crate::error::Error::corrupt(format!("sort order id {} is out of range", sort.order_id))
            })?;
            return Ok(FileOrder::Sorted { order, id });
        }
    }
    Ok(match key {
        Some(_) => FileOrder::Key(RowOrder::by_columns(key_columns)),
        None => FileOrder::Arrival,
    })
}

/// Whether the table's new files hold their rows as written: none of its sort order, primary key
/// or partition spec reorders them (each of those wins over a statement's own order, which only
/// such a table can keep: see `ordered`).
pub fn keeps_arrival_order(metadata: &TableMetadata) -> bool {
    metadata.default_sort_order().is_unsorted()
        && metadata.current_schema().identifier_field_ids().len() == 0
        && metadata.default_partition_spec().is_unpartitioned()
}

/// What an Iceberg v3 table's writer stores of the rows it carries over (row lineage): an
/// UPDATE's new rows keep the `_row_id` of the rows they replace (and are modified: their
/// `_last_updated_sequence_number` is the commit's); a compaction's keep both.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Carries {
    Nothing,
    RowIds,
    Lineage,
}

/// `schema` with Iceberg v3's lineage columns `_row_id` (and, for [`Carries::Lineage`],
/// `_last_updated_sequence_number`) last, with their reserved field ids: the columns files store
/// carried lineage in. Readers find them by id; the names are only for tools, and give way to
/// table columns of the same name.
fn with_lineage_columns(schema: &Schema, carries: Carries) -> Result<Schema> {
    let taken = |name: &str| schema.as_struct().fields().iter().any(|f| f.name.eq_ignore_ascii_case(name));
    let name = |base: &str| [base.to_string(), format!("_iceberg{base}")].into_iter().find(|n| !taken(n));
    let mut fields: Vec<NestedFieldRef> = schema.as_struct().fields().to_vec();
    let mut columns = vec![(ROW_ID_FIELD_ID, "_row_id")];
    if carries == Carries::Lineage {
        columns.push((LAST_UPDATED_FIELD_ID, "_last_updated_sequence_number"));
    }
    for (id, base) in columns {
        let name = name(base).unwrap_or_else(|| format!("_iceberg_{id}"));
        fields.push(Arc::new(NestedField::optional(id, name, Type::Primitive(PrimitiveType::Long))));
    }
    Ok(Schema::builder()
        .with_schema_id(schema.schema_id())
        .with_identifier_field_ids(schema.identifier_field_ids())
        .with_fields(fields)
        .build()?)
}

/// Whether a column of this type is written DELTA_BINARY_PACKED (Parquet's integer encoding).
/// Only 64-bit ones: the Parquet crate cannot skip rows of such INT32 columns whose deltas wrap
/// (see `skippable`), and other Iceberg readers built on it would fail on them too.
fn delta_packs(ty: &PrimitiveType) -> bool {
    matches!(
        ty,
        PrimitiveType::Long
            | PrimitiveType::Time
            | PrimitiveType::Timestamp
            | PrimitiveType::Timestamptz
            | PrimitiveType::TimestampNs
            | PrimitiveType::TimestamptzNs
    )
}

impl TableWriter {
    /// A writer of new data files of about `target_file_size` bytes (None: the table property,
    /// else [`TARGET_FILE_SIZE`]); on a table with a primary key its rows' keys are collected
    /// within the statement's `budget` (shared by its writers).
    pub fn new(
        metadata: &TableMetadata,
        file_io: &FileIO,
        table_name: &str,
        budget: Arc<KeyBudget>,
        target_file_size: Option<u64>,
        carries: Carries,
    ) -> Result<Self> {
        let target_file_size = target_file_size
            .or_else(|| metadata.properties().get(TARGET_FILE_SIZE_PROPERTY).and_then(|v| v.parse().ok()))
            .unwrap_or(TARGET_FILE_SIZE);
        let schema = metadata.current_schema().clone();
        // Dictionaries are enabled per column below (a high-cardinality key would fill one,
        // rehashing all the way, then fall back to plain anyway).
        let mut props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
            .set_dictionary_enabled(false)
            // iceberg-rust leaves inexact (truncated) row-group statistics out of a file's bounds,
            // which would make the bounds narrower than the data: keep statistics exact.
            .set_statistics_truncate_length(None);
        let keyed = schema.identifier_field_ids().len() > 0;
        for field in schema.as_struct().fields() {
            let column = ColumnPath::from(field.name.as_str());
            match field.field_type.as_primitive_type() {
                Some(PrimitiveType::String | PrimitiveType::Binary) => {
                    props = props.set_column_dictionary_enabled(column.clone(), true);
                    if keyed {
                        props = props.set_column_dictionary_page_size_limit(column, KEYED_STRING_DICTIONARY_BYTES);
                    }
                }
                // Integers and instants are often ordered or narrow: their deltas pack into a few
                // bits, which then need no block compression (Snappy was the largest cost of
                // reading them back). Uncompressed, a file is 0.3% larger on random integers,
                // and a scan of a keyed table's integer columns 10% faster.
                Some(ty) if delta_packs(ty) => {
                    props = props
                        .set_column_encoding(column.clone(), Encoding::DELTA_BINARY_PACKED)
                        .set_column_compression(column, Compression::UNCOMPRESSED);
                }
                // Other numbers, dates and decimals are often of few values (TPC-H's quantities,
                // discounts, ship dates): a small dictionary packs them into a few bits, which
                // decode far faster than their Snappy-compressed plain values. The small page
                // limit makes a column of many values fall back to plain after a few thousand.
                Some(ty) => {
                    props = props
                        .set_column_dictionary_enabled(column.clone(), true)
                        .set_column_dictionary_page_size_limit(column.clone(), SMALL_VALUE_DICTIONARY_BYTES);
                    // A decimal stored as INT64 that falls back (TPC-H's prices) falls back to
                    // delta-packed values, uncompressed: a few bits per value less than Snappy's,
                    // and no Snappy to undo (it was a tenth of Q1).
                    if matches!(ty, PrimitiveType::Decimal { precision: 10..=18, .. }) {
                        props = props
                            .set_column_encoding(column.clone(), Encoding::DELTA_BINARY_PACKED)
                            .set_column_compression(column, Compression::UNCOMPRESSED);
                    }
                }
                _ => {}
            }
        }
        let keys = KeyColumns::of(&schema)?;
        if let Some(key) = &keys {
            // Lookups: small pages with the page index (on by default), and per key column a
            // bloom filter per row group, all of them at the end of the file (one read fetches a
            // file's filters); no dictionary on key columns (a probe would decode it first).
            // Row groups stay DuckDB-sized: scans pay per row group, lookups per page.
            props = props
                .set_data_page_row_count_limit(KEYED_PAGE_ROWS)
                .set_data_page_size_limit(KEYED_PAGE_BYTES)
                .set_write_batch_size(KEYED_WRITE_BATCH)
                .set_bloom_filter_position(BloomFilterPosition::End)
                // Page bounds of string keys: the Parquet crate's 64 bytes left keys sharing a
                // longer prefix with equal bounds on every page (a probe then decoded them all).
                .set_column_index_truncate_length(Some(KEY_BOUND_BYTES));
            for name in &key.names {
                let column = ColumnPath::from(name.as_str());
                props = props
                    .set_column_dictionary_enabled(column.clone(), false)
                    .set_column_data_page_size_limit(column.clone(), KEY_PAGE_BYTES)
                    .set_column_bloom_filter_enabled(column.clone(), true)
                    .set_column_bloom_filter_fpp(column.clone(), KEY_BLOOM_FPP)
                    // Sized for a full row group, then folded to the values written.
                    .set_column_bloom_filter_ndv(column, ROW_GROUP_ROWS as u64);
            }
        }
        let table_schema = schema.clone();
        let schema = match carries {
            Carries::Nothing => schema,
            _ => Arc::new(with_lineage_columns(&schema, carries)?),
        };
        // The stored lineage columns get no statistics: a stored `_row_id` is null for a row new
        // in the file (its id is the file's first row id plus its position), so min and max of
        // the stored ones would lead a reader that prunes `_row_id` filters by them astray
        // (DuckDB's iceberg extension does).
        for field in
            schema.as_struct().fields().iter().filter(|f| f.id == ROW_ID_FIELD_ID || f.id == LAST_UPDATED_FIELD_ID)
        {
            props = props.set_column_statistics_enabled(ColumnPath::from(field.name.as_str()), EnabledStatistics::None);
        }
        let props = props.build();
        let parquet = ParquetWriterBuilder::new(props, schema.clone());
        let data_dir = format!("{}/data", metadata.location());
        let rolling = RollingFileWriterBuilder::new(
            parquet,
            usize::try_from(target_file_size).unwrap_or(usize::MAX),
            file_io.clone(),
            FlatLocations(data_dir),
            DefaultFileNameGenerator::new(Uuid::now_v7().to_string(), None, DataFileFormat::Parquet),
        );
        let order = file_order(metadata, &schema, keys.as_ref())?;
        let spec = metadata.default_partition_spec();
        let files = match spec.is_unpartitioned() {
            true => Files::One(Box::new(FileStream::new(&rolling, None, &order))),
            false => {
                Files::Partitioned(Box::new(Partitions::new(rolling, schema.clone(), spec.clone(), order, table_name)?))
            }
        };
        let keys = match keys {
            Some(k) => Some((k.clone(), k.converter()?, PackedKeys::default())),
            None => None,
        };
        let carried = match carries {
            Carries::Nothing => None,
            Carries::RowIds => Some((arrow_schema(&schema)?, 1)),
            Carries::Lineage => Some((arrow_schema(&schema)?, 2)),
        };
        let schema = arrow_schema(&table_schema)?;
        Ok(Self { files, schema, carried, table_name: table_name.to_string(), rows: 0, keys, budget })
    }

    /// The table's columns, in order, as DuckDB hands them over.
    pub fn write(&mut self, columns: &StructArray) -> Result<()> {
        self.write_carried(columns, &[])
    }

    /// Rows that carry rows over, with their lineage (`lineage`: the `_row_id` of the row each
    /// replaces, then its `_last_updated_sequence_number`; null for a new row, and a missing
    /// column all null): stored in the files of a writer that carries rows (see [`Carries`]),
    /// and dropped by any other (a v2 table's rows have no ids).
    pub fn write_carried(&mut self, columns: &StructArray, lineage: &[ArrayRef]) -> Result<()> {
        let mut batch = conform(columns, &self.schema, &self.table_name)?;
        if let Some((carried, count)) = &self.carried {
            let mut arrays = batch.columns().to_vec();
            for i in 0..*count {
                arrays.push(match lineage.get(i) {
                    Some(a) => a.clone(),
                    None => new_null_array(&DataType::Int64, columns.len()),
                });
            }
            batch = RecordBatch::try_new(carried.clone(), arrays)?;
        }
        if let Some((key, converter, packed)) = &mut self.keys {
            if self.budget.exceeded() {
                self.keys = None; // the statement's check reads the keys back from the files
            } else {
                let before = budget_bytes(packed);
                packed.push_rows(&key.encode(converter, &batch)?);
                if !self.budget.take(budget_bytes(packed) - before) {
                    self.keys = None;
                }
            }
        }
        self.rows += batch.num_rows() as u64;
        match &mut self.files {
            Files::One(stream) => stream.write(batch),
            Files::Partitioned(partitions) => partitions.write(&batch),
        }
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Closes the current file; returns every file written (the commit fsyncs them).
    pub fn finish(self) -> Result<Written> {
        let files = match self.files {
            Files::One(stream) => stream.finish()?,
            Files::Partitioned(partitions) => partitions.finish()?,
        };
        Ok(Written { files, keys: self.keys.map(|(_, _, packed)| packed) })
    }
}
