//! The partition of a file to adopt into a partitioned table. A data file belongs to one
//! partition, and a file written without the table's spec in mind may hold rows of several: its
//! partition value is computed from its bounds when they prove every row has the same one (the
//! transform of the lower and upper bound agree, for a transform that keeps order; a bucket only
//! when both bounds are one value), and the file is refused otherwise. Rewriting the rows into
//! one file per partition is what INSERT ... SELECT FROM read_parquet(...) does.

use iceberg::spec::{Literal, PartitionSpec, Schema, Struct, Transform};
use iceberg::transform::create_transform_function;

use super::metrics::Metrics;
use crate::format::partition::{describe_key, transformable};

/// The partition values under `spec` of a file with `metrics`, or why it has none (naming the
/// column).
pub fn value(spec: &PartitionSpec, schema: &Schema, metrics: &Metrics) -> Result<Struct, String> {
    let mut values = Vec::with_capacity(spec.fields().len());
    for field in spec.fields() {
        if field.transform == Transform::Void {
            values.push(None);
            continue;
        }
        let id = field.source_id;
        let column = schema.name_by_field_id(id).unwrap_or("?");
        let spans = || {
            format!(
                "its rows lie in several partitions of the table ({} takes several values in them); insert \
                 them with INSERT ... SELECT * FROM read_parquet(...) instead, which writes a file per partition",
                describe_key(column, &field.transform)
            )
        };
        let nulls = metrics.nulls.get(&id).copied();
        if metrics.rows > 0 && nulls == Some(metrics.rows) {
            values.push(None); // only NULLs: the NULL partition
            continue;
        }
        match nulls {
            Some(0) => {}
            Some(_) => return Err(spans()), // NULLs and values: two partitions
            None => return Err(format!("its footer does not say whether column {column} holds NULLs")),
        }
        let (Some(lo), Some(hi)) = (metrics.lower.get(&id), metrics.upper.get(&id)) else {
            return Err(format!(
                "its footer has no exact bounds of column {column}, which the table is partitioned by"
            ));
        };
        if !transformable(&field.transform, lo) || !transformable(&field.transform, hi) {
            return Err(format!("column {column} holds values beyond what a partition value holds"));
        }
        let transform = create_transform_function(&field.transform).map_err(|e| e.to_string())?;
        let (a, b) = (
            transform.transform_literal(lo).map_err(|e| e.to_string())?,
            transform.transform_literal(hi).map_err(|e| e.to_string())?,
        );
        let same = if field.transform.preserves_order() { a == b } else { lo == hi };
        match (same, a) {
            (true, Some(v)) => values.push(Some(Literal::Primitive(v.literal().clone()))),
            (true, None) => values.push(None),
            (false, _) => return Err(spans()),
        }
    }
    Ok(Struct::from_iter(values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{Datum, NestedField, PrimitiveLiteral, PrimitiveType, Type, UnboundPartitionField};

    fn schema() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::optional(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "day", Type::Primitive(PrimitiveType::Date)).into(),
            ])
            .build()
            .unwrap()
    }

    fn spec(transform: Transform, source: i32) -> PartitionSpec {
        let field = UnboundPartitionField { source_id: source, field_id: None, name: "p".into(), transform };
        PartitionSpec::builder(schema()).add_unbound_field(field).unwrap().build().unwrap()
    }

    fn metrics(id: i32, lo: Datum, hi: Datum, nulls: u64) -> Metrics {
        let mut m = Metrics { rows: 10, ..Metrics::default() };
        m.nulls.insert(id, nulls);
        m.lower.insert(id, lo);
        m.upper.insert(id, hi);
        m
    }

    #[test]
    fn a_file_within_one_partition_gets_its_value() {
        let month = spec(Transform::Month, 2);
        // 2024-01-03 .. 2024-01-30: January 2024, month 648 since 1970
        let m = metrics(2, Datum::date(19725), Datum::date(19752), 0);
        let january = value(&month, &schema(), &m).unwrap();
        assert_eq!(january.fields()[0], Some(Literal::Primitive(PrimitiveLiteral::Int(648))));
        // a bucket: only when every row has one value
        let bucket = spec(Transform::Bucket(4), 1);
        assert!(value(&bucket, &schema(), &metrics(1, Datum::long(7), Datum::long(7), 0)).is_ok());
        let err = value(&bucket, &schema(), &metrics(1, Datum::long(7), Datum::long(8), 0)).unwrap_err();
        assert!(err.contains("several partitions") && err.contains("(bucket(4, id) takes several values"), "{err}");
    }

    #[test]
    fn rows_of_several_partitions_are_refused() {
        let month = spec(Transform::Month, 2);
        let err = value(&month, &schema(), &metrics(2, Datum::date(19725), Datum::date(19760), 0)).unwrap_err();
        assert!(err.contains("(month(day) takes several values"), "{err}");
        // NULLs beside values: the NULL partition and another
        assert!(value(&month, &schema(), &metrics(2, Datum::date(19725), Datum::date(19726), 3)).is_err());
        // only NULLs: the NULL partition
        let mut nulls = Metrics { rows: 10, ..Metrics::default() };
        nulls.nulls.insert(2, 10);
        assert_eq!(value(&month, &schema(), &nulls).unwrap().fields()[0], None);
    }
}
