//! Byte ranges of a file read ahead into memory, served to the Parquet reader as the file itself.
//! The reader would otherwise issue a system call (or several: the standard `File` reader clones
//! the descriptor and seeks) per column chunk; with small row groups that dominated scans. Ranges
//! are read with positional reads (`pread`) and merged when the gap between them is small; an
//! object's are merged across gaps up to [`OBJECT_MAX_GAP`] (a request costs far more than the
//! bytes between two ranges) and fetched concurrently.

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::metadata::ColumnChunkMetaData;
use parquet::file::reader::{ChunkReader, Length};

use super::input::InputFile;
use super::range_cache;
use crate::error::{Error, Result};

/// The gap across which an object's ranges are merged into one GET: at S3's tens of
/// milliseconds per request and ~100 MB/s per connection, a request costs what a few MiB do.
pub const OBJECT_MAX_GAP: u64 = 1 << 20;

/// Parts of a file (sorted, disjoint) with the file's length. Clones share the bytes.
#[derive(Clone)]
pub struct FileRanges {
    len: u64,
    parts: Vec<(u64, Bytes)>,
}

impl FileRanges {
    /// Reads `ranges` (start, length) of `file`, merging ranges less than `max_gap` bytes apart;
    /// `on_read(bytes)` is told about every read.
    pub fn read(
        file: &InputFile,
        file_len: u64,
        mut ranges: Vec<(u64, u64)>,
        max_gap: u64,
        path: &str,
        mut on_read: impl FnMut(u64),
    ) -> Result<FileRanges> {
        // Ranges come from a file's own footer: one past the end is corruption, and is refused
        // before any buffer is sized from it (an absurd length would abort the allocation).
        if let Some((start, len)) = ranges.iter().find(|(s, l)| s.checked_add(*l).is_none_or(|end| end > file_len)) {
            return Err(Error::corrupt(format!(
                "data file {path} is corrupt: its footer places {len} bytes at offset {start}, past its end ({file_len} bytes)"
            )));
        }
        ranges.sort_unstable();
        ranges.dedup();
        let object = file.is_object();
        let mut parts = Vec::with_capacity(ranges.len());
        if object {
            // (what an earlier read of this object kept: range_cache.rs)
            ranges.retain(|&(start, len)| match range_cache::get(file.location(), start, len) {
                Some(kept) => {
                    parts.push((start, kept));
                    false
                }
                None => true,
            });
        }
        let max_gap = if object { max_gap.max(OBJECT_MAX_GAP) } else { max_gap };
        let mut merged: Vec<(u64, u64)> = vec![];
        for &(start, len) in ranges.iter().filter(|r| r.1 > 0) {
            match merged.last_mut() {
                Some((s, l)) if start <= *s + *l + max_gap => *l = (*l).max(start + len - *s),
                _ => merged.push((start, len)),
            }
        }
        let read = file.read_ranges(&merged)?;
        for ((start, len), bytes) in merged.into_iter().zip(read) {
            parts.push((start, bytes));
            on_read(len);
        }
        let read = FileRanges { len: file_len, parts }.sorted();
        if object {
            for &(start, len) in ranges.iter().filter(|r| r.1 > 0) {
                if let Ok(bytes) = read.slice(start, len as usize) {
                    range_cache::put(file.location(), start, &bytes);
                }
            }
        }
        Ok(read)
    }

    /// The parts by start (kept ranges and fetched ones may overlap: `slice` looks at each).
    fn sorted(mut self) -> FileRanges {
        self.parts.sort_by_key(|(s, _)| *s);
        self
    }

    /// The part holding `start..start + len`.
    fn slice(&self, start: u64, len: usize) -> std::result::Result<Bytes, ParquetError> {
        let holds = |(s, data): &(u64, Bytes)| {
            let offset = start.checked_sub(*s)? as usize;
            offset.checked_add(len).filter(|&end| end <= data.len()).map(|end| data.slice(offset..end))
        };
        let i = self.parts.partition_point(|(s, _)| *s <= start);
        // (the part starting last before it, else any: a kept range may lie inside a fetched one)
        let found = i.checked_sub(1).and_then(|i| holds(&self.parts[i])).or_else(|| self.parts.iter().find_map(holds));
        found.ok_or_else(|| {
            ParquetError::General(format!("bytes {start}..{} were not read ahead", start.saturating_add(len as u64)))
        })
    }
}

/// A byte range as a file's footer gives it (offset, length), checked: negative numbers are
/// corruption, named as such rather than a panic in the reader. (Two non-negative `i64`s cannot
/// overflow a `u64`; a range past the file's end is refused when it is read.)
pub fn footer_range(offset: i64, length: i64, path: &str) -> Result<(u64, u64)> {
    match (u64::try_from(offset), u64::try_from(length)) {
        (Ok(o), Ok(l)) => Ok((o, l)),
        _ => Err(Error::corrupt(format!(
            "data file {path} is corrupt: its footer places {length} bytes at offset {offset}"
        ))),
    }
}

