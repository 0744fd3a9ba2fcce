//! Adopting Parquet files a user already has (`skade_add_files`): each file becomes a data file
//! of a table where it lies, never copied, once its footer shows that it fits. Its columns match
//! the table's by name (`columns`); their field ids come from the table's name mapping, since
//! such a file has none (`format::name_mapping`); its metrics (`metrics`) and, in a partitioned
//! table, its partition (`partition`) come from the footer. No row is read here (a table with a
//! primary key reads the file's keys when the statement ends, as after any insert).

pub mod columns;
pub mod metrics;
pub mod partition;

use std::collections::BTreeMap;

use iceberg::spec::{DataContentType, DataFile, DataFileBuilder, DataFileFormat, TableMetadata};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::basic::Repetition;

use crate::error::{Error, Result};
use crate::format::duckdb_types::DuckdbTypes;
use crate::format::name_mapping::{assigned_ids, with_field_ids, FileNames};
use crate::format::schema::arrow_schema;
use crate::io::input::InputFile;

/// A file made a data file of a table, and the names its columns are read by (file column name
/// -> field id, for the table's name mapping).
pub struct Adopted {
    pub file: DataFile,
    pub names: BTreeMap<String, i32>,
}

/// The data file of the table `metadata` describes (its current schema and default partition
/// spec) that the Parquet file at `path` (a real path: see `io::canonical`) becomes, or why it
/// cannot, naming the file and the column. `table`: the table as messages name it.
pub fn adopt(path: &str, metadata: &TableMetadata, table: &str) -> Result<Adopted> {
    let refused = |why: String| Error::invalid(format!("cannot add {path} to table {table}: {why}"));
    let file = InputFile::open(path, "file")?;
    let size = file.size()?;
    let footer = ArrowReaderMetadata::load(&file, ArrowReaderOptions::new())
        .map_err(|e| refused(format!("it is not a readable Parquet file ({e})")))?;
    let descr = footer.parquet_schema();
    if descr.root_schema().get_fields().iter().any(|f| f.get_basic_info().has_id()) {
        // Readers resolve such a file by its ids, which are another table's (an Iceberg writer's).
        return Err(refused(
            "its columns carry Iceberg field ids (it was written for an Iceberg table); add files without \
             them, or insert its rows with INSERT ... SELECT * FROM read_parquet(...)"
                .into(),
        ));
    }
    let schema = metadata.current_schema();
    let kept = DuckdbTypes::of(metadata.properties())?;
    let table_arrow = arrow_schema(schema)?;
    let names = columns::match_columns(footer.schema(), schema, &table_arrow, &kept.0).map_err(refused)?;

    // The footer as readers will see it, ids from the mapping (building it checks it can be).
    let mapping = FileNames::with(None, &names).ok_or_else(|| refused("it has no column".into()))?;
    let meta = match assigned_ids(descr, &mapping) {
        Some(ids) => with_field_ids(footer.metadata(), &ids).map_err(|e| refused(e.message))?,
        None => return Err(refused("it has no column of the table".into())),
    };
    let rows = meta.file_metadata().num_rows();
    let metrics = metrics::of(&meta, schema);
    if rows < 0 || rows as u64 != metrics.rows {
        return Err(refused(format!("its footer says {rows} rows, its row groups {}", metrics.rows)));
    }
    // NOT NULL columns: the footer must show that the file holds no NULL in them.
    let root = meta.file_metadata().schema_descr().root_schema().get_fields();
    for (name, id) in &names {
        let column = schema.field_by_id(*id).ok_or_else(|| Error::internal("a matched column has no field"))?;
        let stored = root.iter().find(|f| f.name() == name);
        let required = stored.is_some_and(|f| f.get_basic_info().repetition() == Repetition::REQUIRED);
        if column.required && !required && metrics.nulls.get(id) != Some(&0) {
            let why = match metrics.nulls.get(id) {
                Some(n) => format!("column {name} is NOT NULL in the table and holds {n} NULLs in the file"),
                None => format!(
                    "column {name} is NOT NULL in the table and the file's footer does not say it holds no NULL"
                ),
            };
            return Err(refused(why));
        }
    }
    let spec = metadata.default_partition_spec();
    let partition = partition::value(spec, schema, &metrics).map_err(refused)?;
    let offsets: Vec<i64> = meta.row_groups().iter().filter_map(|g| g.file_offset()).collect();
    let file = DataFileBuilder::default()
        .content(DataContentType::Data)
        .file_path(path.to_string())
        .file_format(DataFileFormat::Parquet)
        .partition(partition)
        .partition_spec_id(spec.spec_id())
        .record_count(metrics.rows)
        .file_size_in_bytes(size)
        .column_sizes(metrics.sizes)
        .value_counts(metrics.values)
        .null_value_counts(metrics.nulls)
        .lower_bounds(metrics.lower)
        .upper_bounds(metrics.upper)
        .split_offsets((!offsets.is_empty()).then_some(offsets))
        .build()
        .map_err(|e| Error::internal(format!("data file {path}: {e}")))?;
    Ok(Adopted { file, names })
}
