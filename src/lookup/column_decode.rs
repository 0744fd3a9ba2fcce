//! Decoding a few rows of a row group straight through the Parquet crate's column readers, for
//! files whose columns are all flat and of types whose Arrow arrays are the column's values as
//! they are (integers, floats, booleans, dates, times and timestamps in the file's unit, strings
//! and binaries). A point lookup decodes its candidate page of the key columns, then the matching
//! row alone of the other columns; the crate's Arrow reader spent most of such a decode building
//! its readers, row selection and struct array (a third of a warm probe, measured), which this
//! skips. Every other file goes through the Arrow reader.

use std::sync::Arc;

use arrow::array::{make_array, ArrayData, ArrayRef, BinaryArray, BooleanArray, LargeBinaryArray, LargeStringArray};
use arrow::array::{AsArray, StringArray};
use arrow::buffer::{BooleanBuffer, Buffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::compute::take;
use arrow::datatypes::{ArrowNativeType, DataType, TimeUnit};
use parquet::arrow::arrow_reader::ArrowReaderMetadata;
use parquet::basic::{Encoding, LogicalType, TimeUnit as ParquetUnit, Type as PhysicalType};
use parquet::column::page::{Page, PageMetadata, PageReader};
use parquet::column::reader::ColumnReaderImpl;
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DataType as ParquetType, DoubleType, FloatType};
use parquet::data_type::{Int32Type, Int64Type};
use parquet::errors::{ParquetError, Result};
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::schema::types::ColumnDescriptor;

use super::lazy_dictionary::LazyDictionary;
use crate::io::ranges::FileRanges;
use crate::read::skippable::can_skip;

/// How one column's values become its Arrow array.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Direct {
    Int32,
    Int64,
    Float,
    Double,
    Boolean,
    Bytes,
}

/// Each column's decoding, when every column of the file decodes directly (None otherwise).
pub fn plan(meta: &ArrowReaderMetadata) -> Option<Vec<Direct>> {
    let descr = meta.metadata().file_metadata().schema_descr();
    let fields = meta.schema().fields();
    if descr.num_columns() != fields.len() {
        return None; // a nested column
    }
    fields
        .iter()
        .enumerate()
        .map(|(i, field)| {
            let column = descr.column(i);
            if descr.get_column_root_idx(i) != i || column.max_rep_level() != 0 || column.max_def_level() > 1 {
                return None;
            }
            direct(&column, field.data_type())
        })
        .collect()
}

fn direct(column: &ColumnDescriptor, ty: &DataType) -> Option<Direct> {
    let unit = |u: &TimeUnit| match column.logical_type_ref() {
        Some(LogicalType::Timestamp { unit, .. } | LogicalType::Time { unit, .. }) => matches!(
            (unit, u),
            (ParquetUnit::MILLIS, TimeUnit::Millisecond)
                | (ParquetUnit::MICROS, TimeUnit::Microsecond)
                | (ParquetUnit::NANOS, TimeUnit::Nanosecond)
        ),
        _ => false,
    };
    match (column.physical_type(), ty) {
        (PhysicalType::INT32, DataType::Int32 | DataType::Date32) => Some(Direct::Int32),
        (PhysicalType::INT32, DataType::Time32(u)) if unit(u) => Some(Direct::Int32),
        (PhysicalType::INT64, DataType::Int64) => Some(Direct::Int64),
        (PhysicalType::INT64, DataType::Timestamp(u, _) | DataType::Time64(u)) if unit(u) => Some(Direct::Int64),
        (PhysicalType::FLOAT, DataType::Float32) => Some(Direct::Float),
        (PhysicalType::DOUBLE, DataType::Float64) => Some(Direct::Double),
        (PhysicalType::BOOLEAN, DataType::Boolean) => Some(Direct::Boolean),
        (PhysicalType::BYTE_ARRAY, DataType::Utf8 | DataType::LargeUtf8 | DataType::Binary | DataType::LargeBinary) => {
            Some(Direct::Bytes)
        }
        _ => None,
    }
}

