//! What a lookup knows about one data file, loaded once per file (data files are immutable, so it
//! never goes stale): the Parquet footer with its page indexes, each row group's key bounds and
//! the key columns' bloom filters (fetched in one read: skade writes them together at the end of
//! the file). A probe then reads only the pages it decodes: the key columns' page that may hold
//! its key, then the page holding the matching row in each other column, located by the offset
//! index; a dictionary-encoded column's dictionary is decoded once and cached (`dictionaries`).
//!
//! Scans cache footers too (`ReadCaches::footer`), without page indexes and read through the
//! standard file reader; lookups need the offset and column indexes and count every byte they
//! read, so they keep their own.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use arrow::array::RecordBatchReader;
use arrow::array::{new_null_array, Array, ArrayRef, BinaryArray, Decimal128Array, FixedSizeBinaryArray};
use arrow::array::{Int32Array, Int64Array, RecordBatch};
use arrow::compute::interleave;
use arrow::datatypes::{DataType, TimeUnit};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::basic::Type as PhysicalType;
use parquet::bloom_filter::Sbbf;
use parquet::file::metadata::{ColumnChunkMetaData, PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::reader::ChunkReader;

use super::column_decode::{self, Direct};
use super::dictionaries::Dictionaries;
use super::stats;
use crate::error::{Error, Result};
use crate::format::name_mapping::{assigned_ids, with_field_ids, FileNames};
use crate::format::schema::conform_array;
use crate::io::input::InputFile;
use crate::io::ranges::{chunk_range, footer_range, FileRanges};
use crate::read::filter::ColumnStats;
use crate::read::key_bounds::ColumnEncoders;
use crate::read::keys::KeyColumns;
use crate::read::row_groups::row_group_stats;
use crate::read::skippable::{can_skip, group_can_skip};
use iceberg::spec::Schema;

/// A column chunk of an object this small is read whole by a lookup (see `read_rows`).
const SMALL_OBJECT_CHUNK: i64 = 256 << 10;

/// Footers are read with one read of the file's tail of this size (a larger footer takes two).
const FOOTER_READ: u64 = 16 << 10;

/// Encoded lower and upper bound of one key column (None: unknown, prunes nothing).
pub type Bounds = (Option<Box<[u8]>>, Option<Box<[u8]>>);

/// A data page of the first key column: the rows it holds (within its row group) and its bounds.
pub struct Page {
    pub first_row: usize,
    pub rows: usize,
    pub bounds: Bounds,
}

pub struct RowGroup {
    pub first_row: u64,
    pub rows: usize,
    /// The first key column's pages (one pseudo-page without bounds when the file has no page
    /// index for it): a probe decodes the key columns of only the pages that may hold its key.
    pub pages: Vec<Page>,
    /// Per key column.
    pub bounds: Vec<Bounds>,
    /// Per key column (None: no filter in the file).
    pub blooms: Vec<Option<Sbbf>>,
}

/// The rows of one page of the first key column, decoded for probes (see `decode_page`).
pub struct PageRows {
    /// Their first row, in the row group.
    first: usize,
    /// Their key columns.
    pub keys: Vec<ArrayRef>,
    /// The file's columns decoded so far (the key columns), by top-level index, as in the file.
    decoded: Vec<(usize, ArrayRef)>,
    /// Every column, where the file needs the Arrow reader (which decodes them all at once).
    all: Option<RecordBatch>,
}

impl PageRows {
    /// The file's top-level column `c` of these rows, if decoded.
    fn column(&self, c: usize) -> Option<&dyn Array> {
        match &self.all {
            Some(batch) => Some(batch.column(c).as_ref()),
            None => self.decoded.iter().find(|(d, _)| *d == c).map(|(_, array)| array.as_ref()),
        }
    }
}

pub struct DataFileIndex {
    /// The key types its bounds were encoded with (a cached index is only valid for them).
    pub key_types: Vec<DataType>,
    /// The field ids a name mapping gave the file's columns (None: its own, or none).
    mapped_ids: Option<Vec<Option<i32>>>,
    meta: ArrowReaderMetadata,
    len: u64,
    /// Top-level column (in the file) of each field id.
    roots_by_id: HashMap<i32, usize>,
    /// Per key column, the physical type of its Parquet column (what bloom filters hash).
    pub key_physical: Vec<Option<PhysicalType>>,
    pub groups: Vec<RowGroup>,
    /// How each column decodes without the Arrow reader (None: some column needs it).
    direct: Option<Vec<Direct>>,
}

impl DataFileIndex {
    pub fn load(
        file: &InputFile,
        path: &str,
        len: u64,
        schema: &Schema,
        key: &KeyColumns,
        encoders: &ColumnEncoders,
        names: Option<&FileNames>,
    ) -> Result<DataFileIndex> {
        let unreadable =
            |e: &dyn std::fmt::Display| Error::corrupt(format!("data file {path} is not readable Parquet: {e}"));
        let tail = len.min(FOOTER_READ);
        let ranges = FileRanges::read(file, len, vec![(len - tail, tail)], 0, path, stats::read)?;
        // With the offset index: a row is then decoded from its own page alone.
        let reader = || ParquetMetaDataReader::new().with_page_index_policy(PageIndexPolicy::Optional);
        let footer = match reader().parse_and_finish(&ranges) {
            Ok(m) => m,
            Err(_) => {
                stats::read(0); // a footer larger than the tail read: the reader reads it itself
                reader().parse_and_finish(file).map_err(|e| unreadable(&e))?
            }
        };
        // A file without field ids (adopted by skade_add_files) takes them from the table's
        // name mapping, as scans do (`ReadCaches::footer`).
        let mapped_ids = names.and_then(|n| assigned_ids(footer.file_metadata().schema_descr(), n));
        let footer = match &mapped_ids {
            Some(ids) => with_field_ids(&footer, ids)?,
            None => footer,
        };
        let meta =
            ArrowReaderMetadata::try_new(Arc::new(footer), ArrowReaderOptions::new()).map_err(|e| unreadable(&e))?;
        let parquet = meta.metadata();
        let descr = parquet.file_metadata().schema_descr();
        let roots_by_id = crate::format::schema::roots_by_field_id(descr);
        // The leaf column of each key column (keys are top-level primitives).
        let key_leaves: Vec<Option<usize>> = key
            .field_ids
            .iter()
            .map(|id| {
                let root = *roots_by_id.get(id)?;
                (0..descr.num_columns()).find(|&l| descr.get_column_root_idx(l) == root)
            })
            .collect();
        let key_physical = key_leaves.iter().map(|l| l.map(|l| descr.column(l).physical_type())).collect();

        // Every key column's bloom filter, in one read when they lie together.
        let mut regions = vec![];
        for rg in parquet.row_groups() {
            for leaf in key_leaves.iter().flatten() {
                let c = rg.column(*leaf);
                if let (Some(offset), Some(length)) = (c.bloom_filter_offset(), c.bloom_filter_length()) {
                    regions.push(footer_range(offset, length.into(), path)?);
                }
            }
        }
        let blooms = if regions.is_empty() {
            None
        } else {
            Some(FileRanges::read(file, len, regions, 4096, path, stats::read)?)
        };
        let bloom = |rg: &parquet::file::metadata::RowGroupMetaData, leaf: &Option<usize>| -> Option<Sbbf> {
            let c = rg.column((*leaf)?);
            let (offset, length) = (c.bloom_filter_offset()?, c.bloom_filter_length()?);
            let bytes = blooms.as_ref()?.get_bytes(offset as u64, length as usize).ok()?;
            // A filter without blocks cannot answer (checking one would index an empty vector):
            // the row group is then read as if it had none.
            Sbbf::from_bytes(&bytes).ok().filter(|b| b.num_blocks() > 0)
        };

        let stats = row_group_stats(schema, parquet, &key.field_ids);
        let mut groups = Vec::with_capacity(parquet.num_row_groups());
        let mut first_row = 0u64;
        for (g, (rg, s)) in parquet.row_groups().iter().zip(&stats).enumerate() {
            let bounds = key
                .field_ids
                .iter()
                .enumerate()
                .map(|(c, id)| (encoders.bound(c, s.lower(*id)), encoders.bound(c, s.upper(*id))))
                .collect();
            let rows = usize::try_from(rg.num_rows()).map_err(|_| {
                Error::corrupt(format!("data file {path} is corrupt: a row group of {} rows", rg.num_rows()))
            })?;
            let pages = key_leaves
                .first()
                .copied()
                .flatten()
                .and_then(|leaf| pages(parquet, g, leaf, rows, key, encoders))
                .unwrap_or_else(|| vec![Page { first_row: 0, rows, bounds: (None, None) }]);
            groups.push(RowGroup {
                first_row,
                rows,
                pages,
                bounds,
                blooms: key_leaves.iter().map(|l| bloom(rg, l)).collect(),
            });
            first_row = first_row.checked_add(rows as u64).ok_or_else(|| {
                Error::corrupt(format!("data file {path} is corrupt: its row groups hold more than 2^64 rows"))
            })?;
        }
        let direct = column_decode::plan(&meta);
        Ok(DataFileIndex {
            key_types: key.types.clone(),
            mapped_ids,
            meta,
            len,
            roots_by_id,
            key_physical,
            groups,
            direct,
        })
    }

    /// Whether this index reads the file's columns as the name mapping `names` does.
    pub fn names_fit(&self, names: Option<&FileNames>) -> bool {
        match &self.mapped_ids {
            None => names.is_none_or(|n| assigned_ids(self.meta.parquet_schema(), n).is_none()),
            Some(ids) => names.is_some_and(|n| {
                let fields = self.meta.parquet_schema().root_schema().get_fields();
                fields.iter().zip(ids).all(|(f, id)| n.id(f.name()) == *id)
            }),
        }
    }

    /// Approximate bytes held: the footer (with page indexes), the bloom filters, the bounds.
    pub fn memory_size(&self) -> usize {
        let blooms: usize =
            self.groups.iter().flat_map(|g| g.blooms.iter().flatten()).map(|b| b.num_blocks() * 32).sum();
        let bounds: usize = self
            .groups
            .iter()
            .map(|g| {
                let b = |(lo, hi): &Bounds| lo.as_ref().map_or(0, |v| v.len()) + hi.as_ref().map_or(0, |v| v.len());
                64 + g.bounds.iter().map(b).sum::<usize>() + g.pages.iter().map(|p| 32 + b(&p.bounds)).sum::<usize>()
            })
            .sum();
        self.meta.metadata().memory_size() + blooms + bounds
    }

    /// Reads what decoding the rows `runs` ((first, count) pairs, in order) of row group `g` in
    /// leaf columns `leaves` needs: the pages holding those rows (or, where values cannot be
    /// skipped or the file has no offset index, the column chunk), and the dictionary page of
    /// each column not decoded against a cached dictionary (`indexed`, by column).
    fn read_rows(
        &self,
        file: &InputFile,
        path: &str,
        g: usize,
        runs: &[(usize, usize)],
        leaves: impl Iterator<Item = usize>,
        indexed: &[Option<ArrayRef>],
    ) -> Result<FileRanges> {
        let parquet = self.meta.metadata();
        let group = parquet.row_group(g);
        // The Arrow reader skips all columns or none (`decode_all`).
        let whole = !group_can_skip(group, None);
        let holds_a_row = |page_first: usize, page_end: usize| {
            runs.iter().any(|&(first, count)| page_first < first.saturating_add(count) && first < page_end)
        };
        let mut regions = vec![];
        for leaf in leaves {
            let chunk = group.column(leaf);
            let locations = parquet.offset_index().and_then(|o| o.get(g)?.get(leaf)).map(|o| o.page_locations());
            // An object's small chunk is read whole, page by page, in the one GET this read makes
            // anyway: its pages stay in memory (`io::range_cache`), so the next probes of the row
            // group find theirs there (sorted keys delta-pack into a few KB per row group).
            let every_page = file.is_object() && chunk.compressed_size() <= SMALL_OBJECT_CHUNK;
            match locations {
                Some(pages) if !whole && can_skip(chunk) => {
                    if indexed.get(leaf).is_none_or(|d| d.is_none()) {
                        regions.extend(dictionary_range(chunk, path)?);
                    }
                    for (i, page) in pages.iter().enumerate() {
                        let page_first = page.first_row_index.max(0) as usize;
                        let page_end = pages.get(i + 1).map_or(usize::MAX, |p| p.first_row_index.max(0) as usize);
                        if every_page || holds_a_row(page_first, page_end) {
                            regions.push(footer_range(page.offset, page.compressed_page_size.into(), path)?);
                        }
                    }
                }
                _ => regions.push(chunk_range(chunk, path)?),
            }
        }
        FileRanges::read(file, self.len, regions, 0, path, stats::read)
    }

    /// Columns `leaves` of the rows `runs` of row group `g`, read (only their pages) and decoded
    /// straight through the column readers, dictionary-encoded ones as indexes into their cached
    /// dictionaries.
    fn decode_direct(
        &self,
        plan: &[Direct],
        (file, cache): (&InputFile, &Dictionaries),
        path: &str,
        g: usize,
        runs: &[(usize, usize)],
        leaves: &[usize],
    ) -> Result<Vec<ArrayRef>> {
        let indexed = self.dictionaries(plan, file, path, g, leaves.iter().copied(), cache)?;
        let bytes = self.read_rows(file, path, g, runs, leaves.iter().copied(), &indexed)?;
        column_decode::decode(&self.meta, plan, &bytes, g, runs, leaves.iter().copied(), &indexed)
            .map_err(|e| unreadable(path, &e))
    }

    /// Per column (of the file), the decoded dictionary of each of `leaves` in row group `g`
    /// that a probe decodes as dictionary indexes (see `column_decode::all_dictionary`), from
    /// `cache` or read and decoded into it.
    fn dictionaries(
        &self,
        plan: &[Direct],
        file: &InputFile,
        path: &str,
        g: usize,
        leaves: impl Iterator<Item = usize>,
        cache: &Dictionaries,
    ) -> Result<Vec<Option<ArrayRef>>> {
        let group = self.meta.metadata().row_group(g);
        let mut dictionaries = vec![None; plan.len()];
        for leaf in leaves {
            let chunk = group.column(leaf);
            if !column_decode::all_dictionary(chunk) {
                continue;
            }
            let load = || {
                let regions = dictionary_range(chunk, path)?.into_iter().collect();
                let bytes = FileRanges::read(file, self.len, regions, 0, path, stats::read)?;
                column_decode::dictionary(&self.meta, plan, &bytes, g, leaf).map_err(|e| unreadable(path, &e))
            };
            dictionaries[leaf] = Some(cache.get(path, g, leaf, load)?);
        }
        Ok(dictionaries)
    }

    /// The rows `first..first + count` of row group `g` (one page of the first key column) as a
    /// probe needs them: their key columns (field ids `ids`, as `types`; NULL where the file
    /// lacks one) to match, and later the rows that match (`rows`). Files whose columns decode
    /// directly decode just the key columns here, then only the matching rows of the other
    /// columns (skipping to them in the other columns' pages costs less than decoding their every
    /// value); other files decode every column of the rows at once with the Arrow reader, whose
    /// fixed cost dominates.
    pub fn decode_page(
        &self,
        (file, dictionaries): (&InputFile, &Dictionaries),
        path: &str,
        g: usize,
        (first, count): (usize, usize),
        (ids, types): (&[i32], &[DataType]),
    ) -> Result<PageRows> {
        stats::ROWS_DECODED.fetch_add(count as u64, Relaxed);
        let runs = [(first, count)];
        let (decoded, all) = match &self.direct {
            Some(plan) => {
                let present: Vec<usize> = ids.iter().filter_map(|id| self.column_of(*id)).collect();
                let arrays = self.decode_direct(plan, (file, dictionaries), path, g, &runs, &present)?;
                (present.into_iter().zip(arrays).collect::<Vec<_>>(), None)
            }
            None => {
                let leaves = 0..self.meta.metadata().file_metadata().schema_descr().num_columns();
                let bytes = self.read_rows(file, path, g, &runs, leaves, &[])?;
                (vec![], Some(self.decode_all(&bytes, path, g, first, count)?))
            }
        };
        let keys = self.columns_by_id(ids, types, count, |c| match &all {
            Some(batch) => Some(batch.column(c)),
            None => decoded.iter().find(|(d, _)| *d == c).map(|(_, array)| array),
        })?;
        Ok(PageRows { first, keys, decoded, all })
    }

    /// Every column of rows `rows` of row group `g` (each a page's decoded rows and a row in it;
    /// in the group's order, distinct), in that order. Each other column is read in one pass
    /// over its pages holding them: a call with many keys decompresses and decodes a column's
    /// page once, not once per key.
    pub fn rows(
        &self,
        (file, dictionaries): (&InputFile, &Dictionaries),
        path: &str,
        g: usize,
        rows: &[(&PageRows, usize)],
    ) -> Result<RecordBatch> {
        let mut pages: Vec<&PageRows> = vec![];
        let mut at: Vec<(usize, usize)> = Vec::with_capacity(rows.len()); // (page, row in it)
        for &(page, i) in rows {
            // In the group's order, a page's rows come together.
            if !pages.last().is_some_and(|q| std::ptr::eq(*q, page)) {
                pages.push(page);
            }
            at.push((pages.len() - 1, i));
        }
        // The columns every page has decoded (the key columns, or all where the Arrow reader
        // decoded the pages), gathered; the others decoded for these rows.
        let known: Vec<Option<ArrayRef>> = (0..self.meta.schema().fields().len())
            .map(|c| {
                let arrays: Option<Vec<&dyn Array>> = pages.iter().map(|page| page.column(c)).collect();
                arrays.map(|arrays| interleave(&arrays, &at)).transpose()
            })
            .collect::<std::result::Result<_, _>>()?;
        let missing = || known.iter().enumerate().filter(|(_, a)| a.is_none()).map(|(c, _)| c);
        let mut decoded = match (&self.direct, missing().next()) {
            (_, None) => vec![].into_iter(),
            (None, Some(_)) => {
                return Err(Error::internal("a page of a file that needs the Arrow reader lacks columns"))
            }
            (Some(plan), Some(_)) => {
                stats::ROWS_DECODED.fetch_add(rows.len() as u64, Relaxed);
                let mut runs: Vec<(usize, usize)> = vec![];
                for &(page, i) in rows {
                    match runs.last_mut() {
                        Some((first, count)) if *first + *count == page.first + i => *count += 1,
                        _ => runs.push((page.first + i, 1)),
                    }
                }
                let missing: Vec<usize> = missing().collect();
                self.decode_direct(plan, (file, dictionaries), path, g, &runs, &missing)?.into_iter()
            }
        };
        let columns = known.into_iter().filter_map(|a| a.or_else(|| decoded.next())).collect();
        Ok(RecordBatch::try_new(self.meta.schema().clone(), columns)?)
    }

    /// Every column of rows `first..first + count` of row group `g`, through the Arrow reader:
    /// only the pages holding them are decompressed and decoded (the offset index locates them).
    fn decode_all(&self, bytes: &FileRanges, path: &str, g: usize, first: usize, count: usize) -> Result<RecordBatch> {
        // Rows before `first` are skipped, or decoded and dropped where the crate cannot skip
        // (see `skippable`).
        let skip = if group_can_skip(self.meta.metadata().row_group(g), None) { first } else { 0 };
        let selection = RowSelection::from(vec![RowSelector::skip(skip), RowSelector::select(first - skip + count)]);
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), self.meta.clone())
            .with_row_groups(vec![g])
            .with_batch_size((first - skip + count).clamp(1, column_decode::RESERVE_ROWS))
            .with_row_selection(selection)
            .build()
            .map_err(|e| unreadable(path, &e))?;
        let schema = reader.schema();
        let batches = reader.collect::<std::result::Result<Vec<_>, _>>().map_err(|e| unreadable(path, &e))?;
        let batch = match <[RecordBatch; 1]>::try_from(batches) {
            Ok([batch]) => batch, // one page, one batch: no copy
            Err(batches) => arrow::compute::concat_batches(&schema, &batches)?,
        };
        if batch.num_rows() != first - skip + count {
            return Err(unreadable(path, &format!("row group {g} has fewer rows than its footer says")));
        }
        Ok(batch.slice(first - skip, count))
    }

    /// The columns with `ids` of `rows` decoded rows, as `types` (NULL where the file lacks one);
    /// `column(c)`: the decoded top-level column `c`.
    pub fn columns_by_id<'a>(
        &self,
        ids: &[i32],
        types: &[DataType],
        rows: usize,
        column: impl Fn(usize) -> Option<&'a ArrayRef>,
    ) -> Result<Vec<ArrayRef>> {
        ids.iter()
            .zip(types)
            .map(|(id, t)| match self.column_of(*id).and_then(&column) {
                Some(array) => conform_array(array, t),
                None => Ok(new_null_array(t, rows)),
            })
            .collect()
    }

    /// The column (in a decoded batch: every column of the file) of field id `id`.
    pub fn column_of(&self, id: i32) -> Option<usize> {
        self.roots_by_id.get(&id).copied()
    }
}

