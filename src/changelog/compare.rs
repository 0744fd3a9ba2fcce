//! How changelog rows are compared whole: Arrow's row format, with the types it lacks mapped to
//! ones it has.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, ListArray};
use arrow::datatypes::DataType;

/// The type a column is compared as: Arrow's row format has no MAP, so a map compares as the
/// list of its entries (its physical layout; entry order as stored).
pub fn comparable_type(t: &DataType) -> DataType {
    match t {
        DataType::Map(entries, _) => DataType::List(entries.clone()),
        other => other.clone(),
    }
}

pub fn comparable(array: &ArrayRef) -> ArrayRef {
    match array.as_map_opt() {
        Some(map) => Arc::new(ListArray::new(
            match map.data_type() {
                DataType::Map(entries, _) => entries.clone(),
                _ => unreachable!("a map array has a map type"),
            },
            map.offsets().clone(),
            Arc::new(map.entries().clone()),
            map.nulls().cloned(),
        )),
        None => array.clone(),
    }
}