/// The rows of row group `g` in `runs` ((first, count) pairs, in order, not overlapping), one
/// after another, columns `columns` (top-level indexes), from `bytes` (holding at least the
/// pages of those rows: the offset index, when the file has one, lets every other page be
/// skipped unread). Each column is read once for all the runs: its pages are decoded once
/// however many rows a call asks of them. A column with its decoded dictionary in
/// `dictionaries` (by column; see [`all_dictionary`]) is decoded to dictionary indexes and looked
/// up in it: its dictionary page is neither read nor decoded again.
pub fn decode(
    meta: &ArrowReaderMetadata,
    plan: &[Direct],
    bytes: &FileRanges,
    g: usize,
    runs: &[(usize, usize)],
    columns: impl Iterator<Item = usize>,
    dictionaries: &[Option<ArrayRef>],
) -> Result<Vec<ArrayRef>> {
    let schema = meta.schema();
    let count = rows_in(runs);
    columns
        .map(|leaf| {
            let at = Rows { meta, bytes, g, leaf, runs, dictionary_size: None };
            if let Some(dictionary) = dictionaries.get(leaf).and_then(|d| d.as_ref()) {
                let at = Rows { dictionary_size: Some(dictionary.len()), ..at };
                let (indexes, levels) = at.read::<Int32Type>()?;
                let indexes = primitive(indexes, levels, count, &DataType::Int32)?;
                return Ok(take(dictionary, indexes.as_primitive::<arrow::datatypes::Int32Type>(), None)?);
            }
            let ty = schema.field(leaf).data_type();
            match plan[leaf] {
                Direct::Int32 => at.read::<Int32Type>().and_then(|(v, d)| primitive(v, d, count, ty)),
                Direct::Int64 => at.read::<Int64Type>().and_then(|(v, d)| primitive(v, d, count, ty)),
                Direct::Float => at.read::<FloatType>().and_then(|(v, d)| primitive(v, d, count, ty)),
                Direct::Double => at.read::<DoubleType>().and_then(|(v, d)| primitive(v, d, count, ty)),
                Direct::Boolean => at.read::<BoolType>().and_then(|(v, d)| boolean(v, d, count)),
                Direct::Bytes => at.read::<ByteArrayType>().and_then(|(v, d)| bytes_array(v, d, count, ty)),
            }
        })
        .collect()
}

/// How many rows `runs` hold (saturating: the counts come from a footer that may be corrupt).
pub(crate) fn rows_in(runs: &[(usize, usize)]) -> usize {
    runs.iter().fold(0, |sum, (_, n)| sum.saturating_add(*n))
}

/// A column's non-null values and, for a nullable column, each row's definition level.
type Values<T> = (Vec<T>, Option<Vec<i16>>);

/// Rows of one column chunk to read.
struct Rows<'a> {
    meta: &'a ArrowReaderMetadata,
    bytes: &'a FileRanges,
    g: usize,
    leaf: usize,
    runs: &'a [(usize, usize)],
    /// Decode dictionary indexes, against a dictionary of this many values decoded already.
    dictionary_size: Option<usize>,
}

/// Rows reserved ahead of a read: a page of a keyed table holds at most 4,096; a corrupt
/// footer's count must not size an allocation.
pub(crate) const RESERVE_ROWS: usize = 4096;

