//! `collapse := true`: a changelog window netted to its effect.
//!
//! On a table with a primary key, per key: absent before the window and present after is an
//! INSERT of the final image; present then absent a DELETE of the first; present in both with a
//! different image an UPDATE_BEFORE/UPDATE_AFTER pair; otherwise nothing. On a table without a
//! key, the multiset difference of row values: a value inserted n times more than deleted appears
//! as n INSERTs (and the reverse as DELETEs); deleted-and-reinserted identical rows vanish.
//! Rows are identified by Arrow's row format (injective), matched in a borrowed hash map.

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::buffer::{Buffer, NullBuffer};
use arrow::datatypes::SchemaRef as ArrowSchemaRef;
use arrow::row::{RowConverter, Rows, SortField};

use rayon::prelude::*;

use super::compare::{comparable, comparable_type};
use super::types::{change_column, change_keys, DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE};
use crate::error::{Error, Result};
use crate::read::keys::{encode_rows, KeyColumns, KeySet};
use crate::read::scan::{ROW_ID_FIELD_ID, ROW_ID_NAME};
use crate::read::select::kept_rows;

/// (batch, row) of a changelog row.
type Ref = (usize, usize);

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
    match key {
        Some(key) => net_keys(schema, batches, columns, &full, key),
        None => net_values(schema, batches, columns, &full),
    }
}

/// `collapse := true` on an Iceberg v3 table without a key: the window (its batches carry each
/// row's `_row_id` as a last table column: `RowIds::Kept`) netted per row id, as a key nets a
/// keyed table's, into `schema` (without it). A window holding a row with no id (written before
/// its table became v3, and not given one since) nets by value instead.
pub fn collapse_by_row_id(schema: &ArrowSchemaRef, batches: &[RecordBatch]) -> Result<Vec<RecordBatch>> {
    let Some(first) = batches.first() else {
        return Ok(vec![]);
    };
    let columns = schema.fields().len() - 3; // (the table's; the batches' `_row_id` follows them)
    let without_id = |b: &RecordBatch| -> Result<RecordBatch> {
        let kept: Vec<usize> = (0..b.num_columns()).filter(|&i| i != columns).collect();
        Ok(RecordBatch::try_new(schema.clone(), b.project(&kept)?.columns().to_vec())?)
    };
    if batches.iter().any(|b| b.column(columns).null_count() > 0) {
        let plain = batches.iter().map(without_id).collect::<Result<Vec<_>>>()?;
        return collapse(schema, &plain, None);
    }
    let row_id = KeyColumns {
        field_ids: vec![ROW_ID_FIELD_ID],
        indexes: vec![columns],
        names: vec![ROW_ID_NAME.to_string()],
        types: vec![arrow::datatypes::DataType::Int64],
    };
    collapse(&first.schema(), batches, Some(&row_id))?.iter().map(without_id).collect()
}

