//! ALTER TABLE of fields inside a STRUCT column (issue 43): `ADD COLUMN s.f INT`, `DROP COLUMN
//! s.f`, `RENAME COLUMN s.f TO g`, down any path DuckDB takes (`l.element.f` inside a LIST of
//! STRUCTs, `m.value.f` inside a MAP's values). Iceberg's schema evolution by field id: an added
//! field gets a new id (NULL in the files written before), a renamed one keeps its id (its old
//! values stay its own), a dropped one's id is gone for good. A MAP's key never changes (Iceberg
//! changes no key). The errors are DuckDB's own for the same statements on its tables.

use std::sync::Arc;

use arrow::datatypes::Field;
use iceberg::spec::{NestedField, NestedFieldRef, TableMetadata, Type};

use super::duckdb_types::{DuckdbTypes, Nanoseconds};
use super::field_path::{edit_inside, field_at, ids, position, walk, Walk};
use super::partition;
use super::schema::column_type;
use crate::error::{Error, Result};

/// A table's columns being changed, and their kept DuckDB types.
pub struct Columns<'a> {
    pub fields: Vec<NestedFieldRef>,
    pub kept: DuckdbTypes,
    pub metadata: &'a TableMetadata,
    /// The table's name, for messages.
    pub table: &'a str,
}

