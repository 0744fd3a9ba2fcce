//! DuckDB's pushed-down table filters, as pruning predicates. The shim describes the filters as
//! JSON whose constants live in a one-row Arrow struct array (so values cross the boundary in the
//! Arrow C Data Interface, typed). Pruning is always conservative: a filter skade cannot translate
//! prunes nothing, and DuckDB still applies every filter to the rows it receives.

use arrow::array::{Array, AsArray, StructArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type, Int8Type,
    Time64MicrosecondType, TimeUnit, TimestampMicrosecondType,
};
use iceberg::expr::{Predicate, Reference};
use iceberg::spec::{Datum, PrimitiveType, Schema, Type};
use serde::Deserialize;

use crate::error::Result;

#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum FilterExpr {
    And { args: Vec<FilterExpr> },
    Or { args: Vec<FilterExpr> },
    Eq { col: usize, r#const: usize },
    Ne { col: usize, r#const: usize },
    Lt { col: usize, r#const: usize },
    Le { col: usize, r#const: usize },
    Gt { col: usize, r#const: usize },
    Ge { col: usize, r#const: usize },
    IsNull { col: usize },
    IsNotNull { col: usize },
    In { col: usize, consts: Vec<usize> },
}

/// Parses the shim's filter description into one predicate usable for pruning (or None).
pub fn to_predicate(
    json: &str,
    constants: Option<&StructArray>,
    schema: &Schema,
) -> Result<Option<Predicate>> {
    if json.is_empty() {
        return Ok(None);
    }
    let exprs: Vec<FilterExpr> = serde_json::from_str(json)
        .map_err(|e| crate::error::Error::internal(format!("malformed filter description: {e}")))?;
    let t = Translator { constants, schema };
    Ok(and_all(exprs.iter().filter_map(|e| t.translate(e))))
}

fn and_all(preds: impl Iterator<Item = Predicate>) -> Option<Predicate> {
    preds.reduce(|a, b| a.and(b))
}

struct Translator<'a> {
    constants: Option<&'a StructArray>,
    schema: &'a Schema,
}

impl Translator<'_> {
    fn translate(&self, e: &FilterExpr) -> Option<Predicate> {
        use FilterExpr::*;
        match e {
            // A conjunction prunes with whatever part translates; a disjunction only if all do.
            And { args } => and_all(args.iter().filter_map(|a| self.translate(a))),
            Or { args } => {
                let parts: Option<Vec<Predicate>> =
                    args.iter().map(|a| self.translate(a)).collect();
                parts?.into_iter().reduce(|a, b| a.or(b))
            }
            Eq { col, r#const } => self.compare(*col, *r#const, true, |r, d| r.equal_to(d)),
            Ne { col, r#const } => self.compare(*col, *r#const, true, |r, d| r.not_equal_to(d)),
            Lt { col, r#const } => self.compare(*col, *r#const, false, |r, d| r.less_than(d)),
            Le { col, r#const } => {
                self.compare(*col, *r#const, false, |r, d| r.less_than_or_equal_to(d))
            }
            Gt { col, r#const } => self.compare(*col, *r#const, false, |r, d| r.greater_than(d)),
            Ge { col, r#const } => {
                self.compare(*col, *r#const, false, |r, d| r.greater_than_or_equal_to(d))
            }
            IsNull { col } => Some(self.column(*col)?.0.is_null()),
            IsNotNull { col } => Some(self.column(*col)?.0.is_not_null()),
            In { col, consts } => {
                let (r, ty) = self.column(*col)?;
                let datums: Option<Vec<Datum>> =
                    consts.iter().map(|k| self.datum(*k, ty)).collect();
                Some(r.is_in(datums?))
            }
        }
    }

    fn column(&self, col: usize) -> Option<(Reference, &PrimitiveType)> {
        let field = self.schema.as_struct().fields().get(col)?;
        match field.field_type.as_ref() {
            Type::Primitive(p) => Some((Reference::new(field.name.clone()), p)),
            _ => None,
        }
    }

    /// `equality_only`: the comparison is exact on every type. Ordering comparisons are not
    /// pushed on types whose Iceberg order differs from DuckDB's (floats and their NaN, uuids).
    fn compare(
        &self,
        col: usize,
        k: usize,
        equality_only: bool,
        f: impl FnOnce(Reference, Datum) -> Predicate,
    ) -> Option<Predicate> {
        let (r, ty) = self.column(col)?;
        if !equality_only && matches!(ty, PrimitiveType::Uuid) {
            return None;
        }
        Some(f(r, self.datum(k, ty)?))
    }

    fn datum(&self, k: usize, ty: &PrimitiveType) -> Option<Datum> {
        if matches!(ty, PrimitiveType::Float | PrimitiveType::Double) {
            return None; // NaN sorts last in DuckDB but is excluded from Iceberg bounds.
        }
        let array = self.constants?.columns().get(k)?;
        if array.is_null(0) {
            return None;
        }
        let d = match (array.data_type(), ty) {
            (DataType::Boolean, PrimitiveType::Boolean) => Datum::bool(array.as_boolean().value(0)),
            // DuckDB's lossless export: BOOLEAN as arrow.bool8 (one byte per value)
            (DataType::Int8, PrimitiveType::Boolean) => {
                Datum::bool(array.as_primitive::<Int8Type>().value(0) != 0)
            }
            (DataType::Int32, PrimitiveType::Int) => {
                Datum::int(array.as_primitive::<Int32Type>().value(0))
            }
            (DataType::Int64, PrimitiveType::Long) => {
                Datum::long(array.as_primitive::<Int64Type>().value(0))
            }
            (DataType::Float32, _) => Datum::float(array.as_primitive::<Float32Type>().value(0)),
            (DataType::Float64, _) => Datum::double(array.as_primitive::<Float64Type>().value(0)),
            (DataType::Date32, PrimitiveType::Date) => {
                Datum::date(array.as_primitive::<Date32Type>().value(0))
            }
            (DataType::Time64(TimeUnit::Microsecond), PrimitiveType::Time) => {
                Datum::time_micros(array.as_primitive::<Time64MicrosecondType>().value(0)).ok()?
            }
            (DataType::Timestamp(TimeUnit::Microsecond, None), PrimitiveType::Timestamp) => {
                Datum::timestamp_micros(array.as_primitive::<TimestampMicrosecondType>().value(0))
            }
            (DataType::Timestamp(TimeUnit::Microsecond, Some(_)), PrimitiveType::Timestamptz) => {
                Datum::timestamptz_micros(array.as_primitive::<TimestampMicrosecondType>().value(0))
            }
            (DataType::Utf8, PrimitiveType::String) => {
                Datum::string(array.as_string::<i32>().value(0))
            }
            (DataType::Utf8View, PrimitiveType::String) => {
                Datum::string(array.as_string_view().value(0))
            }
            (DataType::Binary, PrimitiveType::Binary) => {
                Datum::binary(array.as_binary::<i32>().value(0).iter().copied())
            }
            (DataType::FixedSizeBinary(16), PrimitiveType::Uuid) => {
                Datum::uuid(uuid::Uuid::from_slice(array.as_fixed_size_binary().value(0)).ok()?)
            }
            (DataType::Decimal128(p, s), PrimitiveType::Decimal { precision, scale })
                if *p as u32 == *precision && *s as u32 == *scale =>
            {
                let v = array.as_primitive::<Decimal128Type>().value(0);
                Datum::try_from_bytes(&v.to_be_bytes(), ty.clone()).ok()?
            }
            _ => return None,
        };
        Some(d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::datatypes::Field;
    use iceberg::spec::NestedField;
    use std::sync::Arc;

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::optional(
                    1,
                    "id",
                    Type::Primitive(PrimitiveType::Long),
                )),
                Arc::new(NestedField::optional(
                    2,
                    "name",
                    Type::Primitive(PrimitiveType::String),
                )),
                Arc::new(NestedField::optional(
                    3,
                    "amount",
                    Type::Primitive(PrimitiveType::Double),
                )),
            ])
            .build()
            .unwrap()
    }

    fn consts() -> StructArray {
        StructArray::from(vec![
            (
                Arc::new(Field::new("c0", DataType::Int64, true)),
                Arc::new(Int64Array::from(vec![5])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("c1", DataType::Utf8, true)),
                Arc::new(StringArray::from(vec!["x"])) as ArrayRef,
            ),
            (
                Arc::new(Field::new("c2", DataType::Float64, true)),
                Arc::new(arrow::array::Float64Array::from(vec![1.0])) as ArrayRef,
            ),
        ])
    }

    #[test]
    fn translates_comparisons_and_skips_what_it_cannot_prove() {
        let c = consts();
        let s = schema();
        let p = to_predicate(
            r#"[{"op":"gt","col":0,"const":0},{"op":"eq","col":1,"const":1}]"#,
            Some(&c),
            &s,
        )
        .unwrap()
        .unwrap();
        let text = format!("{p}");
        assert!(
            text.contains("id > 5") && text.contains("name = \"x\""),
            "{text}"
        );
        // floats never prune; an OR with an untranslatable arm prunes nothing
        assert!(
            to_predicate(r#"[{"op":"lt","col":2,"const":2}]"#, Some(&c), &s)
                .unwrap()
                .is_none()
        );
        assert!(to_predicate(
            r#"[{"op":"or","args":[{"op":"eq","col":0,"const":0},{"op":"lt","col":2,"const":2}]}]"#,
            Some(&c),
            &s
        )
        .unwrap()
        .is_none());
    }
}