/// Per key of a table with a primary key (see the module's documentation).
fn net_keys(
    schema: &ArrowSchemaRef,
    batches: &[RecordBatch],
    columns: usize,
    full: &RowConverter,
    key: &KeyColumns,
) -> Result<Vec<RecordBatch>> {
    let tags: Vec<&[i8]> = batches.iter().map(|b| change_keys(b.column(columns))).collect();
    let removes = |b: usize, r: usize| matches!(tags[b][r], DELETE | UPDATE_BEFORE);
    // Per batch, the rows that remove an image and those that add one (usually far fewer
    // removals: only they, and what matches them, need hashing state).
    let split: Vec<(Vec<u32>, Vec<u32>)> =
        (0..batches.len()).map(|b| (0..batches[b].num_rows() as u32).partition(|&r| removes(b, r as usize))).collect();
    let encode = |converter: &RowConverter, cols: &dyn Fn(&RecordBatch) -> Vec<ArrayRef>, b: usize, rows: &[u32]| {
        encode_rows(converter, &cols(&batches[b]), rows)
    };
    // What to emit, per batch and row (None: nothing): rows keep their batch and order.
    let mut emit: Vec<Vec<Option<i8>>> = batches.iter().map(|b| vec![None; b.num_rows()]).collect();
    let mut out = |r: Ref, tag: i8| emit[r.0][r.1] = Some(tag);
    // Keys as u64 bits when the key is one fixed-width column (no pointer to chase per probe),
    // else in Arrow's row format.
    let raw_width = match key.indexes.as_slice() {
        // (a key is never NULL; were one, the row format tells it apart)
        [i] if batches.iter().all(|b| b.column(*i).null_count() == 0) => {
            batches[0].schema().field(*i).data_type().primitive_width().filter(|w| *w <= 8)
        }
        _ => None,
    };
    let states = match raw_width {
        Some(width) => {
            let bits = |b: usize, rows: &[u32]| -> Vec<u64> {
                let raw = RawValues::of(batches[b].column(key.indexes[0]), width);
                rows.iter().map(|&r| raw.get(r as usize).unwrap_or_default()).collect()
            };
            let removed: Vec<Vec<u64>> = split.iter().enumerate().map(|(b, (rm, _))| bits(b, rm)).collect();
            let added: Vec<Vec<u64>> = split.iter().enumerate().map(|(b, (_, add))| bits(b, add)).collect();
            track(&split, &removed, &added, &mut out)
        }
        None => {
            let converter = key.converter()?;
            let key_columns = |batch: &RecordBatch| key.indexes.iter().map(|&i| batch.column(i).clone()).collect();
            let removed: Vec<Rows> = split
                .iter()
                .enumerate()
                .map(|(b, s)| encode(&converter, &key_columns, b, &s.0))
                .collect::<Result<_>>()?;
            let added: Vec<Rows> = split
                .iter()
                .enumerate()
                .map(|(b, s)| encode(&converter, &key_columns, b, &s.1))
                .collect::<Result<_>>()?;
            track(&split, &slices(&removed), &slices(&added), &mut out)
        }
    };
    // Keys present before and after changed only if their images differ.
    let mut pairs = vec![];
    for Images { before, after, .. } in states {
        match (before, after) {
            (None, Some(a)) => out(a, INSERT),
            (Some(b), None) => out(b, DELETE),
            (Some(b), Some(a)) => pairs.push((b, a)),
            (None, None) => {}
        }
    }
    for ((b, a), same) in pairs.iter().zip(same_images(batches, columns, full, &pairs)?) {
        if !same {
            out(*b, UPDATE_BEFORE);
            out(*a, UPDATE_AFTER);
        }
    }
    // Emitted rows keep their batch and order: slices of it when they form a few runs.
    let result: Vec<Vec<RecordBatch>> = batches
        .par_iter()
        .zip(emit)
        .map(|(batch, tags)| {
            if tags.iter().all(Option::is_none) {
                return Ok(vec![]);
            }
            let keep: Vec<bool> = tags.iter().map(Option::is_some).collect();
            let mut arrays: Vec<ArrayRef> = batch.columns()[..columns].to_vec();
            arrays.push(change_column(tags.iter().map(|t| t.unwrap_or(INSERT)).collect()));
            arrays.extend(batch.columns()[columns + 1..].iter().cloned());
            kept_rows(&RecordBatch::try_new(schema.clone(), arrays)?, &keep)
        })
        .collect::<Result<_>>()?;
    Ok(result.into_iter().flatten().collect())
}

/// A removed key's images: before the window and after it (found in window order).
#[derive(Default, Clone, Copy)]
struct Images {
    before: Option<Ref>,
    after: Option<Ref>,
    /// Whether the window touched the key yet (an addition first: it was absent before).
    seen: bool,
}

