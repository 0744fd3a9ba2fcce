//! Merge-on-read: Iceberg delete files, and which rows of a data file they remove.
//!
//! A position-delete file (or an Iceberg v3 deletion vector, the positions of one data file) (`file_path`, `pos`) with data sequence number S removes rows of data
//! files with sequence number <= S; an equality-delete file (the key columns) with S removes the
//! rows of data files with sequence number < S whose key equals one of its rows (NULL equals
//! NULL). Delete files are immutable, so their parsed contents are cached by path (a deletion
//! vector by path and offset).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::datatypes::{DataType, Int64Type};
use arrow::row::{RowConverter, SortField};
use iceberg::spec::{DataContentType, DataFile, DataFileFormat, Schema};
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;
use parquet::file::metadata::PageIndexPolicy;

use super::keys::{KeyRange, KeySet};
use crate::error::{Error, Result};
use crate::format::manifests::FileEntry;
use crate::format::schema::{arrow_schema, conform_array, roots_by_field_id};
use crate::io::input::InputFile;

/// Iceberg's reserved field ids of position-delete files.
pub const DELETE_FILE_PATH_ID: i32 = 2147483546;
pub const DELETE_POS_ID: i32 = 2147483545;

/// Deleted row positions per data file path (sorted).
#[derive(Debug, Default)]
pub struct PositionDeletes {
    pub by_path: HashMap<String, Vec<u64>>,
}

/// Deleted keys, encoded with Arrow's row format over the key columns (injective per type).
pub struct EqualityDeletes {
    /// The delete file's path: it names the set (delete files are immutable).
    pub path: String,
    pub field_ids: Vec<i32>,
    pub types: Vec<DataType>,
    pub keys: KeySet<Box<[u8]>>,
    /// The range of the keys: rows outside it are not deleted and are never hashed.
    pub range: Option<KeyRange>,
}

impl EqualityDeletes {
    pub fn converter(&self) -> Result<RowConverter> {
        Ok(RowConverter::new(self.types.iter().map(|t| SortField::new(t.clone())).collect())?)
    }
}

/// The deletes that apply to one data file.
#[derive(Clone, Default)]
pub struct FileDeletes {
    /// Sorted, deduplicated deleted positions.
    pub positions: Arc<Vec<u64>>,
    pub equality: Vec<Arc<EqualityDeletes>>,
}

impl FileDeletes {
    pub fn is_empty(&self) -> bool {
        self.positions.is_empty() && self.equality.is_empty()
    }
}

#[derive(Default)]
pub struct DeleteCache {
    positions: Mutex<HashMap<String, Arc<PositionDeletes>>>,
    equality: Mutex<HashMap<String, Arc<EqualityDeletes>>>,
    /// The positions that equality deletes remove from a data file, by (data file, delete files):
    /// found once by reading the file's key columns, then applied as position deletes. Each slot
    /// has its own lock, so the tasks of one file wait for one reader instead of all reading.
    resolved: Mutex<HashMap<(String, Vec<String>), ResolvedSlot>>,
}

/// A slot of [`DeleteCache::resolved`].
pub type ResolvedSlot = Arc<Mutex<Option<Arc<Vec<u64>>>>>;

const MAX_CACHED_DELETE_FILES: usize = 4096;

/// Which deletes apply to which data files of one scan.
pub struct DeleteIndex {
    positions: Vec<(i64, Arc<PositionDeletes>)>,
    /// Deletion vectors (v3) by the data file they delete from: one per data file (DuckDB writes
    /// a Puffin file for each), so a table's thousands are found by path, not searched.
    vectors: HashMap<String, Vec<(i64, Arc<PositionDeletes>)>>,
    equality: Vec<(i64, Arc<EqualityDeletes>)>,
}

impl DeleteIndex {
    /// Loads every delete file (cached) of a snapshot. `Sequence` of uncommitted delete files is
    /// `i64::MAX` (they apply to everything committed).
    pub fn load(cache: &DeleteCache, schema: &Schema, deletes: &[(i64, &DataFile)]) -> Result<DeleteIndex> {
        let mut index = DeleteIndex { positions: vec![], vectors: HashMap::new(), equality: vec![] };
        for (seq, file) in deletes {
            match file.content_type() {
                DataContentType::PositionDeletes if file.file_format() == DataFileFormat::Puffin => {
                    let vector = cache.positions(file)?;
                    for path in vector.by_path.keys() {
                        index.vectors.entry(path.clone()).or_default().push((*seq, vector.clone()));
                    }
                }
                DataContentType::PositionDeletes => index.positions.push((*seq, cache.positions(file)?)),
                DataContentType::EqualityDeletes => index.equality.push((*seq, cache.equality(file, schema)?)),
                DataContentType::Data => {}
            }
        }
        Ok(index)
    }

    pub fn is_empty(&self) -> bool {
        self.positions.is_empty() && self.vectors.is_empty() && self.equality.is_empty()
    }

