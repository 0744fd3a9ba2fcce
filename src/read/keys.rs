//! Primary keys: a table's identifier fields, rows' keys encoded with Arrow's row format (one
//! byte string per key, injective per type, so equal bytes mean equal keys) and packed into one
//! length-delimited buffer, and the check that new keys are not live in the table yet.

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, Scalar, UInt32Array};
use arrow::compute::kernels::boolean::or;
use arrow::compute::kernels::cmp::{gt, lt};
use arrow::compute::take;
use arrow::datatypes::DataType;
use arrow::row::{RowConverter, Rows, SortField};
use iceberg::spec::{DataFile, Datum, Schema};

use super::filter::{Cmp, Prune};
use crate::error::{Error, Result};
use crate::format::schema::arrow_schema;

/// A set of encoded keys, with a fast hash (keys are not attacker-chosen lookups of a server).
pub type KeySet<K> = std::collections::HashSet<K, ahash::RandomState>;

/// The key columns of a table: its identifier fields, in field-id order (the order equality
/// deletes name them in too).
#[derive(Clone)]
pub struct KeyColumns {
    pub field_ids: Vec<i32>,
    /// Top-level column positions.
    pub indexes: Vec<usize>,
    pub names: Vec<String>,
    pub types: Vec<DataType>,
}

impl KeyColumns {
    /// None when the table has no primary key.
    pub fn of(schema: &Schema) -> Result<Option<KeyColumns>> {
        let ids: Vec<i32> = schema.identifier_field_ids().collect();
        Self::for_fields(schema, &ids)
    }

    /// The columns of the given top-level field ids (an equality-delete file's), in field-id
    /// order; None for no ids.
    pub fn for_fields(schema: &Schema, ids: &[i32]) -> Result<Option<KeyColumns>> {
        let mut field_ids = ids.to_vec();
        if field_ids.is_empty() {
            return Ok(None);
        }
        field_ids.sort_unstable();
        let arrow = arrow_schema(schema)?;
        let fields = schema.as_struct().fields();
        let mut key = KeyColumns { field_ids: vec![], indexes: vec![], names: vec![], types: vec![] };
        for id in field_ids {
            let index = fields
                .iter()
                .position(|f| f.id == id)
                .ok_or_else(|| Error::corrupt(format!("key field {id} is not a top-level column")))?;
            key.field_ids.push(id);
            key.indexes.push(index);
            key.names.push(fields[index].name.clone());
            key.types.push(arrow.field(index).data_type().clone());
        }
        Ok(Some(key))
    }

    pub fn converter(&self) -> Result<RowConverter> {
        Ok(RowConverter::new(self.types.iter().map(|t| SortField::new(t.clone())).collect())?)
    }

    /// The keys of a batch of the table's columns (in table order).
    pub fn encode(&self, converter: &RowConverter, batch: &RecordBatch) -> Result<Rows> {
        let columns: Vec<ArrayRef> = self.indexes.iter().map(|&i| batch.column(i).clone()).collect();
        Ok(converter.convert_columns(&columns)?)
    }