impl Rows<'_> {
    fn read<T: ParquetType>(&self) -> Result<Values<T::T>> {
        let chunk = self.meta.metadata().row_group(self.g).column(self.leaf);
        let pages = page_reader(self.meta, self.bytes, self.g, self.leaf)?;
        let descr = chunk.column_descr_ptr();
        let nullable = descr.max_def_level() > 0;
        let pages: Box<dyn PageReader> = match self.dictionary_size {
            Some(size) => Box::new(IndexPages { inner: pages, size }),
            None if chunk.dictionary_page_offset().is_some() => {
                let (meta, bytes, g, leaf) = (self.meta.clone(), self.bytes.clone(), self.g, self.leaf);
                let dictionary = move || {
                    page_reader(&meta, &bytes, g, leaf)?
                        .get_next_page()?
                        .ok_or_else(|| ParquetError::General(format!("column {leaf} has no pages")))
                };
                Box::new(LazyDictionary::new(pages, dictionary))
            }
            None => Box::new(pages),
        };
        let mut reader = ColumnReaderImpl::<T>::new(descr, pages);
        // Counts come from the footer: reserve no more than a page holds, grow if they are true.
        let reserve = rows_in(self.runs).min(RESERVE_ROWS);
        let mut values = Vec::with_capacity(reserve);
        let mut levels = nullable.then(|| Vec::with_capacity(reserve));
        let mut at = 0;
        for &(first, count) in self.runs {
            let gap = first.checked_sub(at).ok_or_else(|| ParquetError::General("row runs out of order".into()))?;
            if gap > 0 {
                if can_skip(chunk) {
                    if reader.skip_records(gap)? != gap {
                        return Err(self.too_few_rows());
                    }
                } else {
                    // (see `skippable`): the rows between are decoded and dropped
                    let (mut dropped, mut dropped_levels) = (vec![], nullable.then(Vec::new));
                    self.read_into(&mut reader, gap, &mut dropped, &mut dropped_levels)?;
                }
            }
            self.read_into(&mut reader, count, &mut values, &mut levels)?;
            at = first + count;
        }
        Ok((values, levels))
    }

    /// Appends the next `count` rows' values and (for a nullable column) definition levels.
    fn read_into<T: ParquetType>(
        &self,
        reader: &mut ColumnReaderImpl<T>,
        count: usize,
        values: &mut Vec<T::T>,
        levels: &mut Option<Vec<i16>>,
    ) -> Result<()> {
        let mut read = 0;
        while read < count {
            let (records, _, _) = reader.read_records(count - read, levels.as_mut(), None, values)?;
            if records == 0 {
                return Err(self.too_few_rows());
            }
            read += records;
        }
        Ok(())
    }

    fn too_few_rows(&self) -> ParquetError {
        ParquetError::General(format!("column {} has fewer rows than its row group", self.leaf))
    }
}

/// The pages of column `leaf` in row group `g`, from `bytes` (located by the offset index, when
/// the file has one, so that pages not read are skipped unread).
fn page_reader(
    meta: &ArrowReaderMetadata,
    bytes: &FileRanges,
    g: usize,
    leaf: usize,
) -> Result<SerializedPageReader<FileRanges>> {
    let parquet = meta.metadata();
    let group = parquet.row_group(g);
    let locations = parquet.offset_index().and_then(|o| o.get(g)?.get(leaf)).map(|o| o.page_locations().clone());
    SerializedPageReader::new(Arc::new(bytes.clone()), group.column(leaf), group.num_rows().max(0) as usize, locations)
}

/// Whether every data page of `chunk` is dictionary-encoded (by the footer's page encoding
/// statistics): a probe can then decode a row's dictionary index alone and look it up in the
/// chunk's dictionary, decoded once ([`dictionary`]) and cached.
pub fn all_dictionary(chunk: &ColumnChunkMetaData) -> bool {
    chunk.dictionary_page_offset().is_some()
        && chunk
            .page_encoding_stats_mask()
            .is_some_and(|m| m.is_only(Encoding::RLE_DICTIONARY) || m.is_only(Encoding::PLAIN_DICTIONARY))
}

