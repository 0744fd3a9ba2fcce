//! DuckDB's timestamps of other units (TIMESTAMP_S, TIMESTAMP_MS, TIMESTAMP_NS) as the
//! microseconds Iceberg stores, and back, keeping DuckDB's infinities (issue 42).
//!
//! DuckDB stores `'infinity'` and `'-infinity'` of every timestamp unit as `i64::MAX` and
//! `-i64::MAX`, the same two numbers in every unit. Arrow's unit cast multiplies them (a safe cast
//! makes the overflow NULL: silent loss) or divides them (a finite instant of year 294,247 that no
//! DuckDB type can read back). Here they map to the same two numbers in the other unit; every other
//! value converts exactly, is truncated to microseconds (nanoseconds: the lake's documented
//! choice), or is refused when the target unit cannot hold it.

use arrow::array::{make_array, Array, ArrayRef, PrimitiveArray};
use arrow::datatypes::{DataType, Int64Type, TimeUnit};

/// DuckDB's `'infinity'` of every timestamp type (`-INFINITY` is `'-infinity'`).
pub const INFINITY: i64 = i64::MAX;

/// `array` (timestamps) as the timestamps of `target`, when both are timestamps of different
/// units; None when this conversion does not apply. The error names the first value the target
/// cannot hold.
pub fn convert(array: &ArrayRef, target: &DataType) -> Option<Result<ArrayRef, String>> {
    let (DataType::Timestamp(from, _), DataType::Timestamp(to, _)) = (array.data_type(), target) else {
        return None;
    };
    if from == to {
        return None;
    }
    let (from, to) = (per_second(from), per_second(to));
    // (every timestamp array is i64 underneath: the values as plain i64, whatever their unit)
    let as_i64 = |data: arrow::array::ArrayData, ty: DataType| data.into_builder().data_type(ty).build();
    let raw = match as_i64(array.to_data(), DataType::Int64) {
        Ok(data) => PrimitiveArray::<Int64Type>::from(data),
        Err(e) => return Some(Err(e.to_string())),
    };
    let bad = std::cell::Cell::new(None);
    let converted: PrimitiveArray<Int64Type> = raw.unary_opt(|v| {
        let out = rescale(v, from, to);
        if out.is_none() && bad.get().is_none() {
            bad.set(Some(v));
        }
        out
    });
    if let Some(v) = bad.get() {
        return Some(Err(format!(
            "the timestamp {v} (in units of 1/{from} s) lies beyond what a timestamp in units of 1/{to} s holds"
        )));
    }
    Some(as_i64(converted.into_data(), target.clone()).map(make_array).map_err(|e| e.to_string()))
}

fn per_second(unit: &TimeUnit) -> i64 {
    match unit {
        TimeUnit::Second => 1,
        TimeUnit::Millisecond => 1_000,
        TimeUnit::Microsecond => 1_000_000,
        TimeUnit::Nanosecond => 1_000_000_000,
    }
}

/// One value from units of 1/`from` s to units of 1/`to` s: infinities kept, finer units truncated
/// toward zero (as Arrow's and DuckDB's casts do), None when it does not fit.
fn rescale(v: i64, from: i64, to: i64) -> Option<i64> {
    if v == INFINITY || v == -INFINITY {
        return Some(v);
    }
    let out = if to >= from { v.checked_mul(to / from)? } else { v / (from / to) };
    // (a finite value must not become one of the infinities)
    (out != INFINITY && out != -INFINITY).then_some(out)
}

#[cfg(test)]
mod tests {
    use arrow::array::{TimestampMicrosecondArray, TimestampNanosecondArray, TimestampSecondArray};

    use std::sync::Arc;

    use arrow::array::AsArray;

    use super::*;

    fn us() -> DataType {
        DataType::Timestamp(TimeUnit::Microsecond, None)
    }

    #[test]
    fn infinities_keep_their_meaning_in_every_unit() {
        let seconds: ArrayRef =
            Arc::new(TimestampSecondArray::from(vec![Some(INFINITY), Some(-INFINITY), None, Some(-1), Some(86_400)]));
        let micros = convert(&seconds, &us()).unwrap().unwrap();
        let m = micros.as_primitive::<arrow::datatypes::TimestampMicrosecondType>();
        assert_eq!(m.values().as_ref(), &[INFINITY, -INFINITY, 0, -1_000_000, 86_400_000_000]);
        assert!(m.is_null(2));
        let back = convert(&micros, seconds.data_type()).unwrap().unwrap();
        assert_eq!(&back, &seconds);

        let nanos: ArrayRef = Arc::new(TimestampNanosecondArray::from(vec![INFINITY, -INFINITY, 1_999, -1_999]));
        let micros = convert(&nanos, &us()).unwrap().unwrap();
        assert_eq!(
            micros.as_primitive::<arrow::datatypes::TimestampMicrosecondType>().values().as_ref(),
            &[INFINITY, -INFINITY, 1, -1]
        );
        let back = convert(&micros, nanos.data_type()).unwrap().unwrap();
        assert_eq!(
            back.as_primitive::<arrow::datatypes::TimestampNanosecondType>().values().as_ref(),
            &[INFINITY, -INFINITY, 1_000, -1_000]
        );
    }

    #[test]
    fn a_value_the_target_cannot_hold_is_refused() {
        // microseconds another writer stored, beyond what nanoseconds reach (year 2262)
        let micros: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![0, i64::MAX / 10]));
        let err = convert(&micros, &DataType::Timestamp(TimeUnit::Nanosecond, None)).unwrap().unwrap_err();
        assert!(err.contains("beyond"), "{err}");
        // the largest finite TIMESTAMP_S DuckDB holds converts exactly
        let seconds: ArrayRef = Arc::new(TimestampSecondArray::from(vec![9_223_372_036_854, -9_223_372_022_400]));
        let micros = convert(&seconds, &us()).unwrap().unwrap();
        assert_eq!(convert(&micros, seconds.data_type()).unwrap().unwrap().as_ref(), seconds.as_ref());
    }

    #[test]
    fn other_conversions_are_not_this_ones() {
        let micros: ArrayRef = Arc::new(TimestampMicrosecondArray::from(vec![1]));
        assert!(convert(&micros, &us()).is_none());
        assert!(convert(&micros, &DataType::Int64).is_none());
    }
}