/// A column chunk's bytes (dictionary page first, when it has one), checked as `footer_range`.
pub fn chunk_range(chunk: &ColumnChunkMetaData, path: &str) -> Result<(u64, u64)> {
    footer_range(chunk.dictionary_page_offset().unwrap_or(chunk.data_page_offset()), chunk.compressed_size(), path)
}

impl Length for FileRanges {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for FileRanges {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> std::result::Result<Self::T, ParquetError> {
        // (of the parts holding `start`, the one reaching furthest: kept and fetched ranges may
        // overlap)
        let (s, data) = self
            .parts
            .iter()
            .filter(|(s, data)| *s <= start && start - s <= data.len() as u64)
            .max_by_key(|(s, data)| s + data.len() as u64)
            .ok_or_else(|| ParquetError::General(format!("offset {start} was not read ahead")))?;
        Ok(bytes::Buf::reader(data.slice((start - s) as usize..)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> std::result::Result<Bytes, ParquetError> {
        self.slice(start, length)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A column chunk's range comes from the footer: negative numbers (a corrupt file) are an
    /// error naming the file, where the crate's own `byte_range` would panic. (Ranges past the
    /// file's end are refused by `FileRanges::read`.)
    #[test]
    fn corrupt_chunk_ranges_are_errors() {
        use arrow::array::{ArrayRef, Int64Array, RecordBatch};
        use parquet::arrow::ArrowWriter;
        use parquet::file::metadata::ParquetMetaDataReader;

        let ids: ArrayRef = std::sync::Arc::new(Int64Array::from_iter_values(0..100));
        let batch = RecordBatch::try_from_iter([("id", ids)]).unwrap();
        let mut bytes = vec![];
        let mut writer = ArrowWriter::try_new(&mut bytes, batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let meta = ParquetMetaDataReader::new().parse_and_finish(&Bytes::from(bytes)).unwrap();
        let chunk = meta.row_group(0).column(0).clone();
        let (start, len) = chunk_range(&chunk, "f.parquet").unwrap();
        assert_eq!((start, len), (chunk.byte_range().0, chunk.byte_range().1));
        let corrupt = [
            chunk.clone().into_builder().set_total_compressed_size(-5).build().unwrap(),
            chunk.clone().into_builder().set_dictionary_page_offset(Some(-1)).build().unwrap(),
        ];
        for c in &corrupt {
            let e = chunk_range(c, "f.parquet").unwrap_err();
            assert!(e.to_string().contains("data file f.parquet is corrupt"), "{e}");
        }
        assert!(footer_range(4, -100, "f.parquet").is_err(), "a negative bloom filter length");
    }

    #[test]
    fn merges_close_ranges_and_serves_slices() {
        let dir = std::env::temp_dir().join(format!("skade-ranges-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        let data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
        std::fs::File::create(&path).unwrap().write_all(&data).unwrap();
        let file = InputFile::open(path.to_str().unwrap(), "data file").unwrap();
        let mut reads = vec![];
        let r = FileRanges::read(&file, 10_000, vec![(5000, 100), (0, 10), (20, 10), (9000, 1000)], 16, "f", |n| {
            reads.push(n)
        })
        .unwrap();
        assert_eq!(reads, vec![30, 100, 1000], "0..10 and 20..30 merge; the others stay apart");
        assert_eq!(&r.get_bytes(22, 5).unwrap()[..], &data[22..27]);
        assert_eq!(&r.get_bytes(9990, 10).unwrap()[..], &data[9990..10_000]);
        assert!(r.get_bytes(100, 10).is_err(), "bytes never read are an error, not zeros");
        assert!(r.get_bytes(5090, 20).is_err(), "a slice running past its part is an error");
        // A file shorter than its catalog says (truncated): an error naming it, never a short buffer.
        let Err(e) = FileRanges::read(&file, 20_000, vec![(9_990, 20)], 0, "lake/data/f.parquet", |_| ()) else {
            panic!("a read past the end of the file succeeded")
        };
        assert!(e.to_string().contains("cannot read 20 bytes at offset 9990 of data file"), "{e}");
        // A footer's absurd range: an error, before any buffer is sized from it.
        for range in [(0, 1 << 60), (u64::MAX, 2), (9_999, 2)] {
            let Err(e) = FileRanges::read(&file, 10_000, vec![(0, 10), range], 0, "f", |_| ()) else {
                panic!("the range {range:?} was read")
            };
            assert!(e.to_string().contains("data file f is corrupt"), "{e}");
        }
        assert!(r.get_bytes(9990, usize::MAX).is_err(), "a length that overflows is an error");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
