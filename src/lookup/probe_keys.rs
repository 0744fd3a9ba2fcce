//! The keys a lookup probes as the bytes Parquet's bloom filters hash (the other forms pruning
//! needs, the whole key and each key column in Arrow's row format, are `read::keys` and
//! `read::key_bounds`).

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{
    DataType, Date32Type, Int16Type, Int32Type, Int64Type, Int8Type, Time64MicrosecondType, TimeUnit,
    TimestampMicrosecondType,
};
use parquet::basic::Type as PhysicalType;

/// The bytes a Parquet bloom filter hashes for row `i` of `values` in a column of physical type
/// `physical`; None when skade cannot be sure of them (the filter is then not consulted).
pub fn bloom_bytes(values: &ArrayRef, i: usize, physical: PhysicalType) -> Option<Vec<u8>> {
    if values.is_null(i) {
        return None;
    }
    let le32 = |v: i32| Some(v.to_le_bytes().to_vec());
    let le64 = |v: i64| Some(v.to_le_bytes().to_vec());
    match (physical, values.data_type()) {
        (PhysicalType::INT32, DataType::Int32) => le32(values.as_primitive::<Int32Type>().value(i)),
        (PhysicalType::INT32, DataType::Date32) => le32(values.as_primitive::<Date32Type>().value(i)),
        (PhysicalType::INT32, DataType::Int8) => le32(values.as_primitive::<Int8Type>().value(i) as i32),
        (PhysicalType::INT32, DataType::Int16) => le32(values.as_primitive::<Int16Type>().value(i) as i32),
        (PhysicalType::INT64, DataType::Int64) => le64(values.as_primitive::<Int64Type>().value(i)),
        (PhysicalType::INT64, DataType::Timestamp(TimeUnit::Microsecond, _)) => {
            le64(values.as_primitive::<TimestampMicrosecondType>().value(i))
        }
        (PhysicalType::INT64, DataType::Time64(TimeUnit::Microsecond)) => {
            le64(values.as_primitive::<Time64MicrosecondType>().value(i))
        }
        (PhysicalType::BYTE_ARRAY, DataType::Utf8) => Some(values.as_string::<i32>().value(i).as_bytes().to_vec()),
        (PhysicalType::BYTE_ARRAY, DataType::LargeUtf8) => Some(values.as_string::<i64>().value(i).as_bytes().to_vec()),
        (PhysicalType::BYTE_ARRAY, DataType::Utf8View) => Some(values.as_string_view().value(i).as_bytes().to_vec()),
        (PhysicalType::BYTE_ARRAY, DataType::Binary) => Some(values.as_binary::<i32>().value(i).to_vec()),
        (PhysicalType::BYTE_ARRAY, DataType::LargeBinary) => Some(values.as_binary::<i64>().value(i).to_vec()),
        (PhysicalType::FIXED_LEN_BYTE_ARRAY, DataType::FixedSizeBinary(_)) => {
            Some(values.as_fixed_size_binary().value(i).to_vec())
        }
        _ => None, // booleans, decimals: no bloom pruning
    }
}
