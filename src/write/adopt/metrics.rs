//! The Iceberg metrics of a file to adopt, from its Parquet footer alone (no row is read): row
//! count, and per top-level primitive column its size, value and null counts and bounds. They
//! land in the manifest entry, where scans prune by them and DuckDB's optimizer trusts them, so a
//! bound is recorded only when every row group that holds a value in the column has exact
//! statistics of the table type's values (`row_groups::values_are`); a null count only when every
//! row group has one. What is unknown is left out, which prunes nothing.

use std::collections::HashMap;

use iceberg::spec::{Datum, PrimitiveType, Schema, Type};
use parquet::basic::{LogicalType, Repetition};
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaData};
use parquet::file::statistics::Statistics;

use crate::read::filter::ColumnStats;
use crate::read::row_groups::row_group_stats;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Metrics {
    pub rows: u64,
    pub sizes: HashMap<i32, u64>,
    pub values: HashMap<i32, u64>,
    pub nulls: HashMap<i32, u64>,
    pub lower: HashMap<i32, Datum>,
    pub upper: HashMap<i32, Datum>,
}

/// The metrics of a footer whose top-level columns carry the table's field ids (see
/// `name_mapping::with_field_ids`); `schema`: the table's.
pub fn of(meta: &ParquetMetaData, schema: &Schema) -> Metrics {
    let descr = meta.file_metadata().schema_descr();
    // (field id, leaf) of each top-level primitive column with an id
    let leaves: Vec<(i32, usize)> = descr
        .columns()
        .iter()
        .enumerate()
        .filter_map(|(leaf, c)| {
            let info = c.self_type().get_basic_info();
            (info.has_id() && c.path().parts().len() == 1).then(|| (info.id(), leaf))
        })
        .collect();
    let ids: Vec<i32> = leaves.iter().map(|(id, _)| *id).collect();
    let stats = row_group_stats(schema, meta, &ids);
    let groups = meta.row_groups();
    let mut out = Metrics { rows: groups.iter().map(|g| g.num_rows().max(0) as u64).sum(), ..Metrics::default() };
    for (id, leaf) in leaves {
        let required = descr.column(leaf).self_type().get_basic_info().repetition() == Repetition::REQUIRED;
        let ty = match schema.field_by_id(id).map(|f| f.field_type.as_ref()) {
            Some(Type::Primitive(p)) => p.clone(),
            _ => continue,
        };
        let mut nulls = Some(0u64);
        let mut bounds: Option<(Datum, Datum)> = None;
        let mut bounded = true;
        let (mut size, mut values) = (0u64, 0u64);
        for (group, stats) in groups.iter().zip(&stats) {
            let chunk = group.column(leaf);
            size += chunk.compressed_size().max(0) as u64;
            values += chunk.num_values().max(0) as u64;
            let group_nulls = if required { Some(0) } else { stats.null_count(id) };
            nulls = nulls.zip(group_nulls).map(|(a, b)| a + b);
            if !bounded || group_nulls == Some(group.num_rows().max(0) as u64) {
                continue; // (a row group of only NULLs has nothing to bound)
            }
            let lower = stats.lower(id).cloned().or_else(|| decimal(&ty, chunk, false));
            let upper = stats.upper(id).cloned().or_else(|| decimal(&ty, chunk, true));
            match (lower, upper) {
                (Some(lo), Some(hi)) => {
                    bounds = Some(match bounds.take() {
                        None => (lo, hi),
                        Some((a, b)) => (least(a, lo), greatest(b, hi)),
                    })
                }
                _ => (bounded, bounds) = (false, None),
            }
        }
        out.sizes.insert(id, size);
        out.values.insert(id, values);
        if let Some(n) = nulls {
            out.nulls.insert(id, n);
        }
        if let Some((lo, hi)) = bounds {
            out.lower.insert(id, lo);
            out.upper.insert(id, hi);
        }
    }
    out
}

fn least(a: Datum, b: Datum) -> Datum {
    if b.partial_cmp(&a).is_some_and(|o| o.is_lt()) {
        b
    } else {
        a
    }
}

fn greatest(a: Datum, b: Datum) -> Datum {
    if b.partial_cmp(&a).is_some_and(|o| o.is_gt()) {
        b
    } else {
        a
    }
}

