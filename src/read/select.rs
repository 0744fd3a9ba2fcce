//! Keeping some rows of a batch. Rows leave a changelog window in runs (a delete of a key range,
//! an update of a few thousand neighbours), so the rows that stay usually form a few runs too:
//! those become zero-copy slices of the batch instead of a copy of every kept value.

use arrow::array::{BooleanArray, RecordBatch};
use arrow::compute::filter_record_batch;

use crate::error::Result;

/// More runs than this and the kept rows are copied into one batch: many small slices would
/// cost the consumer more per row than the copy.
const MAX_RUNS: usize = 8;

/// The rows of `batch` whose `keep` is set, in order, as slices of `batch` when they form at most
/// [`MAX_RUNS`] runs, else as one filtered copy. Nothing kept: no batch.
pub fn kept_rows(batch: &RecordBatch, keep: &[bool]) -> Result<Vec<RecordBatch>> {
    let runs = runs(keep, MAX_RUNS);
    Ok(match runs {
        Some(runs) => runs.into_iter().map(|(start, len)| batch.slice(start, len)).collect(),
        None => vec![filter_record_batch(batch, &BooleanArray::from(keep.to_vec()))?],
    })
}

/// The runs of set values in `keep` as (start, length), or None when there are more than `max`.
fn runs(keep: &[bool], max: usize) -> Option<Vec<(usize, usize)>> {
    let mut runs = vec![];
    let mut r = 0;
    while let Some(first) = keep[r..].iter().position(|k| *k) {
        let start = r + first;
        let len = keep[start..].iter().position(|k| !*k).unwrap_or(keep.len() - start);
        if runs.len() == max {
            return None;
        }
        runs.push((start, len));
        r = start + len;
    }
    Some(runs)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{AsArray, Int64Array, StringArray};
    use arrow::datatypes::Int64Type;

    use super::*;

    fn batch(n: i64) -> RecordBatch {
        RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from_iter_values(0..n)) as _),
            ("s", Arc::new(StringArray::from_iter_values((0..n).map(|i| format!("v{i}")))) as _),
        ])
        .unwrap()
    }

    fn ids(batches: &[RecordBatch]) -> Vec<i64> {
        batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect()
    }

    #[test]
    fn runs_are_found_and_bounded() {
        assert_eq!(runs(&[], 8), Some(vec![]));
        assert_eq!(runs(&[false, false], 8), Some(vec![]));
        assert_eq!(runs(&[true, true, false, true], 8), Some(vec![(0, 2), (3, 1)]));
        assert_eq!(runs(&[false, true, true, true], 8), Some(vec![(1, 3)]));
        assert_eq!(runs(&[true, false, true, false, true], 2), None);
    }

    #[test]
    fn few_runs_are_slices_many_are_one_copy() {
        let b = batch(100);
        // two runs: slices sharing the batch's buffers
        let keep: Vec<bool> = (0..100).map(|i| !(40..60).contains(&i)).collect();
        let parts = kept_rows(&b, &keep).unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(ids(&parts), (0..40).chain(60..100).collect::<Vec<_>>());
        assert_eq!(parts[1].column(1).as_string::<i32>().value(0), "v60");
        let values = |b: &RecordBatch| b.column(0).as_primitive::<Int64Type>().values().as_ptr();
        assert_eq!(values(&parts[1]), values(&b).wrapping_add(60), "a slice shares the batch's values");
        // every other row: one filtered copy
        let keep: Vec<bool> = (0..100).map(|i| i % 2 == 0).collect();
        let parts = kept_rows(&b, &keep).unwrap();
        assert_eq!(parts.len(), 1);
        assert_eq!(ids(&parts), (0..100).step_by(2).collect::<Vec<_>>());
        // nothing kept
        assert!(kept_rows(&b, &[false; 100]).unwrap().is_empty());
        assert_eq!(ids(&kept_rows(&b, &[true; 100]).unwrap()), (0..100).collect::<Vec<_>>());
    }
}
