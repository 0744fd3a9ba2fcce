//! The order a data file's rows are written in: a table's sort order (each field a transform of a
//! column, ascending or descending, NULLs first or last), then its primary key; or the key alone.
//! `sorted_runs` sorts held rows by it.
//!
//! A transformed field sorts by the transformed value (then by the fields after it), as Iceberg's
//! sort order asks: `day(ts), id` orders rows by day, then by id within a day. The values go to the
//! iceberg crate's transforms first clamped to the range it computes right (see
//! `format::partition::MAX_TIME_MICROS`; its truncate wraps at an integer's minimum). Clamping
//! keeps the order (every transform here is monotonic but bucket, which takes any value), so the
//! rows beyond that range (infinities, years past ~247,000) sort as the range's end does.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::{SortColumn, SortOptions};
use arrow::datatypes::{DataType, Date32Type, Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType};
use iceberg::spec::{NullOrder, Schema, SortDirection, SortOrder, Transform};
use iceberg::transform::{create_transform_function, BoxedTransformFunction};

use crate::error::Result;
use crate::format::partition::{MAX_DATE_DAYS, MAX_TIME_MICROS};

/// The fields rows are sorted by, in order.
#[derive(Clone, Debug)]
pub struct RowOrder {
    fields: Vec<OrderField>,
}

#[derive(Clone, Debug)]
struct OrderField {
    /// The column's top-level index.
    column: usize,
    transform: Transform,
    /// The crate's function for `transform` (None: identity, the column itself).
    function: Option<Arc<BoxedTransformFunction>>,
    options: SortOptions,
}

impl RowOrder {
    /// The columns `columns` (top-level indexes), ascending (a primary key: never NULL).
    pub fn by_columns(columns: &[usize]) -> RowOrder {
        let fields = columns
            .iter()
            .map(|&column| OrderField {
                column,
                transform: Transform::Identity,
                function: None,
                options: SortOptions::default(),
            })
            .collect();
        RowOrder { fields }
    }

    /// `order` of a table with `schema`, then the columns `then` (the primary key: ties broken by
    /// it, so that rows of one order value still sort by key for lookups). None when a field's
    /// source is no top-level column (another engine's order of a nested field) or its transform
    /// is one the crate cannot compute: such files are written unsorted, and say so.
    pub fn of_sort_order(schema: &Schema, order: &SortOrder, then: &[usize]) -> Result<Option<RowOrder>> {
        let columns = schema.as_struct().fields();
        let mut fields = Vec::with_capacity(order.fields.len() + then.len());
        for f in &order.fields {
            let Some(column) = columns.iter().position(|c| c.id == f.source_id) else {
                return Ok(None);
            };
            let function = match f.transform {
                Transform::Identity => None,
                Transform::Void | Transform::Unknown => return Ok(None),
                t => Some(Arc::new(create_transform_function(&t)?)),
            };
            let options = SortOptions {
                descending: f.direction == SortDirection::Descending,
                nulls_first: f.null_order == NullOrder::First,
            };
            fields.push(OrderField { column, transform: f.transform, function, options });
        }
        for &column in then {
            if !fields.iter().any(|f| f.column == column && f.function.is_none()) {
                fields.push(OrderField {
                    column,
                    transform: Transform::Identity,
                    function: None,
                    options: SortOptions::default(),
                });
            }
        }
        Ok(Some(RowOrder { fields }))
    }

    /// The values each field sorts by, from the columns of the rows (`column(i)`: column `i` of
    /// every row to sort, concatenated).
    pub fn sort_columns(&self, mut column: impl FnMut(usize) -> Result<ArrayRef>) -> Result<Vec<SortColumn>> {
        self.fields
            .iter()
            .map(|f| {
                let source = column(f.column)?;
                let values = match &f.function {
                    None => source,
                    Some(function) => function.transform(transformable(source, &f.transform)?)?,
                };
                Ok(SortColumn { values, options: Some(f.options) })
            })
            .collect()
    }
}