impl Columns<'_> {
    /// ADD COLUMN `parent`.`field`; false when it exists and `if_not_exists` says to do nothing.
    pub fn add_field(
        &mut self,
        parent: &[String],
        field: &Field,
        duckdb_type: &str,
        if_not_exists: bool,
        nanoseconds: Nanoseconds,
    ) -> Result<bool> {
        let steps = match walk(&self.fields, parent) {
            Walk::Found(steps) => steps,
            Walk::NoColumn => {
                return Err(Error::catalog(format!(
                    "Table {} does not have a column with name \"{}\"",
                    self.table, parent[0]
                )))
            }
            Walk::NotNested { depth } => return Err(not_nested_for_add(&parent[depth])),
            Walk::NoField { depth } => {
                return Err(Error::catalog(format!(
                    "Sub-field \"{}\" does not exist in column \"{}\"",
                    parent[depth],
                    parent[depth - 1]
                )))
            }
        };
        let holder = field_at(&self.fields, &steps);
        let name = parent.last().map(String::as_str).unwrap_or_default();
        let Type::Struct(s) = &*holder.field_type else {
            if holder.field_type.is_primitive() {
                return Err(not_nested_for_add(name));
            }
            return Err(Error::invalid(format!(
                "Column \"{name}\" is not a struct - ALTER TABLE can only add fields to structs"
            )));
        };
        self.refuse_in_map_key(&steps, parent)?;
        if position(s.fields(), field.name()).is_some() {
            if if_not_exists {
                return Ok(false);
            }
            return Err(Error::catalog(format!(
                "Duplicate field \"{}\" - field already exists in struct \"{name}\"",
                field.name()
            )));
        }
        let shown = format!("{}.{}", parent.join("."), field.name());
        let mut next_id = self.metadata.last_column_id();
        let (ty, kept_as) = column_type(field, &mut next_id, nanoseconds, &mut self.kept).map_err(|why| {
            Error::invalid(format!(
                "column \"{shown}\" has type {duckdb_type}, which a skade (Iceberg) table cannot store: {why}"
            ))
        })?;
        next_id += 1;
        if let Some(k) = kept_as {
            self.kept.0.insert(next_id, k.to_string());
        }
        let added = Arc::new(NestedField::optional(next_id, field.name(), ty));
        self.fields = edit_inside::<Error>(&self.fields, &steps, |mut inside| {
            inside.push(added);
            Ok(inside)
        })?;
        Ok(true)
    }

    /// DROP COLUMN `path` (a field inside a column); false when it does not exist and
    /// `if_exists` says to do nothing.
    pub fn drop_field(&mut self, path: &[String], if_exists: bool) -> Result<bool> {
        let column = &path[0];
        let steps = match walk(&self.fields, path) {
            Walk::Found(steps) => steps,
            Walk::NoColumn if if_exists => return Ok(false),
            Walk::NoColumn => {
                return Err(Error::catalog(format!("Cannot drop field from column \"{column}\" - it does not exist")))
            }
            Walk::NotNested { .. } => {
                return Err(Error::catalog(format!("Cannot drop field from column \"{column}\" - not a nested type")))
            }
            Walk::NoField { .. } if if_exists => return Ok(false),
            Walk::NoField { depth } => {
                return Err(Error::catalog(format!("Cannot drop field \"{}\" - it does not exist", path[depth])))
            }
        };
        let (last, holder) = self.struct_member(&steps, path, "drop", "it's not a struct")?;
        if holder.len() == 1 {
            return Err(Error::catalog(format!(
                "Cannot drop field \"{last}\" from column \"{column}\" - it is the last field of the struct"
            )));
        }
        let dropped = field_at(&self.fields, &steps);
        let gone = ids(&dropped);
        if gone.iter().any(|id| partition::is_partition_source(self.metadata, *id)) {
            return Err(Error::invalid(format!(
                "cannot drop column \"{}\" of table {}: the table's files are partitioned by it \
                 (Iceberg readers need it to read their partition values)",
                path.join("."),
                self.table
            )));
        }
        for id in gone {
            self.kept.0.remove(&id);
        }
        let (at, above) = steps.split_last().unwrap_or((&0, &[]));
        self.fields = edit_inside::<Error>(&self.fields, above, |mut inside| {
            inside.remove(*at);
            Ok(inside)
        })?;
        Ok(true)
    }

    /// RENAME COLUMN `path` (a field inside a column) TO `to`: the field keeps its id.
    pub fn rename_field(&mut self, path: &[String], to: &str) -> Result<()> {
        let column = &path[0];
        let steps = match walk(&self.fields, path) {
            Walk::Found(steps) => steps,
            Walk::NoColumn => {
                return Err(Error::catalog(format!("Cannot rename field from column \"{column}\" - it does not exist")))
            }
            Walk::NotNested { .. } => {
                return Err(Error::catalog(format!("Cannot rename field from column \"{column}\" - not a nested type")))
            }
            Walk::NoField { depth } => {
                return Err(Error::catalog(format!("Cannot rename field \"{}\" - it does not exist", path[depth])))
            }
        };
        let (last, holder) = self.struct_member(&steps, path, "rename", "can only rename fields inside a struct")?;
        // (as DuckDB: the field's own name in another case is taken too)
        if position(&holder, to).is_some() {
            return Err(Error::catalog(format!(
                "Cannot rename field \"{last}\" from column \"{column}\" to {to} - a field with this name already exists"
            )));
        }
        let (at, above) = steps.split_last().unwrap_or((&0, &[]));
        self.fields = edit_inside::<Error>(&self.fields, above, |mut inside| {
            inside[*at] = Arc::new(NestedField { name: to.to_string(), ..(*inside[*at]).clone() });
            Ok(inside)
        })?;
        Ok(())
    }

    /// The name of the field `steps` lead to and the fields beside it, when it is a STRUCT's
    /// field (not a LIST's element, nor a MAP's key or value) outside any MAP's key.
    fn struct_member(
        &self,
        steps: &[usize],
        path: &[String],
        verb: &str,
        why_not: &str,
    ) -> Result<(String, Vec<NestedFieldRef>)> {
        let (_, above) = steps.split_last().unwrap_or((&0, &[]));
        let holder = field_at(&self.fields, above);
        let last = path.last().cloned().unwrap_or_default();
        let Type::Struct(s) = &*holder.field_type else {
            return Err(Error::catalog(format!(
                "Cannot {verb} field \"{last}\" from column \"{}\" - {why_not}",
                path[0]
            )));
        };
        self.refuse_in_map_key(steps, path)?;
        Ok((last, s.fields().to_vec()))
    }

    /// Refuses a change at `steps` inside a MAP's key: Iceberg changes no map key (a key of
    /// another shape is another key).
    pub fn refuse_in_map_key(&self, steps: &[usize], path: &[String]) -> Result<()> {
        for depth in 1..steps.len() {
            let holder = field_at(&self.fields, &steps[..depth]);
            if matches!(&*holder.field_type, Type::Map(_)) && steps[depth] == 0 {
                return Err(Error::invalid(format!(
                    "cannot change \"{}\" of table {}: it is inside a MAP's key, and Iceberg changes no map key",
                    path.join("."),
                    self.table
                )));
            }
        }
        Ok(())
    }
}

