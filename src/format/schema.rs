//! Column types: DuckDB's Arrow export -> Iceberg (CREATE TABLE), Iceberg -> Arrow (scans), and
//! conforming incoming batches to a table's Arrow schema (INSERT).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, StructArray};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef, TimeUnit};
use iceberg::spec::{ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, Schema, StructType, Type};

pub(crate) use super::conform::conform_array;
use super::duckdb_types::{self, DuckdbTypes, Nanoseconds};
use super::nested_arrays;
use super::timestamps;
use crate::error::{Error, Result};

const EXTENSION_NAME: &str = "ARROW:extension:name";
const UUID_EXTENSION: &str = "arrow.uuid";
/// DuckDB's lossless Arrow export sends BOOLEAN as one byte per value under this extension.
const BOOL8_EXTENSION: &str = "arrow.bool8";
/// DuckDB exports JSON under this extension (its storage a string; a kept type, see `duckdb_types`).
const JSON_EXTENSION: &str = "arrow.json";

/// Builds the Iceberg schema of a new table from the Arrow schema DuckDB exported for its
/// columns. `duckdb_types` are DuckDB's names for each top-level column's type (for messages),
/// `not_null` the columns declared NOT NULL, `primary_key` the key columns, in key order.
/// Returns the schema and the DuckDB types Iceberg stores as another type (see `duckdb_types`),
/// by the schema's field ids, of columns and of fields inside them alike.
pub fn iceberg_schema(
    arrow: &ArrowSchema,
    duckdb_types: &[String],
    not_null: &[String],
    primary_key: &[String],
    nanoseconds: Nanoseconds,
) -> Result<(Schema, DuckdbTypes)> {
    let mut next_id = 0;
    let mut fields = Vec::with_capacity(arrow.fields().len());
    let mut kept = DuckdbTypes::default();
    for (i, f) in arrow.fields().iter().enumerate() {
        let duck = duckdb_types.get(i).map(String::as_str).unwrap_or("?");
        let cannot = |why: String| {
            Error::invalid(format!(
                "column \"{}\" has type {duck}, which a skade (Iceberg) table cannot store: {why}",
                f.name()
            ))
        };
        let (ty, kept_as) = column_type(f, &mut next_id, nanoseconds, &mut kept).map_err(cannot)?;
        next_id += 1;
        if let Some(name) = kept_as {
            kept.0.insert(next_id, name.to_string());
        }
        let required = is_in(not_null, f.name()) || is_in(primary_key, f.name());
        fields.push(Arc::new(NestedField::new(next_id, f.name(), ty, required)));
    }
    // Field ids are assigned depth-first above; give top-level columns the lowest ids instead,
    // as Iceberg writers conventionally do, by renumbering through the metadata builder later.
    let mut key_ids = Vec::with_capacity(primary_key.len());
    for k in primary_key {
        let field = fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(k))
            .ok_or_else(|| Error::invalid(format!("PRIMARY KEY column \"{k}\" does not exist")))?;
        check_key_column(field)?;
        key_ids.push(field.id);
    }
    let mut names = HashMap::new();
    for f in &fields {
        if let Some(prev) = names.insert(f.name.to_lowercase(), f.name.clone()) {
            return Err(Error::invalid(format!("duplicate column name \"{prev}\"")));
        }
    }
    Ok((Schema::builder().with_fields(fields).with_identifier_field_ids(key_ids).build()?, kept))
}

/// Table property: a composite primary key's field ids in the order PRIMARY KEY named them,
/// comma-separated. Iceberg's identifier-field-ids are a set (the iceberg crate holds them in a
/// hash set), but DuckDB shows a key in its declared order (DESCRIBE, `duckdb_constraints()`):
/// `PRIMARY KEY (b, a)` stays `(b, a)`. Field ids, not names, so a RENAME COLUMN keeps it right.
/// Only the key's display order: key-column lists the core compares or encodes stay in
/// field-id order.
pub const KEY_ORDER_PROPERTY: &str = "skade.primary-key-order";

/// The value of [`KEY_ORDER_PROPERTY`] for key field ids `ids` in declared order (None for a key
/// of one column or none: there is no order to keep).
pub fn key_order_property(ids: &[i32]) -> Option<String> {
    (ids.len() > 1).then(|| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(","))
}

/// The identifier field ids of `schema` in the order PRIMARY KEY declared them: the order of
/// [`KEY_ORDER_PROPERTY`] in `properties` when it names exactly those fields, else field-id
/// order (tables of other writers, or written by skade before it kept the order).
pub fn declared_key_ids(schema: &Schema, properties: &HashMap<String, String>) -> Vec<i32> {
    let mut ids: Vec<i32> = schema.identifier_field_ids().collect();
    ids.sort_unstable();
    let declared: Option<Vec<i32>> =
        properties.get(KEY_ORDER_PROPERTY).and_then(|text| text.split(',').map(|id| id.trim().parse().ok()).collect());
    if let Some(declared) = declared {
        let mut same = declared.clone();
        same.sort_unstable();
        if same == ids {
            return declared;
        }
    }
    ids
}