/// A decimal bound from a chunk's statistics, when the column stores the unscaled value as an
/// INT32 or INT64 of the table's scale (the row-group statistics scans prune by leave decimals
/// out; the manifest's bounds, which DuckDB's optimizer sums within, want them).
fn decimal(ty: &PrimitiveType, chunk: &ColumnChunkMetaData, max: bool) -> Option<Datum> {
    let PrimitiveType::Decimal { scale, .. } = ty else {
        return None;
    };
    match chunk.column_descr().logical_type_ref() {
        Some(LogicalType::Decimal { scale: s, .. }) if *s as u32 == *scale => {}
        _ => return None,
    }
    let value: i128 = match chunk.statistics()? {
        Statistics::Int32(s) => (*if max { s.max_opt() } else { s.min_opt() }?).into(),
        Statistics::Int64(s) => (*if max { s.max_opt() } else { s.min_opt() }?).into(),
        _ => return None,
    };
    Datum::try_from_bytes(&value.to_be_bytes(), ty.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Decimal128Array, Int32Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
    use bytes::Bytes;
    use iceberg::spec::NestedField;
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::ParquetMetaDataReader;
    use parquet::file::properties::WriterProperties;

    use crate::format::name_mapping::{assigned_ids, with_field_ids, FileNames};

    /// A Parquet file as DuckDB's COPY writes one (no field ids) of two row groups, its footer
    /// given the table's ids as adoption gives them.
    fn footer() -> ParquetMetaData {
        let schema = Arc::new(ArrowSchema::new(vec![
            Field::new("id", DataType::Int32, false),
            Field::new("name", DataType::Utf8, true),
            Field::new("amount", DataType::Decimal128(9, 2), true),
            Field::new("empty", DataType::Int64, true),
        ]));
        let batch = |ids: Vec<i32>, names: Vec<Option<&str>>, amounts: Vec<Option<i128>>| {
            let rows = ids.len();
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int32Array::from(ids)),
                Arc::new(StringArray::from(names)),
                Arc::new(Decimal128Array::from(amounts).with_precision_and_scale(9, 2).unwrap()),
                Arc::new(Int64Array::from(vec![None; rows])),
            ];
            RecordBatch::try_new(schema.clone(), columns).unwrap()
        };
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(3)).build();
        let mut bytes = vec![];
        let mut writer = ArrowWriter::try_new(&mut bytes, schema.clone(), Some(props)).unwrap();
        writer
            .write(&batch(vec![5, -2, 9], vec![Some("b"), None, Some("a")], vec![Some(150), None, Some(-1)]))
            .unwrap();
        writer.write(&batch(vec![40, 7, 8], vec![None, None, None], vec![Some(99), Some(1000), None])).unwrap();
        writer.close().unwrap();
        let meta = ParquetMetaDataReader::new().parse_and_finish(&Bytes::from(bytes)).unwrap();
        let names = FileNames::with(
            None,
            &[("id", 1), ("name", 2), ("amount", 3), ("empty", 4)]
                .iter()
                .map(|(n, i)| (n.to_string(), *i))
                .collect::<std::collections::BTreeMap<_, _>>(),
        )
        .unwrap();
        let ids = assigned_ids(meta.file_metadata().schema_descr(), &names).unwrap();
        with_field_ids(&meta, &ids).unwrap()
    }

    fn table() -> Schema {
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "amount", Type::decimal(18, 2).unwrap()).into(),
                NestedField::optional(4, "empty", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap()
    }

    #[test]
    fn metrics_fold_the_row_groups_of_a_footer() {
        let m = of(&footer(), &table());
        assert_eq!(m.rows, 6);
        // an INT32 column read as the table's long: bounds over both row groups
        assert_eq!((m.lower[&1].clone(), m.upper[&1].clone()), (Datum::long(-2), Datum::long(40)));
        assert_eq!(m.nulls[&1], 0);
        // strings: the second row group holds only NULLs and bounds nothing
        assert_eq!((m.lower[&2].clone(), m.upper[&2].clone()), (Datum::string("a"), Datum::string("b")));
        assert_eq!(m.nulls[&2], 4);
        // decimals of the table's scale, from their unscaled integers
        let dec = |v: i128| Datum::try_from_bytes(&v.to_be_bytes(), PrimitiveType::Decimal { precision: 18, scale: 2 });
        assert_eq!(m.lower[&3], dec(-1).unwrap());
        assert_eq!(m.upper[&3], dec(1000).unwrap());
        // a column of only NULLs: counted, never bounded
        assert_eq!(m.nulls[&4], 6);
        assert!(!m.lower.contains_key(&4) && !m.upper.contains_key(&4));
        assert_eq!(m.values[&1], 6);
        assert!(m.sizes[&1] > 0);
    }
}
