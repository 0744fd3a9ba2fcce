//! Which Parquet column chunks the Parquet crate can skip values in.
//!
//! The crate (58.4) fails to skip values of a DELTA_BINARY_PACKED INT32 column when a miniblock
//! holds equal deltas whose sum leaves the i32 range ("delta*n overflow in skip"): writing and
//! decoding wrap those deltas, its skip does not. Values near both ends of the range (-2^31 then
//! 0, as in a DATE or INTEGER column) make such miniblocks. skade wrote INT32 columns that way
//! until it stopped (`writer.rs`); those files must stay readable, so every read that would skip
//! inside such a chunk (row selections, a lookup positioning on its row) decodes and discards
//! instead. INT64 chunks skip correctly (the sum wraps in i64).

use parquet::basic::{Encoding, Type as PhysicalType};
use parquet::file::metadata::{ColumnChunkMetaData, RowGroupMetaData};

/// Whether values of this chunk can be skipped without decoding them.
pub fn can_skip(chunk: &ColumnChunkMetaData) -> bool {
    chunk.column_type() != PhysicalType::INT32 || !chunk.encodings_mask().is_set(Encoding::DELTA_BINARY_PACKED)
}

/// Whether every chunk of the leaf columns `leaves` (all when None) of `group` can skip.
pub fn group_can_skip(group: &RowGroupMetaData, leaves: Option<&[usize]>) -> bool {
    match leaves {
        Some(leaves) => leaves.iter().all(|&l| can_skip(group.column(l))),
        None => group.columns().iter().all(can_skip),
    }
}
