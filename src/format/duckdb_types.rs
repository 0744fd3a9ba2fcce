//! DuckDB types that Iceberg stores as another type (issue 24): TINYINT, SMALLINT, UTINYINT and
//! USMALLINT as int, UINTEGER as long, UBIGINT as decimal(20,0), HUGEINT as decimal(38,0),
//! TIMESTAMP_S and TIMESTAMP_MS as timestamp (microseconds, losslessly), TIMESTAMP_NS as
//! timestamp truncated to microseconds when the lake allows it, and JSON as string (issue 43).
//! The DuckDB type a column or a field was created with is kept in the table property
//! `skade.duckdb-types` (field id -> type name), so DESCRIBE and every read give it back; files
//! hold the Iceberg type, so every Iceberg reader reads them. Fields inside a STRUCT, LIST or MAP
//! are kept by their own field ids, like columns.
//!
//! Reads convert at the edge, where rows leave for DuckDB ([`Facing`]): the Arrow type DuckDB
//! imports as the column's own type (Int8, ..., UInt64, HUGEINT as DuckDB's opaque 16-byte
//! type, Timestamp(s/ms/ns), JSON as a string under the `arrow.json` extension, which both DuckDB
//! versions import as JSON). Writes convert in `schema::conform` (a checked cast; a HUGEINT
//! beyond decimal(38,0) is refused).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Decimal128Array, FixedSizeBinaryArray, RecordBatch, RecordBatchReader};
use arrow::compute::CastOptions;
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef, TimeUnit};
use arrow::error::ArrowError;
use iceberg::spec::{PrimitiveType, Type};

use super::nested_arrays::reshape;
use crate::error::{Error, Result};

/// The table property holding the kept DuckDB types (JSON: `{"<field id>": "TINYINT", ...}`).
pub const PROPERTY: &str = "skade.duckdb-types";

const EXTENSION_NAME: &str = "ARROW:extension:name";
const EXTENSION_METADATA: &str = "ARROW:extension:metadata";
const OPAQUE: &str = "arrow.opaque";
/// DuckDB's JSON, as DuckDB exports and imports it (a string under this canonical extension).
const JSON: &str = "arrow.json";
const HUGEINT_METADATA: &str = r#"{"type_name":"hugeint","vendor_name":"DuckDB"}"#;
const PARQUET_FIELD_ID: &str = "PARQUET:field_id";

/// How a lake stores TIMESTAMP_NS columns (ATTACH option TIMESTAMP_NS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Nanoseconds {
    /// Refused, naming the options (Iceberg v2 timestamps are microseconds).
    #[default]
    Refuse,
    /// Stored as microseconds (the last three digits dropped), read back as TIMESTAMP_NS.
    Microseconds,
}

/// The Iceberg type of a column DuckDB exported as `field` when it is one of the types kept
/// here, with the type's DuckDB name; None for every other type (mapped as they always were).
pub fn stored_as(field: &Field, nanoseconds: Nanoseconds) -> std::result::Result<Option<(Type, &'static str)>, String> {
    let prim = |p, name| Ok(Some((Type::Primitive(p), name)));
    if field.metadata().get(EXTENSION_NAME).map(String::as_str) == Some(JSON) {
        return prim(PrimitiveType::String, "JSON");
    }
    if has_other_extension(field) {
        return Ok(None); // (BOOLEAN comes as arrow.bool8 over Int8, UUID as arrow.uuid)
    }
    if opaque_type_name(field).as_deref() == Some("hugeint") {
        return prim(PrimitiveType::Decimal { precision: 38, scale: 0 }, "HUGEINT");
    }
    // (DuckDB's other opaque types, UHUGEINT, TIMETZ, BIT, BIGNUM, are refused by the schema's
    // mapping, which names them and the way out)
    match field.data_type() {
        DataType::Int8 => prim(PrimitiveType::Int, "TINYINT"),
        DataType::Int16 => prim(PrimitiveType::Int, "SMALLINT"),
        DataType::UInt8 => prim(PrimitiveType::Int, "UTINYINT"),
        DataType::UInt16 => prim(PrimitiveType::Int, "USMALLINT"),
        DataType::UInt32 => prim(PrimitiveType::Long, "UINTEGER"),
        DataType::UInt64 => prim(PrimitiveType::Decimal { precision: 20, scale: 0 }, "UBIGINT"),
        DataType::Timestamp(TimeUnit::Second, None) => prim(PrimitiveType::Timestamp, "TIMESTAMP_S"),
        DataType::Timestamp(TimeUnit::Millisecond, None) => prim(PrimitiveType::Timestamp, "TIMESTAMP_MS"),
        DataType::Timestamp(TimeUnit::Nanosecond, None) => match nanoseconds {
            Nanoseconds::Microseconds => prim(PrimitiveType::Timestamp, "TIMESTAMP_NS"),
            Nanoseconds::Refuse => Err("Iceberg v2 timestamps are microseconds: cast it to TIMESTAMP, or ATTACH the \
                                        lake with TIMESTAMP_NS 'microseconds' to store it as microseconds (the last \
                                        three digits dropped) and read it back as TIMESTAMP_NS"
                .into()),
        },
        _ => Ok(None),
    }
}