    /// A key as DuckDB prints it in constraint errors: `id: 2` or `a: 1, b: x`.
    pub fn describe(&self, converter: &RowConverter, key: &[u8]) -> String {
        let parser = converter.parser();
        let values = match converter.convert_rows([parser.parse(key)]) {
            Ok(v) => v,
            Err(_) => return "?".to_string(),
        };
        self.names
            .iter()
            .zip(values)
            .map(|(name, v)| format!("{name}: {}", shown_value(&v)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A predicate that keeps only files whose key bounds overlap those of `files` (the files a
    /// statement wrote): live keys outside that range cannot collide with the new ones.
    pub fn overlap_prune(&self, files: &[DataFile]) -> Option<Prune> {
        let mut parts = vec![];
        for id in &self.field_ids {
            let lower = files.iter().map(|f| f.lower_bounds().get(id)).collect::<Option<Vec<&Datum>>>();
            let upper = files.iter().map(|f| f.upper_bounds().get(id)).collect::<Option<Vec<&Datum>>>();
            let lowest = lower.and_then(|v| min_datum(v.into_iter()));
            let highest = upper.and_then(|v| max_datum(v.into_iter()));
            if let Some(value) = lowest {
                parts.push(Prune::Compare { field_id: *id, cmp: Cmp::Ge, value });
            }
            if let Some(value) = highest {
                parts.push(Prune::Compare { field_id: *id, cmp: Cmp::Le, value });
            }
        }
        (!parts.is_empty()).then_some(Prune::And(parts))
    }
}

fn min_datum<'a>(mut values: impl Iterator<Item = &'a Datum>) -> Option<Datum> {
    let first = values.next()?;
    values.try_fold(first, |a, b| Some(if b.partial_cmp(a)?.is_lt() { b } else { a })).cloned()
}

fn max_datum<'a>(mut values: impl Iterator<Item = &'a Datum>) -> Option<Datum> {
    let first = values.next()?;
    values.try_fold(first, |a, b| Some(if b.partial_cmp(a)?.is_gt() { b } else { a })).cloned()
}

/// Whether a key of data file `a` may equal one of data file `b`: false only when some key
/// column's bounds are provably disjoint (a key equals another only in every column).
fn files_may_share_a_key(field_ids: &[i32], a: &DataFile, b: &DataFile) -> bool {
    !field_ids.iter().any(|id| {
        let (Some(lo_a), Some(hi_a), Some(lo_b), Some(hi_b)) =
            (a.lower_bounds().get(id), a.upper_bounds().get(id), b.lower_bounds().get(id), b.upper_bounds().get(id))
        else {
            return false; // no bounds: anything may be in there
        };
        hi_a.partial_cmp(lo_b).is_some_and(|o| o.is_lt()) || hi_b.partial_cmp(lo_a).is_some_and(|o| o.is_lt())
    })
}

/// Whether a key of the files `ours` may equal one of the files `theirs`, judged file by file
/// on their key bounds (not on the span of all of them: concurrent writers of interleaved key
/// ranges each write files of narrow bounds). Two transactions whose new keys cannot collide
/// commit both.
pub fn ranges_may_overlap(field_ids: &[i32], ours: &[DataFile], theirs: &[DataFile]) -> bool {
    ours.iter().any(|a| theirs.iter().any(|b| files_may_share_a_key(field_ids, a, b)))
}

/// The smallest and largest of a set of encoded keys. The row format sorts like the keys
/// (lexicographically over the key columns), so rows outside the range cannot be in the set, and
/// the first key column alone decides that for most rows with vectorized comparisons.
pub struct KeyRange {
    lo: Box<[u8]>,
    hi: Box<[u8]>,
    /// The first key column's value in `lo` and in `hi` (one-row arrays).
    first_lo: ArrayRef,
    first_hi: ArrayRef,
}

impl KeyRange {
    /// None for an empty set.
    pub fn of<'a>(converter: &RowConverter, keys: impl Iterator<Item = &'a [u8]> + Clone) -> Result<Option<KeyRange>> {
        let (Some(lo), Some(hi)) = (keys.clone().min(), keys.max()) else {
            return Ok(None);
        };
        let parser = converter.parser();
        let bounds = converter.convert_rows([parser.parse(lo), parser.parse(hi)])?;
        Ok(Some(KeyRange {
            lo: lo.into(),
            hi: hi.into(),
            first_lo: bounds[0].slice(0, 1),
            first_hi: bounds[0].slice(1, 1),
        }))
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        key >= &*self.lo && key <= &*self.hi
    }

    /// Which rows of a batch may hold a key of the range, judged on the first key column; None
    /// when no row can. NULLs stay candidates (NULL equals NULL in equality deletes).
    pub fn candidates(&self, first: &ArrayRef) -> Result<Option<BooleanArray>> {
        let below = lt(first, &Scalar::new(self.first_lo.clone()))?;
        let above = gt(first, &Scalar::new(self.first_hi.clone()))?;
        let outside = or(&below, &above)?;
        if outside.true_count() == first.len() {
            return Ok(None);
        }
        Ok(Some(BooleanArray::from_iter(outside.iter().map(|o| Some(o != Some(true))))))
    }
}

/// The row-format encodings of the rows `rows` (indexes) of `columns`.
pub fn encode_rows(converter: &RowConverter, columns: &[ArrayRef], rows: &[u32]) -> Result<Rows> {
    let indices = UInt32Array::from_iter_values(rows.iter().copied());
    let picked = columns.iter().map(|a| Ok(take(a.as_ref(), &indices, None)?)).collect::<Result<Vec<ArrayRef>>>()?;
    Ok(converter.convert_columns(&picked)?)
}

/// Encodes the candidate rows of `columns` (the key columns of a batch) and calls `hit(row,
/// key)` for each; rows outside `range` are skipped without encoding.
pub fn probe(
    converter: &RowConverter,
    range: &KeyRange,
    columns: &[ArrayRef],
    mut hit: impl FnMut(usize, &[u8]) -> bool,
) -> Result<()> {
    let Some(candidates) = range.candidates(&columns[0])? else {
        return Ok(());
    };
    let positions: Vec<u32> = (0..candidates.len() as u32).filter(|&i| candidates.value(i as usize)).collect();
    let encoded = encode_rows(converter, columns, &positions)?;
    for (j, &i) in positions.iter().enumerate() {
        let key = encoded.row(j);
        if range.contains(key.data()) && !hit(i as usize, key.data()) {
            break;
        }
    }
    Ok(())
}

/// Row keys packed into one buffer: key i is `data[ends[i-1]..ends[i]]`.
#[derive(Default, Clone)]
pub struct PackedKeys {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl PackedKeys {
    pub fn push_rows(&mut self, rows: &Rows) {
        for row in rows.iter() {
            self.data.extend_from_slice(row.data());
            self.ends.push(self.data.len());
        }
    }