    /// The position deletes that may name the data file at `path`.
    fn positions_for<'a>(&'a self, path: &str) -> impl Iterator<Item = &'a (i64, Arc<PositionDeletes>)> {
        self.positions.iter().chain(self.vectors.get(path).into_iter().flatten())
    }

    /// Whether a position delete removes row `pos` of the data file at `path` (sequence `seq`).
    pub fn deletes_position(&self, path: &str, seq: i64, pos: u64) -> bool {
        self.positions_for(path)
            .any(|(d, p)| *d >= seq && p.by_path.get(path).is_some_and(|ps| ps.binary_search(&pos).is_ok()))
    }

    /// The equality deletes that apply to a data file with sequence number `seq`.
    pub fn equality_for(&self, seq: i64) -> impl Iterator<Item = &Arc<EqualityDeletes>> {
        self.equality.iter().filter(move |(d, _)| *d > seq).map(|(_, e)| e)
    }

    /// The deletes for the data file at `path` with data sequence number `seq`.
    pub fn for_file(&self, path: &str, seq: i64) -> FileDeletes {
        let mut positions: Vec<u64> = vec![];
        for (dseq, p) in self.positions_for(path) {
            if *dseq >= seq {
                if let Some(ps) = p.by_path.get(path) {
                    positions.extend_from_slice(ps);
                }
            }
        }
        positions.sort_unstable();
        positions.dedup();
        let equality = self.equality.iter().filter(|(dseq, _)| *dseq > seq).map(|(_, e)| e.clone()).collect();
        FileDeletes { positions: Arc::new(positions), equality }
    }
}

/// Files committed by a snapshot, with their inherited sequence numbers.
pub fn with_sequence(entries: &[FileEntry]) -> Vec<(i64, &DataFile)> {
    entries.iter().map(|e| (e.sequence_number, e.file())).collect()
}

impl DeleteCache {
    /// The slot for the positions `equality` removes from the data file at `path`.
    pub fn resolved_slot(&self, path: &str, equality: &[Arc<EqualityDeletes>]) -> ResolvedSlot {
        let mut sets: Vec<String> = equality.iter().map(|e| e.path.clone()).collect();
        sets.sort_unstable();
        let mut resolved = self.resolved.lock().unwrap();
        if resolved.len() >= MAX_CACHED_DELETE_FILES {
            resolved.clear();
        }
        resolved.entry((path.to_string(), sets)).or_default().clone()
    }

    pub fn positions(&self, file: &DataFile) -> Result<Arc<PositionDeletes>> {
        if file.file_format() == iceberg::spec::DataFileFormat::Puffin {
            return self.deletion_vector(file);
        }
        let path = file.file_path();
        if let Some(p) = self.positions.lock().unwrap().get(path) {
            return Ok(p.clone());
        }
        let mut deletes = PositionDeletes::default();
        let columns = [(DELETE_FILE_PATH_ID, "file_path"), (DELETE_POS_ID, "pos")];
        for batch in read_columns(path, &columns)? {
            let (paths, positions) = (&batch[0], &batch[1]);
            let positions = conform_array(positions, &DataType::Int64)?;
            let positions = positions.as_primitive::<Int64Type>();
            let paths = conform_array(paths, &DataType::Utf8)?;
            let paths = paths.as_string::<i32>();
            for i in 0..paths.len() {
                if paths.is_null(i) || positions.is_null(i) || positions.value(i) < 0 {
                    return Err(Error::corrupt(format!("position-delete file {path} has an invalid row {i}")));
                }
                deletes.by_path.entry(paths.value(i).to_string()).or_default().push(positions.value(i) as u64);
            }
        }
        for v in deletes.by_path.values_mut() {
            v.sort_unstable();
            v.dedup();
        }
        let deletes = Arc::new(deletes);
        let mut cache = self.positions.lock().unwrap();
        if cache.len() >= MAX_CACHED_DELETE_FILES {
            cache.clear();
        }
        cache.insert(path.to_string(), deletes.clone());
        Ok(deletes)
    }

