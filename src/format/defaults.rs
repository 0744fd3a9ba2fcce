//! Iceberg v3 column defaults: `initial-default` (what rows written before a column existed read
//! in it) and `write-default` (what a write that leaves the column out stores). skade keeps them
//! on primitive columns of v3 tables: from DuckDB's constant (a one-row Arrow array) to an Iceberg
//! literal, from the literal to a column of a scan, and to the text DuckDB casts its DEFAULT from.

use std::sync::Arc;

use arrow::array::{
    new_null_array, Array, ArrayRef, BinaryArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray, Float32Array,
    Float64Array, Int32Array, Int64Array, StringArray, UInt32Array,
};
use arrow::datatypes::{DataType, Field, Schema as ArrowSchema, SchemaRef as ArrowSchemaRef};
use iceberg::arrow::{arrow_primitive_to_literal, type_to_arrow_type};
use iceberg::spec::{
    FormatVersion, Literal, NestedField, PrimitiveLiteral, PrimitiveType, Schema, TableMetadata, Type,
};
use serde_json::Value as JsonValue;

use super::conform::conform_array;
use crate::error::{Error, Result};

/// The Iceberg literal of `value` (one row, as DuckDB exported the column's constant default) for
/// column `column` of type `ty`; None for a NULL default (no default).
pub fn literal_of(value: &ArrayRef, ty: &Type, column: &str) -> Result<Option<Literal>> {
    if !ty.is_primitive() {
        return Err(Error::not_implemented(format!(
            "column \"{column}\" is a STRUCT, LIST or MAP: skade keeps defaults of columns of other types only"
        )));
    }
    if value.len() != 1 {
        return Err(Error::internal(format!("a default of {} values", value.len())));
    }
    let stored = conform_array(value, &type_to_arrow_type(ty)?)?;
    let Some(literal) = arrow_primitive_to_literal(&stored, ty)?.into_iter().next().flatten() else {
        return Ok(None);
    };
    // (Iceberg keeps a default as JSON: a NaN or an infinity has no JSON form)
    match json_of(&literal, ty) {
        Some(JsonValue::Null) => Err(Error::invalid(format!(
            "column \"{column}\": its DEFAULT has no Iceberg form (a NaN or infinite number cannot be a default)"
        ))),
        None => Err(Error::invalid(format!(
            "column \"{column}\": its DEFAULT has no Iceberg form skade can write (a TIME of 24:00:00, or a \
             TIMESTAMPTZ before 1970 with a fraction of a second, which the iceberg crate cannot write)"
        ))),
        Some(_) => Ok(Some(literal)),
    }
}

/// The Iceberg JSON form of `literal` (of type `ty`); None where the iceberg crate's conversion
/// has none or would panic (its time of day takes no 24:00:00, its timestamps with a zone no
/// negative fraction of a second).
fn json_of(literal: &Literal, ty: &Type) -> Option<JsonValue> {
    if let (Literal::Primitive(PrimitiveLiteral::Long(v)), Type::Primitive(p)) = (literal, ty) {
        let unsafe_value = match p {
            PrimitiveType::Time => !(0..86_400_000_000).contains(v),
            PrimitiveType::Timestamptz => *v < 0 && v % 1_000_000 != 0,
            PrimitiveType::TimestamptzNs => *v < 0 && v % 1_000_000_000 != 0,
            _ => false,
        };
        if unsafe_value {
            return None;
        }
    }
    literal.clone().try_into_json(ty).ok()
}

/// Refuses defaults in a client's table (created or changed through the REST server) that skade
/// cannot keep or read: on a table before v3, on a field inside a STRUCT, LIST or MAP (skade
/// fills the initial defaults of top-level columns only), or without a JSON form it can write.
pub fn check_client_defaults(shown: &str, md: &TableMetadata) -> Result<()> {
    let refused = |why: String| Err(Error::not_implemented(format!("table {shown}: {why}")));
    for column in md.current_schema().as_struct().fields() {
        let mut nested = super::field_path::children(&column.field_type);
        while let Some(f) = nested.pop() {
            if f.initial_default.is_some() || f.write_default.is_some() {
                return refused(format!(
                    "field {} has a default: skade keeps defaults of top-level columns only",
                    f.name
                ));
            }
            nested.extend(super::field_path::children(&f.field_type));
        }
        let defaults = [&column.initial_default, &column.write_default];
        if defaults.iter().all(|d| d.is_none()) {
            continue;
        }
        if md.format_version() < FormatVersion::V3 {
            return refused(format!("column {} has a default: an Iceberg v2 table keeps none", column.name));
        }
        if defaults.iter().filter_map(|d| d.as_ref()).any(|d| json_of(d, &column.field_type).is_none()) {
            return refused(format!("column {} has a default skade cannot write back", column.name));
        }
    }
    Ok(())
}

