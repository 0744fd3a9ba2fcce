//! Which table column each column of a file to adopt is, by name, and whether its values read as
//! that column's type. A read converts a file's column to the table's type (`conform_array`), so
//! a file may hold a type a read widens without loss: narrower integers (signed, or unsigned that
//! fit), FLOAT for DOUBLE, a DECIMAL of the same scale and fewer digits, other string and binary
//! layouts, timestamps in milliseconds. Anything a read would narrow, round or reinterpret is
//! refused, and so are integers for a DECIMAL column (UBIGINT's): Iceberg has no such promotion,
//! and other readers would refuse the file.

use std::collections::{BTreeMap, HashMap};

use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, TimeUnit};
use iceberg::spec::Schema;

use crate::format::schema::duckdb_name;

/// The table's name for a column id of each file column (by the file's name, which the table's
/// name mapping will hold), or why the file cannot be adopted, naming the column. `kept`: the
/// DuckDB types a table keeps by field id (for messages: a TINYINT column is an Iceberg int).
pub fn match_columns(
    file: &ArrowSchema,
    table: &Schema,
    table_arrow: &ArrowSchema,
    kept: &BTreeMap<i32, String>,
) -> Result<BTreeMap<String, i32>, String> {
    let fields = table.as_struct().fields();
    let mut matched: BTreeMap<String, i32> = BTreeMap::new();
    let mut taken: HashMap<i32, &str> = HashMap::new();
    for f in file.fields() {
        // The table's column of this name; DuckDB's names are case-insensitive, so a file
        // written with `ID` adopts into column `id` when no column is named exactly so.
        let exact = fields.iter().position(|t| t.name == *f.name());
        let folded: Vec<usize> = (0..fields.len()).filter(|&i| fields[i].name.eq_ignore_ascii_case(f.name())).collect();
        let i = match (exact, folded.as_slice()) {
            (Some(i), _) | (None, &[i]) => i,
            (None, []) => return Err(format!("column {} is not a column of the table", f.name())),
            (None, _) => return Err(format!("column {} matches several columns of the table by name", f.name())),
        };
        let column = &fields[i];
        if let Some(other) = taken.insert(column.id, f.name()) {
            return Err(format!("columns {other} and {} are both column {} of the table", f.name(), column.name));
        }
        let target = table_arrow.field(i);
        if !readable(f.data_type(), target.data_type()) {
            let theirs = kept.get(&column.id).cloned().unwrap_or_else(|| duckdb_name(target));
            return Err(format!(
                "column {} is {} in the file, which does not read as the table's {theirs} without loss",
                f.name(),
                duckdb_name(f)
            ));
        }
        matched.insert(f.name().clone(), column.id);
    }
    if let Some(missing) = fields.iter().find(|t| t.required && !taken.contains_key(&t.id)) {
        return Err(format!("column {} is NOT NULL in the table and missing from the file", missing.name));
    }
    Ok(matched)
}

/// Whether values of Arrow type `file` read as `table` without loss (see the module's list).
pub fn readable(file: &DataType, table: &DataType) -> bool {
    use DataType::*;
    let same = match (file, table) {
        (Dictionary(_, values), _) => return readable(values, table),
        (Boolean, Boolean) | (Date32, Date32) => true,
        (Int8 | Int16 | Int32 | UInt8 | UInt16, Int32 | Int64) | (Int64 | UInt32, Int64) => true,
        // (integers for a DECIMAL column, UBIGINT's included, would read in skade, but Iceberg
        // allows no integer-to-decimal promotion: other readers, PyIceberg's, refuse such a file)
        (Float32, Float32 | Float64) | (Float64, Float64) => true,
        (Decimal32(p, s) | Decimal64(p, s) | Decimal128(p, s) | Decimal256(p, s), Decimal128(tp, ts)) => {
            s == ts && p <= tp
        }
        (Utf8 | LargeUtf8 | Utf8View, Utf8 | LargeUtf8) => true,
        (Binary | LargeBinary | BinaryView, Binary | LargeBinary) => true,
        (FixedSizeBinary(a), FixedSizeBinary(b)) => a == b,
        (Time32(TimeUnit::Millisecond) | Time64(TimeUnit::Microsecond), Time64(TimeUnit::Microsecond)) => true,
        (Timestamp(unit, zone), Timestamp(TimeUnit::Microsecond, table_zone)) => {
            // (an instant stays an instant, a local time local; never finer than microseconds)
            zone.is_some() == table_zone.is_some() && matches!(unit, TimeUnit::Millisecond | TimeUnit::Microsecond)
        }
        (Timestamp(TimeUnit::Nanosecond, zone), Timestamp(TimeUnit::Nanosecond, table_zone)) => {
            zone.is_some() == table_zone.is_some()
        }
        (List(a) | LargeList(a), List(b) | LargeList(b)) => element_readable(a, b),
        (Map(a, _), Map(b, _)) => match (a.data_type(), b.data_type()) {
            (Struct(a), Struct(b)) if a.len() == 2 && b.len() == 2 => {
                readable(a[0].data_type(), b[0].data_type()) && element_readable(&a[1], &b[1])
            }
            _ => false,
        },
        // A struct's fields by name, all of them (a read converts a struct field by field)
        (Struct(a), Struct(b)) => {
            a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.name() == y.name() && element_readable(x, y))
        }
        _ => false,
    };
    same && (file.equals_datatype(table) || arrow::compute::can_cast_types(file, table))
}