/// Follows the keys the window removed through its batches (`removed[b][j]` is the key of row
/// `split[b].0[j]`, `added` likewise); an added key never removed is an INSERT right away.
fn track<K: std::hash::Hash + Eq + Copy>(
    split: &[(Vec<u32>, Vec<u32>)],
    removed: &[Vec<K>],
    added: &[Vec<K>],
    out: &mut dyn FnMut(Ref, i8),
) -> Vec<Images> {
    let removals: usize = removed.iter().map(Vec::len).sum();
    let mut state: std::collections::HashMap<K, Images, ahash::RandomState> =
        std::collections::HashMap::with_capacity_and_hasher(removals, Default::default());
    for k in removed.iter().flatten() {
        state.entry(*k).or_default();
    }
    for (b, (rm, add)) in split.iter().enumerate() {
        // within a snapshot, its removals come before its additions
        for (k, &r) in removed[b].iter().zip(rm) {
            if let Some(e) = state.get_mut(k) {
                if !e.seen {
                    e.before = Some((b, r as usize));
                    e.seen = true;
                }
                e.after = None;
            }
        }
        for (k, &r) in added[b].iter().zip(add) {
            match state.get_mut(k) {
                Some(e) => {
                    e.seen = true;
                    e.after = Some((b, r as usize));
                }
                None => out((b, r as usize), INSERT),
            }
        }
    }
    state.into_values().collect()
}

fn slices(rows: &[Rows]) -> Vec<Vec<&[u8]>> {
    rows.iter().map(|r| r.iter().map(|row| row.data()).collect()).collect()
}

/// Whether each (before, after) pair of rows has the same image: compared column by column with
/// Arrow's comparators (one per pair of batches), or, for types they cannot compare, encoded in
/// Arrow's row format in one call per batch.
fn same_images(
    batches: &[RecordBatch],
    columns: usize,
    full: &RowConverter,
    pairs: &[(Ref, Ref)],
) -> Result<Vec<bool>> {
    let mut comparators: std::collections::HashMap<(usize, usize), Vec<arrow::array::DynComparator>> =
        Default::default();
    let mut out = Vec::with_capacity(pairs.len());
    for &(b, a) in pairs {
        let cmps = match comparators.entry((b.0, a.0)) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let built: std::result::Result<Vec<_>, _> = (0..columns)
                    .map(|c| {
                        arrow::array::make_comparator(
                            batches[b.0].column(c).as_ref(),
                            batches[a.0].column(c).as_ref(),
                            Default::default(),
                        )
                    })
                    .collect();
                match built {
                    Ok(cmps) => e.insert(cmps),
                    Err(_) => return same_encoded(batches, columns, full, pairs),
                }
            }
        };
        out.push(cmps.iter().all(|cmp| cmp(b.1, a.1).is_eq()));
    }
    Ok(out)
}

/// [`same_images`] through the row format.
fn same_encoded(
    batches: &[RecordBatch],
    columns: usize,
    full: &RowConverter,
    pairs: &[(Ref, Ref)],
) -> Result<Vec<bool>> {
    let mut wanted: Vec<Vec<u32>> = vec![vec![]; batches.len()];
    for (b, a) in pairs {
        wanted[b.0].push(b.1 as u32);
        wanted[a.0].push(a.1 as u32);
    }
    for rows in &mut wanted {
        rows.sort_unstable();
        rows.dedup();
    }
    let images: Vec<Rows> = wanted
        .par_iter()
        .enumerate()
        .map(|(b, rows)| {
            let cols: Vec<ArrayRef> = batches[b].columns()[..columns].iter().map(comparable).collect();
            encode_rows(full, &cols, rows)
        })
        .collect::<Result<_>>()?;
    let image = |r: Ref| -> Result<&[u8]> {
        let i = wanted[r.0]
            .binary_search(&(r.1 as u32))
            .map_err(|_| Error::internal("skade_changelog(collapse): an image was not encoded"))?;
        Ok(images[r.0].row(i).data())
    };
    pairs.iter().map(|&(b, a)| Ok(image(b)? == image(a)?)).collect()
}

