//! One column into a table's Arrow type: a column of a file into the table's schema (a type
//! promoted since, fields found by id), or one of DuckDB's into the stored types.

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, Field};

use super::duckdb_types;
use super::nested_arrays;
use super::timestamps;
use crate::error::{Error, Result};

/// One column into the table's Arrow type (see `schema::conform`): a column of a file into the table's
/// schema, or one of DuckDB's into the stored types. Nested fields are found by their field ids
/// (`nested_arrays`), so a file written before a nested field was added, dropped or renamed reads
/// right.
pub(crate) fn conform_array(array: &ArrayRef, target: &DataType) -> Result<ArrayRef> {
    if array.data_type() == target {
        return Ok(array.clone());
    }
    nested_arrays::reshape(array, &Field::new("", target.clone(), true), &|a, f| conform_value(a, f.data_type()))
}

/// One value that is not a STRUCT, LIST or MAP into the table's Arrow type.
fn conform_value(array: &ArrayRef, target: &DataType) -> Result<ArrayRef> {
    if let (DataType::FixedSizeBinary(16), DataType::Decimal128(p, 0)) = (array.data_type(), target) {
        // DuckDB's HUGEINT (16 bytes) for a decimal(p,0) column (a lookup key, a filter's value)
        return duckdb_types::hugeints_as_decimals(array, *p).map_err(Error::invalid);
    }
    if let Some(converted) = timestamps::convert(array, target) {
        return converted.map_err(Error::invalid); // (infinities kept: an Arrow cast loses them)
    }
    Ok(arrow::compute::cast(array, target)?)
}