/// Refuses a column Iceberg cannot take as an identifier field (a PRIMARY KEY column).
pub(crate) fn check_key_column(field: &NestedField) -> Result<()> {
    if !field.field_type.is_primitive() {
        return Err(Error::invalid(format!(
            "PRIMARY KEY column \"{}\" must have a primitive type, not {}",
            field.name, field.field_type
        )));
    }
    if matches!(field.field_type.as_primitive_type(), Some(PrimitiveType::Float | PrimitiveType::Double)) {
        return Err(Error::invalid(format!(
            "PRIMARY KEY column \"{}\" cannot be FLOAT or DOUBLE (Iceberg identifier fields exclude floating point)",
            field.name
        )));
    }
    Ok(())
}

fn is_in(list: &[String], name: &str) -> bool {
    list.iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// The Iceberg type of one top-level column DuckDB exported as `field`, its nested fields numbered
/// from `next_id` on (advanced past them), and the DuckDB type kept for it (see `duckdb_types`);
/// the types kept for fields inside it are added to `kept` by their ids. A type Iceberg cannot
/// store is refused in DuckDB's terms, with the way out (a cast, or the column left out), for the
/// caller to put after the column's name and type.
pub(crate) fn column_type(
    field: &Field,
    next_id: &mut i32,
    nanoseconds: Nanoseconds,
    kept: &mut DuckdbTypes,
) -> std::result::Result<(Type, Option<&'static str>), String> {
    mapped(field, next_id, nanoseconds, Place { column: field.name(), nested: false }, kept)
}

/// [`column_type`] of a field anywhere in a column.
fn mapped(
    field: &Field,
    next_id: &mut i32,
    nanoseconds: Nanoseconds,
    at: Place,
    kept: &mut DuckdbTypes,
) -> std::result::Result<(Type, Option<&'static str>), String> {
    match duckdb_types::stored_as(field, nanoseconds)? {
        Some((ty, name)) => Ok((ty, Some(name))),
        None => Ok((iceberg_type(field, next_id, nanoseconds, at, kept)?, None)),
    }
}

/// A nested field's type (see [`mapped`]), given the next id, which the caller assigns it: its
/// kept DuckDB type is noted under that id.
fn nested_field_type(
    field: &Field,
    next_id: &mut i32,
    nanoseconds: Nanoseconds,
    at: Place,
    kept: &mut DuckdbTypes,
) -> std::result::Result<Type, String> {
    let (ty, kept_as) = mapped(field, next_id, nanoseconds, at.inside(), kept)?;
    *next_id += 1;
    if let Some(name) = kept_as {
        kept.0.insert(*next_id, name.to_string());
    }
    Ok(ty)
}

/// Where a type being mapped is: in which top-level column, and whether inside its STRUCT, LIST
/// or MAP (for the way out of a refusal).
#[derive(Clone, Copy)]
struct Place<'a> {
    column: &'a str,
    nested: bool,
}

impl Place<'_> {
    fn inside(self) -> Self {
        Place { nested: true, ..self }
    }

    /// Why DuckDB type `ty` cannot be stored here, and the way out: a cast to `to` (a type
    /// Iceberg stores; `also` names another way), or the column left out; `note` ends it.
    fn refuse(self, ty: &str, to: &str, also: &str, note: &str) -> String {
        let c = sql_identifier(self.column);
        if self.nested {
            return format!(
                "inside it, {ty} has no Iceberg type: cast the column to a type with {to} in that place{also}, or \
                 leave the column out (SELECT * EXCLUDE ({c})){note}"
            );
        }
        format!(
            "Iceberg has no {ty} type; store it as {to}{also}: CAST({c} AS {to}) (in a SELECT *: SELECT * REPLACE \
             (CAST({c} AS {to}) AS {c})), or leave the column out (SELECT * EXCLUDE ({c})){note}"
        )
    }
}