    /// An Iceberg v3 deletion vector: one blob of a Puffin file (at `content_offset`, of
    /// `content_size_in_bytes`), the deleted positions of its `referenced_data_file`. Cached by
    /// file and offset (a Puffin file may hold several).
    fn deletion_vector(&self, file: &DataFile) -> Result<Arc<PositionDeletes>> {
        let path = file.file_path();
        let missing =
            |what: &str| Error::corrupt(format!("deletion vector in {path} has no {what} in its manifest entry"));
        let offset = file.content_offset().ok_or_else(|| missing("content_offset"))?;
        let size = file.content_size_in_bytes().ok_or_else(|| missing("content_size_in_bytes"))?;
        let data_file = file.referenced_data_file().ok_or_else(|| missing("referenced_data_file"))?;
        let key = format!("{path}@{offset}:{data_file}");
        if let Some(p) = self.positions.lock().unwrap().get(&key) {
            return Ok(p.clone());
        }
        // (the entry's offset and size are another writer's: they must lie within the file as it
        // is, before anything is allocated for them)
        let input = InputFile::open(path, "deletion vector file")?;
        let file_size = input.size()?;
        let (Ok(start), Ok(len)) = (u64::try_from(offset), u64::try_from(size)) else {
            return Err(Error::corrupt(format!("deletion vector in {path} has a negative offset or size")));
        };
        if start.checked_add(len).is_none_or(|end| end > file_size) {
            return Err(Error::corrupt(format!(
                "deletion vector in {path} at {offset} of {size} bytes lies beyond the file's {file_size} bytes"
            )));
        }
        let blob = input.read_range(start, len as usize)?;
        let positions = crate::format::deletion_vector::decode(&blob, &key, file.record_count())?;
        let deletes = Arc::new(PositionDeletes { by_path: HashMap::from([(data_file, positions)]) });
        let mut cache = self.positions.lock().unwrap();
        if cache.len() >= MAX_CACHED_DELETE_FILES {
            cache.clear();
        }
        cache.insert(key, deletes.clone());
        Ok(deletes)
    }

    pub fn equality(&self, file: &DataFile, schema: &Schema) -> Result<Arc<EqualityDeletes>> {
        let path = file.file_path();
        if let Some(e) = self.equality.lock().unwrap().get(path) {
            return Ok(e.clone());
        }
        let field_ids = file
            .equality_ids()
            .filter(|ids| !ids.is_empty())
            .ok_or_else(|| Error::corrupt(format!("equality-delete file {path} names no equality fields")))?;
        let table_arrow = arrow_schema(schema)?;
        let mut types = vec![];
        let mut columns = vec![];
        for id in &field_ids {
            let pos = schema
                .as_struct()
                .fields()
                .iter()
                .position(|f| f.id == *id)
                .ok_or_else(|| Error::corrupt(format!("equality-delete file {path} uses unknown field {id}")))?;
            types.push(table_arrow.field(pos).data_type().clone());
            columns.push((*id, table_arrow.field(pos).name().as_str()));
        }
        let mut deletes = EqualityDeletes {
            path: path.to_string(),
            field_ids: field_ids.clone(),
            types,
            keys: KeySet::default(),
            range: None,
        };
        let converter = deletes.converter()?;
        for batch in read_columns(path, &columns)? {
            let columns =
                batch.iter().zip(&deletes.types).map(|(c, t)| conform_array(c, t)).collect::<Result<Vec<_>>>()?;
            let rows = converter.convert_columns(&columns)?;
            for i in 0..rows.num_rows() {
                deletes.keys.insert(rows.row(i).data().into());
            }
        }
        deletes.range = KeyRange::of(&converter, deletes.keys.iter().map(|k| &**k))?;
        let deletes = Arc::new(deletes);
        let mut cache = self.equality.lock().unwrap();
        if cache.len() >= MAX_CACHED_DELETE_FILES {
            cache.clear();
        }
        cache.insert(path.to_string(), deletes.clone());
        Ok(deletes)
    }
}

/// Every row of the columns with the given field ids, batch by batch, in that order. A file
/// without field ids (some writers leave them out of delete files) is matched by column name.
fn read_columns(path: &str, columns: &[(i32, &str)]) -> Result<Vec<Vec<ArrayRef>>> {
    let unreadable = |e: &dyn std::fmt::Display| Error::corrupt(format!("delete file {path} is not readable: {e}"));
    let file = InputFile::open(path, "delete file")?;
    let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Skip);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(file, options).map_err(|e| unreadable(&e))?;
    let fields = builder.parquet_schema().root_schema().get_fields();
    let by_id = roots_by_field_id(builder.parquet_schema());
    let mut wanted = vec![];
    for (id, name) in columns {
        let root = match by_id.get(id) {
            Some(r) => *r,
            None if by_id.is_empty() => fields
                .iter()
                .position(|f| f.name() == *name)
                .ok_or_else(|| unreadable(&format!("it has no column {name} (field id {id})")))?,
            None => return Err(unreadable(&format!("it has no column with field id {id}"))),
        };
        wanted.push(root);
    }
    let mut sorted = wanted.clone();
    sorted.sort_unstable();
    sorted.dedup();
    let mask = ProjectionMask::roots(builder.parquet_schema(), sorted.iter().copied());
    let builder = builder.with_projection(mask);
    let reader = builder.build().map_err(|e| unreadable(&e))?;
    let mut out = vec![];
    for batch in reader {
        let batch = batch.map_err(|e| unreadable(&e))?;
        let batch_columns: Vec<ArrayRef> =
            wanted.iter().map(|r| batch.column(sorted.binary_search(r).unwrap()).clone()).collect();
        out.push(batch_columns);
    }
    Ok(out)
}
