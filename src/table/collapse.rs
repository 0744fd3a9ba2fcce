//! `collapse := true`: a changelog window netted to its effect.
//!
//! On a table with a primary key, per key: absent before the window and present after is an
//! INSERT of the final image; present then absent a DELETE of the first; present in both with a
//! different image an UPDATE_BEFORE/UPDATE_AFTER pair; otherwise nothing. On a table without a
//! key, the multiset difference of row values: a value inserted n times more than deleted appears
//! as n INSERTs (and the reverse as DELETEs); deleted-and-reinserted identical rows vanish.
//! Rows are identified by Arrow's row format (injective), matched in a borrowed hash map.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, ListArray, RecordBatch, StringArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::{DataType, SchemaRef as ArrowSchemaRef};
use arrow::row::{RowConverter, Rows, SortField};

use rayon::prelude::*;

use super::changelog::{DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE};
use super::keys::{encode_rows, KeyColumns, KeySet};
use crate::error::{Error, Result};

/// (batch, row) of a changelog row.
type Ref = (usize, usize);

/// Keeps keys in the order they first appeared: the output follows the changelog's order.
type Ordered<K, V> = indexmap::IndexMap<K, V, ahash::RandomState>;

/// Nets `batches` (a window's changelog, oldest snapshot first, deletes before inserts within a
/// snapshot) into the schema they share.
pub fn collapse(
    schema: &ArrowSchemaRef,
    batches: &[RecordBatch],
    key: Option<&KeyColumns>,
) -> Result<Vec<RecordBatch>> {
    if batches.is_empty() {
        return Ok(vec![]);
    }
    let columns = schema.fields().len() - 3; // the table's columns; then _change_type, _commit_snapshot_id, _full_reload
    let full = RowConverter::new(
        schema.fields()[..columns].iter().map(|f| SortField::new(comparable_type(f.data_type()))).collect(),
    )
    .map_err(|_| {
        Error::not_implemented("skade_changelog(collapse := true) cannot compare rows of this table's types")
    })?;
    let tags: Vec<&StringArray> = batches.iter().map(|b| b.column(columns).as_string::<i32>()).collect();
    let removes = |b: usize, r: usize| matches!(tags[b].value(r), DELETE | UPDATE_BEFORE);
    // Per batch, the rows that remove an image and those that add one (usually far fewer
    // removals: only they, and what matches them, need hashing state).
    let split: Vec<(Vec<u32>, Vec<u32>)> =
        (0..batches.len()).map(|b| (0..batches[b].num_rows() as u32).partition(|&r| removes(b, r as usize))).collect();
    let encode = |converter: &RowConverter, cols: &dyn Fn(&RecordBatch) -> Vec<ArrayRef>, b: usize, rows: &[u32]| {
        encode_rows(converter, &cols(&batches[b]), rows)
    };
    let all_columns = |batch: &RecordBatch| batch.columns()[..columns].iter().map(comparable).collect();
    // What to emit, per batch and row (None: nothing): rows keep their batch and order.
    let mut emit: Vec<Vec<Option<&'static str>>> = batches.iter().map(|b| vec![None; b.num_rows()]).collect();
    let mut out = |r: Ref, tag: &'static str| emit[r.0][r.1] = Some(tag);
    match key {
        Some(key) => {
            let converter = key.converter()?;
            let key_columns = |batch: &RecordBatch| key.indexes.iter().map(|&i| batch.column(i).clone()).collect();
            let removed: Vec<Rows> = split
                .iter()
                .enumerate()
                .map(|(b, (rm, _))| encode(&converter, &key_columns, b, rm))
                .collect::<Result<_>>()?;
            let added: Vec<Rows> = split
                .iter()
                .enumerate()
                .map(|(b, (_, add))| encode(&converter, &key_columns, b, add))
                .collect::<Result<_>>()?;
            let touched: KeySet<&[u8]> = removed.iter().flat_map(|rows| rows.iter().map(|r| r.data())).collect();
            // A key never removed in the window was inserted once (keys are unique): an INSERT.
            // The others: key -> (image before the window, image after it), in chronological order.
            let mut state: Ordered<&[u8], (Option<Ref>, Option<Ref>)> = Ordered::default();
            for b in 0..batches.len() {
                // within a snapshot, its removals come before its additions
                let (rm, add) = &split[b];
                for (j, &r) in rm.iter().enumerate() {
                    let entry = state.entry(removed[b].row(j).data()).or_insert((Some((b, r as usize)), None));
                    entry.1 = None;
                }
                for (j, &r) in add.iter().enumerate() {
                    let k = added[b].row(j).data();
                    if touched.contains(k) {
                        state.entry(k).or_insert((None, None)).1 = Some((b, r as usize));
                    } else {
                        out((b, r as usize), INSERT);
                    }
                }
            }
            let image = |r: Ref| encode(&full, &all_columns, r.0, &[r.1 as u32]);
            for (before, after) in state.into_values() {
                match (before, after) {
                    (None, Some(a)) => out(a, INSERT),
                    (Some(b), None) => out(b, DELETE),
                    (Some(b), Some(a)) => {
                        if image(b)?.row(0) != image(a)?.row(0) {
                            out(b, UPDATE_BEFORE);
                            out(a, UPDATE_AFTER);
                        }
                    }
                    (None, None) => {}
                }
            }
        }
        None => {
            // Multiset difference: hash the removed values, then let each added row cancel one.
            let removed: Vec<Rows> = split
                .iter()
                .enumerate()
                .map(|(b, (rm, _))| encode(&full, &all_columns, b, rm))
                .collect::<Result<_>>()?;
            let mut pending: Ordered<&[u8], (usize, Vec<Ref>)> = Ordered::default();
            for (b, rows) in removed.iter().enumerate() {
                for (j, &r) in split[b].0.iter().enumerate() {
                    let entry = pending.entry(rows.row(j).data()).or_insert((0, vec![]));
                    entry.0 += 1;
                    entry.1.push((b, r as usize));
                }
            }
            // Only added rows whose first column matches some removed row's can cancel one: they
            // alone are encoded whole.
            let first = RowConverter::new(vec![SortField::new(comparable_type(schema.field(0).data_type()))])?;
            let first_column = |batch: &RecordBatch| vec![comparable(batch.column(0))];
            let removed_first: Vec<Rows> = split
                .iter()
                .enumerate()
                .map(|(b, (rm, _))| encode(&first, &first_column, b, rm))
                .collect::<Result<_>>()?;
            let candidates: KeySet<&[u8]> =
                removed_first.iter().flat_map(|rows| rows.iter().map(|r| r.data())).collect();
            // The per-batch encoding runs in parallel; only the cancelling is sequential.
            let encoded: Vec<(Vec<u32>, Rows)> = split
                .par_iter()
                .enumerate()
                .map(|(b, (_, add))| {
                    let firsts = encode(&first, &first_column, b, add)?;
                    let maybe: Vec<u32> = add
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| candidates.contains(firsts.row(*j).data()))
                        .map(|(_, &r)| r)
                        .collect();
                    let rows = encode(&full, &all_columns, b, &maybe)?;
                    Ok((maybe, rows))
                })
                .collect::<Result<_>>()?;
            for (b, ((_, add), (maybe, rows))) in split.iter().zip(&encoded).enumerate() {
                let mut cancelled = KeySet::default();
                for (j, &r) in maybe.iter().enumerate() {
                    if let Some(entry) = pending.get_mut(rows.row(j).data()).filter(|e| e.0 > 0) {
                        entry.0 -= 1; // a carry-over, or inserted then deleted
                        cancelled.insert(r);
                    }
                }
                for &r in add.iter().filter(|r| !cancelled.contains(*r)) {
                    out((b, r as usize), INSERT);
                }
            }
            for (left, refs) in pending.into_values() {
                for r in refs.into_iter().take(left) {
                    out(r, DELETE);
                }
            }
        }
    }
    let mut result = vec![];
    for (batch, tags) in batches.iter().zip(emit) {
        if tags.iter().all(Option::is_none) {
            continue;
        }
        let rows = if tags.iter().all(Option::is_some) {
            batch.clone() // every row stays (most batches of new rows): no copy
        } else {
            filter_record_batch(batch, &BooleanArray::from_iter(tags.iter().map(|t| Some(t.is_some()))))?
        };
        let mut arrays: Vec<ArrayRef> = rows.columns()[..columns].to_vec();
        arrays.push(Arc::new(StringArray::from_iter_values(tags.into_iter().flatten())));
        arrays.extend(rows.columns()[columns + 1..].iter().cloned());
        result.push(RecordBatch::try_new(schema.clone(), arrays)?);
    }
    Ok(result)
}

/// The type a column is compared as: Arrow's row format has no MAP, so a map compares as the
/// list of its entries (its physical layout; entry order as stored).
pub(super) fn comparable_type(t: &DataType) -> DataType {
    match t {
        DataType::Map(entries, _) => DataType::List(entries.clone()),
        other => other.clone(),
    }
}

pub(super) fn comparable(array: &ArrayRef) -> ArrayRef {
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