/// The multiset difference of a window on a table without a key (its changelog holds only
/// INSERT and DELETE rows): each added row identical to a removed one cancels it. Removed rows are
/// few (deletes, update images) and are encoded whole; an added row is encoded only when its first
/// column's value is one of theirs (checked on the raw values for fixed-width columns). Batches
/// with nothing removed or cancelled are kept as they are, without a copy.
fn net_values(
    schema: &ArrowSchemaRef,
    batches: &[RecordBatch],
    columns: usize,
    full: &RowConverter,
) -> Result<Vec<RecordBatch>> {
    let all_columns =
        |batch: &RecordBatch| -> Vec<ArrayRef> { batch.columns()[..columns].iter().map(comparable).collect() };
    let (removals, removed): (Vec<Vec<u32>>, Vec<Rows>) = batches
        .par_iter()
        .map(|b| {
            let tags = change_keys(b.column(columns));
            let rm: Vec<u32> = (0..tags.len() as u32).filter(|&r| tags[r as usize] == DELETE).collect();
            let rows = encode_rows(full, &all_columns(b), &rm)?;
            Ok((rm, rows))
        })
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    // Each distinct removed value has a slot: how many of its removals no addition matched yet.
    let mut slot_of: std::collections::HashMap<&[u8], usize, ahash::RandomState> = Default::default();
    let mut unmatched: Vec<usize> = vec![];
    let mut slots: Vec<Vec<usize>> = Vec::with_capacity(batches.len());
    for rows in &removed {
        let mut batch_slots = Vec::with_capacity(rows.num_rows());
        for row in rows.iter() {
            let next = unmatched.len();
            let slot = *slot_of.entry(row.data()).or_insert(next);
            if slot == next {
                unmatched.push(0);
            }
            unmatched[slot] += 1;
            batch_slots.push(slot);
        }
        slots.push(batch_slots);
    }
    let first = FirstColumn::of(batches, &removals)?;
    // Per batch, in parallel: the added rows that may cancel a removal, encoded whole.
    let candidates: Vec<(Vec<u32>, Rows)> = batches
        .par_iter()
        .zip(&removals)
        .map(|(batch, rm)| {
            let maybe = first.candidates(batch.column(0), rm)?;
            let rows = encode_rows(full, &all_columns(batch), &maybe)?;
            Ok((maybe, rows))
        })
        .collect::<Result<_>>()?;
    // Each candidate cancels one unmatched identical removal (a carry-over, or inserted then
    // deleted).
    let mut cancelled: Vec<Vec<u32>> = vec![vec![]; batches.len()];
    for (b, (maybe, rows)) in candidates.iter().enumerate() {
        for (j, &r) in maybe.iter().enumerate() {
            if let Some(&slot) = slot_of.get(rows.row(j).data()) {
                if unmatched[slot] > 0 {
                    unmatched[slot] -= 1;
                    cancelled[b].push(r);
                }
            }
        }
    }
    // Removals left unmatched are DELETEs: the first ones of each value, in window order.
    let mut deletes: Vec<Vec<u32>> = vec![vec![]; batches.len()];
    for (b, batch_slots) in slots.iter().enumerate() {
        for (j, &slot) in batch_slots.iter().enumerate() {
            if unmatched[slot] > 0 {
                unmatched[slot] -= 1;
                deletes[b].push(removals[b][j]);
            }
        }
    }
    let out: Vec<Vec<RecordBatch>> = batches
        .par_iter()
        .enumerate()
        .map(|(b, batch)| {
            if removals[b].is_empty() && cancelled[b].is_empty() {
                return Ok(vec![batch.clone()]); // only additions, none cancelled: kept whole
            }
            let mut keep = vec![true; batch.num_rows()];
            for &r in removals[b].iter().chain(&cancelled[b]) {
                keep[r as usize] = false;
            }
            for &r in &deletes[b] {
                keep[r as usize] = true;
            }
            let kept = RecordBatch::try_new(schema.clone(), batch.columns().to_vec())?;
            kept_rows(&kept, &keep)
        })
        .collect::<Result<_>>()?;
    Ok(out.into_iter().flatten().collect())
}