/// `source` as the crate's transform `t` computes right: clamped to the range where its time
/// transforms neither wrap nor panic and its truncate of integers does not wrap (both keep the
/// order), binary values as the Arrow type its truncate takes.
fn transformable(source: ArrayRef, t: &Transform) -> Result<ArrayRef> {
    let time = matches!(t, Transform::Year | Transform::Month | Transform::Day | Transform::Hour);
    Ok(match (t, source.data_type()) {
        (_, DataType::Timestamp(TimeUnit::Microsecond, tz)) if time => {
            let a = source.as_primitive::<TimestampMicrosecondType>();
            let clamped = a.unary::<_, TimestampMicrosecondType>(|v| v.clamp(-MAX_TIME_MICROS, MAX_TIME_MICROS));
            Arc::new(clamped.with_timezone_opt(tz.clone()))
        }
        (_, DataType::Date32) if time => {
            let a = source.as_primitive::<Date32Type>();
            Arc::new(a.unary::<_, Date32Type>(|v| v.clamp(-MAX_DATE_DAYS, MAX_DATE_DAYS)))
        }
        (Transform::Truncate(w), DataType::Int32) => {
            let low = i32::MIN.saturating_add(i32::try_from(*w).unwrap_or(i32::MAX));
            Arc::new(source.as_primitive::<Int32Type>().unary::<_, Int32Type>(|v| v.max(low)))
        }
        (Transform::Truncate(w), DataType::Int64) => {
            let low = i64::MIN.saturating_add(i64::from(*w));
            Arc::new(source.as_primitive::<Int64Type>().unary::<_, Int64Type>(|v| v.max(low)))
        }
        // (the crate's truncate has no case for LargeBinary, skade's binary columns)
        (Transform::Truncate(_), DataType::LargeBinary) => arrow::compute::cast(&source, &DataType::Binary)?,
        _ => source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Int64Array, RecordBatch, StringArray, TimestampMicrosecondArray};
    use arrow::compute::{lexsort_to_indices, take_record_batch};
    use arrow::datatypes::{Field, Schema as ArrowSchema};
    use iceberg::spec::{NestedField, PrimitiveType, SortField, Type};

    fn schema() -> Schema {
        let f = |id, name: &str, t| NestedField::optional(id, name, Type::Primitive(t)).into();
        Schema::builder()
            .with_fields(vec![
                f(1, "id", PrimitiveType::Long),
                f(2, "ts", PrimitiveType::Timestamp),
                f(3, "s", PrimitiveType::String),
            ])
            .build()
            .unwrap()
    }

    fn batch(ids: Vec<Option<i64>>, ts: Vec<Option<i64>>, s: Vec<Option<&str>>) -> RecordBatch {
        let schema = ArrowSchema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
            Field::new("s", DataType::Utf8, true),
        ]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(TimestampMicrosecondArray::from(ts)),
            Arc::new(StringArray::from(s)),
        ];
        RecordBatch::try_new(Arc::new(schema), columns).unwrap()
    }

    fn order(fields: &[(i32, Transform, SortDirection, NullOrder)], then: &[usize]) -> RowOrder {
        let fields = fields
            .iter()
            .map(|&(source_id, transform, direction, null_order)| SortField {
                source_id,
                transform,
                direction,
                null_order,
            })
            .collect();
        let order = SortOrder::builder().with_fields(fields).build_unbound().unwrap();
        RowOrder::of_sort_order(&schema(), &order, then).unwrap().unwrap()
    }

    /// The ids of `b`'s rows in order `o`.
    fn ids(b: &RecordBatch, o: &RowOrder) -> Vec<Option<i64>> {
        let columns = o.sort_columns(|c| Ok(b.column(c).clone())).unwrap();
        let sorted = take_record_batch(b, &lexsort_to_indices(&columns, None).unwrap()).unwrap();
        sorted.column(0).as_primitive::<Int64Type>().iter().collect()
    }

    use NullOrder::{First, Last};
    use SortDirection::{Ascending as Asc, Descending as Desc};

    #[test]
    fn directions_and_nulls_as_ordered() {
        let b = batch(vec![Some(2), None, Some(3), Some(1)], vec![None; 4], vec![None; 4]);
        let by = |d, n| ids(&b, &order(&[(1, Transform::Identity, d, n)], &[]));
        assert_eq!(by(Asc, Last), [Some(1), Some(2), Some(3), None]);
        assert_eq!(by(Asc, First), [None, Some(1), Some(2), Some(3)]);
        assert_eq!(by(Desc, First), [None, Some(3), Some(2), Some(1)]);
        assert_eq!(by(Desc, Last), [Some(3), Some(2), Some(1), None]);
    }

    #[test]
    fn a_transformed_field_sorts_by_its_value_then_by_the_next_field() {
        const DAY: i64 = 86_400_000_000;
        // day(ts) ascending, then id descending: within a day ids fall, whatever the hour
        let b = batch(
            vec![Some(1), Some(2), Some(3), Some(4), Some(5)],
            vec![Some(DAY + 5), Some(3), Some(DAY + 1), Some(7), Some(i64::MAX)],
            vec![None; 5],
        );
        let o = order(&[(2, Transform::Day, Asc, Last), (1, Transform::Identity, Desc, Last)], &[]);
        // (i64::MAX: TIMESTAMP 'infinity', sorted as the clamped range's last day)
        assert_eq!(ids(&b, &o), [Some(4), Some(2), Some(3), Some(1), Some(5)]);

        // truncate(1, s) descending, then the key (column 0) ascending
        let b = batch(
            vec![Some(4), Some(3), Some(2), Some(1)],
            vec![None; 4],
            vec![Some("az"), Some("b"), Some("aa"), Some("ba")],
        );
        let o = order(&[(3, Transform::Truncate(1), Desc, Last)], &[0]);
        assert_eq!(ids(&b, &o), [Some(1), Some(3), Some(2), Some(4)]);

        // bucket: rows of one bucket together, in bucket order (the crate's murmur3 values)
        let b = batch((0..64).map(Some).collect(), vec![None; 64], vec![None; 64]);
        let o = order(&[(1, Transform::Bucket(4), Asc, Last), (1, Transform::Identity, Asc, Last)], &[]);
        let sorted = ids(&b, &o);
        let bucket = create_transform_function(&Transform::Bucket(4)).unwrap();
        let values: Vec<i32> = {
            let input: ArrayRef = Arc::new(Int64Array::from(sorted.clone()));
            bucket.transform(input).unwrap().as_primitive::<Int32Type>().values().to_vec()
        };
        assert!(values.windows(2).all(|w| w[0] <= w[1]), "{values:?}");
        let mut seen = sorted.clone();
        seen.sort();
        assert_eq!(seen, (0..64).map(Some).collect::<Vec<_>>(), "every row once");
    }

    #[test]
    fn extreme_values_are_clamped_not_wrapped() {
        // truncate(10) of the integer minimum wraps in the crate; hour of an instant past year
        // ~247,000 too: clamped, they keep their place
        let b = batch(
            vec![Some(i64::MIN), Some(0), Some(-5)],
            vec![Some(i64::MAX), Some(0), Some(i64::MIN + 1)],
            vec![None; 3],
        );
        let o = order(&[(1, Transform::Truncate(10), Asc, Last)], &[]);
        assert_eq!(ids(&b, &o), [Some(i64::MIN), Some(-5), Some(0)]);
        let o = order(&[(2, Transform::Hour, Desc, Last)], &[]);
        assert_eq!(ids(&b, &o), [Some(i64::MIN), Some(0), Some(-5)]);
    }

    #[test]
    fn the_key_breaks_ties_unless_the_order_already_sorts_by_it() {
        let o = order(&[(3, Transform::Identity, Asc, Last)], &[0, 2]);
        assert_eq!(o.fields.iter().map(|f| f.column).collect::<Vec<_>>(), [2, 0]);
        let o = order(&[(1, Transform::Bucket(2), Asc, Last)], &[0]);
        assert_eq!(o.fields.iter().map(|f| f.column).collect::<Vec<_>>(), [0, 0], "bucket(id) does not sort by id");
        let nested = SortOrder::builder()
            .with_fields(vec![SortField {
                source_id: 99,
                transform: Transform::Identity,
                direction: Asc,
                null_order: First,
            }])
            .build_unbound()
            .unwrap();
        assert!(RowOrder::of_sort_order(&schema(), &nested, &[]).unwrap().is_none());
    }
}