/// Refuses a change of a column's initial default (Iceberg: set once, when the column is added;
/// the rows written before it read it, so changing it would change them).
pub fn check_initial_defaults_kept(shown: &str, base: &TableMetadata, next: &TableMetadata) -> Result<()> {
    for was in base.current_schema().as_struct().fields() {
        if let Some(is) = next.current_schema().field_by_id(was.id) {
            // (compared in JSON form: a widened column's default is the same value in a wider type)
            let json = |f: &NestedField| f.initial_default.as_ref().map(|d| json_of(d, &f.field_type));
            if json(is) != json(was) {
                return Err(Error::invalid(format!(
                    "table {shown}: column {} would change its initial-default, which Iceberg sets once, when the \
                     column is added",
                    was.name
                )));
            }
        }
    }
    Ok(())
}

/// `literal` (of a field of type `from`) as a value of the field's new type `to` (ALTER COLUMN
/// TYPE widens int to long, float to double, a decimal's precision); None when it has no such form.
pub fn retyped(literal: &Literal, from: &Type, to: &Type) -> Option<Literal> {
    let json = json_of(literal, from)?;
    Literal::try_from_json(json, to).ok().flatten()
}

/// The column of `rows` rows, of Arrow type `target`, that rows of a file without field `field`
/// read: its initial default, or NULL.
pub fn missing_column(field: Option<&NestedField>, target: &DataType, rows: usize) -> Result<ArrayRef> {
    let (Some(field), true) = (field, rows > 0) else {
        return Ok(new_null_array(target, rows));
    };
    match (&field.initial_default, field.field_type.as_ref()) {
        (Some(Literal::Primitive(value)), Type::Primitive(ty)) => {
            let one = conform_array(&literal_array(value, ty)?, target)?;
            Ok(arrow::compute::take(&one, &UInt32Array::from(vec![0u32; rows]), None)?)
        }
        _ => Ok(new_null_array(target, rows)),
    }
}

/// A one-element array of `value` in the Arrow type the iceberg crate gives `ty`.
fn literal_array(value: &PrimitiveLiteral, ty: &PrimitiveType) -> Result<ArrayRef> {
    let array: ArrayRef = match value {
        PrimitiveLiteral::Boolean(v) => Arc::new(BooleanArray::from(vec![*v])),
        PrimitiveLiteral::Int(v) => Arc::new(Int32Array::from(vec![*v])),
        PrimitiveLiteral::Long(v) => Arc::new(Int64Array::from(vec![*v])),
        PrimitiveLiteral::Float(v) => Arc::new(Float32Array::from(vec![v.0])),
        PrimitiveLiteral::Double(v) => Arc::new(Float64Array::from(vec![v.0])),
        PrimitiveLiteral::String(v) => Arc::new(StringArray::from(vec![v.as_str()])),
        PrimitiveLiteral::Binary(v) if matches!(ty, PrimitiveType::Fixed(_)) => {
            Arc::new(FixedSizeBinaryArray::try_from_iter(std::iter::once(v))?)
        }
        PrimitiveLiteral::Binary(v) => Arc::new(BinaryArray::from(vec![v.as_slice()])),
        PrimitiveLiteral::UInt128(v) => {
            Arc::new(FixedSizeBinaryArray::try_from_iter(std::iter::once(v.to_be_bytes()))?)
        }
        PrimitiveLiteral::Int128(v) => {
            let (precision, scale) = match ty {
                PrimitiveType::Decimal { precision, scale } => (*precision as u8, *scale as i8),
                _ => (38, 0),
            };
            Arc::new(Decimal128Array::from(vec![*v]).with_precision_and_scale(precision, scale)?)
        }
        PrimitiveLiteral::AboveMax | PrimitiveLiteral::BelowMin => {
            return Err(Error::corrupt(format!("a column default out of the range of type {ty}")))
        }
    };
    let target = type_to_arrow_type(&Type::Primitive(ty.clone()))?;
    Ok(conform_array(&array, &target)?)
}

/// The text DuckDB casts a column's DEFAULT from (to the column's type): Iceberg's JSON form of
/// the value, binary values as `\xNN` escapes (DuckDB's BLOB literal form, where Iceberg writes hex).
pub fn default_text(literal: &Literal, ty: &Type) -> Option<String> {
    let binary = matches!(ty, Type::Primitive(PrimitiveType::Binary | PrimitiveType::Fixed(_)));
    match json_of(literal, ty)? {
        JsonValue::String(hex) if binary => {
            Some(hex.as_bytes().chunks(2).map(|pair| format!("\\x{}", String::from_utf8_lossy(pair))).collect())
        }
        // (a year past 9999 is written with a sign, which DuckDB's casts do not take)
        JsonValue::String(text) => Some(text.strip_prefix('+').map(str::to_string).unwrap_or(text)),
        JsonValue::Null => None,
        other => Some(other.to_string()),
    }
}

/// The Arrow field metadata key of a column's write default, as [`default_text`] gives it (the
/// shim makes it the column's DEFAULT).
pub const DEFAULT_METADATA: &str = "skade.default";

