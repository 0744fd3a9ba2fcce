//! DuckDB's pushed-down table filters, as pruning predicates. The shim describes the filters as
//! JSON whose constants live in a one-row Arrow struct array (so values cross the boundary in the
//! Arrow C Data Interface, typed). Pruning is always conservative: a filter skade cannot translate
//! prunes nothing, and DuckDB still applies every filter to the rows it receives.

use std::cmp::Ordering;

use arrow::array::{Array, ArrayRef, AsArray, StructArray};
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type, Int8Type,
    Time64MicrosecondType, TimeUnit, TimestampMicrosecondType,
};
use iceberg::spec::{DataFile, Datum, PrimitiveType, Schema, Type};
use serde::Deserialize;

use crate::error::{Error, Result};

/// The shim's description of DuckDB's table filters (column = top-level column index).
#[derive(Debug, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum FilterExpr {
    And {
        args: Vec<FilterExpr>,
    },
    Or {
        args: Vec<FilterExpr>,
    },
    Eq {
        col: usize,
        r#const: usize,
    },
    Ne {
        col: usize,
        r#const: usize,
    },
    Lt {
        col: usize,
        r#const: usize,
    },
    Le {
        col: usize,
        r#const: usize,
    },
    Gt {
        col: usize,
        r#const: usize,
    },
    Ge {
        col: usize,
        r#const: usize,
    },
    IsNull {
        col: usize,
    },
    IsNotNull {
        col: usize,
    },
    In {
        col: usize,
        consts: Vec<usize>,
    },
    /// A filter DuckDB need not evaluate (a join's runtime filter): it may prune, never pin.
    Hint {
        arg: Box<FilterExpr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A predicate over Iceberg field ids, evaluated against a data file's column metrics.
#[derive(Debug, Clone)]
pub enum Prune {
    And(Vec<Prune>),
    Or(Vec<Prune>),
    Compare {
        field_id: i32,
        cmp: Cmp,
        value: Datum,
    },
    In {
        field_id: i32,
        values: Vec<Datum>,
    },
    IsNull(i32),
    IsNotNull(i32),
    /// A join's runtime filter: it prunes files and row groups, as DuckDB's zone maps use it, but
    /// is no condition of the query (DuckDB may push it below a LIMIT or a DISTINCT ON), so it
    /// never pins keys (the transaction's pinned-key shortcut, above this module) and the rows
    /// are not filtered by it.
    Hint(Box<Prune>),
}

impl Prune {
    /// Parses the shim's description. None: nothing in it can prune.
    pub fn parse(json: &str, constants: Option<&StructArray>, schema: &Schema) -> Result<Option<Prune>> {
        if json.is_empty() {
            return Ok(None);
        }
        let exprs: Vec<FilterExpr> =
            serde_json::from_str(json).map_err(|e| Error::internal(format!("malformed filter description: {e}")))?;
        let t = Translator { constants, schema };
        Ok(and_all(exprs.iter().filter_map(|e| t.translate(e)).collect()))
    }

    /// The field ids the predicate looks at.
    pub fn field_ids(&self) -> Vec<i32> {
        let mut out = vec![];
        let mut stack = vec![self];
        while let Some(p) = stack.pop() {
            match p {
                Prune::And(parts) | Prune::Or(parts) => stack.extend(parts),
                Prune::Compare { field_id, .. } | Prune::In { field_id, .. } => out.push(*field_id),
                Prune::IsNull(id) | Prune::IsNotNull(id) => out.push(*id),
                Prune::Hint(p) => stack.push(p),
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The part of the predicate on the fields `keep` accepts: a weaker predicate (a conjunct on
    /// other fields is dropped; a disjunction with an arm on them is dropped whole), so still
    /// conservative. None: nothing is left.
    pub fn restrict(&self, keep: &dyn Fn(i32) -> bool) -> Option<Prune> {
        match self {
            Prune::And(parts) => and_all(parts.iter().filter_map(|p| p.restrict(keep)).collect()),
            Prune::Or(parts) => parts.iter().map(|p| p.restrict(keep)).collect::<Option<Vec<_>>>().map(Prune::Or),
            Prune::Compare { field_id: id, .. }
            | Prune::In { field_id: id, .. }
            | Prune::IsNull(id)
            | Prune::IsNotNull(id) => keep(*id).then(|| self.clone()),
            Prune::Hint(p) => p.restrict(keep).map(|p| Prune::Hint(Box::new(p))),
        }
    }

    /// Both predicates (either may be absent).
    pub fn and(a: Option<Prune>, b: Option<Prune>) -> Option<Prune> {
        and_all(a.into_iter().chain(b).collect())
    }

    /// False only when no row of `file` can satisfy the predicate.
    pub fn may_match(&self, file: &DataFile) -> bool {
        self.may_match_stats(file)
    }

    /// False only when no row described by `stats` (a file, a row group) can satisfy it.
    pub fn may_match_stats(&self, stats: &dyn ColumnStats) -> bool {
        match self {
            Prune::And(parts) => parts.iter().all(|p| p.may_match_stats(stats)),
            Prune::Or(parts) => parts.iter().any(|p| p.may_match_stats(stats)),
            Prune::IsNull(id) => stats.null_count(*id).is_none_or(|n| n > 0),
            Prune::IsNotNull(id) => !all_null(stats, *id),
            Prune::Hint(p) => p.may_match_stats(stats),
            Prune::Compare { field_id, cmp, value } => {
                if all_null(stats, *field_id) {
                    return false; // a comparison is never true on NULL
                }
                let lower = stats.lower(*field_id);
                let upper = stats.upper(*field_id);
                let below = |b: Option<&Datum>| b.and_then(|b| b.partial_cmp(value)); // bound vs value
                match cmp {
                    Cmp::Eq => {
                        !matches!(below(lower), Some(Ordering::Greater))
                            && !matches!(below(upper), Some(Ordering::Less))
                    }
                    Cmp::Ne => !(below(lower) == Some(Ordering::Equal) && below(upper) == Some(Ordering::Equal)),
                    Cmp::Lt => !matches!(below(lower), Some(Ordering::Greater | Ordering::Equal)),
                    Cmp::Le => !matches!(below(lower), Some(Ordering::Greater)),
                    Cmp::Gt => !matches!(below(upper), Some(Ordering::Less | Ordering::Equal)),
                    Cmp::Ge => !matches!(below(upper), Some(Ordering::Less)),
                }
            }
            Prune::In { field_id, values } => values
                .iter()
                .any(|v| Prune::Compare { field_id: *field_id, cmp: Cmp::Eq, value: v.clone() }.may_match_stats(stats)),
        }
    }
}

/// Column statistics by Iceberg field id: a data file's metrics or a row group's statistics.
/// Missing statistics prune nothing.
pub trait ColumnStats {
    fn lower(&self, field_id: i32) -> Option<&Datum>;
    fn upper(&self, field_id: i32) -> Option<&Datum>;
    fn null_count(&self, field_id: i32) -> Option<u64>;
    fn row_count(&self) -> u64;
}

impl ColumnStats for DataFile {
    fn lower(&self, field_id: i32) -> Option<&Datum> {
        self.lower_bounds().get(&field_id)
    }
    fn upper(&self, field_id: i32) -> Option<&Datum> {
        self.upper_bounds().get(&field_id)
    }
    fn null_count(&self, field_id: i32) -> Option<u64> {
        self.null_value_counts().get(&field_id).copied()
    }
    fn row_count(&self) -> u64 {
        self.record_count()
    }
}

fn all_null(stats: &dyn ColumnStats, id: i32) -> bool {
    stats.null_count(id).is_some_and(|n| n == stats.row_count())
}

fn and_all(mut parts: Vec<Prune>) -> Option<Prune> {
    match parts.len() {
        0 => None,
        1 => parts.pop(),
        _ => Some(Prune::And(parts)),
    }
}

struct Translator<'a> {
    constants: Option<&'a StructArray>,
    schema: &'a Schema,
}

impl Translator<'_> {
    fn translate(&self, e: &FilterExpr) -> Option<Prune> {
        use FilterExpr::*;
        match e {
            // A conjunction prunes with whatever part translates; a disjunction only if all do.
            And { args } => and_all(args.iter().filter_map(|a| self.translate(a)).collect()),
            Or { args } => {
                let parts: Option<Vec<Prune>> = args.iter().map(|a| self.translate(a)).collect();
                parts.map(Prune::Or)
            }
            Eq { col, r#const } => self.compare(*col, *r#const, Cmp::Eq),
            Ne { col, r#const } => self.compare(*col, *r#const, Cmp::Ne),
            Lt { col, r#const } => self.compare(*col, *r#const, Cmp::Lt),
            Le { col, r#const } => self.compare(*col, *r#const, Cmp::Le),
            Gt { col, r#const } => self.compare(*col, *r#const, Cmp::Gt),
            Ge { col, r#const } => self.compare(*col, *r#const, Cmp::Ge),
            IsNull { col } => Some(Prune::IsNull(self.column(*col)?.0)),
            IsNotNull { col } => Some(Prune::IsNotNull(self.column(*col)?.0)),
            In { col, consts } => {
                let (field_id, ty) = self.column(*col)?;
                let values: Option<Vec<Datum>> = consts.iter().map(|k| self.datum(*k, ty)).collect();
                Some(Prune::In { field_id, values: values? })
            }
            Hint { arg } => self.translate(arg).map(|p| Prune::Hint(Box::new(p))),
        }
    }

    fn column(&self, col: usize) -> Option<(i32, &PrimitiveType)> {
        let field = self.schema.as_struct().fields().get(col)?;
        match field.field_type.as_ref() {
            Type::Primitive(p) => Some((field.id, p)),
            _ => None,
        }
    }

    /// Ordering comparisons are not pushed on types whose Iceberg order differs from DuckDB's
    /// (uuids); floats are never pushed (see `datum`).
    fn compare(&self, col: usize, k: usize, cmp: Cmp) -> Option<Prune> {
        let (field_id, ty) = self.column(col)?;
        if !matches!(cmp, Cmp::Eq | Cmp::Ne) && matches!(ty, PrimitiveType::Uuid) {
            return None;
        }
        Some(Prune::Compare { field_id, cmp, value: self.datum(k, ty)? })
    }

    fn datum(&self, k: usize, ty: &PrimitiveType) -> Option<Datum> {
        datum_at(self.constants?.columns().get(k)?, 0, ty)
    }
}

/// Row `row` of `array` as a value of Iceberg type `ty` (None: NULL, a float, or a type pair it
/// cannot translate).
pub fn datum_at(array: &ArrayRef, row: usize, ty: &PrimitiveType) -> Option<Datum> {
    if matches!(ty, PrimitiveType::Float | PrimitiveType::Double) {
        return None; // NaN sorts last in DuckDB but is excluded from Iceberg bounds.
    }
    if row >= array.len() || array.is_null(row) {
        return None;
    }
    let d = match (array.data_type(), ty) {
        (DataType::Boolean, PrimitiveType::Boolean) => Datum::bool(array.as_boolean().value(row)),
        // DuckDB's lossless export: BOOLEAN as arrow.bool8 (one byte per value)
        (DataType::Int8, PrimitiveType::Boolean) => Datum::bool(array.as_primitive::<Int8Type>().value(row) != 0),
        (DataType::Int32, PrimitiveType::Int) => Datum::int(array.as_primitive::<Int32Type>().value(row)),
        (DataType::Int64, PrimitiveType::Long) => Datum::long(array.as_primitive::<Int64Type>().value(row)),
        // narrow DuckDB integers kept on wider Iceberg columns (format::duckdb_types)
        (DataType::Int8 | DataType::Int16 | DataType::UInt8 | DataType::UInt16, PrimitiveType::Int) => {
            let wide = arrow::compute::cast(&array.slice(row, 1), &DataType::Int32).ok()?;
            Datum::int(wide.as_primitive::<Int32Type>().value(0))
        }
        (DataType::UInt32, PrimitiveType::Long) => {
            Datum::long(array.as_primitive::<arrow::datatypes::UInt32Type>().value(row) as i64)
        }
        (DataType::Float32, _) => Datum::float(array.as_primitive::<Float32Type>().value(row)),
        (DataType::Float64, _) => Datum::double(array.as_primitive::<Float64Type>().value(row)),
        (DataType::Date32, PrimitiveType::Date) => Datum::date(array.as_primitive::<Date32Type>().value(row)),
        (DataType::Time64(TimeUnit::Microsecond), PrimitiveType::Time) => {
            Datum::time_micros(array.as_primitive::<Time64MicrosecondType>().value(row)).ok()?
        }
        (DataType::Timestamp(TimeUnit::Microsecond, None), PrimitiveType::Timestamp) => {
            Datum::timestamp_micros(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        // TIMESTAMP_S and TIMESTAMP_MS kept on timestamp columns: exact in microseconds (not
        // TIMESTAMP_NS, whose truncation would move a negative bound past rows it must keep)
        (DataType::Timestamp(TimeUnit::Second | TimeUnit::Millisecond, None), PrimitiveType::Timestamp) => {
            let target = DataType::Timestamp(TimeUnit::Microsecond, None);
            let micros = crate::format::timestamps::convert(&array.slice(row, 1), &target)?.ok()?;
            Datum::timestamp_micros(micros.as_primitive::<TimestampMicrosecondType>().value(0))
        }
        (DataType::Timestamp(TimeUnit::Microsecond, Some(_)), PrimitiveType::Timestamptz) => {
            Datum::timestamptz_micros(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        (DataType::Utf8, PrimitiveType::String) => Datum::string(array.as_string::<i32>().value(row)),
        (DataType::Utf8View, PrimitiveType::String) => Datum::string(array.as_string_view().value(row)),
        (DataType::Binary, PrimitiveType::Binary) => Datum::binary(array.as_binary::<i32>().value(row).iter().copied()),
        (DataType::FixedSizeBinary(16), PrimitiveType::Uuid) => {
            Datum::uuid(uuid::Uuid::from_slice(array.as_fixed_size_binary().value(row)).ok()?)
        }
        (DataType::Decimal128(p, s), PrimitiveType::Decimal { precision, scale })
            if *p as u32 == *precision && *s as u32 == *scale =>
        {
            let v = array.as_primitive::<Decimal128Type>().value(row);
            Datum::try_from_bytes(&v.to_be_bytes(), ty.clone()).ok()?
        }
        _ => return None,
    };
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
    use arrow::datatypes::Field;
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, NestedField, Struct};
    use std::collections::HashMap;
    use std::sync::Arc;

    fn schema() -> Schema {
        let f = |id, name, t| Arc::new(NestedField::optional(id, name, Type::Primitive(t)));
        Schema::builder()
            .with_fields(vec![
                f(1, "id", PrimitiveType::Long),
                f(2, "name", PrimitiveType::String),
                f(3, "amount", PrimitiveType::Double),
            ])
            .build()
            .unwrap()
    }

    fn consts() -> StructArray {
        let c = |name: &str, a: ArrayRef| (Arc::new(Field::new(name, a.data_type().clone(), true)), a);
        StructArray::from(vec![
            c("c0", Arc::new(Int64Array::from(vec![5]))),
            c("c1", Arc::new(StringArray::from(vec!["x"]))),
            c("c2", Arc::new(Float64Array::from(vec![1.0]))),
            c("c3", Arc::new(Int64Array::from(vec![50]))),
        ])
    }

    /// A file whose ids run from `lo` to `hi`, with `nulls` NULL ids out of 100 rows.
    fn file(lo: i64, hi: i64, nulls: u64) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path("f.parquet".into())
            .file_format(DataFileFormat::Parquet)
            .partition(Struct::empty())
            .record_count(100)
            .file_size_in_bytes(1)
            .null_value_counts(HashMap::from([(1, nulls)]))
            .lower_bounds(HashMap::from([(1, Datum::long(lo))]))
            .upper_bounds(HashMap::from([(1, Datum::long(hi))]))
            .build()
            .unwrap()
    }

    fn prune(json: &str) -> Option<Prune> {
        Prune::parse(json, Some(&consts()), &schema()).unwrap()
    }

    #[test]
    fn comparisons_prune_by_bounds() {
        let eq5 = prune(r#"[{"op":"eq","col":0,"const":0}]"#).unwrap();
        assert!(eq5.may_match(&file(0, 10, 0)));
        assert!(!eq5.may_match(&file(6, 10, 0)));
        assert!(!eq5.may_match(&file(0, 4, 0)));
        let gt5 = prune(r#"[{"op":"gt","col":0,"const":0}]"#).unwrap();
        assert!(!gt5.may_match(&file(0, 5, 0)));
        assert!(gt5.may_match(&file(0, 6, 0)));
        let le5 = prune(r#"[{"op":"le","col":0,"const":0}]"#).unwrap();
        assert!(le5.may_match(&file(5, 9, 0)));
        assert!(!le5.may_match(&file(6, 9, 0)));
        // a join's runtime filter prunes as its filter does
        let hint = prune(r#"[{"op":"hint","arg":{"op":"eq","col":0,"const":0}}]"#).unwrap();
        assert!(matches!(hint, Prune::Hint(_)));
        assert!(hint.may_match(&file(0, 10, 0)));
        assert!(!hint.may_match(&file(6, 10, 0)));
        let in_ = prune(r#"[{"op":"in","col":0,"consts":[0,3]}]"#).unwrap();
        assert!(in_.may_match(&file(40, 60, 0)));
        assert!(!in_.may_match(&file(6, 40, 0)));
        let ne = prune(r#"[{"op":"ne","col":0,"const":0}]"#).unwrap();
        assert!(!ne.may_match(&file(5, 5, 0)));
        assert!(ne.may_match(&file(5, 6, 0)));
    }

    #[test]
    fn nulls_are_respected() {
        let is_null = prune(r#"[{"op":"is_null","col":0}]"#).unwrap();
        assert!(!is_null.may_match(&file(0, 10, 0)));
        assert!(is_null.may_match(&file(0, 10, 3)));
        let eq5 = prune(r#"[{"op":"eq","col":0,"const":0}]"#).unwrap();
        assert!(!eq5.may_match(&file(0, 10, 100)), "an all-NULL column never compares equal");
        let not_null = prune(r#"[{"op":"is_not_null","col":0}]"#).unwrap();
        assert!(!not_null.may_match(&file(0, 10, 100)));
    }

    #[test]
    fn what_cannot_be_proven_is_not_pruned() {
        // floats never prune (NaN sorts last in DuckDB but is outside Iceberg bounds)
        assert!(prune(r#"[{"op":"lt","col":2,"const":2}]"#).is_none());
        // an OR with an untranslatable arm prunes nothing; an AND keeps its other parts
        assert!(
            prune(r#"[{"op":"or","args":[{"op":"eq","col":0,"const":0},{"op":"lt","col":2,"const":2}]}]"#).is_none()
        );
        let and = prune(r#"[{"op":"and","args":[{"op":"eq","col":0,"const":0},{"op":"lt","col":2,"const":2}]}]"#);
        assert!(!and.unwrap().may_match(&file(6, 10, 0)));
        // a type mismatch between constant and column: no pruning
        assert!(prune(r#"[{"op":"eq","col":0,"const":1}]"#).is_none());
    }
}