/// The dictionary of column `leaf` in row group `g` (decodes directly, [`all_dictionary`]), its
/// values as the column's Arrow type, from `bytes` (holding its dictionary page).
pub fn dictionary(
    meta: &ArrowReaderMetadata,
    plan: &[Direct],
    bytes: &FileRanges,
    g: usize,
    leaf: usize,
) -> Result<ArrayRef> {
    let chunk = meta.metadata().row_group(g).column(leaf);
    let mut pages = page_reader(meta, bytes, g, leaf)?;
    let Some(Page::DictionaryPage { buf, num_values, encoding: Encoding::PLAIN | Encoding::PLAIN_DICTIONARY, .. }) =
        pages.get_next_page()?
    else {
        return Err(ParquetError::General(format!("column {leaf} has no plain dictionary page")));
    };
    // Its values read as a page of a required column.
    let page = Page::DataPage {
        buf,
        num_values,
        encoding: Encoding::PLAIN,
        def_level_encoding: Encoding::RLE,
        rep_level_encoding: Encoding::RLE,
        statistics: None,
    };
    let descr = chunk.column_descr();
    let required = Arc::new(ColumnDescriptor::new(descr.self_type_ptr(), 0, 0, descr.path().clone()));
    let count = num_values as usize;
    fn values<T: ParquetType>(descr: Arc<ColumnDescriptor>, page: Page, count: usize) -> Result<Vec<T::T>> {
        let mut reader = ColumnReaderImpl::<T>::new(descr, Box::new(OnePage(Some(page))));
        let mut values = Vec::with_capacity(count.min(RESERVE_ROWS));
        let (read, _, _) = reader.read_records(count, None, None, &mut values)?;
        match read == count {
            true => Ok(values),
            false => Err(ParquetError::General(format!("a dictionary of {read} values, not {count}"))),
        }
    }
    let ty = meta.schema().field(leaf).data_type();
    match plan[leaf] {
        Direct::Int32 => primitive(values::<Int32Type>(required, page, count)?, None, count, ty),
        Direct::Int64 => primitive(values::<Int64Type>(required, page, count)?, None, count, ty),
        Direct::Float => primitive(values::<FloatType>(required, page, count)?, None, count, ty),
        Direct::Double => primitive(values::<DoubleType>(required, page, count)?, None, count, ty),
        Direct::Boolean => boolean(values::<BoolType>(required, page, count)?, None, count),
        Direct::Bytes => bytes_array(values::<ByteArrayType>(required, page, count)?, None, count, ty),
    }
}

/// A dictionary-encoded column chunk's pages with its dictionary page skipped unread and replaced
/// by the identity dictionary of its size: the column reader then returns each row's index.
struct IndexPages {
    inner: SerializedPageReader<FileRanges>,
    size: usize,
}

impl PageReader for IndexPages {
    fn get_next_page(&mut self) -> Result<Option<Page>> {
        if self.inner.peek_next_page()?.is_some_and(|p| p.is_dict) {
            self.inner.skip_next_page()?;
            let size = u32::try_from(self.size).map_err(|_| ParquetError::General("a dictionary over 2^32".into()))?;
            let buf: Vec<u8> = (0..size).flat_map(u32::to_le_bytes).collect();
            return Ok(Some(Page::DictionaryPage {
                buf: buf.into(),
                num_values: size,
                encoding: Encoding::PLAIN,
                is_sorted: false,
            }));
        }
        match self.inner.get_next_page()? {
            // Never read as indexes: an error, not wrong values.
            Some(page) if !matches!(page.encoding(), Encoding::RLE_DICTIONARY | Encoding::PLAIN_DICTIONARY) => Err(
                ParquetError::General("a page of a dictionary-encoded column chunk is not dictionary-encoded".into()),
            ),
            page => Ok(page),
        }
    }

    fn peek_next_page(&mut self) -> Result<Option<PageMetadata>> {
        self.inner.peek_next_page()
    }

    fn skip_next_page(&mut self) -> Result<()> {
        self.inner.skip_next_page()
    }

    fn at_record_boundary(&mut self) -> Result<bool> {
        self.inner.at_record_boundary()
    }
}

impl Iterator for IndexPages {
    type Item = Result<Page>;
    fn next(&mut self) -> Option<Result<Page>> {
        self.get_next_page().transpose()
    }
}

/// One page, as a page reader.
struct OnePage(Option<Page>);

impl PageReader for OnePage {
    fn get_next_page(&mut self) -> Result<Option<Page>> {
        Ok(self.0.take())
    }