/// A nested field: readable, and no NULL where the table's field takes none (a file's field that
/// may hold NULLs cannot be checked from its footer).
fn element_readable(file: &Field, table: &Field) -> bool {
    (table.is_nullable() || !file.is_nullable()) && readable(file.data_type(), table.data_type())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::schema::arrow_schema;
    use iceberg::spec::{NestedField, PrimitiveType, Type};
    use std::sync::Arc;

    fn table() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "amount", Type::decimal(18, 2).unwrap()).into(),
                NestedField::optional(4, "ts", Type::Primitive(PrimitiveType::Timestamp)).into(),
            ])
            .build()
            .unwrap()
    }

    fn file(fields: Vec<Field>) -> ArrowSchema {
        ArrowSchema::new(fields)
    }

    fn check(fields: Vec<Field>) -> Result<BTreeMap<String, i32>, String> {
        let table = table();
        let arrow = arrow_schema(&table).unwrap();
        match_columns(&file(fields), &table, &arrow, &BTreeMap::new())
    }

    #[test]
    fn columns_match_by_name_in_any_order_and_widen() {
        let matched = check(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, None), true),
            Field::new("ID", DataType::Int32, false),
            Field::new("amount", DataType::Decimal128(9, 2), true),
            Field::new("name", DataType::Utf8View, true),
        ])
        .unwrap();
        assert_eq!(
            matched,
            BTreeMap::from([("ID".into(), 1), ("amount".into(), 3), ("name".into(), 2), ("ts".into(), 4)])
        );
        // a nullable column may be missing: it reads as NULL
        assert!(check(vec![Field::new("id", DataType::Int64, true)]).is_ok());
    }

    #[test]
    fn mismatches_name_the_column() {
        let err = |fields| check(fields).unwrap_err();
        let id = || Field::new("id", DataType::Int64, false);
        assert!(err(vec![id(), Field::new("extra", DataType::Int64, true)]).contains("column extra is not a column"));
        assert!(err(vec![Field::new("name", DataType::Utf8, true)]).contains("column id is NOT NULL"));
        let narrowing = err(vec![id(), Field::new("amount", DataType::Decimal128(18, 3), true)]);
        assert!(narrowing.contains("column amount is DECIMAL(18,3) in the file"), "{narrowing}");
        assert!(narrowing.contains("DECIMAL(18,2)"), "{narrowing}");
        let text = err(vec![id(), Field::new("ts", DataType::Utf8, true)]);
        assert!(text.contains("column ts is VARCHAR"), "{text}");
        let twice = err(vec![id(), Field::new("ID", DataType::Int64, true)]);
        assert!(twice.contains("are both column id"), "{twice}");
    }

    #[test]
    fn only_lossless_conversions_read() {
        use DataType::*;
        assert!(readable(&UInt32, &Int64) && !readable(&UInt32, &Int32) && !readable(&Int64, &Int32));
        assert!(!readable(&UInt64, &Decimal128(20, 0)) && !readable(&Int32, &Decimal128(19, 0)));
        assert!(!readable(&Float64, &Float32) && readable(&Float32, &Float64));
        assert!(!readable(&Decimal128(10, 2), &Decimal128(9, 2)) && !readable(&Decimal128(9, 3), &Decimal128(18, 2)));
        let tz = |unit| Timestamp(unit, Some(Arc::from("UTC")));
        assert!(readable(&tz(TimeUnit::Microsecond), &Timestamp(TimeUnit::Microsecond, Some(Arc::from("+00:00")))));
        assert!(!readable(&tz(TimeUnit::Microsecond), &Timestamp(TimeUnit::Microsecond, None)));
        assert!(!readable(&Timestamp(TimeUnit::Nanosecond, None), &Timestamp(TimeUnit::Microsecond, None)));
        assert!(readable(&Dictionary(Box::new(Int32), Box::new(Utf8)), &Utf8));
        let list = |t: DataType, nullable| List(Arc::new(Field::new("element", t, nullable)));
        assert!(readable(&list(Int32, true), &list(Int64, true)));
        assert!(!readable(&list(Int32, true), &list(Int64, false)));
        assert!(!readable(&list(Int64, true), &list(Int32, true)));
        let st = |names: &[&str]| Struct(names.iter().map(|n| Field::new(*n, Int32, true)).collect::<Vec<_>>().into());
        assert!(readable(&st(&["a", "b"]), &st(&["a", "b"])));
        assert!(!readable(&st(&["b", "a"]), &st(&["a", "b"])) && !readable(&st(&["a"]), &st(&["a", "b"])));
    }
}