/// `arrow` (the columns of `schema`, in its order) with each column's write default in its
/// field's metadata under [`DEFAULT_METADATA`].
pub fn with_write_defaults(arrow: ArrowSchemaRef, schema: &Schema) -> ArrowSchemaRef {
    let columns = schema.as_struct().fields();
    if columns.iter().all(|f| f.write_default.is_none()) {
        return arrow;
    }
    let fields: Vec<Field> = arrow
        .fields()
        .iter()
        .zip(columns)
        .map(|(a, f)| match f.write_default.as_ref().and_then(|d| default_text(d, &f.field_type)) {
            Some(text) => {
                let mut metadata = a.metadata().clone();
                metadata.insert(DEFAULT_METADATA.to_string(), text);
                a.as_ref().clone().with_metadata(metadata)
            }
            None => a.as_ref().clone(),
        })
        .collect();
    Arc::new(ArrowSchema::new_with_metadata(fields, arrow.metadata().clone()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;

    #[test]
    fn a_default_goes_from_duckdb_to_a_literal_to_a_column() {
        let cases: Vec<(ArrayRef, PrimitiveType, &str)> = vec![
            (Arc::new(Int32Array::from(vec![7])), PrimitiveType::Int, "7"),
            (Arc::new(Int64Array::from(vec![-3])), PrimitiveType::Long, "-3"),
            (Arc::new(StringArray::from(vec!["x'y"])), PrimitiveType::String, "x'y"),
            (Arc::new(Float64Array::from(vec![2.5])), PrimitiveType::Double, "2.5"),
            (Arc::new(BooleanArray::from(vec![true])), PrimitiveType::Boolean, "true"),
            (Arc::new(BinaryArray::from(vec![&b"\x01\xab"[..]])), PrimitiveType::Binary, "\\x01\\xab"),
            (
                Arc::new(Decimal128Array::from(vec![1420]).with_precision_and_scale(9, 2).unwrap()),
                PrimitiveType::Decimal { precision: 9, scale: 2 },
                "14.20",
            ),
            (Arc::new(arrow::array::Date32Array::from(vec![17486])), PrimitiveType::Date, "2017-11-16"),
        ];
        for (value, ty, text) in cases {
            let ty = Type::Primitive(ty);
            let literal = literal_of(&value, &ty, "c").unwrap().unwrap();
            assert_eq!(default_text(&literal, &ty).as_deref(), Some(text));
            let field = NestedField::optional(1, "c", ty.clone()).with_initial_default(literal);
            let column = missing_column(Some(&field), value.data_type(), 3).unwrap();
            assert_eq!(column.len(), 3);
            assert_eq!(column.slice(2, 1).as_ref(), value.as_ref(), "{ty}");
        }
    }

    #[test]
    fn null_nan_and_nested_defaults() {
        let int = Type::Primitive(PrimitiveType::Int);
        assert!(literal_of(&(Arc::new(Int32Array::from(vec![None])) as ArrayRef), &int, "c").unwrap().is_none());
        let nan: ArrayRef = Arc::new(Float64Array::from(vec![f64::NAN]));
        let err = literal_of(&nan, &Type::Primitive(PrimitiveType::Double), "c").unwrap_err();
        assert!(err.to_string().contains("NaN"), "{err}");
        let list = Type::List(iceberg::spec::ListType::new(Arc::new(NestedField::list_element(2, int, false))));
        assert!(literal_of(&nan, &list, "c").is_err());
    }

    #[test]
    fn values_the_crate_cannot_write_are_refused_not_panicked_on() {
        let time = Type::Primitive(PrimitiveType::Time);
        let midnight: ArrayRef = Arc::new(arrow::array::Time64MicrosecondArray::from(vec![86_400_000_000]));
        assert!(literal_of(&midnight, &time, "c").unwrap_err().to_string().contains("24:00:00"));
        let tz = Type::Primitive(PrimitiveType::Timestamptz);
        let before_1970 = Literal::Primitive(PrimitiveLiteral::Long(-500_000));
        assert_eq!(default_text(&before_1970, &tz), None);
        let whole_second = Literal::Primitive(PrimitiveLiteral::Long(-1_000_000));
        assert_eq!(default_text(&whole_second, &tz).as_deref(), Some("1969-12-31T23:59:59+00:00"));
        let far = Literal::Primitive(PrimitiveLiteral::Int(3_652_425)); // (year 11970)
        assert!(!default_text(&far, &Type::Primitive(PrimitiveType::Date)).unwrap().starts_with('+'));
    }

    #[test]
    fn a_widened_column_keeps_its_default() {
        let (int, long) = (Type::Primitive(PrimitiveType::Int), Type::Primitive(PrimitiveType::Long));
        assert_eq!(retyped(&Literal::int(7), &int, &long), Some(Literal::long(7)));
        let field = NestedField::optional(1, "c", int);
        let nulls = missing_column(Some(&field), &DataType::Int32, 2).unwrap();
        assert_eq!(nulls.as_primitive::<arrow::datatypes::Int32Type>().null_count(), 2);
    }
}
