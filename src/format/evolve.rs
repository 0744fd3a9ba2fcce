//! Schema evolution (ALTER TABLE, issue 24): a table's next metadata with a new current schema.
//! Columns keep their Iceberg field ids, so files written before read correctly after every
//! change: an added column is NULL in them, a dropped one is ignored, a renamed one found by its
//! id, a promoted one widened as it is read. A column dropped and added again under its name is a
//! new column (a new id), NULL in the files before. Only what Iceberg allows: its type promotions
//! (int -> long, float -> double, a decimal's precision widened), making a required column
//! optional (not the reverse), no default values (v2 has none). Fields inside STRUCT columns
//! are added, dropped, renamed and promoted the same way (`evolve_nested`, `evolve_types`).
//! COMMENT ON is a change too: a column's comment is its field's `doc` (a new schema, the ids
//! kept), a table's the table property `comment` (the names Iceberg's Java API and Spark use).

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::Field;
use iceberg::spec::{FormatVersion, Literal, NestedField, NestedFieldRef, Schema, TableMetadata, TableMetadataBuilder};

use super::defaults::{literal_of, retyped};
use super::duckdb_types::{self, DuckdbTypes, Nanoseconds};
use super::evolve_nested::Columns;
use super::evolve_types::{changed_field, duckdb_type_name};
use super::field_path::{self, edit_inside, field_at, walk, Walk};
use super::partition;
use super::schema::column_type;
use crate::error::{Error, Result};

/// One ALTER TABLE of a table's columns. A `path` names a column (one name) or a field inside
/// one (the column, then each field down: see `field_path`).
#[derive(Debug, Clone)]
pub enum SchemaChange {
    /// ADD COLUMN: `field` as DuckDB exports the new column's type (its name the column's),
    /// `duckdb_type` its name; `parent` the STRUCT it goes into (empty: the table); `default` its
    /// DEFAULT, one value of `field`'s type (v3 tables: the rows it holds read it).
    AddColumn {
        parent: Vec<String>,
        field: Field,
        duckdb_type: String,
        if_not_exists: bool,
        default: Option<ArrayRef>,
    },
    /// ALTER COLUMN SET DEFAULT (one value, as DuckDB exports the column's type) or DROP DEFAULT
    /// (None): the column's write default only (v3 tables; the rows it holds keep reading what
    /// they read).
    SetDefault {
        name: String,
        default: Option<ArrayRef>,
    },
    DropColumn {
        path: Vec<String>,
        if_exists: bool,
    },
    RenameColumn {
        path: Vec<String>,
        to: String,
    },
    /// ALTER COLUMN ... TYPE: `field` the new type as DuckDB exports it.
    ChangeType {
        path: Vec<String>,
        field: Field,
        duckdb_type: String,
    },
    DropNotNull {
        name: String,
    },
    SetNotNull {
        name: String,
    },
    /// ADD PRIMARY KEY: the columns become required and the table's identifier fields (the
    /// caller checks the rows first: no key NULL, none repeated).
    AddPrimaryKey {
        columns: Vec<String>,
    },
    /// SET PARTITIONED BY (RESET: no keys): a new default partition spec.
    SetPartitioning {
        keys: Vec<super::partition::PartitionKey>,
    },
    /// SET SORTED BY (RESET: no keys): a new default sort order.
    SetSortOrder {
        keys: Vec<super::sort_order::SortKey>,
    },
    /// COMMENT ON TABLE (None: IS NULL, the comment removed).
    SetComment {
        comment: Option<String>,
    },
    /// COMMENT ON COLUMN (None: removed).
    SetColumnComment {
        path: Vec<String>,
        comment: Option<String>,
    },
}

/// The table property holding a table's comment.
pub const COMMENT_PROPERTY: &str = "comment";

/// The commit log's operations of ALTER TABLE: every [`SchemaChange::operation`], and RENAME TO's
/// (lineage reports each as an ALTER event).
pub const ALTER_OPERATIONS: &[&str] = &[
    "add_column",
    "drop_column",
    "rename_column",
    "alter_column_type",
    "drop_not_null",
    "set_not_null",
    "add_primary_key",
    "set_partitioned_by",
    "reset_partitioned_by",
    "set_sorted_by",
    "reset_sorted_by",
    "set_comment",
    "set_column_comment",
    "set_default",
    "rename_table",
    "upgrade_format_version",
];