fn not_nested_for_add(name: &str) -> Error {
    Error::invalid(format!("Column \"{name}\" is not a nested type, ADD COLUMN can only be used on nested types"))
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::{DataType, Schema as ArrowSchema};
    use iceberg::spec::{TableMetadata, UnboundPartitionSpec};

    use super::super::evolve::{evolve, SchemaChange};
    use super::*;

    /// id BIGINT PRIMARY KEY, s STRUCT(a TINYINT, b VARCHAR, n STRUCT(x INTEGER)),
    /// l STRUCT(y INTEGER)[], m MAP(VARCHAR, INTEGER)
    fn table() -> TableMetadata {
        let arrow = ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new_struct(
                "s",
                vec![
                    Field::new("a", DataType::Int8, true),
                    Field::new("b", DataType::Utf8, true),
                    Field::new_struct("n", vec![Field::new("x", DataType::Int32, true)], true),
                ],
                true,
            ),
            Field::new_list(
                "l",
                Field::new_struct("element", vec![Field::new("y", DataType::Int32, true)], true),
                true,
            ),
            Field::new_map(
                "m",
                "entries",
                Field::new("key", DataType::Utf8, false),
                Field::new("value", DataType::Int32, true),
                false,
                true,
            ),
        ]);
        let types: Vec<String> = arrow.fields().iter().map(|f| f.name().clone()).collect();
        let key = ["id".to_string()];
        let (schema, kept) =
            super::super::schema::iceberg_schema(&arrow, &types, &[], &key, Nanoseconds::Refuse).unwrap();
        let spec = UnboundPartitionSpec::builder().build();
        super::super::metadata::new_table(
            schema,
            spec,
            iceberg::spec::SortOrder::unsorted_order(),
            "/t",
            uuid::Uuid::new_v4(),
            &kept,
            &key,
        )
        .unwrap()
    }

    fn path(p: &str) -> Vec<String> {
        p.split('.').map(str::to_string).collect()
    }

    fn apply(md: &TableMetadata, change: SchemaChange) -> Result<Option<TableMetadata>> {
        evolve(md, "/t/metadata/00000-x.metadata.json", &change, Nanoseconds::Refuse, "main.t")
    }

    fn add(parent: &str, name: &str, ty: DataType) -> SchemaChange {
        let field = Field::new(name, ty, true);
        let duckdb_type = super::super::schema::duckdb_name(&field);
        SchemaChange::AddColumn { parent: path(parent), field, duckdb_type, if_not_exists: false, default: None }
    }

    fn error(md: &TableMetadata, change: SchemaChange) -> String {
        apply(md, change).unwrap_err().message
    }

    /// (the field's id, its Iceberg type, its kept DuckDB type)
    fn at(md: &TableMetadata, name: &str) -> Option<(i32, String, Option<String>)> {
        let schema = md.current_schema();
        let id = schema.field_id_by_name(name)?;
        let kept = DuckdbTypes::of(md.properties()).unwrap().0.get(&id).cloned();
        Some((id, schema.field_by_id(id)?.field_type.to_string(), kept))
    }

    #[test]
    fn a_new_table_keeps_nested_types_by_their_ids() {
        let md = table();
        let (_, ty, kept) = at(&md, "s.a").unwrap();
        assert_eq!((ty.as_str(), kept.as_deref()), ("int", Some("TINYINT")));
    }

    #[test]
    fn fields_are_added_with_new_ids() {
        let md = table();
        let last = md.last_column_id();
        let next = apply(&md, add("s", "c", DataType::UInt16)).unwrap().unwrap();
        assert_eq!(at(&next, "s.c"), Some((last + 1, "int".into(), Some("USMALLINT".into()))));
        assert_eq!(at(&next, "s.a"), at(&md, "s.a"));
        let next = apply(&next, add("s.n", "z", DataType::Utf8)).unwrap().unwrap();
        assert_eq!(at(&next, "s.n.z").unwrap().0, last + 2);
        let next = apply(&next, add("l.element", "w", DataType::Int64)).unwrap().unwrap();
        assert_eq!(at(&next, "l.element.w").unwrap().0, last + 3);
        // IF NOT EXISTS on a field there (in another case): nothing changes
        let again = SchemaChange::AddColumn {
            parent: path("s"),
            field: Field::new("A", DataType::Int32, true),
            duckdb_type: "INTEGER".into(),
            if_not_exists: true,
            default: None,
        };
        assert!(apply(&next, again).unwrap().is_none());
    }

    #[test]
    fn bad_adds_say_what_duckdb_says() {
        let md = table();
        for (parent, wanted) in [
            ("nope", "Table main.t does not have a column with name \"nope\""),
            ("id", "Column \"id\" is not a nested type, ADD COLUMN can only be used on nested types"),
            ("s.a", "Column \"a\" is not a nested type"),
            ("s.zz", "Sub-field \"zz\" does not exist in column \"s\""),
            ("l", "Column \"l\" is not a struct - ALTER TABLE can only add fields to structs"),
            ("m", "Column \"m\" is not a struct"),
        ] {
            let err = error(&md, add(parent, "c", DataType::Int32));
            assert!(err.contains(wanted), "{parent}: {err}");
        }
        let err = error(&md, add("s.n", "X", DataType::Int32));
        assert_eq!(err, "Duplicate field \"X\" - field already exists in struct \"n\"");
        let err = error(&md, add("s", "d", DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))));
        assert!(err.starts_with("column \"s.d\" has type ENUM"), "{err}");
    }

    #[test]
    fn fields_are_dropped_with_their_kept_types() {
        let md = table();
        let drop = |p: &str, if_exists| SchemaChange::DropColumn { path: path(p), if_exists };
        let next = apply(&md, drop("s.a", false)).unwrap().unwrap();
        assert_eq!(at(&next, "s.a"), None);
        assert!(DuckdbTypes::of(next.properties()).unwrap().is_empty());
        assert_eq!(at(&next, "s.b"), at(&md, "s.b"));
        assert!(apply(&md, drop("s.zz", true)).unwrap().is_none());
        assert!(apply(&md, drop("nope.x", true)).unwrap().is_none());
        for (p, wanted) in [
            ("nope.x", "Cannot drop field from column \"nope\" - it does not exist"),
            ("id.x", "Cannot drop field from column \"id\" - not a nested type"),
            ("s.zz", "Cannot drop field \"zz\" - it does not exist"),
            ("s.n.x", "Cannot drop field \"x\" from column \"s\" - it is the last field of the struct"),
            ("l.element", "Cannot drop field \"element\" from column \"l\" - it's not a struct"),
            ("m.key", "Cannot drop field \"key\" from column \"m\" - it's not a struct"),
        ] {
            let err = error(&md, drop(p, false));
            assert!(err.contains(wanted), "{p}: {err}");
        }
        // a whole STRUCT column dropped takes its fields' kept types along
        let next = apply(&md, SchemaChange::DropColumn { path: path("s"), if_exists: false }).unwrap().unwrap();
        assert!(!next.properties().contains_key(super::super::duckdb_types::PROPERTY));
    }

    #[test]
    fn a_renamed_field_keeps_its_id() {
        let md = table();
        let rename = |p: &str, to: &str| SchemaChange::RenameColumn { path: path(p), to: to.into() };
        let next = apply(&md, rename("s.a", "aa")).unwrap().unwrap();
        assert_eq!(at(&next, "s.aa"), at(&md, "s.a"));
        let next = apply(&md, rename("l.element.y", "yy")).unwrap().unwrap();
        assert_eq!(at(&next, "l.element.yy"), at(&md, "l.element.y"));
        for (p, to, wanted) in [
            ("s.a", "B", "Cannot rename field \"a\" from column \"s\" to B - a field with this name already exists"),
            ("s.zz", "q", "Cannot rename field \"zz\" - it does not exist"),
            ("nope.a", "q", "Cannot rename field from column \"nope\" - it does not exist"),
            ("id.a", "q", "Cannot rename field from column \"id\" - not a nested type"),
            (
                "l.element",
                "e",
                "Cannot rename field \"element\" from column \"l\" - can only rename fields inside a struct",
            ),
        ] {
            let err = error(&md, rename(p, to));
            assert!(err.contains(wanted), "{p}: {err}");
        }
    }

    #[test]
    fn nested_types_are_promoted_in_place() {
        let md = table();
        let change = |p: &str, field: Field| {
            let duckdb_type = super::super::schema::duckdb_name(&field);
            SchemaChange::ChangeType { path: path(p), field, duckdb_type }
        };
        // a kept type widened: the same Iceberg int, another DuckDB type
        let next = apply(&md, change("s.a", Field::new("a", DataType::Int16, true))).unwrap().unwrap();
        assert_eq!(at(&next, "s.a"), Some((at(&md, "s.a").unwrap().0, "int".into(), Some("SMALLINT".into()))));
        let next = apply(&next, change("s.n.x", Field::new("x", DataType::Int64, true))).unwrap().unwrap();
        assert_eq!(at(&next, "s.n.x").unwrap().1, "long");
        // the whole column: a LIST's element's field, a MAP's value
        let element = Field::new_struct("element", vec![Field::new("y", DataType::Int64, true)], true);
        let next = apply(&next, change("l", Field::new_list("l", element, true))).unwrap().unwrap();
        assert_eq!(at(&next, "l.element.y").unwrap().1, "long");
        assert!(apply(&next, change("s.a", Field::new("a", DataType::Int16, true))).unwrap().is_none());
        let err = error(&md, change("s.b", Field::new("b", DataType::Int32, true)));
        assert!(
            err.starts_with("cannot change column \"s.b\" of table main.t from VARCHAR to INTEGER: Iceberg"),
            "{err}"
        );
        let err = error(&md, change("s.a", Field::new("a", DataType::UInt8, true)));
        assert!(err.contains("from TINYINT to UTINYINT: not every value"), "{err}");
        let err = error(&md, change("s.zz", Field::new("zz", DataType::Int64, true)));
        assert_eq!(err, "Sub-field \"zz\" does not exist in column \"s\"");
        let err = error(&md, change("id.q", Field::new("q", DataType::Int64, true)));
        assert_eq!(err, "Sub-field \"q\" does not exist in column \"id\"");
    }
}