/// The pages of leaf column `leaf` (the first key column) in row group `g`, with their bounds
/// from the column index; None without a page index. Integer, date/time, decimal, string, binary
/// and UUID keys get page bounds.
fn pages(
    parquet: &ParquetMetaData,
    g: usize,
    leaf: usize,
    rows: usize,
    key: &KeyColumns,
    encoders: &ColumnEncoders,
) -> Option<Vec<Page>> {
    let locations = parquet.offset_index()?.get(g)?.get(leaf)?.page_locations();
    let index = parquet.column_index().and_then(|c| c.get(g)?.get(leaf));
    let ty = &key.types[0];
    let bound = |value: Option<ArrayRef>| -> Option<Box<[u8]>> {
        let value = value?;
        let value = if value.data_type() == ty { value } else { arrow::compute::cast(&value, ty).ok()? };
        // (a value the cast cannot convert, like invalid UTF-8, comes back NULL: no bound)
        (value.len() == 1 && value.is_valid(0)).then(|| encoders.encode(0, &value))?
    };
    let mut pages = Vec::with_capacity(locations.len());
    for (i, location) in locations.iter().enumerate() {
        let first = location.first_row_index.max(0) as usize;
        let end = locations.get(i + 1).map(|l| l.first_row_index.max(0) as usize).unwrap_or(rows);
        // Only where the physical value is the Arrow value (decimals are converted below).
        let (lo, hi): (Option<ArrayRef>, Option<ArrayRef>) = match index {
            Some(ColumnIndexMetaData::INT32(c)) if matches!(ty, DataType::Int32 | DataType::Date32) => (
                c.min_value(i).map(|v| Arc::new(Int32Array::from(vec![*v])) as ArrayRef),
                c.max_value(i).map(|v| Arc::new(Int32Array::from(vec![*v])) as ArrayRef),
            ),
            Some(ColumnIndexMetaData::INT64(c))
                if matches!(
                    ty,
                    DataType::Int64
                        | DataType::Timestamp(TimeUnit::Microsecond, _)
                        | DataType::Time64(TimeUnit::Microsecond)
                ) =>
            {
                (
                    c.min_value(i).map(|v| Arc::new(Int64Array::from(vec![*v])) as ArrayRef),
                    c.max_value(i).map(|v| Arc::new(Int64Array::from(vec![*v])) as ArrayRef),
                )
            }
            // Byte-array bounds may be truncated, but stay bounds (a maximum truncated is
            // incremented); one that is not valid UTF-8 for a string key bounds nothing.
            Some(ColumnIndexMetaData::BYTE_ARRAY(c))
                if matches!(ty, DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary) =>
            {
                let bytes = |v: Option<&[u8]>| v.map(|v| Arc::new(BinaryArray::from(vec![v])) as ArrayRef);
                (bytes(c.min_value(i)), bytes(c.max_value(i)))
            }
            // Decimals: the unscaled integers (big-endian two's complement in fixed-length bytes).
            Some(ColumnIndexMetaData::INT32(c)) if matches!(ty, DataType::Decimal128(..)) => {
                (decimal(ty, c.min_value(i).map(|v| *v as i128)), decimal(ty, c.max_value(i).map(|v| *v as i128)))
            }
            Some(ColumnIndexMetaData::INT64(c)) if matches!(ty, DataType::Decimal128(..)) => {
                (decimal(ty, c.min_value(i).map(|v| *v as i128)), decimal(ty, c.max_value(i).map(|v| *v as i128)))
            }
            Some(ColumnIndexMetaData::FIXED_LEN_BYTE_ARRAY(c)) if matches!(ty, DataType::Decimal128(..)) => {
                (decimal(ty, c.min_value(i).and_then(be_i128)), decimal(ty, c.max_value(i).and_then(be_i128)))
            }
            // UUIDs and other fixed-size binaries (a truncated bound has the wrong size: none).
            Some(ColumnIndexMetaData::FIXED_LEN_BYTE_ARRAY(c)) if matches!(ty, DataType::FixedSizeBinary(_)) => {
                let bytes = |v: Option<&[u8]>| -> Option<ArrayRef> {
                    let DataType::FixedSizeBinary(n) = ty else { return None };
                    let v = v.filter(|v| v.len() == *n as usize)?;
                    Some(Arc::new(FixedSizeBinaryArray::try_from_iter(std::iter::once(v)).ok()?))
                };
                (bytes(c.min_value(i)), bytes(c.max_value(i)))
            }
            _ => (None, None),
        };
        pages.push(Page { first_row: first, rows: end.saturating_sub(first), bounds: (bound(lo), bound(hi)) });
    }
    Some(pages)
}

/// A one-value decimal array of type `ty` (a Decimal128) from an unscaled value.
fn decimal(ty: &DataType, value: Option<i128>) -> Option<ArrayRef> {
    let DataType::Decimal128(p, s) = ty else { return None };
    Some(Arc::new(Decimal128Array::from(vec![value?]).with_precision_and_scale(*p, *s).ok()?))
}

/// A big-endian two's complement integer of at most 16 bytes.
fn be_i128(bytes: &[u8]) -> Option<i128> {
    if bytes.is_empty() || bytes.len() > 16 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut full = [fill; 16];
    full[16 - bytes.len()..].copy_from_slice(bytes);
    Some(i128::from_be_bytes(full))
}

/// Where `chunk`'s dictionary page lies (None: it has none).
fn dictionary_range(chunk: &ColumnChunkMetaData, path: &str) -> Result<Option<(u64, u64)>> {
    let Some(offset) = chunk.dictionary_page_offset() else { return Ok(None) };
    Ok(Some(footer_range(offset, chunk.data_page_offset().saturating_sub(offset), path)?))
}

fn unreadable(path: &str, e: &dyn std::fmt::Display) -> Error {
    Error::corrupt(format!("data file {path} is not readable: {e}"))
}