/// Finds the added rows whose first column holds a value some removed row has: a necessary
/// condition for identical rows, far cheaper than encoding every row.
enum FirstColumn {
    /// Fixed-width values up to 8 bytes, compared as their bits (as the row format does);
    /// `sorted` holds the same values in order, to bound a batch's candidates by its range;
    /// `sketch` is a bitmap of their hashes (`shift` turns a hash into a bit), checked before
    /// the set.
    Bits { width: usize, values: KeySet<u64>, sorted: Vec<u64>, sketch: Vec<u64>, shift: u32, null: bool },
    /// Other types: the row format of the first column.
    Rows { converter: RowConverter, values: KeySet<Box<[u8]>> },
}

impl FirstColumn {
    fn of(batches: &[RecordBatch], removals: &[Vec<u32>]) -> Result<FirstColumn> {
        let data_type = batches[0].schema().field(0).data_type().clone();
        if let Some(width) = data_type.primitive_width().filter(|w| *w <= 8) {
            let mut values = KeySet::default();
            let mut null = false;
            for (batch, rm) in batches.iter().zip(removals) {
                let raw = RawValues::of(batch.column(0), width);
                for &r in rm {
                    match raw.get(r as usize) {
                        Some(v) => {
                            values.insert(v);
                        }
                        None => null = true,
                    }
                }
            }
            let bits = (values.len() * SKETCH_BITS_PER_VALUE).next_power_of_two().clamp(1 << 12, 1 << 20);
            let shift = 64 - bits.trailing_zeros();
            let mut sketch = vec![0u64; bits / 64];
            for v in &values {
                let h = sketch_bit(*v, shift);
                sketch[h / 64] |= 1 << (h % 64);
            }
            let mut sorted: Vec<u64> = values.iter().copied().collect();
            sorted.sort_unstable();
            return Ok(FirstColumn::Bits { width, values, sorted, sketch, shift, null });
        }
        let converter = RowConverter::new(vec![SortField::new(comparable_type(&data_type))])?;
        let mut values = KeySet::default();
        for (batch, rm) in batches.iter().zip(removals) {
            let rows = encode_rows(&converter, &[comparable(batch.column(0))], rm)?;
            values.extend(rows.iter().map(|r| Box::<[u8]>::from(r.data())));
        }
        Ok(FirstColumn::Rows { converter, values })
    }

    /// The rows of `column` not in `removals` whose value some removed row has.
    fn candidates(&self, column: &ArrayRef, removals: &[u32]) -> Result<Vec<u32>> {
        // The rows not removed, built only once a batch needs probing.
        let added = || {
            let mut removed = vec![false; column.len()];
            for &r in removals {
                removed[r as usize] = true;
            }
            (0..column.len() as u32).filter(move |&r| !removed[r as usize])
        };
        Ok(match self {
            FirstColumn::Bits { values, null: false, .. } if values.is_empty() => vec![],
            FirstColumn::Bits { width, values, sorted, sketch, shift, null } => {
                let raw = RawValues::of(column, *width);
                // Only removed values within this column's range can match: usually none
                // (removals are clustered, as batches are), and then no row is probed.
                let nulls = *null && column.null_count() > 0;
                let (lo, hi) = match raw.bounds(column.len()) {
                    Some((min, max)) => (sorted.partition_point(|v| *v < min), sorted.partition_point(|v| *v <= max)),
                    None => (0, 0),
                };
                if lo == hi && !nulls {
                    return Ok(vec![]);
                }
                let (lo, hi) = if lo < hi { (sorted[lo], sorted[hi - 1]) } else { (1, 0) };
                added()
                    .filter(|&r| match raw.get(r as usize) {
                        Some(v) if v < lo || v > hi => false,
                        Some(v) => {
                            let h = sketch_bit(v, *shift);
                            sketch[h / 64] & (1 << (h % 64)) != 0 && values.contains(&v)
                        }
                        None => *null,
                    })
                    .collect()
            }
            FirstColumn::Rows { values, .. } if values.is_empty() => vec![],
            FirstColumn::Rows { converter, values } => {
                let rows: Vec<u32> = added().collect();
                let encoded = encode_rows(converter, &[comparable(column)], &rows)?;
                rows.iter()
                    .enumerate()
                    .filter(|(j, _)| values.contains(encoded.row(*j).data()))
                    .map(|(_, &r)| r)
                    .collect()
            }
        })
    }
}