/// An Arrow extension type other than DuckDB's opaque ones (their storage type says nothing).
fn has_other_extension(field: &Field) -> bool {
    field.metadata().get(EXTENSION_NAME).is_some_and(|name| name != OPAQUE)
}

/// The name DuckDB gives a type it exports as an Arrow opaque extension type ("hugeint",
/// "uhugeint", "time_tz", "bit", "bignum", ...).
pub(crate) fn opaque_type_name(field: &Field) -> Option<String> {
    if field.metadata().get(EXTENSION_NAME).map(String::as_str) != Some(OPAQUE) {
        return None;
    }
    let meta: serde_json::Value = serde_json::from_str(field.metadata().get(EXTENSION_METADATA)?).ok()?;
    if meta.get("vendor_name")?.as_str()? != "DuckDB" {
        return None;
    }
    meta.get("type_name")?.as_str().map(str::to_string)
}

/// A table's kept DuckDB types, by field id (of a column, or of a field inside one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DuckdbTypes(pub BTreeMap<i32, String>);

impl DuckdbTypes {
    pub fn of(properties: &HashMap<String, String>) -> Result<DuckdbTypes> {
        let Some(text) = properties.get(PROPERTY) else {
            return Ok(DuckdbTypes::default());
        };
        let map: BTreeMap<String, String> = serde_json::from_str(text)
            .map_err(|e| Error::corrupt(format!("table property {PROPERTY} does not parse ({e}): {text}")))?;
        let mut out = BTreeMap::new();
        for (id, ty) in map {
            let id = id.parse().map_err(|_| Error::corrupt(format!("table property {PROPERTY} names field {id}")))?;
            out.insert(id, ty);
        }
        Ok(DuckdbTypes(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The property's value.
    pub fn property(&self) -> String {
        let map: BTreeMap<String, &String> = self.0.iter().map(|(id, t)| (id.to_string(), t)).collect();
        serde_json::to_string(&map).unwrap_or_default()
    }
}

/// The Arrow type DuckDB imports as `duckdb_type`, and the extension (name, metadata) that
/// says which DuckDB type it is where the Arrow type alone does not.
type Target = (DataType, Option<(&'static str, &'static str)>);

fn facing_type(duckdb_type: &str) -> Option<Target> {
    Some(match duckdb_type {
        "TINYINT" => (DataType::Int8, None),
        "SMALLINT" => (DataType::Int16, None),
        "UTINYINT" => (DataType::UInt8, None),
        "USMALLINT" => (DataType::UInt16, None),
        "UINTEGER" => (DataType::UInt32, None),
        "UBIGINT" => (DataType::UInt64, None),
        "HUGEINT" => (DataType::FixedSizeBinary(16), Some((OPAQUE, HUGEINT_METADATA))),
        "TIMESTAMP_S" => (DataType::Timestamp(TimeUnit::Second, None), None),
        "TIMESTAMP_MS" => (DataType::Timestamp(TimeUnit::Millisecond, None), None),
        "TIMESTAMP_NS" => (DataType::Timestamp(TimeUnit::Nanosecond, None), None),
        // (DuckDB's own export gives the extension an empty metadata too)
        "JSON" => (DataType::Utf8, Some((JSON, ""))),
        _ => return None,
    })
}

/// The conversion of a table's rows as they leave for DuckDB: each column with a kept type (found
/// by its field id) to the Arrow type DuckDB imports as that type.
#[derive(Debug, Clone, Default)]
pub struct Facing {
    /// (ordered: its Debug text names a table's shape, see `TableInfo::shape_id`)
    by_field_id: BTreeMap<i32, Target>,
}

impl Facing {
    /// The conversion of the table whose metadata is `metadata` (its current property).
    pub fn of(metadata: &iceberg::spec::TableMetadata) -> Result<Facing> {
        Ok(Facing::new(&DuckdbTypes::of(metadata.properties())?))
    }

    /// The conversion of the table as snapshot `snapshot_id` has it (an AT clause): the DuckDB
    /// types the snapshot was written with, recorded in its summary (snapshots written before
    /// they were: the table's current ones, always wider).
    pub fn at(metadata: &iceberg::spec::TableMetadata, snapshot_id: i64) -> Result<Facing> {
        let recorded = metadata.snapshot_by_id(snapshot_id).map(|s| &s.summary().additional_properties);
        match recorded.filter(|p| p.contains_key(PROPERTY)) {
            Some(properties) => Ok(Facing::new(&DuckdbTypes::of(properties)?)),
            None => Facing::of(metadata),
        }
    }

    pub fn new(types: &DuckdbTypes) -> Facing {
        let by_field_id = types.0.iter().filter_map(|(id, t)| Some((*id, facing_type(t)?))).collect();
        Facing { by_field_id }
    }

    pub fn is_empty(&self) -> bool {
        self.by_field_id.is_empty()
    }

    fn target(&self, field: &Field) -> Option<&Target> {
        let id: i32 = field.metadata().get(PARQUET_FIELD_ID)?.parse().ok()?;
        self.by_field_id.get(&id)
    }

    /// `schema` with every kept column and field as DuckDB imports it.
    pub fn schema(&self, schema: &ArrowSchemaRef) -> ArrowSchemaRef {
        if self.is_empty() {
            return schema.clone();
        }
        let fields: Vec<Field> = schema.fields().iter().map(|f| self.field(f)).collect();
        Arc::new(ArrowSchema::new_with_metadata(fields, schema.metadata().clone()))
    }

    /// `field` as DuckDB imports it: its kept type, or (a STRUCT, LIST or MAP) the kept types
    /// of the fields inside it.
    fn field(&self, f: &Field) -> Field {
        if let Some((ty, extension)) = self.target(f) {
            let mut metadata = f.metadata().clone();
            if let Some((name, extension_metadata)) = extension {
                metadata.insert(EXTENSION_NAME.into(), name.to_string());
                metadata.insert(EXTENSION_METADATA.into(), extension_metadata.to_string());
            }
            return f.clone().with_data_type(ty.clone()).with_metadata(metadata);
        }
        let ty = match f.data_type() {
            DataType::Struct(children) => DataType::Struct(children.iter().map(|c| self.field(c)).collect()),
            DataType::List(element) => DataType::List(Arc::new(self.field(element))),
            // (the entries field has no id: its key and value have)
            DataType::Map(entries, sorted) => DataType::Map(Arc::new(self.field(entries)), *sorted),
            _ => return f.clone(),
        };
        f.clone().with_data_type(ty)
    }

    /// A batch of `schema` (as [`Self::schema`] gave it) from one in the stored types.
    pub fn batch(&self, batch: RecordBatch, schema: &ArrowSchemaRef) -> Result<RecordBatch> {
        if self.is_empty() {
            return Ok(batch);
        }
        let columns = batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(c, f)| reshape(c, f, &from_stored))
            .collect::<Result<Vec<_>>>()?;
        let options = arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
    }

    /// `reader` converted batch by batch.
    pub fn reader(&self, reader: impl RecordBatchReader + Send + 'static) -> Box<dyn RecordBatchReader + Send> {
        if self.is_empty() {
            return Box::new(reader);
        }
        let schema = self.schema(&reader.schema());
        Box::new(FacingReader { inner: Box::new(reader), facing: self.clone(), schema })
    }
}

struct FacingReader {
    inner: Box<dyn RecordBatchReader + Send>,
    facing: Facing,
    schema: ArrowSchemaRef,
}

impl Iterator for FacingReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let batch = self.inner.next()?;
        Some(batch.and_then(|b| self.facing.batch(b, &self.schema).map_err(|e| ArrowError::ExternalError(Box::new(e)))))
    }
}

