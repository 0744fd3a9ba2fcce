//! ALTER COLUMN ... TYPE (issue 24; nested fields, issue 43): what a column's or a field's type
//! may become. Iceberg changes a type only by its promotions (int -> long, float -> double, a
//! decimal's precision widened), and skade asks more: every value of the old DuckDB type must be
//! one of the new (TINYINT -> SMALLINT is the same Iceberg int with a wider kept type, SMALLINT ->
//! UTINYINT the same int but not a widening). A STRUCT, LIST or MAP changes field by field, each
//! keeping its id, so files written before read as they are, widened as they are read.

use std::sync::Arc;

use arrow::datatypes::{DataType, Field};
use iceberg::spec::{ListType, MapType, NestedField, NestedFieldRef, PrimitiveType, StructType, Type};

use super::duckdb_types::{DuckdbTypes, Nanoseconds};
use super::field_path::{self, with_type};
use super::schema::{column_type, sql_identifier};

/// `old` (a column, or a field inside one) with the type DuckDB exported as `new`: a primitive
/// promoted or its kept type widened; a STRUCT's fields matched by name (case-insensitive), each
/// changed so, the new ones added (NULL in the rows written before, numbered after `next_id`),
/// none dropped (DROP COLUMN does that); a LIST's element and a MAP's value changed so, its key
/// kept. `kept` follows the change. The error says why, for the caller's message.
pub fn changed_field(
    old: &NestedField,
    new: &Field,
    kept: &mut DuckdbTypes,
    next_id: &mut i32,
    nanoseconds: Nanoseconds,
) -> Result<NestedFieldRef, String> {
    match (&*old.field_type, new.data_type()) {
        (Type::Struct(s), DataType::Struct(news)) => {
            if let Some(gone) = s.fields().iter().find(|o| !news.iter().any(|n| n.name().eq_ignore_ascii_case(&o.name)))
            {
                return Err(format!(
                    "the new type has no field \"{}\": a type change drops no field (ALTER TABLE ... DROP COLUMN does)",
                    gone.name
                ));
            }
            let mut fields = Vec::with_capacity(news.len());
            for n in news {
                match field_path::position(s.fields(), n.name()) {
                    Some(i) => fields.push(
                        changed_field(&s.fields()[i], n, kept, next_id, nanoseconds)
                            .map_err(|why| format!("field {}: {why}", n.name()))?,
                    ),
                    None => {
                        let (ty, kept_as) = column_type(n, next_id, nanoseconds, kept)
                            .map_err(|why| format!("field {}: {why}", n.name()))?;
                        *next_id += 1;
                        if let Some(name) = kept_as {
                            kept.0.insert(*next_id, name.to_string());
                        }
                        fields.push(Arc::new(NestedField::optional(*next_id, n.name(), ty)));
                    }
                }
            }
            Ok(with_type(old, Type::Struct(StructType::new(fields))))
        }
        (Type::List(l), DataType::List(element) | DataType::LargeList(element)) => {
            let element = changed_field(&l.element_field, element, kept, next_id, nanoseconds)?;
            Ok(with_type(old, Type::List(ListType::new(element))))
        }
        (Type::Map(m), DataType::Map(entries, _)) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err("malformed MAP".into());
            };
            let before = kept.clone();
            let key = changed_field(&m.key_field, &kv[0], kept, next_id, nanoseconds)?;
            if key != m.key_field || *kept != before {
                return Err("a MAP's keys keep their type (Iceberg changes no map key)".into());
            }
            let value = changed_field(&m.value_field, &kv[1], kept, next_id, nanoseconds)?;
            Ok(with_type(old, Type::Map(MapType::new(key, value))))
        }
        (
            Type::Primitive(_),
            DataType::Struct(_) | DataType::List(_) | DataType::LargeList(_) | DataType::Map(_, _),
        )
        | (Type::Struct(_) | Type::List(_) | Type::Map(_), _) => Err(format!(
            "Iceberg changes a column's type only to a wider one of its kind, and {} to {} is not one",
            duckdb_type_name(old, kept),
            super::schema::duckdb_name(new)
        )),
        (Type::Primitive(_), _) => changed_primitive(old, new, kept, nanoseconds),
    }
}