impl SchemaChange {
    /// The commit log's operation for it (one of [`ALTER_OPERATIONS`]).
    pub fn operation(&self) -> &'static str {
        match self {
            SchemaChange::AddColumn { .. } => "add_column",
            SchemaChange::DropColumn { .. } => "drop_column",
            SchemaChange::RenameColumn { .. } => "rename_column",
            SchemaChange::ChangeType { .. } => "alter_column_type",
            SchemaChange::DropNotNull { .. } => "drop_not_null",
            SchemaChange::SetNotNull { .. } => "set_not_null",
            SchemaChange::AddPrimaryKey { .. } => "add_primary_key",
            SchemaChange::SetPartitioning { keys } if keys.is_empty() => "reset_partitioned_by",
            SchemaChange::SetPartitioning { .. } => "set_partitioned_by",
            SchemaChange::SetSortOrder { keys } if keys.is_empty() => "reset_sorted_by",
            SchemaChange::SetSortOrder { .. } => "set_sorted_by",
            SchemaChange::SetComment { .. } => "set_comment",
            SchemaChange::SetColumnComment { .. } => "set_column_comment",
            SchemaChange::SetDefault { .. } => "set_default",
        }
    }
}

/// The metadata after `change` on `metadata` (read from `location`), or None when it changes
/// nothing (IF [NOT] EXISTS, a constraint already so). `table` names the table in messages.
pub fn evolve(
    metadata: &TableMetadata,
    location: &str,
    change: &SchemaChange,
    nanoseconds: Nanoseconds,
    table: &str,
) -> Result<Option<TableMetadata>> {
    if let SchemaChange::SetPartitioning { keys } = change {
        return super::partition::set_spec(metadata, location, keys, table);
    }
    if let SchemaChange::SetSortOrder { keys } = change {
        return super::sort_order::set_order(metadata, location, keys, table);
    }
    if let SchemaChange::SetComment { comment } = change {
        return set_comment(metadata, location, comment.as_deref());
    }
    let inside_a_column = match change {
        SchemaChange::AddColumn { parent, .. } => !parent.is_empty(),
        SchemaChange::DropColumn { path, .. } | SchemaChange::RenameColumn { path, .. } => path.len() > 1,
        _ => false,
    };
    if inside_a_column && metadata.properties().contains_key(super::name_mapping::PROPERTY) {
        // Files adopted by skade_add_files carry no field ids: skade maps their columns by name,
        // but the fields inside a column by position, which adding, dropping or renaming one
        // would shift onto other fields.
        return Err(Error::not_implemented(format!(
            "cannot add, drop or rename a field inside a column of table {table}: it holds files adopted by \
             skade_add_files, whose nested fields skade reads by position (a table that ever adopted files keeps its \
             nested fields as they are)"
        )));
    }
    let schema = metadata.current_schema();
    let mut fields: Vec<NestedFieldRef> = schema.as_struct().fields().to_vec();
    let mut keys: Vec<i32> = schema.identifier_field_ids().collect();
    let mut kept = DuckdbTypes::of(metadata.properties())?;
    let find = |fields: &[NestedFieldRef], name: &str| fields.iter().position(|f| f.name.eq_ignore_ascii_case(name));
    let missing = |name: &str| Error::catalog(format!("Table {table} does not have a column with name \"{name}\""));
    let nested = |fields: Vec<NestedFieldRef>, kept: DuckdbTypes| Columns { fields, kept, metadata, table };
    match change {
        SchemaChange::AddColumn { parent, default: Some(_), .. } if !parent.is_empty() => {
            return Err(Error::not_implemented(format!(
                "ADD COLUMN {}.{} with a DEFAULT: skade keeps defaults of top-level columns only",
                parent.join("."),
                field_name(change)
            )));
        }
        SchemaChange::AddColumn { parent, field, duckdb_type, if_not_exists, .. } if !parent.is_empty() => {
            let mut columns = nested(fields, kept);
            if !columns.add_field(parent, field, duckdb_type, *if_not_exists, nanoseconds)? {
                return Ok(None);
            }
            (fields, kept) = (columns.fields, columns.kept);
        }
        SchemaChange::AddColumn { field, duckdb_type, if_not_exists, default, .. } => {
            if find(&fields, field.name()).is_some() {
                if *if_not_exists {
                    return Ok(None);
                }
                return Err(Error::catalog(format!(
                    "Column with name {} already exists in table {table}",
                    field.name()
                )));
            }
            let mut next_id = metadata.last_column_id();
            let (ty, kept_as) = column_type(field, &mut next_id, nanoseconds, &mut kept).map_err(|why| {
                Error::invalid(format!(
                    "column \"{}\" has type {duckdb_type}, which a skade (Iceberg) table cannot store: {why}",
                    field.name()
                ))
            })?;
            next_id += 1;
            let mut added = NestedField::optional(next_id, field.name(), ty);
            if let Some(value) = default {
                needs_v3(metadata, table)?;
                if let Some(literal) = literal_of(value, &added.field_type, field.name())? {
                    added = added.with_initial_default(literal.clone()).with_write_default(literal);
                }
            }
            fields.push(Arc::new(added));
            if let Some(name) = kept_as {
                kept.0.insert(next_id, name.to_string());
            }
        }
        SchemaChange::DropColumn { path, if_exists } if path.len() > 1 => {
            let mut columns = nested(fields, kept);
            if !columns.drop_field(path, *if_exists)? {
                return Ok(None);
            }
            (fields, kept) = (columns.fields, columns.kept);
        }
        SchemaChange::DropColumn { path, if_exists } => {
            let name = column_of(path)?;
            let Some(i) = find(&fields, name) else {
                return if *if_exists { Ok(None) } else { Err(missing(name)) };
            };
            if keys.contains(&fields[i].id) {
                return Err(Error::invalid(format!(
                    "cannot drop column \"{}\" of table {table}: it is part of the PRIMARY KEY",
                    fields[i].name
                )));
            }
            if partition::is_partition_source(metadata, fields[i].id) {
                return Err(Error::invalid(format!(
                    "cannot drop column \"{}\" of table {table}: the table's files are partitioned by it \
                     (Iceberg readers need it to read their partition values)",
                    fields[i].name
                )));
            }
            if super::sort_order::is_sort_source(metadata, fields[i].id) {
                return Err(Error::invalid(format!(
                    "cannot drop column \"{}\" of table {table}: the table is sorted by it (SET SORTED BY \
                     without it, or RESET SORTED BY, first)",
                    fields[i].name
                )));
            }
            if fields.len() == 1 {
                return Err(Error::invalid(format!(
                    "cannot drop column \"{}\": it is the only column of table {table}",
                    fields[i].name
                )));
            }
            for id in field_path::ids(&fields[i]) {
                kept.0.remove(&id); // (the column's own and its fields')
            }
            fields.remove(i);
        }
        SchemaChange::RenameColumn { path, to } if path.len() > 1 => {
            let mut columns = nested(fields, kept);
            columns.rename_field(path, to)?;
            (fields, kept) = (columns.fields, columns.kept);
        }
        SchemaChange::RenameColumn { path, to } => {
            let from = column_of(path)?;
            let i = find(&fields, from).ok_or_else(|| missing(from))?;
            if find(&fields, to).is_some_and(|j| j != i) {
                return Err(Error::catalog(format!("Column with name {to} already exists in table {table}")));
            }
            let f = &fields[i];
            fields[i] = Arc::new(NestedField::new(f.id, to, (*f.field_type).clone(), f.required).with_doc_of(f));
        }
        SchemaChange::ChangeType { path, field, duckdb_type } => {
            let steps = match walk(&fields, path) {
                Walk::Found(steps) => steps,
                Walk::NoColumn => return Err(missing(column_of(path)?)),
                // (the field asked for, and the one it is not inside)
                Walk::NotNested { depth } => return Err(no_sub_field(&path[depth + 1], &path[depth])),
                Walk::NoField { depth } => return Err(no_sub_field(&path[depth], &path[depth - 1])),
            };
            let f = field_at(&fields, &steps);
            let shown = path.join(".");
            let before = duckdb_type_name(&f, &kept);
            let refuse = |why: &str| {
                Error::invalid(format!(
                    "cannot change column \"{shown}\" of table {table} from {before} to {duckdb_type}: {why}"
                ))
            };
            if keys.contains(&f.id) {
                return Err(refuse("it is part of the PRIMARY KEY, whose type stays as created"));
            }
            if field_path::ids(&f).iter().any(|id| partition::is_partition_source(metadata, *id)) {
                return Err(refuse("the table's files are partitioned by it, their partition values in its type"));
            }
            nested(fields.clone(), kept.clone()).refuse_in_map_key(&steps, path)?;
            let mut next_id = metadata.last_column_id();
            let mut next_kept = kept.clone();
            let changed =
                changed_field(&f, field, &mut next_kept, &mut next_id, nanoseconds).map_err(|why| refuse(&why))?;
            // (a default in the column's new type: the metadata's JSON must read as that type)
            let retype = |d: &Option<Literal>| {
                let retype_one = |l: &Literal| retyped(l, &f.field_type, &changed.field_type);
                let why = "its DEFAULT has no value of the new type";
                d.as_ref().map(|l| retype_one(l).ok_or_else(|| refuse(why))).transpose()
            };
            let (initial_default, write_default) = (retype(&f.initial_default)?, retype(&f.write_default)?);
            let changed = Arc::new(NestedField { initial_default, write_default, ..(*changed).clone() });
            if changed == f && next_kept == kept {
                return Ok(None); // the type it has
            }
            let (at, above) = steps.split_last().unwrap_or((&0, &[]));
            fields = edit_inside::<Error>(&fields, above, |mut inside| {
                inside[*at] = changed;
                Ok(inside)
            })?;
            kept = next_kept;
        }
        SchemaChange::DropNotNull { name } => {
            let i = find(&fields, name).ok_or_else(|| missing(name))?;
            let f = fields[i].clone();
            if keys.contains(&f.id) {
                return Err(Error::invalid(format!(
                    "cannot drop NOT NULL of column \"{}\" of table {table}: it is part of the PRIMARY KEY",
                    f.name
                )));
            }
            if !f.required {
                return Ok(None);
            }
            fields[i] = Arc::new(NestedField::new(f.id, &f.name, (*f.field_type).clone(), false).with_doc_of(&f));
        }
        SchemaChange::SetNotNull { name } => {
            let i = find(&fields, name).ok_or_else(|| missing(name))?;
            if fields[i].required {
                return Ok(None);
            }
            return Err(Error::invalid(format!(
                "cannot SET NOT NULL on column \"{}\" of table {table}: Iceberg cannot make an optional \
                 column required (files written before may hold NULLs, and readers trust the schema)",
                fields[i].name
            )));
        }
        SchemaChange::AddPrimaryKey { columns } => {
            if !keys.is_empty() {
                let declared = super::schema::declared_key_ids(schema, metadata.properties());
                let names: Vec<&str> = declared
                    .iter()
                    .filter_map(|id| fields.iter().find(|f| f.id == *id))
                    .map(|f| f.name.as_str())
                    .collect();
                return Err(Error::catalog(format!("table {table} already has a PRIMARY KEY ({})", names.join(", "))));
            }
            for name in columns {
                let i = find(&fields, name).ok_or_else(|| missing(name))?;
                let f = fields[i].clone();
                if keys.contains(&f.id) {
                    return Err(Error::invalid(format!("column \"{}\" appears twice in the PRIMARY KEY", f.name)));
                }
                super::schema::check_key_column(&f)?;
                keys.push(f.id);
                // (identifier fields are required; the caller found no NULL in the live rows)
                fields[i] = Arc::new(NestedField::new(f.id, &f.name, (*f.field_type).clone(), true).with_doc_of(&f));
            }
        }
        SchemaChange::SetDefault { name, default, .. } => {
            let i = find(&fields, name).ok_or_else(|| missing(name))?;
            let f = fields[i].clone();
            let write_default = match default {
                Some(value) => literal_of(value, &f.field_type, &f.name)?,
                None => None,
            };
            if f.write_default == write_default {
                return Ok(None); // (DROP DEFAULT of a column without one, on v2 too)
            }
            needs_v3(metadata, table)?;
            // (the initial default stays: the rows written before the column read what they read)
            fields[i] = Arc::new(NestedField { write_default, ..(*f).clone() });
        }
        SchemaChange::SetColumnComment { path, comment } => {
            let steps = match walk(&fields, path) {
                Walk::Found(steps) => steps,
                Walk::NoColumn => return Err(missing(column_of(path)?)),
                Walk::NotNested { depth } => return Err(no_sub_field(&path[depth + 1], &path[depth])),
                Walk::NoField { depth } => return Err(no_sub_field(&path[depth], &path[depth - 1])),
            };
            let f = field_at(&fields, &steps);
            if f.doc == *comment {
                return Ok(None);
            }
            let (at, above) = steps.split_last().unwrap_or((&0, &[]));
            fields = edit_inside::<Error>(&fields, above, |mut inside| {
                inside[*at] = Arc::new(NestedField { doc: comment.clone(), ..(*f).clone() });
                Ok(inside)
            })?;
        }
        SchemaChange::SetPartitioning { .. } => return Err(Error::internal("a partitioning is no change of columns")),
        SchemaChange::SetSortOrder { .. } => return Err(Error::internal("a sort order is no change of columns")),
        SchemaChange::SetComment { .. } => return Err(Error::internal("a table's comment is no change of columns")),
    }
    // the key's declared order (identifier fields are a set): see `schema::KEY_ORDER_PROPERTY`
    let key_order = match change {
        SchemaChange::AddPrimaryKey { .. } => super::schema::key_order_property(&keys),
        _ => None,
    };
    let next = Schema::builder().with_fields(fields).with_identifier_field_ids(keys).build()?;
    let mut builder = TableMetadataBuilder::new_from_metadata(metadata.clone(), Some(location.to_string()))
        .add_current_schema(next)?;
    builder = if kept.is_empty() {
        builder.remove_properties(&[duckdb_types::PROPERTY.to_string()])?
    } else {
        builder.set_properties([(duckdb_types::PROPERTY.to_string(), kept.property())].into())?
    };
    if let Some(order) = key_order {
        builder = builder.set_properties([(super::schema::KEY_ORDER_PROPERTY.to_string(), order)].into())?;
    }
    Ok(Some(builder.build()?.metadata))
}