impl RecordBatchReader for FacingReader {
    fn schema(&self) -> ArrowSchemaRef {
        self.schema.clone()
    }
}

/// A value in its stored type as `field`'s type (a column's, or a field's inside one): a checked cast (a value another writer stored
/// that the DuckDB type cannot hold is an error naming the column, never NULL), or a HUGEINT
/// reinterpreted from its decimal (the same 16 bytes).
fn from_stored(column: &ArrayRef, field: &Field) -> Result<ArrayRef> {
    if let (DataType::FixedSizeBinary(16), DataType::Decimal128(_, _)) = (field.data_type(), column.data_type()) {
        let decimals = column.as_primitive::<arrow::datatypes::Decimal128Type>();
        let values = decimals.values().inner().clone();
        return Ok(Arc::new(FixedSizeBinaryArray::try_new(16, values, decimals.nulls().cloned())?));
    }
    let refused = |e: &dyn std::fmt::Display| {
        Error::invalid(format!("column \"{}\" holds a value its DuckDB type cannot: {e}", field.name()))
    };
    if let Some(converted) = super::timestamps::convert(column, field.data_type()) {
        return converted.map_err(|e| refused(&e)); // (infinities kept: an Arrow cast loses them)
    }
    let options = CastOptions { safe: false, ..Default::default() };
    arrow::compute::cast_with_options(column, field.data_type(), &options).map_err(|e| refused(&e))
}

