//! Schema evolution (ALTER TABLE, issue 24): a table's next metadata with a new current schema.
//! Columns keep their Iceberg field ids, so files written before read correctly after every
//! change: an added column is NULL in them, a dropped one is ignored, a renamed one found by its
//! id, a promoted one widened as it is read. A column dropped and added again under its name is a
//! new column (a new id), NULL in the files before. Only what Iceberg allows: its type promotions
//! (int -> long, float -> double, a decimal's precision widened), making a required column
//! optional (not the reverse), no default values (v2 has none).

use std::sync::Arc;

use arrow::datatypes::Field;
use iceberg::spec::{NestedField, NestedFieldRef, PrimitiveType, Schema, TableMetadata, TableMetadataBuilder, Type};

use super::duckdb_types::{self, DuckdbTypes, Nanoseconds};
use super::partition;
use super::schema::column_type;
use crate::error::{Error, Result};

/// One ALTER TABLE of a table's columns.
#[derive(Debug, Clone)]
pub enum SchemaChange {
    /// ADD COLUMN: `field` as DuckDB exports the column's type, `duckdb_type` its name.
    AddColumn {
        field: Field,
        duckdb_type: String,
        if_not_exists: bool,
    },
    DropColumn {
        name: String,
        if_exists: bool,
    },
    RenameColumn {
        from: String,
        to: String,
    },
    /// ALTER COLUMN ... TYPE: `field` the new type as DuckDB exports it.
    ChangeType {
        name: String,
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
}

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
    "rename_table",
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
    let schema = metadata.current_schema();
    let mut fields: Vec<NestedFieldRef> = schema.as_struct().fields().to_vec();
    let mut keys: Vec<i32> = schema.identifier_field_ids().collect();
    let mut kept = DuckdbTypes::of(metadata.properties())?;
    let find = |fields: &[NestedFieldRef], name: &str| fields.iter().position(|f| f.name.eq_ignore_ascii_case(name));
    let missing = |name: &str| Error::catalog(format!("Table {table} does not have a column with name \"{name}\""));
    match change {
        SchemaChange::AddColumn { field, duckdb_type, if_not_exists } => {
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
            let (ty, kept_as) = column_type(field, &mut next_id, nanoseconds).map_err(|why| {
                Error::invalid(format!(
                    "column \"{}\" has type {duckdb_type}, which a skade (Iceberg) table cannot store: {why}",
                    field.name()
                ))
            })?;
            next_id += 1;
            fields.push(Arc::new(NestedField::optional(next_id, field.name(), ty)));
            if let Some(name) = kept_as {
                kept.0.insert(next_id, name.to_string());
            }
        }
        SchemaChange::DropColumn { name, if_exists } => {
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
            kept.0.remove(&fields[i].id);
            fields.remove(i);
        }
        SchemaChange::RenameColumn { from, to } => {
            let i = find(&fields, from).ok_or_else(|| missing(from))?;
            if find(&fields, to).is_some_and(|j| j != i) {
                return Err(Error::catalog(format!("Column with name {to} already exists in table {table}")));
            }
            let f = &fields[i];
            fields[i] = Arc::new(NestedField::new(f.id, to, (*f.field_type).clone(), f.required).with_doc_of(f));
        }
        SchemaChange::ChangeType { name, field, duckdb_type } => {
            let i = find(&fields, name).ok_or_else(|| missing(name))?;
            let f = fields[i].clone();
            let before = kept.0.get(&f.id).cloned().unwrap_or_else(|| natural_duckdb_type(&f.field_type));
            let refuse = |why: &str| {
                Error::invalid(format!(
                    "cannot change column \"{}\" of table {table} from {before} to {duckdb_type}: {why}",
                    f.name
                ))
            };
            if keys.contains(&f.id) {
                return Err(refuse("it is part of the PRIMARY KEY, whose type stays as created"));
            }
            if partition::is_partition_source(metadata, f.id) {
                return Err(refuse("the table's files are partitioned by it, their partition values in its type"));
            }
            let mut next_id = metadata.last_column_id();
            let (ty, kept_as) = column_type(field, &mut next_id, nanoseconds).map_err(|why| refuse(&why))?;
            if *f.field_type == ty && kept.0.get(&f.id).map(String::as_str) == kept_as {
                return Ok(None); // the type it has
            }
            if !iceberg_promotes(&f.field_type, &ty) {
                return Err(refuse(&format!(
                    "Iceberg changes a column's type only to a wider one of its kind (int to bigint, float to \
                     double, a decimal's precision widened), and {} to {ty} is not one",
                    f.field_type
                )));
            }
            if !duckdb_widens(&before, duckdb_type) {
                return Err(refuse("not every value of the old type fits the new one"));
            }
            fields[i] = Arc::new(NestedField::new(f.id, &f.name, ty, f.required).with_doc_of(&f));
            match kept_as {
                Some(k) => kept.0.insert(f.id, k.to_string()),
                None => kept.0.remove(&f.id),
            };
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
        SchemaChange::SetPartitioning { .. } => return Err(Error::internal("a partitioning is no change of columns")),
        SchemaChange::SetSortOrder { .. } => return Err(Error::internal("a sort order is no change of columns")),
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

trait WithDoc {
    fn with_doc_of(self, other: &NestedField) -> NestedField;
}

impl WithDoc for NestedField {
    fn with_doc_of(mut self, other: &NestedField) -> NestedField {
        self.doc = other.doc.clone();
        self
    }
}

/// Iceberg's allowed type changes of a column (the type itself, or a promotion).
fn iceberg_promotes(from: &Type, to: &Type) -> bool {
    use PrimitiveType::*;
    match (from, to) {
        (Type::Primitive(a), Type::Primitive(b)) if a == b => true,
        (Type::Primitive(Int), Type::Primitive(Long)) | (Type::Primitive(Float), Type::Primitive(Double)) => true,
        (Type::Primitive(Decimal { precision: p, scale: s }), Type::Primitive(Decimal { precision: q, scale: t })) => {
            s == t && q >= p
        }
        _ => false,
    }
}

/// The DuckDB type a column of Iceberg type `ty` reads as when no other is kept.
fn natural_duckdb_type(ty: &Type) -> String {
    match ty {
        Type::Primitive(PrimitiveType::Int) => "INTEGER".into(),
        Type::Primitive(PrimitiveType::Long) => "BIGINT".into(),
        Type::Primitive(PrimitiveType::Float) => "FLOAT".into(),
        Type::Primitive(PrimitiveType::Double) => "DOUBLE".into(),
        Type::Primitive(PrimitiveType::Decimal { precision, scale }) => format!("DECIMAL({precision},{scale})"),
        Type::Primitive(PrimitiveType::String) => "VARCHAR".into(),
        Type::Primitive(PrimitiveType::Binary) => "BLOB".into(),
        Type::Primitive(PrimitiveType::Timestamptz) => "TIMESTAMP WITH TIME ZONE".into(),
        other => other.to_string().to_uppercase(),
    }
}

/// Whether every value of DuckDB type `from` is one of `to` (the integer types by their ranges,
/// decimals by precision at one scale; the rest only to themselves or FLOAT to DOUBLE).
fn duckdb_widens(from: &str, to: &str) -> bool {
    let (from, to) = (from.to_ascii_uppercase(), to.to_ascii_uppercase());
    match (integer_range(&from), integer_range(&to)) {
        (Some((a, b)), Some((c, d))) => return c <= a && b <= d,
        (Some(_), None) | (None, Some(_)) => return false,
        _ => {}
    }
    match (decimal_of(&from), decimal_of(&to)) {
        (Some((p, s)), Some((q, t))) => s == t && q >= p,
        _ => from == to || (from == "FLOAT" && to == "DOUBLE"),
    }
}

/// The values of an integer type, DECIMAL(p,0) included.
fn integer_range(ty: &str) -> Option<(i128, i128)> {
    Some(match ty {
        "TINYINT" => (i8::MIN as i128, i8::MAX as i128),
        "SMALLINT" => (i16::MIN as i128, i16::MAX as i128),
        "INTEGER" => (i32::MIN as i128, i32::MAX as i128),
        "BIGINT" => (i64::MIN as i128, i64::MAX as i128),
        "HUGEINT" => (i128::MIN, i128::MAX),
        "UTINYINT" => (0, u8::MAX as i128),
        "USMALLINT" => (0, u16::MAX as i128),
        "UINTEGER" => (0, u32::MAX as i128),
        "UBIGINT" => (0, u64::MAX as i128),
        _ => match decimal_of(ty) {
            Some((p, 0)) if p <= 38 => {
                let max = 10i128.pow(p) - 1;
                (-max, max)
            }
            _ => return None,
        },
    })
}

fn decimal_of(ty: &str) -> Option<(u32, u32)> {
    let inner = ty.strip_prefix("DECIMAL(")?.strip_suffix(')')?;
    let (p, s) = inner.split_once(',')?;
    Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_change_is_an_alter_operation() {
        let field = Field::new("c", arrow::datatypes::DataType::Int32, true);
        let changes = [
            SchemaChange::AddColumn { field: field.clone(), duckdb_type: "INTEGER".into(), if_not_exists: false },
            SchemaChange::DropColumn { name: "c".into(), if_exists: false },
            SchemaChange::RenameColumn { from: "c".into(), to: "d".into() },
            SchemaChange::ChangeType { name: "c".into(), field, duckdb_type: "BIGINT".into() },
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
        let rename = SchemaChange::RenameColumn { from: "b".into(), to: "bb".into() };
        let renamed = evolve(&next, "/t/metadata/00001-x.metadata.json", &rename, Nanoseconds::Refuse, "main.t")
            .unwrap()
            .unwrap();
        assert_eq!(declared_key_ids(renamed.current_schema(), renamed.properties()), vec![3, 1]);
    }

    #[test]
    fn widening_follows_value_ranges() {
        for (from, to) in [
            ("TINYINT", "SMALLINT"),
            ("SMALLINT", "INTEGER"),
            ("INTEGER", "BIGINT"),
            ("UTINYINT", "SMALLINT"),
            ("UINTEGER", "BIGINT"),
            ("FLOAT", "DOUBLE"),
            ("DECIMAL(9,2)", "DECIMAL(18,2)"),
            ("INTEGER", "DECIMAL(10,0)"),
        ] {
            assert!(duckdb_widens(from, to), "{from} -> {to}");
        }
        for (from, to) in [
            ("BIGINT", "INTEGER"),
            ("TINYINT", "UTINYINT"),
            ("UBIGINT", "BIGINT"),
            ("DOUBLE", "FLOAT"),
            ("DECIMAL(9,2)", "DECIMAL(18,3)"),
            ("INTEGER", "VARCHAR"),
        ] {
            assert!(!duckdb_widens(from, to), "{from} -> {to}");
        }
    }
}
