//! Iceberg view metadata files: what `CREATE VIEW` writes, so that other Iceberg engines (and
//! the REST catalog) see skade's views as the view spec describes them.
//!
//! A view's definition is DuckDB SQL: its version holds one `sql` representation of dialect
//! `duckdb` (the SELECT as DuckDB prints it), its default namespace is the view's schema (where
//! DuckDB resolves the query's unqualified names), and its schema the columns DuckDB bound it to.
//! What DuckDB needs beyond the spec lives in properties: the column aliases the view was
//! declared with (`CREATE VIEW v (a, b) AS ...`), which a re-bind applies again.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::Schema as ArrowSchema;
use iceberg::spec::{
    NestedField, PrimitiveType, Schema, SchemaRef, Type, ViewFormatVersion, ViewMetadata, ViewMetadataBuilder,
    ViewRepresentation, ViewVersion,
};
use uuid::Uuid;

use super::duckdb_types::Nanoseconds;
use super::schema::iceberg_schema;
use crate::error::{Error, Result};
use crate::io::write_new;

/// The dialect of the SQL skade writes (and the only one it can run).
pub const DIALECT: &str = "duckdb";
/// The view property holding the column aliases of `CREATE VIEW v (a, b)`, a JSON list.
pub const ALIASES_PROPERTY: &str = "skade.duckdb-aliases";
/// The view property Iceberg engines show as a view's comment.
pub const COMMENT_PROPERTY: &str = "comment";

/// A view as DuckDB declares it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewDefinition {
    /// The SELECT, as DuckDB prints it.
    pub sql: String,
    /// The column aliases of the declaration (none: the query's own names).
    pub aliases: Vec<String>,
    /// The schema the query's unqualified names resolve in.
    pub namespace: String,
    pub comment: Option<String>,
    /// Comments of the view's columns, by column name.
    pub column_comments: Vec<(String, String)>,
}

/// The columns of a view as DuckDB bound it: its Arrow export and each column's DuckDB type.
pub struct ViewColumns<'a> {
    pub arrow: &'a ArrowSchema,
    pub duckdb_types: &'a [String],
}

/// `<view>/metadata/<version>-<uuid>.metadata.json`, as for tables.
pub fn metadata_location(view_location: &str, version: u64) -> String {
    super::metadata::metadata_location(view_location, version)
}

/// The metadata of a new view.
pub fn new_view(
    location: &str,
    view_uuid: Uuid,
    definition: &ViewDefinition,
    columns: &ViewColumns,
) -> Result<ViewMetadata> {
    let schema = view_schema(columns, &definition.column_comments)?;
    let version = version(definition, 1, schema.schema_id())?;
    let built =
        ViewMetadataBuilder::new(location.to_string(), schema, version, ViewFormatVersion::V1, properties(definition))
            .map_err(|e| Error::internal(format!("building a view's metadata: {e}")))?
            .assign_uuid(view_uuid)
            .build()
            .map_err(|e| Error::internal(format!("building a view's metadata: {e}")))?;
    Ok(built.metadata)
}

/// The metadata of `previous` with a new current version (CREATE OR REPLACE VIEW, and every
/// change of what the view is: its history stays, as Iceberg's replace-view keeps it).
pub fn replaced(previous: &ViewMetadata, definition: &ViewDefinition, columns: &ViewColumns) -> Result<ViewMetadata> {
    let next_schema_id = previous.schemas_iter().map(|s| s.schema_id()).max().unwrap_or(-1) + 1;
    let schema = view_schema(columns, &definition.column_comments)?;
    let schema = schema
        .into_builder()
        .with_schema_id(next_schema_id)
        .build()
        .map_err(|e| Error::internal(format!("the view's new schema: {e}")))?;
    with_version(previous, definition, schema)
}

