//! What every read shares, by immutable path or id: parsed manifests, delete files, Parquet
//! footers, the Arrow shape of each table schema, and each snapshot's column statistics.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef as ArrowSchemaRef;
use iceberg::spec::{Operation, Schema, Snapshot, TableMetadata};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::file::metadata::ParquetMetaDataReader;

use super::column_stats::{self, FileStats};
use super::deletes::DeleteCache;
use super::key_bounds::ColumnEncoders;
use super::keys::KeyColumns;
use crate::error::{Error, Result};
use crate::format::manifests::ManifestCache;
use crate::format::name_mapping::{assigned_ids, with_field_ids, FileNames};
use crate::format::schema::arrow_schema;
use crate::io::input::InputFile;

#[derive(Default)]
pub struct ReadCaches {
    pub manifests: ManifestCache,
    pub deletes: DeleteCache,
    footers: Mutex<HashMap<String, ArrowReaderMetadata>>,
    /// Footers of files without field ids with the ids a name mapping gives them, by path and
    /// those ids (two tables, or a rolled-back adoption, may give one file different ids).
    mapped_footers: Mutex<HashMap<MappedFooter, ArrowReaderMetadata>>,
    /// By table uuid and schema id, checked against the schema itself: an ALTER rolled back
    /// frees its schema id for a different schema (a table dropped and created again has the
    /// same location but a new uuid).
    shapes: Mutex<HashMap<(uuid::Uuid, i32), Arc<Shape>>>,
    /// By table uuid and snapshot id (a snapshot's files never change, and a snapshot id is never
    /// given to two snapshots of a catalog's tables).
    file_stats: Mutex<HashMap<(uuid::Uuid, i64), Arc<FileStats>>>,
    /// The last schema's column statistics of each snapshot, as [`column_stats::bounds_batch`]
    /// gives them (checked against the schema: see `shapes`).
    column_stats: Mutex<HashMap<(uuid::Uuid, i64), Arc<SnapshotColumns>>>,
}

/// A file's path and the field ids a name mapping gives its top-level columns.
type MappedFooter = (String, Vec<Option<i32>>);

const MAX_CACHED_FOOTERS: usize = 65_536;
/// How much of a file's tail the first read of its footer takes: most footers fit.
const FOOTER_PREFETCH: usize = 64 << 10;
const MAX_CACHED_SHAPES: usize = 4096;
const MAX_CACHED_STATS: usize = 4096;

/// A snapshot's column statistics under one schema: the bounds batch, whether each column holds
/// no NULL, and the files' rows.
pub struct SnapshotColumns {
    schema: Schema,
    pub bounds: RecordBatch,
    pub null_free: Vec<bool>,
    pub rows: u64,
}

/// What a lookup derives from a table schema: its Arrow schema, its key and the key encoders.
pub struct Shape {
    /// The schema it was derived from.
    schema: Schema,
    pub arrow: ArrowSchemaRef,
    pub key: Option<KeyColumns>,
    pub encoders: Option<ColumnEncoders>,
}

impl ReadCaches {
    /// The footer of the data file at `path`, open as `file`; a file without field ids (an
    /// adopted one) with those its table's mapping `names` gives its columns (see `name_mapping`).
    pub fn footer(&self, path: &str, file: &InputFile, names: Option<&FileNames>) -> Result<ArrowReaderMetadata> {
        let cached = self.footers.lock().unwrap().get(path).cloned();
        let m = match cached {
            Some(m) => m,
            None => {
                // (the footer with one read of the file's tail: an object's length and footer
                // would otherwise be two more requests)
                let options = ArrowReaderOptions::new();
                let m = ParquetMetaDataReader::new()
                    .with_prefetch_hint(Some(FOOTER_PREFETCH))
                    .parse_and_finish(file)
                    .and_then(|metadata| ArrowReaderMetadata::try_new(Arc::new(metadata), options))
                    .map_err(|e| Error::corrupt(format!("data file {path} is not readable Parquet: {e}")))?;
                let mut footers = self.footers.lock().unwrap();
                if footers.len() >= MAX_CACHED_FOOTERS {
                    footers.clear();
                }
                footers.insert(path.to_string(), m.clone());
                m
            }
        };
        let Some(ids) = names.and_then(|n| assigned_ids(m.parquet_schema(), n)) else {
            return Ok(m);
        };
        let name = (path.to_string(), ids);
        if let Some(mapped) = self.mapped_footers.lock().unwrap().get(&name) {
            return Ok(mapped.clone());
        }
        let meta = with_field_ids(m.metadata(), &name.1)?;
        let mapped = ArrowReaderMetadata::try_new(Arc::new(meta), ArrowReaderOptions::new())
            .map_err(|e| Error::corrupt(format!("data file {path} is not readable Parquet: {e}")))?;
        let mut footers = self.mapped_footers.lock().unwrap();
        if footers.len() >= MAX_CACHED_FOOTERS {
            footers.clear();
        }
        footers.insert(name, mapped.clone());
        Ok(mapped)
    }