/// The metadata with the table's comment `comment` (None: removed), or None when it has it.
fn set_comment(metadata: &TableMetadata, location: &str, comment: Option<&str>) -> Result<Option<TableMetadata>> {
    if metadata.properties().get(COMMENT_PROPERTY).map(String::as_str) == comment {
        return Ok(None);
    }
    let builder = TableMetadataBuilder::new_from_metadata(metadata.clone(), Some(location.to_string()));
    let builder = match comment {
        Some(text) => builder.set_properties([(COMMENT_PROPERTY.to_string(), text.to_string())].into())?,
        None => builder.remove_properties(&[COMMENT_PROPERTY.to_string()])?,
    };
    Ok(Some(builder.build()?.metadata))
}

trait WithDoc {
    /// The field with `other`'s doc and defaults (a field rebuilt with a new name or nullability).
    fn with_doc_of(self, other: &NestedField) -> NestedField;
}

impl WithDoc for NestedField {
    fn with_doc_of(mut self, other: &NestedField) -> NestedField {
        self.doc = other.doc.clone();
        self.initial_default = other.initial_default.clone();
        self.write_default = other.write_default.clone();
        self
    }
}

/// Refuses a column default on a table before Iceberg v3, naming the way out.
fn needs_v3(metadata: &TableMetadata, table: &str) -> Result<()> {
    if metadata.format_version() >= FormatVersion::V3 {
        return Ok(());
    }
    Err(Error::not_implemented(format!(
        "table {table} is an Iceberg v2 table, which keeps no column defaults (upgrade it with CALL \
         skade_upgrade_table('{table}', 3), or ATTACH the lake with FORMAT_VERSION 3 for new tables)"
    )))
}