    fn peek_next_page(&mut self) -> Result<Option<PageMetadata>> {
        Ok(self.0.as_ref().map(|p| PageMetadata {
            num_rows: None,
            num_levels: Some(p.num_values() as usize),
            is_dict: false,
        }))
    }

    fn skip_next_page(&mut self) -> Result<()> {
        self.0 = None;
        Ok(())
    }
}

impl Iterator for OnePage {
    type Item = Result<Page>;
    fn next(&mut self) -> Option<Result<Page>> {
        self.get_next_page().transpose()
    }
}

/// The validity of each of `count` rows from their definition levels (None: all valid), checked
/// against the number of non-null values read.
fn validity(levels: Option<&[i16]>, values: usize, count: usize) -> Result<Option<NullBuffer>> {
    let Some(levels) = levels.filter(|_| values < count) else {
        return if values == count {
            Ok(None)
        } else {
            Err(ParquetError::General(format!("{values} values for {count} rows")))
        };
    };
    let valid: Vec<bool> = levels.iter().map(|l| *l > 0).collect();
    if valid.len() != count || valid.iter().filter(|v| **v).count() != values {
        return Err(ParquetError::General(format!("{values} values for {count} rows")));
    }
    Ok(Some(NullBuffer::from(valid)))
}

/// Each row's value: the next non-null value where the row is valid, a default elsewhere.
fn spread<T: Clone>(values: Vec<T>, nulls: &Option<NullBuffer>, default: T) -> Vec<T> {
    let Some(nulls) = nulls else { return values };
    let mut values = values.into_iter();
    nulls.iter().map(|valid| if valid { values.next().unwrap_or(default.clone()) } else { default.clone() }).collect()
}

fn primitive<T: ArrowNativeType>(
    values: Vec<T>,
    levels: Option<Vec<i16>>,
    count: usize,
    ty: &DataType,
) -> Result<ArrayRef> {
    let nulls = validity(levels.as_deref(), values.len(), count)?;
    let values = spread(values, &nulls, T::default());
    let data = ArrayData::builder(ty.clone()).len(count).add_buffer(Buffer::from_vec(values)).nulls(nulls).build()?;
    Ok(make_array(data))
}

fn boolean(values: Vec<bool>, levels: Option<Vec<i16>>, count: usize) -> Result<ArrayRef> {
    let nulls = validity(levels.as_deref(), values.len(), count)?;
    let values = spread(values, &nulls, false);
    Ok(Arc::new(BooleanArray::new(BooleanBuffer::from(values), nulls)))
}

