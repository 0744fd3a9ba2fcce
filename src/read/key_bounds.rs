//! Key columns compared with bounds: each key column alone in Arrow's row format (which orders like
//! the values), so that a value and a file's, row group's or page's Iceberg bounds, converted the
//! same way, compare as bytes.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Decimal128Array, FixedSizeBinaryArray, Int32Array, Int64Array,
    StringArray,
};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::row::{RowConverter, SortField};
use iceberg::spec::{Datum, PrimitiveLiteral};

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
