//! Schemas, partition specs and sort orders other engines send (a table created over the REST
//! protocol, or a change to one), checked as skade's own CREATE TABLE and ALTER TABLE check
//! theirs: what skade could not read, write or show in DuckDB is refused before anything is
//! written. (Iceberg's builder checks ids and references; these are the rules it leaves to the
//! catalog, and skade's own on top.)

use std::collections::HashMap;

use iceberg::spec::{NestedFieldRef, Schema, TableMetadata, Transform, Type};

use crate::error::{Error, Result};

/// Every field of `schema` by id, with the id of the field it lies in (None: a column).
fn parents(schema: &Schema) -> HashMap<i32, (NestedFieldRef, Option<i32>)> {
    fn walk(fields: &[NestedFieldRef], parent: Option<i32>, out: &mut HashMap<i32, (NestedFieldRef, Option<i32>)>) {
        for field in fields {
            out.insert(field.id, (field.clone(), parent));
            let inner: Vec<NestedFieldRef> = match &*field.field_type {
                Type::Struct(s) => s.fields().to_vec(),
                Type::List(l) => vec![l.element_field.clone()],
                Type::Map(m) => vec![m.key_field.clone(), m.value_field.clone()],
                Type::Primitive(_) => vec![],
            };
            walk(&inner, Some(field.id), out);
        }
    }
    let mut out = HashMap::new();
    walk(schema.as_struct().fields(), None, &mut out);
    out
}

/// What any table's schema must be for skade: columns, names distinct in any case at every
/// level (DuckDB's names are case-insensitive), partitioned by columns (not fields inside
/// them) with transforms skade knows, sorted by fields it has.
pub fn check_table(shown: &str, md: &TableMetadata) -> Result<()> {
    super::defaults::check_client_defaults(shown, md)?;
    let refused = |why: String| Err(Error::invalid(format!("table {shown}: {why}")));
    let schema = md.current_schema();
    if schema.as_struct().fields().is_empty() {
        return refused("a table has at least one column".into());
    }
    fn distinct(fields: &[NestedFieldRef]) -> std::result::Result<(), String> {
        let mut seen = HashMap::new();
        for field in fields {
            if let Some(other) = seen.insert(field.name.to_lowercase(), &field.name) {
                return Err(format!("columns \"{other}\" and \"{}\" differ only in case", field.name));
            }
            match &*field.field_type {
                Type::Struct(s) => distinct(s.fields())?,
                Type::List(l) => distinct(std::slice::from_ref(&l.element_field))?,
                Type::Map(m) => distinct(&[m.key_field.clone(), m.value_field.clone()])?,
                Type::Primitive(_) => {}
            }
        }
        Ok(())
    }
    if let Err(why) = distinct(schema.as_struct().fields()) {
        return refused(why);
    }
    let columns: Vec<i32> = schema.as_struct().fields().iter().map(|f| f.id).collect();
    for spec in md.partition_specs_iter() {
        for field in spec.fields() {
            if matches!(field.transform, Transform::Unknown) {
                return refused(format!("partition field {} has a transform skade does not know", field.name));
            }
            if !columns.contains(&field.source_id) {
                return refused(format!(
                    "partition field {} is of field {}, which is no column of the current schema (skade partitions \
                     by columns)",
                    field.name, field.source_id
                ));
            }
        }
    }
    if let Some(f) = md.default_sort_order().fields.iter().find(|f| schema.field_by_id(f.source_id).is_none()) {
        return refused(format!(
            "the sort order sorts by field {}, which the current schema does not have",
            f.source_id
        ));
    }
    Ok(())
}

/// A change from `base` to `next`'s current schema, as ALTER TABLE allows one: a field keeps its
/// id and its place (the field it lies in), changes type only by an Iceberg promotion (none of a
/// partition column, a map key, or a list's element or a map's key and value ids), never becomes
/// required; a dropped field's id is never used again; new ids follow the table's last; a new
/// field is optional unless the field it lies in is new too (no row has it); identifier fields
/// stay. A table holding files adopted by `skade_add_files` (read by name, nested fields by
/// position) takes no change from a client.
pub fn check_change(shown: &str, base: &TableMetadata, next: &TableMetadata) -> Result<()> {
    let refused = |why: String| Err(Error::invalid(format!("table {shown}: {why}")));
    let (old, new) = (base.current_schema(), next.current_schema());
    if old.as_struct() == new.as_struct() && old.identifier_field_ids().eq(new.identifier_field_ids()) {
        return Ok(());
    }
    if base.properties().contains_key(super::name_mapping::PROPERTY) {
        return Err(Error::not_implemented(format!(
            "table {shown} holds files adopted by skade_add_files (read by column name): its schema changes through \
             DuckDB only"
        )));
    }
    let mut old_ids: Vec<i32> = old.identifier_field_ids().collect();
    let mut new_ids: Vec<i32> = new.identifier_field_ids().collect();
    old_ids.sort_unstable();
    new_ids.sort_unstable();
    if old_ids != new_ids {
        return Err(Error::not_implemented(format!(
            "table {shown}: changing its identifier fields (its key) over the REST protocol is not served"
        )));
    }
    let (before, after) = (parents(old), parents(new));
    let ever = |id: i32| base.schemas_iter().any(|s| s.field_by_id(id).is_some());
    let added = after.keys().filter(|id| !ever(**id)).count() as i32;
    for (id, (field, parent)) in &after {
        let Some((was, was_parent)) = before.get(id) else {
            if ever(*id) {
                return refused(format!(
                    "column {} reuses field id {id}, a dropped field's (a new field takes a new id)",
                    field.name
                ));
            }
            if *id > base.last_column_id() + added {
                return refused(format!(
                    "field {} takes id {id}: new fields take the ids after the table's last, {}",
                    field.name,
                    base.last_column_id()
                ));
            }
            let parent_is_new = parent.is_some_and(|p| !before.contains_key(&p));
            if field.required && !parent_is_new {
                return refused(format!(
                    "a new field {} cannot be required: the table's rows have no value for it",
                    field.name
                ));
            }
            continue;
        };
        if parent != was_parent {
            return refused(format!("field {} (id {id}) cannot move into another field", field.name));
        }
        if field.required && !was.required {
            return refused(format!("field {} (id {id}) cannot become required", field.name));
        }
        let same_inner = match (&*was.field_type, &*field.field_type) {
            (Type::Struct(_), Type::Struct(_)) => true,
            (Type::List(a), Type::List(b)) => a.element_field.id == b.element_field.id,
            (Type::Map(a), Type::Map(b)) => {
                a.key_field.id == b.key_field.id
                    && a.value_field.id == b.value_field.id
                    && a.key_field.field_type == b.key_field.field_type
            }
            (a, b) if a == b => true,
            (a, b) => {
                let in_key =
                    parent.is_some_and(|p| matches!(&*after[&p].0.field_type, Type::Map(m) if m.key_field.id == *id));
                !in_key
                    && !super::partition::is_partition_source(base, *id)
                    && super::evolve_types::iceberg_promotes(a, b)
            }
        };
        if !same_inner {
            return refused(format!(
                "field {} (id {id}) cannot change from {} to {}",
                field.name, was.field_type, field.field_type
            ));
        }
    }
    Ok(())
}