/// The name of the column an ADD COLUMN adds.
fn field_name(change: &SchemaChange) -> &str {
    match change {
        SchemaChange::AddColumn { field, .. } => field.name(),
        _ => "",
    }
}

fn no_sub_field(name: &str, column: &str) -> Error {
    Error::catalog(format!("Sub-field \"{name}\" does not exist in column \"{column}\""))
}

/// The column a top-level change names.
fn column_of(path: &[String]) -> Result<&str> {
    path.first().map(String::as_str).ok_or_else(|| Error::internal("an ALTER of no column"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_change_is_an_alter_operation() {
        let field = Field::new("c", arrow::datatypes::DataType::Int32, true);
        let changes = [
            SchemaChange::AddColumn {
                parent: vec![],
                field: field.clone(),
                duckdb_type: "INTEGER".into(),
                if_not_exists: false,
                default: None,
            },
            SchemaChange::SetDefault { name: "c".into(), default: None },
            SchemaChange::DropColumn { path: vec!["c".into()], if_exists: false },
            SchemaChange::RenameColumn { path: vec!["c".into()], to: "d".into() },
            SchemaChange::ChangeType { path: vec!["c".into()], field, duckdb_type: "BIGINT".into() },
            SchemaChange::DropNotNull { name: "c".into() },
            SchemaChange::SetNotNull { name: "c".into() },
            SchemaChange::AddPrimaryKey { columns: vec!["c".into()] },
            SchemaChange::SetPartitioning { keys: vec![] },
            SchemaChange::SetPartitioning {
                keys: vec![super::super::partition::PartitionKey {
                    column: "c".into(),
                    transform: iceberg::spec::Transform::Identity,
                }],
            },
            SchemaChange::SetSortOrder { keys: vec![] },
            SchemaChange::SetComment { comment: None },
            SchemaChange::SetColumnComment { path: vec!["c".into()], comment: Some("x".into()) },
            SchemaChange::SetSortOrder {
                keys: vec![super::super::sort_order::SortKey {
                    column: "c".into(),
                    transform: iceberg::spec::Transform::Identity,
                    direction: iceberg::spec::SortDirection::Descending,
                    null_order: iceberg::spec::NullOrder::First,
                }],
            },
        ];
        for change in &changes {
            assert!(ALTER_OPERATIONS.contains(&change.operation()), "{}", change.operation());
        }
    }

    use super::*;

    #[test]
    fn add_primary_key_keeps_the_declared_order() {
        use super::super::schema::declared_key_ids;
        let md = super::super::metadata::tests::keyed_table(&[]);
        let change = SchemaChange::AddPrimaryKey { columns: vec!["c".into(), "A".into()] };
        let next =
            evolve(&md, "/t/metadata/00000-x.metadata.json", &change, Nanoseconds::Refuse, "main.t").unwrap().unwrap();
        assert_eq!(declared_key_ids(next.current_schema(), next.properties()), vec![3, 1]);
        // a second key is refused, naming the first in its order
        let again = SchemaChange::AddPrimaryKey { columns: vec!["b".into()] };
        let err = evolve(&next, "/t/metadata/00001-x.metadata.json", &again, Nanoseconds::Refuse, "main.t")
            .unwrap_err()
            .to_string();
        assert!(err.contains("already has a PRIMARY KEY (c, a)"), "{err}");
        // later changes keep it
        let rename = SchemaChange::RenameColumn { path: vec!["b".into()], to: "bb".into() };
        let renamed = evolve(&next, "/t/metadata/00001-x.metadata.json", &rename, Nanoseconds::Refuse, "main.t")
            .unwrap()
            .unwrap();
        assert_eq!(declared_key_ids(renamed.current_schema(), renamed.properties()), vec![3, 1]);
    }

    #[test]
    fn comments_are_the_comment_property_and_field_docs() {
        let md = super::super::metadata::tests::keyed_table(&[]);
        let at = |n: usize| format!("/t/metadata/0000{n}-x.metadata.json");
        let apply = |md: &TableMetadata, n: usize, change: SchemaChange| {
            evolve(md, &at(n), &change, Nanoseconds::Refuse, "main.t").unwrap()
        };
        let table = SchemaChange::SetComment { comment: Some("orders".into()) };
        let commented = apply(&md, 0, table.clone()).unwrap();
        assert_eq!(commented.properties().get(COMMENT_PROPERTY).map(String::as_str), Some("orders"));
        assert_eq!(commented.current_schema_id(), md.current_schema_id());
        assert!(apply(&commented, 1, table).is_none(), "the comment it has");

        let column =
            |c: Option<&str>| SchemaChange::SetColumnComment { path: vec!["B".into()], comment: c.map(Into::into) };
        let documented = apply(&commented, 1, column(Some(""))).unwrap();
        let b = documented.current_schema().field_by_name("b").unwrap().clone();
        assert_eq!((b.id, b.doc.as_deref()), (2, Some("")), "the id kept, an empty comment kept as one");
        assert_ne!(documented.current_schema_id(), md.current_schema_id());
        assert_eq!(documented.properties().get(COMMENT_PROPERTY).map(String::as_str), Some("orders"));
        assert!(apply(&documented, 2, column(Some(""))).is_none());
        // a rename keeps it; IS NULL removes it
        let rename = SchemaChange::RenameColumn { path: vec!["b".into()], to: "bb".into() };
        let renamed = apply(&documented, 2, rename).unwrap();
        assert_eq!(renamed.current_schema().field_by_id(2).unwrap().doc.as_deref(), Some(""));
        let removed = SchemaChange::SetColumnComment { path: vec!["bb".into()], comment: None };
        let removed = apply(&renamed, 3, removed).unwrap();
        assert_eq!(removed.current_schema().field_by_id(2).unwrap().doc, None);
        let gone = apply(&removed, 4, SchemaChange::SetComment { comment: None }).unwrap();
        assert!(!gone.properties().contains_key(COMMENT_PROPERTY));

        let nowhere = SchemaChange::SetColumnComment { path: vec!["zz".into()], comment: None };
        let err = evolve(&md, &at(1), &nowhere, Nanoseconds::Refuse, "main.t").unwrap_err();
        assert!(err.to_string().contains("does not have a column with name \"zz\""), "{err}");
    }
}