    pub fn push(&mut self, key: &[u8]) {
        self.data.extend_from_slice(key);
        self.ends.push(self.data.len());
    }

    /// The bytes of the keys themselves.
    pub fn data_len(&self) -> usize {
        self.data.len()
    }

    pub fn append(&mut self, other: PackedKeys) {
        if self.ends.is_empty() {
            *self = other;
            return;
        }
        let base = self.data.len();
        self.data.extend_from_slice(&other.data);
        self.ends.extend(other.ends.iter().map(|e| e + base));
    }

    pub fn len(&self) -> usize {
        self.ends.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(s, &e)| &self.data[s..e])
    }

    /// The keys as a set, or the first key that occurs twice.
    pub fn unique(&self) -> std::result::Result<KeySet<&[u8]>, &[u8]> {
        let mut set = KeySet::with_capacity_and_hasher(self.len(), ahash::RandomState::new());
        for key in self.iter() {
            if !set.insert(key) {
                return Err(key);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat};

    #[test]
    fn key_values_show_as_duckdb_prints_them() {
        use arrow::array::{Date32Array, Int64Array, TimestampMicrosecondArray, TimestampSecondArray};
        let show = |a: ArrayRef| shown_value(&a);
        assert_eq!(show(std::sync::Arc::new(TimestampSecondArray::from(vec![i64::MAX]))), "infinity");
        assert_eq!(show(std::sync::Arc::new(TimestampMicrosecondArray::from(vec![-i64::MAX]))), "-infinity");
        assert_eq!(show(std::sync::Arc::new(Date32Array::from(vec![i32::MAX]))), "infinity");
        assert_eq!(show(std::sync::Arc::new(TimestampSecondArray::from(vec![1_577_836_800]))), "2020-01-01 00:00:00");
        assert_eq!(
            show(std::sync::Arc::new(TimestampMicrosecondArray::from(vec![1_500_000]))),
            "1970-01-01 00:00:01.5"
        );
        let tz = TimestampMicrosecondArray::from(vec![250_000]).with_timezone("+00:00");
        assert_eq!(show(std::sync::Arc::new(tz)), "1970-01-01 00:00:00.25+00");
        assert_eq!(show(std::sync::Arc::new(Date32Array::from(vec![1]))), "1970-01-02");
        assert_eq!(show(std::sync::Arc::new(Int64Array::from(vec![-5]))), "-5");
        // beyond the calendar Arrow renders: the stored number
        assert_eq!(show(std::sync::Arc::new(TimestampSecondArray::from(vec![9_223_372_036_854]))), "9223372036854");
    }

    /// A data file whose key columns (field ids 1 and 2) have these bounds.
    fn file(bounds: &[(i32, i64, i64)]) -> DataFile {
        DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(format!("{bounds:?}.parquet"))
            .file_format(DataFileFormat::Parquet)
            .record_count(1)
            .file_size_in_bytes(1)
            .partition_spec_id(0)
            .lower_bounds(bounds.iter().map(|(id, lo, _)| (*id, Datum::long(*lo))).collect())
            .upper_bounds(bounds.iter().map(|(id, _, hi)| (*id, Datum::long(*hi))).collect())
            .build()
            .unwrap()
    }

    #[test]
    fn keys_may_collide_only_where_every_key_column_overlaps_in_one_pair_of_files() {
        let ids = [1];
        let ours = [file(&[(1, 201, 201)]), file(&[(1, 203, 203)])];
        // interleaved one-key files: their span (200..=204) holds ours, no file does
        let theirs = [file(&[(1, 200, 200)]), file(&[(1, 202, 202)]), file(&[(1, 204, 204)])];
        assert!(!ranges_may_overlap(&ids, &ours, &theirs));
        assert!(ranges_may_overlap(&ids, &ours, &[file(&[(1, 203, 210)])]), "one pair overlaps");
        assert!(ranges_may_overlap(&ids, &ours, &[file(&[(1, 203, 203)])]), "the same key");
        assert!(!ranges_may_overlap(&ids, &ours, &[]), "nothing committed meanwhile");
        // composite keys: disjoint in one column is enough
        let ids = [1, 2];
        let a = [file(&[(1, 0, 10), (2, 0, 10)])];
        assert!(!ranges_may_overlap(&ids, &a, &[file(&[(1, 0, 10), (2, 11, 20)])]));
        assert!(ranges_may_overlap(&ids, &a, &[file(&[(1, 5, 6), (2, 10, 20)])]));
        // a file without bounds may hold any key
        assert!(ranges_may_overlap(&ids, &a, &[file(&[])]));
    }
}

/// The first value of `v` as DuckDB prints it in its own messages: a date or an instant as
/// `2020-01-01 00:00:00` (Arrow's ISO text has a `T`), DuckDB's infinities by name (Arrow cannot
/// render them), a value beyond the calendar Arrow renders as its stored number.
fn shown_value(v: &ArrayRef) -> String {
    use arrow::array::AsArray;
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let raw = match v.data_type() {
        DataType::Timestamp(_, _) | DataType::Date64 => arrow::compute::cast(v, &DataType::Int64)
            .ok()
            .and_then(|a| a.as_primitive_opt::<arrow::datatypes::Int64Type>().map(|p| p.value(0) as i128)),
        DataType::Date32 => arrow::compute::cast(v, &DataType::Int32)
            .ok()
            .and_then(|a| a.as_primitive_opt::<arrow::datatypes::Int32Type>().map(|p| p.value(0) as i128)),
        _ => None,
    };
    let infinity = match v.data_type() {
        DataType::Date32 => i32::MAX as i128,
        _ => i64::MAX as i128,
    };
    match raw {
        Some(r) if r == infinity => return "infinity".into(),
        Some(r) if r == -infinity => return "-infinity".into(),
        _ => {}
    }
    // (fractions as DuckDB prints them: only the digits that are not trailing zeros; an instant
    // with a time zone in UTC, which is how skade stores it)
    let options = FormatOptions::default()
        .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.6f"))
        .with_timestamp_tz_format(Some("%Y-%m-%d %H:%M:%S%.6f"));
    let text = match ArrayFormatter::try_new(v.as_ref(), &options).map(|f| f.value(0).try_to_string()) {
        Ok(Ok(text)) => text,
        _ => return raw.map(|r| r.to_string()).unwrap_or_else(|| "?".into()),
    };
    match v.data_type() {
        DataType::Timestamp(_, tz) if text.contains('.') => {
            let trimmed = text.trim_end_matches('0').trim_end_matches('.');
            format!("{trimmed}{}", if tz.is_some() { "+00" } else { "" })
        }
        _ => text,
    }
}