fn changed_primitive(
    old: &NestedField,
    new: &Field,
    kept: &mut DuckdbTypes,
    nanoseconds: Nanoseconds,
) -> Result<NestedFieldRef, String> {
    let before = duckdb_type_name(old, kept);
    // (a primitive has no fields inside: nothing numbered, nothing kept but its own)
    let (ty, kept_as) = column_type(new, &mut 0, nanoseconds, &mut DuckdbTypes::default())?;
    if *old.field_type == ty && kept.0.get(&old.id).map(String::as_str) == kept_as {
        return Ok(Arc::new(old.clone())); // the type it has
    }
    if !iceberg_promotes(&old.field_type, &ty) {
        return Err(format!(
            "Iceberg changes a column's type only to a wider one of its kind (int to bigint, float to double, a \
             decimal's precision widened), and {} to {ty} is not one",
            old.field_type
        ));
    }
    let after = kept_as.map(str::to_string).unwrap_or_else(|| natural_duckdb_type(&ty));
    if !duckdb_widens(&before, &after) {
        return Err("not every value of the old type fits the new one".into());
    }
    match kept_as {
        Some(k) => kept.0.insert(old.id, k.to_string()),
        None => kept.0.remove(&old.id),
    };
    Ok(with_type(old, ty))
}

/// How DuckDB names the type of `field` (its kept type, else the natural one of its Iceberg
/// type; a STRUCT, LIST or MAP from its fields').
pub fn duckdb_type_name(field: &NestedField, kept: &DuckdbTypes) -> String {
    if let Some(name) = kept.0.get(&field.id) {
        return name.clone();
    }
    match &*field.field_type {
        Type::Primitive(_) => natural_duckdb_type(&field.field_type),
        Type::Struct(s) => {
            let fields: Vec<String> = s
                .fields()
                .iter()
                .map(|f| format!("{} {}", sql_identifier(&f.name), duckdb_type_name(f, kept)))
                .collect();
            format!("STRUCT({})", fields.join(", "))
        }
        Type::List(l) => format!("{}[]", duckdb_type_name(&l.element_field, kept)),
        Type::Map(m) => {
            format!("MAP({}, {})", duckdb_type_name(&m.key_field, kept), duckdb_type_name(&m.value_field, kept))
        }
    }
}

