//! Row groups as pruning units: a row group's Parquet statistics as Iceberg bounds, so a scan
//! reads only the row groups of a file that its filters may match (files are pruned the same way
//! by their manifest bounds first).
//!
//! iceberg 0.10 converts Parquet statistics to `Datum`s only inside the crate (crate-private), so
//! skade converts them itself, for the types whose statistics order like Iceberg's values. Inexact
//! (truncated) maxima are not used; anything unknown prunes nothing.

use std::collections::HashMap;

use iceberg::spec::{Datum, PrimitiveType, Schema, Type};
use parquet::basic::{ColumnOrder, ConvertedType, LogicalType, TimeUnit};
use parquet::file::metadata::ParquetMetaData;
use parquet::file::statistics::Statistics;
use parquet::schema::types::ColumnDescriptor;

use super::filter::ColumnStats;

/// One row group's statistics for the columns a filter names.
pub struct RowGroupStats {
    lower: HashMap<i32, Datum>,
    upper: HashMap<i32, Datum>,
    nulls: HashMap<i32, u64>,
    rows: u64,
}

impl ColumnStats for RowGroupStats {
    fn lower(&self, field_id: i32) -> Option<&Datum> {
        self.lower.get(&field_id)
    }
    fn upper(&self, field_id: i32) -> Option<&Datum> {
        self.upper.get(&field_id)
    }
    fn null_count(&self, field_id: i32) -> Option<u64> {
        self.nulls.get(&field_id).copied()
    }
    fn row_count(&self) -> u64 {
        self.rows
    }
}

/// The statistics of every row group of a file for the top-level columns `field_ids`.
pub fn row_group_stats(schema: &Schema, footer: &ParquetMetaData, field_ids: &[i32]) -> Vec<RowGroupStats> {
    let descr = footer.file_metadata().schema_descr();
    // Leaf column index of each wanted top-level primitive field.
    let mut leaves: Vec<(i32, usize, PrimitiveType)> = vec![];
    for (leaf, column) in descr.columns().iter().enumerate() {
        let info = column.self_type().get_basic_info();
        if !info.has_id() || column.path().parts().len() != 1 || !field_ids.contains(&info.id()) {
            continue;
        }
        if let Some(Type::Primitive(p)) = schema.field_by_id(info.id()).map(|f| f.field_type.as_ref()) {
            if values_are(p, column, footer.file_metadata().column_order(leaf)) {
                leaves.push((info.id(), leaf, p.clone()));
            }
        }
    }
    footer
        .row_groups()
        .iter()
        .map(|rg| {
            let mut stats = RowGroupStats {
                lower: HashMap::new(),
                upper: HashMap::new(),
                nulls: HashMap::new(),
                rows: rg.num_rows().max(0) as u64,
            };
            for (id, leaf, ty) in &leaves {
                let Some(s) = rg.column(*leaf).statistics() else {
                    continue;
                };
                if let Some(n) = s.null_count_opt() {
                    stats.nulls.insert(*id, n);
                }
                if let Some(d) = datum(ty, s, false) {
                    stats.lower.insert(*id, d);
                }
                if let Some(d) = datum(ty, s, true) {
                    stats.upper.insert(*id, d);
                }
            }
            stats
        })
        .collect()
}

/// Whether the statistics of Parquet column `column` are values of Iceberg type `ty` as [`datum`]
/// reads them. Files skade wrote always are; a file another writer made (adopted by
/// `skade_add_files`) may store a timestamp in milliseconds, an unsigned integer whose largest
/// values read as negative, or strings ordered by an older writer's signed bytes: such statistics
/// bound nothing here (a wrong bound would skip rows).
pub fn values_are(ty: &PrimitiveType, column: &ColumnDescriptor, order: ColumnOrder) -> bool {
    let micros = |unit: &TimeUnit| matches!(unit, TimeUnit::MICROS);
    // (DuckDB marks UINTEGER and UBIGINT with the converted type alone: their statistics are the
    // unsigned values' bits, which read as signed ones would bound the wrong rows)
    if matches!(column.converted_type(), ConvertedType::UINT_32 | ConvertedType::UINT_64) {
        return false;
    }
    match (ty, column.logical_type_ref()) {
        (_, Some(LogicalType::Integer { bit_width, is_signed: false })) => *bit_width < 32,
        (PrimitiveType::Timestamp | PrimitiveType::Timestamptz, Some(LogicalType::Timestamp { unit, .. })) => {
            micros(unit)
        }
        (PrimitiveType::Time, Some(LogicalType::Time { unit, .. })) => micros(unit),
        (PrimitiveType::Timestamp | PrimitiveType::Timestamptz, _) => {
            column.converted_type() == ConvertedType::TIMESTAMP_MICROS
        }
        (PrimitiveType::Time, _) => column.converted_type() == ConvertedType::TIME_MICROS,
        (PrimitiveType::String | PrimitiveType::Binary, _) => matches!(order, ColumnOrder::TYPE_DEFINED_ORDER(_)),
        _ => true,
    }
}

/// A statistic as an Iceberg value of type `ty`: the minimum, or the maximum when `max`.
fn datum(ty: &PrimitiveType, stats: &Statistics, max: bool) -> Option<Datum> {
    if max && !stats.max_is_exact() && matches!(stats, Statistics::ByteArray(_) | Statistics::FixedLenByteArray(_)) {
        return None; // a truncated maximum is below the real one
    }
    macro_rules! pick {
        ($s:expr) => {
            if max {
                $s.max_opt()
            } else {
                $s.min_opt()
            }
        };
    }
    match (ty, stats) {
        (PrimitiveType::Boolean, Statistics::Boolean(s)) => pick!(s).map(|v| Datum::bool(*v)),
        (PrimitiveType::Int, Statistics::Int32(s)) => pick!(s).map(|v| Datum::int(*v)),
        (PrimitiveType::Long, Statistics::Int64(s)) => pick!(s).map(|v| Datum::long(*v)),
        (PrimitiveType::Long, Statistics::Int32(s)) => pick!(s).map(|v| Datum::long(*v as i64)),
        (PrimitiveType::Float, Statistics::Float(s)) => pick!(s).filter(|v| !v.is_nan()).map(|v| Datum::float(*v)),
        (PrimitiveType::Double, Statistics::Double(s)) => pick!(s).filter(|v| !v.is_nan()).map(|v| Datum::double(*v)),
        (PrimitiveType::Double, Statistics::Float(s)) => {
            pick!(s).filter(|v| !v.is_nan()).map(|v| Datum::double(*v as f64))
        }
        (PrimitiveType::Date, Statistics::Int32(s)) => pick!(s).map(|v| Datum::date(*v)),
        (PrimitiveType::Time, Statistics::Int64(s)) => pick!(s).and_then(|v| Datum::time_micros(*v).ok()),
        (PrimitiveType::Timestamp, Statistics::Int64(s)) => pick!(s).map(|v| Datum::timestamp_micros(*v)),
        (PrimitiveType::Timestamptz, Statistics::Int64(s)) => pick!(s).map(|v| Datum::timestamptz_micros(*v)),
        (PrimitiveType::String, Statistics::ByteArray(s)) => {
            pick!(s).and_then(|v| std::str::from_utf8(v.data()).ok()).map(Datum::string)
        }
        (PrimitiveType::Binary, Statistics::ByteArray(s)) => pick!(s).map(|v| Datum::binary(v.data().iter().copied())),
        _ => None, // decimals, UUIDs, fixed, nanosecond timestamps: no pruning
    }
}