/// `name` as SQL names a column: bare when it is a plain lowercase identifier, else quoted.
pub(crate) fn sql_identifier(name: &str) -> String {
    let plain = name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if plain {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// The DuckDB types DuckDB exports in a form Iceberg has no type for, refused in DuckDB's terms
/// (ENUM, UNION, ARRAY, INTERVAL, ...) with the way out; None for every other type.
fn refusal(field: &Field, at: Place) -> Option<String> {
    if let Some(name) = duckdb_types::opaque_type_name(field) {
        return Some(match name.as_str() {
            "uhugeint" => {
                at.refuse("128-bit unsigned integer", "DECIMAL(38,0)", " if the values fit (else VARCHAR)", "")
            }
            "time_tz" => at.refuse("TIME WITH TIME ZONE", "VARCHAR", " (which keeps the offset)", ""),
            "hugeint" => return None, // (a kept type)
            _ => at.refuse(&duckdb_name(field), "VARCHAR", "", ""),
        });
    }
    Some(match field.data_type() {
        DataType::Dictionary(_, _) => at.refuse("ENUM", "VARCHAR", "", " (a pandas Categorical column is an ENUM)"),
        DataType::Union(_, _) => at.refuse("UNION", "VARCHAR", "", ""),
        DataType::FixedSizeList(child, _) => {
            at.refuse("fixed-size ARRAY", &format!("{}[]", duckdb_name(child)), "", "")
        }
        DataType::Interval(_) | DataType::Duration(_) => at.refuse(
            "INTERVAL",
            "VARCHAR",
            &format!(" (or as seconds: epoch({}))", sql_identifier(at.column)),
            " (a pandas timedelta column is an INTERVAL)",
        ),
        DataType::Time32(_) | DataType::Time64(TimeUnit::Nanosecond) => at.refuse(
            &duckdb_name(field),
            "TIME",
            " (Iceberg times are microseconds: the last three digits are dropped)",
            "",
        ),
        _ => return None,
    })
}

/// How DuckDB names the type it exported as `field` (for messages); Arrow's name where DuckDB
/// has none.
pub(crate) fn duckdb_name(field: &Field) -> String {
    match field.metadata().get(EXTENSION_NAME).map(String::as_str) {
        Some(UUID_EXTENSION) => return "UUID".into(),
        Some(BOOL8_EXTENSION) => return "BOOLEAN".into(),
        Some(JSON_EXTENSION) => return "JSON".into(),
        _ => {}
    }
    if let Some(name) = duckdb_types::opaque_type_name(field) {
        return match name.as_str() {
            "time_tz" => "TIME WITH TIME ZONE".into(),
            other => other.to_uppercase(),
        };
    }
    let list = |child: &Field, size: String| format!("{}[{size}]", duckdb_name(child));
    let members = |fields: &mut dyn Iterator<Item = &arrow::datatypes::FieldRef>| {
        fields.map(|f| format!("{} {}", sql_identifier(f.name()), duckdb_name(f))).collect::<Vec<_>>().join(", ")
    };
    match field.data_type() {
        DataType::Null => "NULL".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INTEGER".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 => "UTINYINT".into(),
        DataType::UInt16 => "USMALLINT".into(),
        DataType::UInt32 => "UINTEGER".into(),
        DataType::UInt64 => "UBIGINT".into(),
        DataType::Float16 | DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal32(p, s)
        | DataType::Decimal64(p, s)
        | DataType::Decimal128(p, s)
        | DataType::Decimal256(p, s) => {
            format!("DECIMAL({p},{s})")
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => "BLOB".into(),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Time64(TimeUnit::Nanosecond) => "TIME_NS".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::Timestamp(_, Some(_)) => "TIMESTAMP WITH TIME ZONE".into(),
        DataType::Timestamp(TimeUnit::Second, None) => "TIMESTAMP_S".into(),
        DataType::Timestamp(TimeUnit::Millisecond, None) => "TIMESTAMP_MS".into(),
        DataType::Timestamp(TimeUnit::Microsecond, None) => "TIMESTAMP".into(),
        DataType::Timestamp(TimeUnit::Nanosecond, None) => "TIMESTAMP_NS".into(),
        DataType::Interval(_) | DataType::Duration(_) => "INTERVAL".into(),
        DataType::Dictionary(_, _) => "ENUM".into(),
        DataType::List(c) | DataType::LargeList(c) | DataType::ListView(c) | DataType::LargeListView(c) => {
            list(c, String::new())
        }
        DataType::FixedSizeList(c, n) => list(c, n.to_string()),
        DataType::Struct(fields) => format!("STRUCT({})", members(&mut fields.iter())),
        DataType::Union(fields, _) => format!("UNION({})", members(&mut fields.iter().map(|(_, f)| f))),
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => format!("MAP({}, {})", duckdb_name(&kv[0]), duckdb_name(&kv[1])),
            _ => "MAP".into(),
        },
        other => other.to_string(),
    }
}

fn iceberg_type(
    field: &Field,
    next_id: &mut i32,
    nanoseconds: Nanoseconds,
    at: Place,
    kept: &mut DuckdbTypes,
) -> std::result::Result<Type, String> {
    let prim = |p| Ok(Type::Primitive(p));
    match field.metadata().get(EXTENSION_NAME).map(String::as_str) {
        Some(UUID_EXTENSION) => return prim(PrimitiveType::Uuid),
        Some(BOOL8_EXTENSION) => return prim(PrimitiveType::Boolean),
        _ => {}
    }
    if let Some(why) = refusal(field, at) {
        return Err(why);
    }
    if field.metadata().contains_key(EXTENSION_NAME) {
        return Err(at.refuse(&duckdb_name(field), "VARCHAR", "", ""));
    }
    // (the narrow and unsigned integers and the timestamps of other units are kept types, mapped
    // by `duckdb_types::stored_as` before this)
    let mut nested = |f: &Field, next_id: &mut i32| nested_field_type(f, next_id, nanoseconds, at, kept);
    match field.data_type() {
        // DuckDB 2.0 exports an untyped NULL (`SELECT NULL AS n`, `[] AS l`) as Arrow's Null:
        // INTEGER, as DuckDB 1.5 types such a column (its rows are all NULL)
        DataType::Null => prim(PrimitiveType::Int),
        DataType::Boolean => prim(PrimitiveType::Boolean),
        DataType::Int32 => prim(PrimitiveType::Int),
        DataType::Int64 => prim(PrimitiveType::Long),
        DataType::Float32 => prim(PrimitiveType::Float),
        DataType::Float64 => prim(PrimitiveType::Double),
        DataType::Decimal128(p, s) if *p <= 38 && *s >= 0 => {
            prim(PrimitiveType::Decimal { precision: *p as u32, scale: *s as u32 })
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => prim(PrimitiveType::String),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => prim(PrimitiveType::Binary),
        DataType::Date32 => prim(PrimitiveType::Date),
        DataType::Time64(TimeUnit::Microsecond) => prim(PrimitiveType::Time),
        DataType::Timestamp(TimeUnit::Microsecond, None) => prim(PrimitiveType::Timestamp),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => prim(PrimitiveType::Timestamptz),
        DataType::Timestamp(_, _) => {
            Err("Iceberg v2 stores timestamps in microseconds; use TIMESTAMP or TIMESTAMPTZ".into())
        }
        DataType::List(child)
        | DataType::LargeList(child)
        | DataType::ListView(child)
        | DataType::LargeListView(child) => {
            let element = nested(child, next_id)?;
            Ok(Type::List(ListType::new(Arc::new(NestedField::list_element(*next_id, element, !child.is_nullable())))))
        }
        DataType::Struct(children) => {
            let mut fields: Vec<NestedFieldRef> = Vec::with_capacity(children.len());
            for c in children {
                let t = nested(c, next_id)?;
                fields.push(Arc::new(NestedField::new(*next_id, c.name(), t, !c.is_nullable())));
            }
            Ok(Type::Struct(StructType::new(fields)))
        }
        DataType::Map(entries, _) => {
            let (k, v) = match entries.data_type() {
                DataType::Struct(kv) if kv.len() == 2 => (&kv[0], &kv[1]),
                _ => return Err("malformed MAP".into()),
            };
            let kt = nested(k, next_id)?;
            let key_id = *next_id;
            let vt = nested(v, next_id)?;
            Ok(Type::Map(MapType::new(
                Arc::new(NestedField::map_key_element(key_id, kt)),
                Arc::new(NestedField::map_value_element(*next_id, vt, !v.is_nullable())),
            )))
        }
        _ => Err(at.refuse(&duckdb_name(field), "VARCHAR", "", "")),
    }
}

/// The Arrow schema skade reads and writes for a table: Iceberg's mapping (with field ids), plus
/// the `arrow.uuid` extension so DuckDB sees UUID rather than BLOB.
pub fn arrow_schema(schema: &Schema) -> Result<ArrowSchemaRef> {
    let arrow = iceberg::arrow::schema_to_arrow_schema(schema)?;
    let fields: Vec<Field> = arrow
        .fields()
        .iter()
        .zip(schema.as_struct().fields())
        .map(|(f, ice)| tag_uuid(f.as_ref().clone(), &ice.field_type))
        .collect();
    Ok(Arc::new(ArrowSchema::new_with_metadata(fields, arrow.metadata().clone())))
}

fn tag_uuid(field: Field, ty: &Type) -> Field {
    match (ty, field.data_type().clone()) {
        (Type::Primitive(PrimitiveType::Uuid), _) => {
            let mut md = field.metadata().clone();
            md.insert(EXTENSION_NAME.to_string(), UUID_EXTENSION.to_string());
            field.with_metadata(md)
        }
        (Type::List(l), DataType::List(child)) => {
            let child = tag_uuid(child.as_ref().clone(), &l.element_field.field_type);
            field.clone().with_data_type(DataType::List(Arc::new(child)))
        }
        (Type::Struct(s), DataType::Struct(children)) => {
            let children: Vec<Field> =
                children.iter().zip(s.fields()).map(|(c, f)| tag_uuid(c.as_ref().clone(), &f.field_type)).collect();
            field.clone().with_data_type(DataType::Struct(children.into()))
        }
        (Type::Map(m), DataType::Map(entries, sorted)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return field;
            };
            let k = tag_uuid(kv[0].as_ref().clone(), &m.key_field.field_type);
            let v = tag_uuid(kv[1].as_ref().clone(), &m.value_field.field_type);
            let entries = entries.as_ref().clone().with_data_type(DataType::Struct(vec![k, v].into()));
            field.clone().with_data_type(DataType::Map(Arc::new(entries), sorted))
        }
        _ => field,
    }
}

/// Reshapes a batch from DuckDB (any field names, DuckDB's Arrow flavours) into the table's
/// Arrow schema: the arrays as they are where the types match, else each nested field in its
/// place converted (kept types into the stored ones, string views, large lists), and enforces
/// NOT NULL.
pub fn conform(columns: &StructArray, target: &ArrowSchemaRef, table_name: &str) -> Result<RecordBatch> {
    if columns.num_columns() != target.fields().len() {
        return Err(Error::invalid(format!(
            "table {table_name} has {} columns but {} were supplied",
            target.fields().len(),
            columns.num_columns()
        )));
    }
    let mut out = Vec::with_capacity(target.fields().len());
    for ((col, field), source) in columns.columns().iter().zip(target.fields()).zip(columns.fields()) {
        if !field.is_nullable() && col.logical_null_count() > 0 {
            return Err(Error::constraint(format!("NOT NULL constraint failed: {table_name}.{}", field.name())));
        }
        let column_name = format!("{table_name}.{}", field.name());
        let col = match duckdb_types::hugeint_to_decimal(col, source, &column_name) {
            Some(decimal) => decimal?,
            None => match timestamps::convert(col, field.data_type()) {
                Some(converted) => converted.map_err(|why| Error::invalid(format!("column {column_name}: {why}")))?,
                // (an error inside a STRUCT, LIST or MAP, a HUGEINT too wide there, names the column)
                None => conform_array(col, field.data_type()).map_err(|e| {
                    match nested_arrays::is_nested(field.data_type()) {
                        true => Error::new(e.kind, format!("column {column_name}: {}", e.message)),
                        false => e,
                    }
                })?,
            },
        };
        check_time_of_day(&col, table_name, field.name())?;
        out.push(col);
    }
    Ok(RecordBatch::try_new_with_options(
        target.clone(),
        out,
        &RecordBatchOptions::new().with_row_count(Some(columns.len())),
    )?)
}

/// An Iceberg time is microseconds within a day; DuckDB's TIME also holds 24:00:00, which no
/// Iceberg reader (nor the file's statistics) could take.
fn check_time_of_day(col: &ArrayRef, table_name: &str, column: &str) -> Result<()> {
    const DAY_US: i64 = 86_400_000_000;
    if let Some(times) = col.as_primitive_opt::<arrow::datatypes::Time64MicrosecondType>() {
        if let Some(max) = arrow::compute::max(times).filter(|m| *m >= DAY_US) {
            return Err(Error::invalid(format!(
                "column {table_name}.{column}: TIME {:02}:{:02}:{:02} cannot be stored, an Iceberg time lies \
                 within a day (00:00:00 to 23:59:59.999999)",
                max / 3_600_000_000,
                max / 60_000_000 % 60,
                max / 1_000_000 % 60
            )));
        }
    }
    Ok(())
}

/// `batch` (rows of a table in one of its schemas) in the columns of `target` (another schema
/// of the table): each column found by its Iceberg field id (the `PARQUET:field_id` metadata
/// Arrow fields of tables carry), so a rename or a drop and re-add never hands one column's values
/// to another; widened where the type was promoted; where the rows' schema lacks it, the
/// column's initial default in `schema` (the Iceberg schema of `target`), or NULL. A column
/// without a field id (a changelog's own) is found by its name.
pub fn by_field_id(batch: &RecordBatch, target: &ArrowSchemaRef, schema: &Schema) -> Result<RecordBatch> {
    const FIELD_ID: &str = "PARQUET:field_id";
    let id = |f: &Field| f.metadata().get(FIELD_ID).cloned();
    let source = batch.schema();
    let columns = target
        .fields()
        .iter()
        .map(|f| {
            let found = match id(f) {
                Some(want) => source.fields().iter().position(|s| id(s).as_ref() == Some(&want)),
                None => source.index_of(f.name()).ok(),
            };
            match found {
                Some(i) => conform_array(batch.column(i), f.data_type()),
                None => {
                    let field = id(f).and_then(|id| id.parse().ok()).and_then(|id| schema.field_by_id(id));
                    super::defaults::missing_column(field.map(|f| f.as_ref()), f.data_type(), batch.num_rows())
                }
            }
        })
        .collect::<Result<Vec<_>>>()?;
    let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
    Ok(RecordBatch::try_new_with_options(target.clone(), columns, &options)?)
}

/// The top-level columns of a Parquet file by their Iceberg field ids (columns without an id are
/// left out: other writers may omit them).
pub(crate) fn roots_by_field_id(
    schema: &parquet::schema::types::SchemaDescriptor,
) -> std::collections::HashMap<i32, usize> {
    schema
        .root_schema()
        .get_fields()
        .iter()
        .enumerate()
        .filter(|(_, f)| f.get_basic_info().has_id())
        .map(|(i, f)| (f.get_basic_info().id(), i))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int32Array, ListArray, StringArray};
    use arrow::datatypes::Int32Type;

    #[test]
    fn maps_every_supported_type() {
        let uuid = Field::new("u", DataType::FixedSizeBinary(16), true)
            .with_metadata([(EXTENSION_NAME.to_string(), UUID_EXTENSION.to_string())].into());
        let arrow = ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("b", DataType::Boolean, true),
            Field::new("i", DataType::Int32, true),
            Field::new("f", DataType::Float32, true),
            Field::new("d", DataType::Float64, true),
            Field::new("dec", DataType::Decimal128(18, 3), true),
            Field::new("s", DataType::Utf8, true),
            Field::new("bl", DataType::Binary, true),
            Field::new("dt", DataType::Date32, true),
            Field::new("t", DataType::Time64(TimeUnit::Microsecond), true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("tz", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
            uuid,
            Field::new_list("l", Field::new("l", DataType::Int32, true), true),
            Field::new_struct("st", vec![Field::new("a", DataType::Utf8, true)], true),
            Field::new_map(
                "m",
                "entries",
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Int64, true),
                false,
                true,
            ),
        ]);
        let types: Vec<String> = arrow.fields().iter().map(|f| f.data_type().to_string()).collect();
        let (schema, kept) = iceberg_schema(&arrow, &types, &[], &["id".into()], Nanoseconds::Refuse).unwrap();
        assert!(kept.is_empty());
        assert_eq!(schema.as_struct().fields().len(), 16);
        assert!(schema.field_by_name("id").unwrap().required);
        assert_eq!(schema.identifier_field_ids().count(), 1);
        let back = arrow_schema(&schema).unwrap();
        assert_eq!(back.field_with_name("u").unwrap().metadata().get(EXTENSION_NAME).unwrap(), UUID_EXTENSION);
    }

    #[test]
    fn narrow_types_are_stored_wider_and_kept_by_name() {
        let arrow = ArrowSchema::new(vec![
            Field::new("tiny", DataType::Int8, true),
            Field::new("big", DataType::UInt64, true),
            Field::new("ms", DataType::Timestamp(TimeUnit::Millisecond, None), true),
        ]);
        let types = ["TINYINT".to_string(), "UBIGINT".into(), "TIMESTAMP_MS".into()];
        let (schema, kept) = iceberg_schema(&arrow, &types, &[], &[], Nanoseconds::Refuse).unwrap();
        let by_name = |n: &str| kept.0.get(&schema.field_by_name(n).unwrap().id).cloned();
        assert_eq!(kept.0.len(), 3);
        assert_eq!(
            (by_name("tiny"), by_name("big"), by_name("ms")),
            (Some("TINYINT".into()), Some("UBIGINT".into()), Some("TIMESTAMP_MS".into()))
        );
        let t = |n| schema.field_by_name(n).unwrap().field_type.to_string();
        assert_eq!((t("tiny"), t("big"), t("ms")), ("int".into(), "decimal(20, 0)".into(), "timestamp".into()));
    }

    #[test]
    fn unsupported_types_name_column_and_type() {
        let ns = ArrowSchema::new(vec![Field::new("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true)]);
        let err = iceberg_schema(&ns, &["TIMESTAMP_NS".into()], &[], &[], Nanoseconds::Refuse).unwrap_err();
        assert!(
            err.message.contains("\"t\"") && err.message.contains("TIMESTAMP_NS 'microseconds'"),
            "{}",
            err.message
        );
        assert!(iceberg_schema(&ns, &["TIMESTAMP_NS".into()], &[], &[], Nanoseconds::Microseconds).is_ok());
    }

    /// Narrow types, HUGEINT and JSON inside a STRUCT, LIST or MAP are kept like columns, by the
    /// id of the field that holds them.
    #[test]
    fn kept_types_inside_nested_columns() {
        let hugeint = Field::new("h", DataType::FixedSizeBinary(16), true).with_metadata(HashMap::from([
            (EXTENSION_NAME.to_string(), "arrow.opaque".to_string()),
            ("ARROW:extension:metadata".to_string(), r#"{"type_name":"hugeint","vendor_name":"DuckDB"}"#.to_string()),
        ]));
        let json = Field::new("j", DataType::Utf8, true)
            .with_metadata(HashMap::from([(EXTENSION_NAME.to_string(), JSON_EXTENSION.to_string())]));
        let arrow = ArrowSchema::new(vec![
            Field::new_struct("s", vec![Field::new("t", DataType::Int8, true), hugeint, json.clone()], true),
            Field::new_list("l", Field::new("element", DataType::UInt16, true), true),
            Field::new_map(
                "m",
                "entries",
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::UInt64, true),
                false,
                true,
            ),
            json,
        ]);
        let types = ["STRUCT(...)".to_string(), "USMALLINT[]".into(), "MAP(VARCHAR, UBIGINT)".into(), "JSON".into()];
        let (schema, kept) = iceberg_schema(&arrow, &types, &[], &[], Nanoseconds::Refuse).unwrap();
        let kept_at = |path: &str| {
            let id = schema.field_id_by_name(path).unwrap_or_else(|| panic!("{path}"));
            (schema.field_by_id(id).unwrap().field_type.to_string(), kept.0.get(&id).cloned().unwrap_or_default())
        };
        assert_eq!(kept_at("s.t"), ("int".into(), "TINYINT".into()));
        assert_eq!(kept_at("s.h"), ("decimal(38, 0)".into(), "HUGEINT".into()));
        assert_eq!(kept_at("s.j"), ("string".into(), "JSON".into()));
        assert_eq!(kept_at("l.element"), ("int".into(), "USMALLINT".into()));
        assert_eq!(kept_at("m.value"), ("decimal(20, 0)".into(), "UBIGINT".into()));
        assert_eq!(kept_at("j"), ("string".into(), "JSON".into()));
        assert_eq!(kept.0.len(), 6);
    }

    /// DuckDB's types with no Iceberg form are refused in DuckDB's terms (never Arrow's), naming the
    /// column and the way out.
    #[test]
    fn refused_types_speak_duckdb() {
        let ext = |f: Field, name: &str, meta: Option<&str>| {
            let mut md = HashMap::from([(EXTENSION_NAME.to_string(), name.to_string())]);
            if let Some(meta) = meta {
                md.insert("ARROW:extension:metadata".to_string(), meta.to_string());
            }
            f.with_metadata(md)
        };
        let dict = DataType::Dictionary(Box::new(DataType::UInt8), Box::new(DataType::Utf8));
        let union = DataType::Union(
            arrow::datatypes::UnionFields::try_new(
                vec![0, 1],
                vec![Field::new("i", DataType::Int32, true), Field::new("s", DataType::Utf8, true)],
            )
            .unwrap(),
            arrow::datatypes::UnionMode::Sparse,
        );
        let array = DataType::FixedSizeList(Arc::new(Field::new("", DataType::Int32, true)), 3);
        let time_tz = r#"{"type_name":"time_tz","vendor_name":"DuckDB"}"#;
        let cases: Vec<(Field, &str, &[&str])> = vec![
            (
                Field::new("mood", dict.clone(), true),
                "ENUM('a', 'b')",
                &["Iceberg has no ENUM type", "CAST(mood AS VARCHAR)", "SELECT * EXCLUDE (mood)", "pandas Categorical"],
            ),
            (
                Field::new("u", union, true),
                "UNION(i INTEGER, s VARCHAR)",
                &["Iceberg has no UNION type", "CAST(u AS VARCHAR)"],
            ),
            (
                Field::new("arr", array, true),
                "INTEGER[3]",
                &[
                    "Iceberg has no fixed-size ARRAY type",
                    "CAST(arr AS INTEGER[])",
                    "SELECT * REPLACE (CAST(arr AS INTEGER[]) AS arr)",
                ],
            ),
            (
                Field::new("Span", DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano), true),
                "INTERVAL",
                &["Iceberg has no INTERVAL type", "CAST(\"Span\" AS VARCHAR)", "epoch(\"Span\")", "pandas timedelta"],
            ),
            (
                ext(Field::new("t", DataType::FixedSizeBinary(8), true), "arrow.opaque", Some(time_tz)),
                "TIME WITH TIME ZONE",
                &["Iceberg has no TIME WITH TIME ZONE type", "CAST(t AS VARCHAR)"],
            ),
            (
                ext(
                    Field::new("uh", DataType::FixedSizeBinary(16), true),
                    "arrow.opaque",
                    Some(r#"{"type_name":"uhugeint","vendor_name":"DuckDB"}"#),
                ),
                "UHUGEINT",
                &["128-bit unsigned integer", "CAST(uh AS DECIMAL(38,0))"],
            ),
            (
                Field::new("tn", DataType::Time64(TimeUnit::Nanosecond), true),
                "TIME_NS",
                &["Iceberg has no TIME_NS type", "CAST(tn AS TIME)"],
            ),
            (
                Field::new_struct("s", vec![Field::new("e", dict, true)], true),
                "STRUCT(e ENUM('a'))",
                &["inside it, ENUM has no Iceberg type", "with VARCHAR in that place", "SELECT * EXCLUDE (s)"],
            ),
            (
                Field::new_list(
                    "tz",
                    ext(Field::new("element", DataType::FixedSizeBinary(8), true), "arrow.opaque", Some(time_tz)),
                    true,
                ),
                "TIME WITH TIME ZONE[]",
                &["inside it, TIME WITH TIME ZONE has no Iceberg type", "with VARCHAR in that place"],
            ),
        ];
        for (field, duck, wanted) in cases {
            let name = field.name().clone();
            let arrow = ArrowSchema::new(vec![field]);
            let err = iceberg_schema(&arrow, &[duck.to_string()], &[], &[], Nanoseconds::Refuse).unwrap_err().message;
            let quoted = format!("column \"{name}\" has type {duck}, which a skade (Iceberg) table cannot store: ");
            assert!(err.starts_with(&quoted), "{err}");
            for w in wanted {
                assert!(err.contains(w), "{w}: {err}");
            }
            for arrow_speak in ["Arrow", "Dictionary", "Sparse", "FixedSizeList", "MonthDayNano", "arrow.", "Utf8"] {
                assert!(!err.contains(arrow_speak), "{arrow_speak}: {err}");
            }
        }
    }

    /// DuckDB 2.0 exports an untyped NULL as Arrow's Null: an INTEGER column (a list of them an
    /// INTEGER[] one), as DuckDB 1.5 types it, whose rows are written as NULLs.
    #[test]
    fn untyped_nulls_are_integers() {
        let arrow = ArrowSchema::new(vec![
            Field::new("n", DataType::Null, true),
            Field::new_list("l", Field::new("l", DataType::Null, true), true),
        ]);
        let (schema, kept) =
            iceberg_schema(&arrow, &["\"NULL\"".into(), "\"NULL\"[]".into()], &[], &[], Nanoseconds::Refuse).unwrap();
        assert!(kept.is_empty());
        let t = |n| schema.field_by_name(n).unwrap().field_type.to_string();
        assert_eq!(t("n"), "int");
        let Type::List(list) = &*schema.field_by_name("l").unwrap().field_type else { panic!("not a list") };
        assert_eq!(list.element_field.field_type.to_string(), "int");
        let target = arrow_schema(&schema).unwrap();
        let nulls = ListArray::new(
            Arc::new(Field::new("l", DataType::Null, true)),
            arrow::buffer::OffsetBuffer::from_lengths([0, 0, 1]),
            Arc::new(arrow::array::NullArray::new(1)),
            None,
        );
        let input = StructArray::from(vec![
            (Arc::new(arrow.field(0).clone()), Arc::new(arrow::array::NullArray::new(3)) as ArrayRef),
            (Arc::new(arrow.field(1).clone()), Arc::new(nulls) as ArrayRef),
        ]);
        let batch = conform(&input, &target, "t").unwrap();
        assert_eq!(batch.schema(), target);
        assert_eq!(batch.column(0).data_type(), &DataType::Int32);
        assert_eq!(batch.column(0).logical_null_count(), 3);
        let lists = batch.column(1).as_list::<i32>();
        assert_eq!((lists.value_length(0), lists.value_length(2)), (0, 1));
        assert_eq!(lists.values().data_type(), &DataType::Int32);
        assert!(lists.value(2).is_null(0));
        // a Null array is all NULL, for NOT NULL too
        let required: ArrowSchemaRef = Arc::new(ArrowSchema::new(vec![Field::new("n", DataType::Int32, false)]));
        let one = StructArray::from(vec![(
            Arc::new(Field::new("n", DataType::Null, true)),
            Arc::new(arrow::array::NullArray::new(1)) as ArrayRef,
        )]);
        assert_eq!(conform(&one, &required, "t").unwrap_err().kind, crate::error::ErrorKind::Constraint);
    }

    #[test]
    fn conform_relabels_nested_and_enforces_not_null() {
        let target: ArrowSchemaRef = Arc::new(ArrowSchema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new_list("l", Field::new("element", DataType::Int32, true), true),
        ]));
        let list = ListArray::from_iter_primitive::<Int32Type, _, _>(vec![Some(vec![Some(1)]), None]);
        let input = StructArray::from(vec![
            (Arc::new(Field::new("x", DataType::Int32, true)), Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef),
            (Arc::new(Field::new("y", list.data_type().clone(), true)), Arc::new(list) as ArrayRef),
        ]);
        let batch = conform(&input, &target, "t").unwrap();
        assert_eq!(batch.schema(), target);

        let with_null = StructArray::from(vec![
            (
                Arc::new(Field::new("x", DataType::Int32, true)),
                Arc::new(Int32Array::from(vec![None, Some(2)])) as ArrayRef,
            ),
            (Arc::new(Field::new("y", DataType::Utf8, true)), Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef),
        ]);
        let err = conform(&with_null, &target, "t").unwrap_err();
        assert_eq!(err.kind, crate::error::ErrorKind::Constraint);
    }
}