/// Iceberg's allowed type changes of a column (the type itself, or a promotion).
pub fn iceberg_promotes(from: &Type, to: &Type) -> bool {
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
pub fn natural_duckdb_type(ty: &Type) -> String {
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
/// decimals by precision at one scale, JSON a VARCHAR; the rest only to themselves or FLOAT to
/// DOUBLE).
pub fn duckdb_widens(from: &str, to: &str) -> bool {
    let (from, to) = (from.to_ascii_uppercase(), to.to_ascii_uppercase());
    match (integer_range(&from), integer_range(&to)) {
        (Some((a, b)), Some((c, d))) => return c <= a && b <= d,
        (Some(_), None) | (None, Some(_)) => return false,
        _ => {}
    }
    match (decimal_of(&from), decimal_of(&to)) {
        (Some((p, s)), Some((q, t))) => s == t && q >= p,
        // (VARCHAR to JSON would have to check that every value parses)
        _ => from == to || (from == "FLOAT" && to == "DOUBLE") || (from == "JSON" && to == "VARCHAR"),
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
    use super::*;

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
            ("JSON", "VARCHAR"),
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
            ("VARCHAR", "JSON"),
        ] {
            assert!(!duckdb_widens(from, to), "{from} -> {to}");
        }
    }

    fn struct_of(fields: Vec<Field>) -> Field {
        Field::new("s", DataType::Struct(fields.into()), true)
    }

    /// STRUCT(a TINYINT, b VARCHAR) (ids 2, 3 in column 1) changed field by field.
    fn column() -> (NestedField, DuckdbTypes) {
        let s = Type::Struct(StructType::new(vec![
            Arc::new(NestedField::optional(2, "a", Type::Primitive(PrimitiveType::Int))),
            Arc::new(NestedField::optional(3, "b", Type::Primitive(PrimitiveType::String))),
        ]));
        (NestedField::optional(1, "s", s), DuckdbTypes([(2, "TINYINT".to_string())].into()))
    }

    #[test]
    fn a_struct_changes_field_by_field() {
        let (old, kept) = column();
        assert_eq!(duckdb_type_name(&old, &kept), "STRUCT(a TINYINT, b VARCHAR)");
        // a widened (the same Iceberg int, kept SMALLINT), fields reordered, c added after id 3
        let new = struct_of(vec![
            Field::new("B", DataType::Utf8, true),
            Field::new("a", DataType::Int16, true),
            Field::new("c", DataType::Int64, true),
        ]);
        let (mut k, mut next) = (kept.clone(), 3);
        let changed = changed_field(&old, &new, &mut k, &mut next, Nanoseconds::Refuse).unwrap();
        assert_eq!(duckdb_type_name(&changed, &k), "STRUCT(b VARCHAR, a SMALLINT, c BIGINT)");
        assert_eq!(field_path::ids(&changed), vec![1, 3, 2, 4]);
        assert_eq!(next, 4);
        // the same type: the same field, nothing kept differently
        let (mut same, mut next) = (kept.clone(), 3);
        let again = struct_of(vec![Field::new("a", DataType::Int8, true), Field::new("b", DataType::Utf8, true)]);
        assert_eq!(*changed_field(&old, &again, &mut same, &mut next, Nanoseconds::Refuse).unwrap(), old);
        assert_eq!(same, kept);
    }

    #[test]
    fn a_struct_change_refuses_what_iceberg_or_the_values_do_not_allow() {
        let (old, kept) = column();
        let refused = |fields: Vec<Field>| {
            let (mut k, mut next) = (kept.clone(), 3);
            changed_field(&old, &struct_of(fields), &mut k, &mut next, Nanoseconds::Refuse).unwrap_err()
        };
        let dropped = refused(vec![Field::new("a", DataType::Int8, true)]);
        assert!(dropped.contains("no field \"b\""), "{dropped}");
        let narrowed = refused(vec![Field::new("a", DataType::UInt8, true), Field::new("b", DataType::Utf8, true)]);
        assert!(narrowed.starts_with("field a: not every value"), "{narrowed}");
        let retyped = refused(vec![Field::new("a", DataType::Int8, true), Field::new("b", DataType::Int32, true)]);
        assert!(retyped.contains("string to int is not one"), "{retyped}");
    }

    #[test]
    fn lists_and_maps_change_their_elements_and_values() {
        let int = || Type::Primitive(PrimitiveType::Int);
        let list = NestedField::optional(
            1,
            "l",
            Type::List(ListType::new(Arc::new(NestedField::list_element(2, int(), false)))),
        );
        let wider = Field::new_list("l", Field::new("element", DataType::Int64, true), true);
        let (mut k, mut next) = (DuckdbTypes::default(), 2);
        let changed = changed_field(&list, &wider, &mut k, &mut next, Nanoseconds::Refuse).unwrap();
        assert_eq!(duckdb_type_name(&changed, &k), "BIGINT[]");
        let map = NestedField::optional(1, "m", Type::Map(MapType::optional(2, int(), 3, int())));
        let entries = |k: DataType, v: DataType| {
            Field::new_map("m", "entries", Field::new("key", k, false), Field::new("value", v, true), false, true)
        };
        let changed =
            changed_field(&map, &entries(DataType::Int32, DataType::Int64), &mut k, &mut next, Nanoseconds::Refuse)
                .unwrap();
        assert_eq!(duckdb_type_name(&changed, &k), "MAP(INTEGER, BIGINT)");
        let key =
            changed_field(&map, &entries(DataType::Int64, DataType::Int32), &mut k, &mut next, Nanoseconds::Refuse);
        assert!(key.unwrap_err().contains("MAP's keys keep their type"));
    }
}