/// The metadata of `previous` with its comments changed (COMMENT ON VIEW / COLUMN): a new
/// version of the same SQL and columns, their docs and the comment property changed.
pub fn commented(previous: &ViewMetadata, definition: &ViewDefinition) -> Result<ViewMetadata> {
    let current = current_schema(previous)?;
    let next_schema_id = previous.schemas_iter().map(|s| s.schema_id()).max().unwrap_or(-1) + 1;
    let fields: Vec<_> = current
        .as_struct()
        .fields()
        .iter()
        .map(|f| {
            let doc = comment_of(&definition.column_comments, &f.name);
            let mut f = NestedField::clone(f);
            f.doc = doc;
            Arc::new(f)
        })
        .collect();
    let schema = Schema::builder()
        .with_schema_id(next_schema_id)
        .with_fields(fields)
        .build()
        .map_err(|e| Error::internal(format!("the view's new schema: {e}")))?;
    with_version(previous, definition, schema)
}

fn with_version(previous: &ViewMetadata, definition: &ViewDefinition, schema: Schema) -> Result<ViewMetadata> {
    let next_version = previous.versions().map(|v| v.version_id()).max().unwrap_or(0) + 1;
    // (-1: the schema added just before, whatever id the builder gave it; an identical schema
    // is reused)
    let version = version(definition, next_version, -1)?;
    let mut builder = ViewMetadataBuilder::new_from_metadata(previous.clone())
        .add_schema(schema)
        .add_version(version)
        .and_then(|b| b.set_current_version_id(next_version))
        .map_err(|e| Error::internal(format!("a view's new version: {e}")))?;
    let stale: Vec<String> = [COMMENT_PROPERTY, ALIASES_PROPERTY]
        .into_iter()
        .filter(|p| previous.properties().contains_key(*p))
        .map(str::to_string)
        .collect();
    builder = builder
        .remove_properties(&stale)
        .set_properties(properties(definition))
        .map_err(|e| Error::internal(format!("a view's new properties: {e}")))?;
    Ok(builder.build().map_err(|e| Error::internal(format!("a view's new version: {e}")))?.metadata)
}

/// The view's definition as its current version and properties hold it.
pub fn definition(metadata: &ViewMetadata, location: &str) -> Result<ViewDefinition> {
    let version = metadata.current_version();
    let sql = version
        .representations()
        .iter()
        .map(|ViewRepresentation::Sql(r)| r)
        .find(|r| r.dialect.eq_ignore_ascii_case(DIALECT))
        .ok_or_else(|| {
            let dialects: Vec<&str> =
                version.representations().iter().map(|ViewRepresentation::Sql(r)| r.dialect.as_str()).collect();
            Error::not_implemented(format!(
                "view metadata {location} has no SQL of dialect {DIALECT} (only {}): DuckDB cannot run it",
                dialects.join(", ")
            ))
        })?
        .sql
        .clone();
    let aliases = match metadata.properties().get(ALIASES_PROPERTY) {
        None => vec![],
        Some(text) => serde_json::from_str(text).map_err(|e| {
            Error::corrupt(format!("view metadata {location}: property {ALIASES_PROPERTY} is not a list of names: {e}"))
        })?,
    };
    let schema = current_schema(metadata)?;
    let column_comments =
        schema.as_struct().fields().iter().filter_map(|f| Some((f.name.clone(), f.doc.clone()?))).collect();
    Ok(ViewDefinition {
        sql,
        aliases,
        namespace: version.default_namespace().iter().last().cloned().unwrap_or_default(),
        comment: metadata.properties().get(COMMENT_PROPERTY).cloned(),
        column_comments,
    })
}

/// The columns the view's current version was bound to.
pub fn current_schema(metadata: &ViewMetadata) -> Result<SchemaRef> {
    // (not the crate's current_schema(), which panics on a file naming a schema it lacks)
    let id = metadata.current_version().schema_id();
    metadata.schema_by_id(id).cloned().ok_or_else(|| {
        Error::corrupt(format!(
            "view metadata of {}: its current version names schema {id}, which it lacks",
            metadata.location()
        ))
    })
}