    pub fn shape(&self, metadata: &TableMetadata, schema: &Schema) -> Result<Arc<Shape>> {
        let name = (metadata.uuid(), schema.schema_id());
        if let Some(s) = self.shapes.lock().unwrap().get(&name).filter(|s| s.schema == *schema) {
            return Ok(s.clone());
        }
        let key = KeyColumns::of(schema)?;
        let encoders = key.as_ref().map(ColumnEncoders::new).transpose()?;
        let shape = Arc::new(Shape { schema: schema.clone(), arrow: arrow_schema(schema)?, key, encoders });
        let mut shapes = self.shapes.lock().unwrap();
        if shapes.len() >= MAX_CACHED_SHAPES {
            shapes.clear();
        }
        shapes.insert(name, shape.clone());
        Ok(shape)
    }

    /// The statistics of `snapshot`'s data files (by field id: whatever schema reads them).
    pub fn file_stats(&self, metadata: &TableMetadata, snapshot: &Snapshot) -> Result<Arc<FileStats>> {
        let name = (metadata.uuid(), snapshot.snapshot_id());
        if let Some(s) = self.file_stats.lock().unwrap().get(&name) {
            return Ok(s.clone());
        }
        let files = self.manifests.snapshot_files(metadata, snapshot)?;
        // An append keeps its parent's files: fold only the ones it added (after each commit to
        // a table of many files, the first query does not fold them all again).
        let parent = (snapshot.summary().operation == Operation::Append)
            .then(|| snapshot.parent_snapshot_id())
            .flatten()
            .and_then(|p| self.file_stats.lock().unwrap().get(&(metadata.uuid(), p)).cloned());
        // (only if the parent's files and the ones entered under this snapshot's id are all of
        // its files: a file left out would make the bounds too narrow)
        let added: Vec<_> = files.data.iter().filter(|e| e.snapshot_id == snapshot.snapshot_id()).collect();
        let stats = Arc::new(match parent.filter(|p| p.files() + added.len() as u64 == files.data.len() as u64) {
            Some(parent) => parent.merged(&FileStats::of(added.iter().map(|e| e.file()))),
            None => FileStats::of(files.data.iter().map(|e| e.file())),
        });
        let mut cached = self.file_stats.lock().unwrap();
        if cached.len() >= MAX_CACHED_STATS {
            cached.clear();
        }
        cached.insert(name, stats.clone());
        Ok(stats)
    }

    /// The column statistics of `snapshot` for the columns of `schema` (see [`SnapshotColumns`]).
    pub fn snapshot_columns(
        &self,
        metadata: &TableMetadata,
        snapshot: &Snapshot,
        schema: &Schema,
    ) -> Result<Arc<SnapshotColumns>> {
        let name = (metadata.uuid(), snapshot.snapshot_id());
        if let Some(c) = self.column_stats.lock().unwrap().get(&name).filter(|c| c.schema == *schema) {
            return Ok(c.clone());
        }
        let stats = self.file_stats(metadata, snapshot)?;
        let (bounds, null_free) = column_stats::for_schema(&stats, schema, &self.shape(metadata, schema)?.arrow)?;
        let found = Arc::new(SnapshotColumns { schema: schema.clone(), bounds, null_free, rows: stats.rows });
        let mut cached = self.column_stats.lock().unwrap();
        if cached.len() >= MAX_CACHED_STATS {
            cached.clear();
        }
        cached.insert(name, found.clone());
        Ok(found)
    }
}