fn bytes_array(values: Vec<ByteArray>, levels: Option<Vec<i16>>, count: usize, ty: &DataType) -> Result<ArrayRef> {
    let nulls = validity(levels.as_deref(), values.len(), count)?;
    let total: usize = values.iter().map(|v| v.len()).sum();
    let mut data = Vec::with_capacity(total);
    let mut ends = Vec::with_capacity(count);
    let mut values = values.iter();
    for row in 0..count {
        if nulls.as_ref().is_none_or(|n| n.is_valid(row)) {
            if let Some(v) = values.next() {
                data.extend_from_slice(v.data());
            }
        }
        ends.push(data.len());
    }
    let data = Buffer::from_vec(data);
    let offsets = |ends: Vec<usize>| -> Result<OffsetBuffer<i32>> {
        let ends: Vec<i32> = std::iter::once(Ok(0))
            .chain(
                ends.into_iter()
                    .map(|e| i32::try_from(e).map_err(|_| ParquetError::General("a page over 2 GB".into()))),
            )
            .collect::<Result<_>>()?;
        Ok(OffsetBuffer::new(ScalarBuffer::from(ends)))
    };
    let large = |ends: Vec<usize>| {
        OffsetBuffer::new(ScalarBuffer::from(
            std::iter::once(0i64).chain(ends.into_iter().map(|e| e as i64)).collect::<Vec<_>>(),
        ))
    };
    Ok(match ty {
        DataType::Utf8 => Arc::new(StringArray::try_new(offsets(ends)?, data, nulls)?),
        DataType::LargeUtf8 => Arc::new(LargeStringArray::try_new(large(ends), data, nulls)?),
        DataType::Binary => Arc::new(BinaryArray::try_new(offsets(ends)?, data, nulls)?),
        DataType::LargeBinary => Arc::new(LargeBinaryArray::try_new(large(ends), data, nulls)?),
        other => return Err(ParquetError::General(format!("{other} is not a byte array type"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Date32Array, Float32Array, Float64Array, Int32Array, Int64Array, RecordBatch};
    use arrow::array::{Time64MicrosecondArray, TimestampMicrosecondArray};
    use arrow::datatypes::{Field, Schema};
    use parquet::arrow::arrow_reader::{
        ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
    };
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{Compression, Encoding};
    use parquet::file::metadata::PageIndexPolicy;
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use parquet::schema::types::ColumnPath;
    use std::fs::File;

    /// 300 rows of every directly decoded type, nulls every 7th row in the nullable columns.
    fn batch() -> RecordBatch {
        let n = 300;
        fn opt<T>(i: usize, v: T) -> Option<T> {
            (i % 7 != 3).then_some(v)
        }
        let columns: Vec<(&str, ArrayRef, bool)> = vec![
            ("id", Arc::new(Int64Array::from_iter_values(0..n as i64)), false),
            ("i32", Arc::new(Int32Array::from_iter((0..n).map(|i| opt(i, i as i32 * 3)))), true),
            ("f32", Arc::new(Float32Array::from_iter((0..n).map(|i| opt(i, i as f32 / 4.0)))), true),
            ("f64", Arc::new(Float64Array::from_iter((0..n).map(|i| opt(i, i as f64 * 1.5)))), true),
            ("b", Arc::new(BooleanArray::from_iter((0..n).map(|i| opt(i, i % 3 == 0)))), true),
            ("s", Arc::new(StringArray::from_iter((0..n).map(|i| opt(i, "x".repeat(i % 5))))), true),
            ("bin", Arc::new(BinaryArray::from_iter((0..n).map(|i| opt(i, vec![i as u8; i % 4])))), true),
            ("d", Arc::new(Date32Array::from_iter((0..n).map(|i| opt(i, i as i32 - 100)))), true),
            ("t", Arc::new(Time64MicrosecondArray::from_iter((0..n).map(|i| opt(i, i as i64 * 1_000)))), true),
            (
                "ts",
                Arc::new(
                    TimestampMicrosecondArray::from_iter((0..n).map(|i| opt(i, i as i64 * 1_000_000)))
                        .with_timezone("+00:00"),
                ),
                true,
            ),
        ];
        let fields: Vec<Field> =
            columns.iter().map(|(name, a, nullable)| Field::new(*name, a.data_type().clone(), *nullable)).collect();
        RecordBatch::try_new(Arc::new(Schema::new(fields)), columns.into_iter().map(|(_, a, _)| a).collect()).unwrap()
    }

    /// The batch written as skade writes key tables (small pages, page index, packed integers
    /// uncompressed, dictionaries on the other columns), one row group; `foreign`: as another
    /// writer might (version 2 data pages, everything Snappy, a dictionary that falls back to
    /// plain pages within the chunk).
    fn file(batch: &RecordBatch, foreign: bool) -> (std::path::PathBuf, crate::io::input::InputFile, u64) {
        static FILES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("skade-column-decode-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.parquet");
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_data_page_row_count_limit(32)
            .set_write_batch_size(32)
            .set_column_encoding(ColumnPath::from("id"), Encoding::DELTA_BINARY_PACKED)
            .set_column_compression(
                ColumnPath::from("id"),
                if foreign { Compression::SNAPPY } else { Compression::UNCOMPRESSED },
            )
            .set_dictionary_enabled(true)
            .set_column_dictionary_enabled(ColumnPath::from("id"), false)
            .set_column_dictionary_page_size_limit(ColumnPath::from("bin"), if foreign { 16 } else { 1 << 20 })
            .set_writer_version(if foreign { WriterVersion::PARQUET_2_0 } else { WriterVersion::PARQUET_1_0 })
            .build();
        let mut writer = ArrowWriter::try_new(File::create(&path).unwrap(), batch.schema(), Some(props)).unwrap();
        writer.write(batch).unwrap();
        writer.close().unwrap();
        let f = crate::io::input::InputFile::open(path.to_str().unwrap(), "data file").unwrap();
        let len = f.size().unwrap();
        (dir, f, len)
    }

    #[test]
    fn rows_decode_as_the_arrow_reader_decodes_them() {
        decodes_as_the_arrow_reader(false);
        decodes_as_the_arrow_reader(true);
    }

    fn decodes_as_the_arrow_reader(foreign: bool) {
        let batch = batch();
        let (dir, f, len) = file(&batch, foreign);
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let meta = ArrowReaderMetadata::load(&f, options).unwrap();
        let plan = plan(&meta).expect("every column decodes directly");
        let bytes = FileRanges::read(&f, len, vec![(0, len)], 0, "f.parquet", |_| ()).unwrap();
        // Every column decodes the same with its dictionary decoded ahead (as indexes) and without.
        let group = meta.metadata().row_group(0);
        let dictionaries: Vec<Option<ArrayRef>> = (0..plan.len())
            .map(|c| all_dictionary(group.column(c)).then(|| dictionary(&meta, &plan, &bytes, 0, c).unwrap()))
            .collect();
        let indexed: Vec<&str> = dictionaries
            .iter()
            .zip(meta.schema().fields())
            .filter(|(d, _)| d.is_some())
            .map(|(_, f)| f.name().as_str())
            .collect();
        // (Booleans get no dictionary; in the foreign file `bin`'s fell back to plain pages, so it
        // is decoded value by value.)
        let expected = if foreign {
            &["i32", "f32", "f64", "s", "d", "t", "ts"][..]
        } else {
            &["i32", "f32", "f64", "s", "bin", "d", "t", "ts"]
        };
        assert_eq!(indexed, expected, "foreign {foreign}");
        let decode = |bytes: &FileRanges, runs: &[(usize, usize)], columns: &[usize]| {
            let plain = decode(&meta, &plan, bytes, 0, runs, columns.iter().copied(), &[]);
            let indexed = decode(&meta, &plan, bytes, 0, runs, columns.iter().copied(), &dictionaries);
            match (plain, indexed) {
                (Ok(plain), Ok(indexed)) => {
                    assert_eq!(plain, indexed, "runs {runs:?}");
                    Ok(plain)
                }
                (Err(e), Err(_)) => Err(e),
                (plain, indexed) => panic!("runs {runs:?}: {:?} but {:?}", plain.map(|_| ()), indexed.map(|_| ())),
            }
        };
        let all: Vec<usize> = (0..plan.len()).collect();
        // Within a page, across page boundaries, a null row, single rows, the whole group.
        for (first, count) in [(0, 1), (3, 1), (31, 2), (40, 32), (64, 100), (299, 1), (0, 300)] {
            let columns = decode(&bytes, &[(first, count)], &all).unwrap();
            let expected: Vec<RecordBatch> =
                ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta.clone())
                    .with_row_selection(RowSelection::from(vec![RowSelector::skip(first), RowSelector::select(count)]))
                    .with_batch_size(count)
                    .build()
                    .unwrap()
                    .collect::<std::result::Result<_, _>>()
                    .unwrap();
            let expected = arrow::compute::concat_batches(&meta.schema().clone(), &expected).unwrap();
            assert_eq!(expected, batch.slice(first, count), "the reference reader reads what was written");
            let got = RecordBatch::try_new(meta.schema().clone(), columns).unwrap();
            assert_eq!(got, expected, "rows {first}+{count}, foreign {foreign}");
        }
        // Several runs in one pass: within a page, gaps across pages, a null row, the last row.
        let runs = [(0, 1), (2, 2), (31, 1), (40, 3), (101, 1), (299, 1)];
        let columns = decode(&bytes, &runs, &all).unwrap();
        let rows: Vec<u32> = runs.iter().flat_map(|&(f, n)| f as u32..(f + n) as u32).collect();
        let expected = arrow::compute::take_record_batch(&batch, &arrow::array::UInt32Array::from(rows)).unwrap();
        assert_eq!(RecordBatch::try_new(meta.schema().clone(), columns).unwrap(), expected, "foreign {foreign}");
        assert!(decode(&bytes, &[(5, 2), (6, 1)], &[0, 1]).is_err(), "overlapping runs");
        // Only some columns: in the order asked.
        let some = decode(&bytes, &[(10, 5)], &[5, 0]).unwrap();
        assert_eq!(some, vec![batch.column(5).slice(10, 5), batch.column(0).slice(10, 5)]);
        // Bytes not read ahead are an error, never zeros.
        let partial = FileRanges::read(&f, len, vec![(len - 8, 8)], 0, "f.parquet", |_| ()).unwrap();
        assert!(decode(&partial, &[(0, 1)], &[0, 1]).is_err());
        // A corrupt footer's row count: an error once the pages run out, not an allocation sized
        // from it (which would abort the process).
        assert!(decode(&bytes, &[(0, 1 << 40)], &all).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A chunk whose dictionary fell back to plain pages: a read of a plain page never reads its
    /// dictionary page; a read of a dictionary-encoded one reads it once.
    #[test]
    fn a_plain_page_is_read_without_its_dictionary() {
        let batch = batch();
        let (dir, f, len) = file(&batch, true);
        let meta =
            ArrowReaderMetadata::load(&f, ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required))
                .unwrap();
        let bytes = FileRanges::read(&f, len, vec![(0, len)], 0, "f.parquet", |_| ()).unwrap();
        let leaf = 6; // bin
        let chunk = meta.metadata().row_group(0).column(leaf);
        assert!(chunk.dictionary_page_offset().is_some() && !all_dictionary(chunk));
        let read_row = |row: usize| {
            let loads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let (m, b, counted) = (meta.clone(), bytes.clone(), loads.clone());
            let dictionary = move || {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(page_reader(&m, &b, 0, leaf)?.get_next_page()?.unwrap())
            };
            let pages = LazyDictionary::new(page_reader(&meta, &bytes, 0, leaf).unwrap(), dictionary);
            let mut reader = ColumnReaderImpl::<ByteArrayType>::new(chunk.column_descr_ptr(), Box::new(pages));
            assert_eq!(reader.skip_records(row).unwrap(), row);
            let (mut values, mut levels) = (vec![], vec![]);
            reader.read_records(1, Some(&mut levels), None, &mut values).unwrap();
            (values.first().map(|v| v.data().to_vec()), loads.load(std::sync::atomic::Ordering::Relaxed))
        };
        let expected = |row: usize| (row % 7 != 3).then(|| vec![row as u8; row % 4]);
        assert_eq!(read_row(0), (expected(0), 1), "the first page is dictionary-encoded");
        for row in [298, 299] {
            assert_eq!(read_row(row), (expected(row), 0), "row {row}: a plain page");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn other_types_go_through_the_arrow_reader() {
        use arrow::array::{Decimal128Array, Int16Array};
        let plan_of = |a: ArrayRef| {
            let batch = RecordBatch::try_from_iter([("c", a)]).unwrap();
            let (dir, f, _) = file(&batch, false);
            let meta = ArrowReaderMetadata::load(&f, ArrowReaderOptions::new()).unwrap();
            std::fs::remove_dir_all(&dir).unwrap();
            plan(&meta)
        };
        assert_eq!(plan_of(Arc::new(Int64Array::from(vec![1]))), Some(vec![Direct::Int64]));
        assert_eq!(plan_of(Arc::new(Int16Array::from(vec![1]))), None, "narrowed from INT32");
        let decimal = Decimal128Array::from(vec![1]).with_precision_and_scale(9, 2).unwrap();
        assert_eq!(plan_of(Arc::new(decimal)), None, "decimals are scaled integers");
    }
}
