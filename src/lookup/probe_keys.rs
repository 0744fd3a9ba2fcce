//! The keys a lookup probes, in the three forms pruning needs: the whole key in Arrow's row
//! format (compared with the rows read), each key column alone in the row format (compared with
//! file and row-group bounds, converted the same way: the row format orders like the values), and
//! each key column as the bytes Parquet's bloom filters hash.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray, Int32Array, Int64Array,
    StringArray,
};
use arrow::compute::cast;
use arrow::datatypes::{
    DataType, Date32Type, Int16Type, Int32Type, Int64Type, Int8Type, Time64MicrosecondType, TimeUnit,
    TimestampMicrosecondType,
};
use arrow::row::{RowConverter, SortField};
use iceberg::spec::{Datum, PrimitiveLiteral};
use parquet::basic::Type as PhysicalType;

use crate::error::Result;
use crate::read::keys::KeyColumns;

/// Per key column, its type and a converter of that column alone.
pub struct ColumnEncoders(Vec<(DataType, RowConverter)>);

impl ColumnEncoders {
    pub fn new(key: &KeyColumns) -> Result<Self> {
        let mut out = vec![];
        for t in &key.types {
            out.push((t.clone(), RowConverter::new(vec![SortField::new(t.clone())])?));
        }
        Ok(Self(out))
    }

    /// A bound (an Iceberg value) of key column `c`, encoded like the probes' values; None when
    /// it cannot be converted (it then prunes nothing).
    pub fn bound(&self, c: usize, value: Option<&Datum>) -> Option<Box<[u8]>> {
        let (ty, converter) = &self.0[c];
        let array = datum_array(value?, ty)?;
        let rows = converter.convert_columns(&[array]).ok()?;
        Some(rows.row(0).data().into())
    }

    /// The one value of `value` (of key column `c`'s type), encoded.
    pub fn encode(&self, c: usize, value: &ArrayRef) -> Option<Box<[u8]>> {
        let rows = self.0[c].1.convert_columns(std::slice::from_ref(value)).ok()?;
        Some(rows.row(0).data().into())
    }

    /// Column `c` of every probe, encoded.
    pub fn column(&self, c: usize, values: &ArrayRef) -> Result<Vec<Box<[u8]>>> {
        let rows = self.0[c].1.convert_columns(std::slice::from_ref(values))?;
        Ok(rows.iter().map(|r| r.data().into()).collect())
    }
}

/// An Iceberg value as a one-row array of the Arrow type `ty` (a key column's type); None for
/// values keys never hold.
pub fn datum_array(value: &Datum, ty: &DataType) -> Option<ArrayRef> {
    let array: ArrayRef = match (value.literal(), ty) {
        (PrimitiveLiteral::Boolean(b), _) => Arc::new(BooleanArray::from(vec![*b])),
        (PrimitiveLiteral::Int(v), _) => Arc::new(Int32Array::from(vec![*v])),
        (PrimitiveLiteral::Long(v), _) => Arc::new(Int64Array::from(vec![*v])),
        (PrimitiveLiteral::String(s), _) => Arc::new(StringArray::from(vec![s.as_str()])),
        (PrimitiveLiteral::Binary(b), DataType::FixedSizeBinary(n)) if b.len() == *n as usize => {
            Arc::new(FixedSizeBinaryArray::try_from_iter(std::iter::once(b.as_slice())).ok()?)
        }
        (PrimitiveLiteral::Binary(b), _) => Arc::new(BinaryArray::from(vec![b.as_slice()])),
        (PrimitiveLiteral::UInt128(u), DataType::FixedSizeBinary(16)) => {
            Arc::new(FixedSizeBinaryArray::try_from_iter(std::iter::once(u.to_be_bytes())).ok()?)
        }
        (PrimitiveLiteral::Int128(v), DataType::Decimal128(p, s)) => {
            Arc::new(Decimal128Array::from(vec![*v]).with_precision_and_scale(*p, *s).ok()?)
        }
        _ => return None,
    };
    if array.data_type() == ty {
        Some(array)
    } else {
        cast(&array, ty).ok()
    }
}

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