/// A HUGEINT column DuckDB sent (its opaque 16-byte type) as the decimal(38,0) Iceberg stores;
/// None when `field` is not one. A value beyond 38 digits is refused, naming the column.
pub fn hugeint_to_decimal(column: &ArrayRef, field: &Field, table_column: &str) -> Option<Result<ArrayRef>> {
    if opaque_type_name(field).as_deref() != Some("hugeint") {
        return None;
    }
    Some(hugeints_as_decimals(column, 38).map_err(|why| Error::invalid(format!("column {table_column}: {why}"))))
}

/// 16-byte little-endian integers (DuckDB's HUGEINT) as decimal(`precision`,0), each checked to
/// fit (a skade table stores HUGEINT as DECIMAL(38,0)).
pub fn hugeints_as_decimals(column: &ArrayRef, precision: u8) -> std::result::Result<ArrayRef, String> {
    let bytes = column.as_fixed_size_binary_opt().filter(|b| b.value_length() == 16).ok_or("not 16-byte integers")?;
    let max = 10i128.pow(precision as u32) - 1;
    let values: Vec<i128> = (0..bytes.len())
        .map(|i| if bytes.is_null(i) { 0 } else { i128::from_le_bytes(bytes.value(i).try_into().unwrap_or([0; 16])) })
        .collect();
    if let Some((_, v)) = values.iter().enumerate().find(|(i, v)| !bytes.is_null(*i) && !(-max..=max).contains(*v)) {
        return Err(format!("HUGEINT {v} cannot be stored, it has more than {precision} digits"));
    }
    let array = Decimal128Array::new(values.into(), bytes.nulls().cloned())
        .with_precision_and_scale(precision, 0)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(array))
}