/// Bits of [`FirstColumn::Bits`]'s sketch per removed value (a power of two from 4 Kbit to
/// 1 Mbit): one value in 16 or fewer of the others passes it. Sized to the removals, the sketch
/// of a typical window (a few thousand values) stays in the L1 cache; probed once per added row,
/// a sketch that does not was most of the netting's time.
const SKETCH_BITS_PER_VALUE: usize = 16;

fn sketch_bit(v: u64, shift: u32) -> usize {
    (v.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> shift) as usize
}

/// The values of a fixed-width column as raw bits.
struct RawValues {
    values: Buffer,
    offset: usize,
    nulls: Option<NullBuffer>,
    width: usize,
}

impl RawValues {
    fn of(column: &ArrayRef, width: usize) -> RawValues {
        let data = column.to_data();
        RawValues { values: data.buffers()[0].clone(), offset: data.offset(), nulls: data.nulls().cloned(), width }
    }

    /// The least and greatest bits of the `len` values that are not null (None: no such value).
    fn bounds(&self, len: usize) -> Option<(u64, u64)> {
        if self.width == 8 && self.nulls.is_none() {
            let bytes = &self.values.as_slice()[self.offset * 8..(self.offset + len) * 8];
            let values = || bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()));
            return Some((values().min()?, values().max()?));
        }
        let mut bits = (0..len).filter_map(|r| self.get(r));
        let first = bits.next()?;
        Some(bits.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
    }

    /// The bits of value `row` (None: null).
    #[inline(always)]
    fn get(&self, row: usize) -> Option<u64> {
        if self.nulls.as_ref().is_some_and(|n| n.is_null(row)) {
            return None;
        }
        let bytes = self.values.as_slice();
        let start = (self.offset + row) * self.width;
        Some(match self.width {
            8 => read::<8>(bytes, start),
            4 => read::<4>(bytes, start),
            2 => read::<2>(bytes, start),
            _ => read::<1>(bytes, start),
        })
    }
}