pub fn write(location: &str, metadata: &ViewMetadata) -> Result<()> {
    write_new(location, &serde_json::to_vec(metadata)?)
}

pub fn read(location: &str) -> Result<ViewMetadata> {
    let bytes = crate::io::input::read_whole(location, "view metadata file")?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::corrupt(format!("view metadata file {location} is not valid Iceberg view metadata: {e}")))
}

fn properties(definition: &ViewDefinition) -> HashMap<String, String> {
    let mut properties = HashMap::from([("created-by".to_string(), format!("skade {}", env!("CARGO_PKG_VERSION")))]);
    if let Some(comment) = &definition.comment {
        properties.insert(COMMENT_PROPERTY.to_string(), comment.clone());
    }
    if !definition.aliases.is_empty() {
        properties.insert(
            ALIASES_PROPERTY.to_string(),
            serde_json::to_string(&definition.aliases).unwrap_or_else(|_| "[]".into()),
        );
    }
    properties
}

fn version(definition: &ViewDefinition, version_id: i32, schema_id: i32) -> Result<ViewVersion> {
    // (the crate's representation list has no public constructor: the version is built from its
    // JSON form, which is the spec's)
    let json = serde_json::json!({
        "version-id": version_id,
        "schema-id": schema_id,
        "timestamp-ms": chrono::Utc::now().timestamp_millis(),
        "summary": {"engine-name": "duckdb", "engine-version": format!("skade {}", env!("CARGO_PKG_VERSION"))},
        "representations": [{"type": "sql", "sql": definition.sql, "dialect": DIALECT}],
        "default-namespace": [definition.namespace],
    });
    serde_json::from_value(json).map_err(|e| Error::internal(format!("a view version: {e}")))
}

/// The view's columns as an Iceberg schema. A view is not stored: a column whose DuckDB type
/// Iceberg has no type for (INTERVAL, UNION, ...) is declared as a string rather than refusing a
/// view DuckDB can run (its doc stays the column's comment).
fn view_schema(columns: &ViewColumns, comments: &[(String, String)]) -> Result<Schema> {
    let mut fields = Vec::with_capacity(columns.arrow.fields().len());
    let mut next_id = 0;
    for (i, f) in columns.arrow.fields().iter().enumerate() {
        let duck = columns.duckdb_types.get(i).cloned().unwrap_or_default();
        next_id += 1;
        let id = next_id;
        let one = ArrowSchema::new(vec![f.as_ref().clone()]);
        // (a TIMESTAMP_NS column is declared as Iceberg's microsecond timestamp: nothing is stored)
        let ty = match iceberg_schema(&one, std::slice::from_ref(&duck), &[], &[], Nanoseconds::Microseconds) {
            Ok((s, _)) => renumbered(s.as_struct().fields()[0].field_type.as_ref(), &mut next_id),
            Err(_) => Type::Primitive(PrimitiveType::String),
        };
        let doc = comment_of(comments, f.name());
        // (DuckDB lets a view's query repeat a column name; an Iceberg schema's names are unique)
        let mut name = f.name().clone();
        let mut n = 0;
        while fields.iter().any(|g: &Arc<NestedField>| g.name.eq_ignore_ascii_case(&name)) {
            n += 1;
            name = format!("{}_{n}", f.name());
        }
        let mut field = NestedField::optional(id, &name, ty);
        field.doc = doc;
        fields.push(Arc::new(field));
    }
    Schema::builder()
        .with_schema_id(0)
        .with_fields(fields)
        .build()
        .map_err(|e| Error::invalid(format!("the view's columns cannot be an Iceberg schema: {e}")))
}