fn read<const W: usize>(bytes: &[u8], start: usize) -> u64 {
    let mut value = [0u8; 8];
    value[..W].copy_from_slice(&bytes[start..start + W]);
    u64::from_le_bytes(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::changelog::types::{changelog_schema, CHANGE_TYPES};
    use arrow::array::{AsArray, Int64Array, StringArray};
    use arrow::datatypes::DataType;
    use arrow::datatypes::{Field, Schema as ArrowSchema};
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
    use std::sync::Arc;

    /// (id, v) rows of a changelog: each (id, v, change, snapshot).
    fn feed(rows: &[(i64, &str, i8, i64)]) -> (ArrowSchemaRef, Vec<RecordBatch>) {
        let table =
            ArrowSchema::new(vec![Field::new("id", DataType::Int64, true), Field::new("v", DataType::Utf8, true)]);
        let schema = changelog_schema(&table);
        // one batch per row: netting must work across batches
        let batches = rows
            .iter()
            .map(|&(id, v, change, snapshot)| {
                let t = RecordBatch::try_new(
                    Arc::new(table.clone()),
                    vec![Arc::new(Int64Array::from(vec![id])), Arc::new(StringArray::from(vec![v]))],
                )
                .unwrap();
                crate::changelog::types::with_tags(&schema, &t, change_column(vec![change]), snapshot, false).unwrap()
            })
            .collect();
        (schema, batches)
    }

    fn key() -> KeyColumns {
        let schema = Schema::builder()
            .with_fields(vec![
                Arc::new(NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long))),
                Arc::new(NestedField::optional(2, "v", Type::Primitive(PrimitiveType::String))),
            ])
            .with_identifier_field_ids([1])
            .build()
            .unwrap();
        KeyColumns::of(&schema).unwrap().unwrap()
    }

    /// The netted rows as (id, v, change), sorted.
    fn netted(
        schema: &ArrowSchemaRef,
        batches: &[RecordBatch],
        key: Option<&KeyColumns>,
    ) -> Vec<(i64, String, String)> {
        let mut out = vec![];
        for b in collapse(schema, batches, key).unwrap() {
            let ids = b.column(0).as_primitive::<arrow::datatypes::Int64Type>();
            let vs = b.column(1).as_string::<i32>();
            for (r, tag) in change_keys(b.column(2)).iter().enumerate() {
                out.push((ids.value(r), vs.value(r).to_string(), CHANGE_TYPES[*tag as usize].to_string()));
            }
        }
        out.sort();
        out
    }

    fn row(id: i64, v: &str, change: &str) -> (i64, String, String) {
        (id, v.to_string(), change.to_string())
    }

    #[test]
    fn a_keyed_window_nets_each_key_to_its_first_and_last_image() {
        let (schema, batches) = feed(&[
            (1, "a", INSERT, 10), // absent, then present: INSERT
            (2, "b", DELETE, 10), // present, then absent: DELETE
            (3, "c", UPDATE_BEFORE, 10),
            (3, "c2", UPDATE_AFTER, 10), // changed twice:
            (3, "c2", UPDATE_BEFORE, 11),
            (3, "c3", UPDATE_AFTER, 11), //   the first and last images
            (4, "d", INSERT, 10),
            (4, "d", DELETE, 11), // inserted then deleted: nothing
            (5, "e", UPDATE_BEFORE, 10),
            (5, "x", UPDATE_AFTER, 10), // changed and changed back:
            (5, "x", UPDATE_BEFORE, 11),
            (5, "e", UPDATE_AFTER, 11), //   nothing
            (6, "f", DELETE, 10),
            (6, "g", INSERT, 11), // deleted then re-inserted: UPDATE
        ]);
        assert_eq!(
            netted(&schema, &batches, Some(&key())),
            vec![
                row(1, "a", "INSERT"),
                row(2, "b", "DELETE"),
                row(3, "c", "UPDATE_BEFORE"),
                row(3, "c3", "UPDATE_AFTER"),
                row(6, "f", "UPDATE_BEFORE"),
                row(6, "g", "UPDATE_AFTER"),
            ]
        );
    }

    #[test]
    fn a_window_without_a_key_nets_to_the_multiset_difference_of_rows() {
        let (schema, batches) = feed(&[
            (1, "a", INSERT, 10),
            (1, "a", INSERT, 10), // a duplicate row: two INSERTs
            (1, "a", DELETE, 11), // one of them deleted: one left
            (2, "b", DELETE, 10), // an older row deleted
            (3, "c", DELETE, 10), // deleted and re-inserted identical: a carry-over, gone
            (3, "c", INSERT, 11),
            (4, "d", DELETE, 10), // changed: a DELETE and an INSERT
            (4, "e", INSERT, 10),
        ]);
        assert_eq!(
            netted(&schema, &batches, None),
            vec![row(1, "a", "INSERT"), row(2, "b", "DELETE"), row(4, "d", "DELETE"), row(4, "e", "INSERT")]
        );
        assert!(collapse(&schema, &[], None).unwrap().is_empty());
    }
}