/// `ty` with its nested field ids renumbered from `next_id` (each column's type is converted
/// alone, so their ids start over).
fn renumbered(ty: &Type, next_id: &mut i32) -> Type {
    match ty {
        Type::Primitive(_) => ty.clone(),
        Type::Struct(s) => Type::Struct(iceberg::spec::StructType::new(
            s.fields()
                .iter()
                .map(|f| {
                    *next_id += 1;
                    let id = *next_id;
                    let inner = renumbered(&f.field_type, next_id);
                    let mut g = NestedField::new(id, &f.name, inner, f.required);
                    g.doc = f.doc.clone();
                    Arc::new(g)
                })
                .collect(),
        )),
        Type::List(l) => {
            *next_id += 1;
            let id = *next_id;
            let inner = renumbered(&l.element_field.field_type, next_id);
            Type::List(iceberg::spec::ListType::new(Arc::new(NestedField::list_element(
                id,
                inner,
                l.element_field.required,
            ))))
        }
        Type::Map(m) => {
            *next_id += 1;
            let key_id = *next_id;
            *next_id += 1;
            let value_id = *next_id;
            let key = renumbered(&m.key_field.field_type, next_id);
            let value = renumbered(&m.value_field.field_type, next_id);
            Type::Map(iceberg::spec::MapType::new(
                Arc::new(NestedField::map_key_element(key_id, key)),
                Arc::new(NestedField::map_value_element(value_id, value, m.value_field.required)),
            ))
        }
    }
}

fn comment_of(comments: &[(String, String)], column: &str) -> Option<String> {
    comments.iter().find(|(c, _)| c.eq_ignore_ascii_case(column)).map(|(_, text)| text.clone())
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Field};

    use super::*;

    fn columns() -> ArrowSchema {
        ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("tags", DataType::List(Arc::new(Field::new("l", DataType::Utf8, true))), true),
            Field::new("span", DataType::Interval(arrow::datatypes::IntervalUnit::MonthDayNano), true),
        ])
    }

    #[test]
    fn a_view_round_trips_through_its_metadata_and_keeps_its_history() {
        let arrow = columns();
        let types = ["BIGINT".to_string(), "VARCHAR[]".into(), "INTERVAL".into()];
        let cols = ViewColumns { arrow: &arrow, duckdb_types: &types };
        let def = ViewDefinition {
            sql: "SELECT id, tags, span FROM t".into(),
            aliases: vec!["a".into()],
            namespace: "main".into(),
            comment: Some("the view".into()),
            column_comments: vec![],
        };
        let md = new_view("/w/main/v", Uuid::new_v4(), &def, &cols).unwrap();
        let json = serde_json::to_string(&md).unwrap();
        assert!(json.contains("\"dialect\":\"duckdb\""), "{json}");
        let back: ViewMetadata = serde_json::from_str(&json).unwrap();
        assert_eq!(definition(&back, "x").unwrap(), def);
        let schema = current_schema(&back).unwrap();
        let ids: Vec<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
        assert_eq!(ids, vec![1, 2, 4], "nested ids follow their column's");
        // an INTERVAL has no Iceberg type: a string
        let span = &schema.as_struct().fields()[2];
        assert_eq!(*span.field_type, Type::Primitive(PrimitiveType::String));
        assert_eq!(span.doc, None);

        let def2 = ViewDefinition { sql: "SELECT id FROM t".into(), aliases: vec![], comment: None, ..def.clone() };
        let arrow2 = ArrowSchema::new(vec![Field::new("id", DataType::Int64, true)]);
        let cols2 = ViewColumns { arrow: &arrow2, duckdb_types: &types[..1] };
        let md2 = replaced(&back, &def2, &cols2).unwrap();
        assert_eq!(md2.uuid(), md.uuid());
        assert_eq!(md2.versions().len(), 2);
        assert_eq!(definition(&md2, "x").unwrap(), def2, "aliases and comment of the old version gone");

        let def3 = ViewDefinition { column_comments: vec![("id".into(), "the key".into())], ..def2.clone() };
        let md3 = commented(&md2, &def3).unwrap();
        assert_eq!(definition(&md3, "x").unwrap(), def3);
        assert_eq!(md3.versions().len(), 3);
    }
}
