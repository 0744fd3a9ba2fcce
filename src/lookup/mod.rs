//! Point lookups by primary key, through merge-on-read: the live row of each key at a snapshot.
//!
//! A probe prunes before it reads: files by their manifest key bounds, then row groups by their
//! statistics and the key columns' bloom filters, then key pages by their bounds (keyed tables
//! are written with each row group sorted by key, see `write::writer`), and reads the one
//! surviving key page. Rows whose key matches are checked against the snapshot's position and
//! equality deletes; the newest live one is the answer (a primary key has at most one), read from
//! the page holding it in each other column. Everything that does not change between lookups is
//! cached (see `cache`), so a warm probe reads only pages: its key page and its row's.

pub(crate) mod cache;
pub(crate) mod column_decode;
pub(crate) mod data_file;
pub(crate) mod dictionaries;
mod lazy_dictionary;
pub(crate) mod probe_keys;
pub mod stats;

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use arrow::array::{make_comparator, Array, ArrayRef, AsArray, RecordBatch};
use arrow::compute::SortOptions;
use arrow::datatypes::Int64Type;
use arrow::datatypes::SchemaRef as ArrowSchemaRef;
use iceberg::spec::{DataFile, Schema, TableMetadata};

use self::cache::LookupCache;
use self::cache::{within, CandidateFile};
use self::data_file::{DataFileIndex, PageRows};
use self::probe_keys::bloom_bytes;
use crate::error::{Error, Result};
use crate::format::name_mapping::FileNames;
use crate::format::schema::conform_array;
use crate::read::caches::ReadCaches;
use crate::read::deletes::{DeleteIndex, EqualityDeletes};
use crate::read::filter::{datum_at, Cmp, Prune};
use crate::read::key_bounds::ColumnEncoders;
use crate::read::keys::{KeyColumns, KeySet};
use crate::read::partition_prune;
use crate::read::scan::STAGED_SEQUENCE;
use crate::read::time_travel::snapshot_and_schema;
use crate::read::time_travel::Version;

pub struct LookupRequest<'a> {
    pub metadata: &'a TableMetadata,
    pub version: Version,
    /// Files this transaction wrote and has not committed (it reads its own writes).
    pub staged: &'a [DataFile],
    pub staged_deletes: &'a [DataFile],
    /// The columns of the rows returned, matched by field id (missing ones are NULL).
    pub output: &'a Schema,
    /// The table's name mapping (with the transaction's own adopted files'): the field ids of
    /// files without their own.
    pub names: Option<&'a FileNames>,
}

/// The rows found (one per key found, in the order the keys were given) and where each is.
#[derive(Debug)]
pub struct Found {
    pub batch: RecordBatch,
    /// (data file path, position in the file) per row.
    pub positions: Vec<(String, u64)>,
}

/// A page of the first key column: (file, row group, page), indexes into the call's files.
type PageId = (usize, usize, usize);

/// A row whose key matches a probe's and that no position delete, nor an equality delete on
/// the key, removes.
struct Candidate {
    /// Index into the call's probes.
    probe: usize,
    page: PageId,
    /// Its row in the page.
    i: usize,
    /// Its position in the file.
    position: u64,
    /// Whether an equality delete on other columns may still remove it (its row tells).
    undecided: bool,
}

/// One distinct key to find.
struct Probe {
    /// Row of the key arrays.
    row: usize,
    key: Box<[u8]>,
    /// Each key column alone, encoded.
    columns: Vec<Box<[u8]>>,
}

/// Finds the live rows whose primary key is one of `keys` (arrays in key-column order).
pub fn lookup(
    caches: &ReadCaches,
    lookup_cache: &LookupCache,
    req: &LookupRequest<'_>,
    keys: &[ArrayRef],
) -> Result<Found> {
    stats::LOOKUPS.fetch_add(1, Relaxed);
    let out_schema = caches.shape(req.metadata, req.output)?.arrow.clone();
    let (snapshot, schema) = snapshot_and_schema(req.metadata, req.version)?;
    let snapshot = snapshot.as_deref();
    let shape = caches.shape(req.metadata, &schema)?;
    let (Some(key), Some(encoders)) = (&shape.key, &shape.encoders) else {
        return Err(Error::invalid("the table has no primary key"));
    };
    if keys.len() != key.types.len() {
        return Err(Error::invalid(format!("a key has {} columns, the primary key {}", keys.len(), key.types.len())));
    }
    let keys = keys.iter().zip(&key.types).map(|(a, t)| conform_array(a, t)).collect::<Result<Vec<_>>>()?;
    let probes = probes(key, encoders, &keys)?;
    stats::KEYS.fetch_add(probes.len() as u64, Relaxed);
    if snapshot.is_none() && req.staged.is_empty() || probes.is_empty() {
        return Ok(Found { batch: RecordBatch::new_empty(out_schema), positions: vec![] });
    }

    let committed = match snapshot {
        Some(s) => Some(lookup_cache.snapshot(caches, req.metadata, s, &schema, key, encoders)?),
        None => None,
    };
    let staged: Vec<CandidateFile> =
        req.staged.iter().map(|f| CandidateFile::new(f, STAGED_SEQUENCE, key, encoders)).collect();
    let staged_deletes: Vec<(i64, &DataFile)> = req.staged_deletes.iter().map(|f| (STAGED_SEQUENCE, f)).collect();
    let staged_deletes = DeleteIndex::load(&caches.deletes, &schema, &staged_deletes)?;
    let delete_indexes: Vec<&DeleteIndex> = committed.iter().map(|c| &c.deletes).chain([&staged_deletes]).collect();
    // Staged files are the newest; committed ones are sorted newest first.
    let files: Vec<&CandidateFile> = staged.iter().chain(committed.iter().flat_map(|c| c.files.iter())).collect();

    // Within one call (several keys): key pages decoded, by (file, group, page).
    let mut decoded: HashMap<PageId, Arc<PageRows>> = HashMap::new();
    let mut indexes: HashMap<usize, Arc<DataFileIndex>> = HashMap::new();
    // First every key's candidate rows, then each row group's candidates decoded together (one
    // pass over the other columns' pages for all the keys of a call that fall in it).
    let mut candidates: Vec<Candidate> = vec![];
    let partitioned = files.iter().any(|f| f.partition.is_some());
    for (n, probe) in probes.iter().enumerate() {
        let columns: Vec<&[u8]> = probe.columns.iter().map(|c| &**c).collect();
        // (a file partitioned by a key column: its partition must be the key's)
        let equal = if partitioned { key_equality(&schema, key, &keys, probe.row) } else { None };
        let may_hold = |f: &CandidateFile| match (&f.partition, &equal) {
            (Some((spec, values)), Some(equal)) => partition_prune::may_match(equal, spec, values),
            _ => true,
        };
        'files: for (f, file) in files.iter().enumerate().filter(|(_, f)| within(&f.bounds, &columns) && may_hold(f)) {
            let index = match indexes.entry(f) {
                Entry::Occupied(e) => e.get().clone(),
                Entry::Vacant(e) => e.insert(lookup_cache.data_file(file, &schema, key, encoders, req.names)?).clone(),
            };
            let blooms: Vec<Option<Vec<u8>>> = keys
                .iter()
                .zip(&index.key_physical)
                .map(|(k, p)| p.and_then(|p| bloom_bytes(k, probe.row, p)))
                .collect();
            // Equality deletes on other columns than the key (another writer's) need the row.
            let undecided = delete_indexes.iter().any(|d| d.equality_for(file.seq).any(|eq| !on_key(eq, key)));
            for (g, group) in index.groups.iter().enumerate() {
                if !within(&group.bounds, &columns) || !may_contain(&group.blooms, &blooms) {
                    continue;
                }
                for (p, page) in group.pages.iter().enumerate() {
                    if !within(std::slice::from_ref(&page.bounds), &columns[..1]) {
                        continue;
                    }
                    let page_rows = match decoded.get(&(f, g, p)) {
                        Some(k) => k.clone(),
                        None => {
                            let rows = (page.first_row, page.rows);
                            let key_columns = (&key.field_ids[..], &key.types[..]);
                            let handle = lookup_cache.handle(&file.path)?;
                            let at = (&*handle, &lookup_cache.dictionaries);
                            let k = Arc::new(index.decode_page(at, &file.path, g, rows, key_columns)?);
                            decoded.insert((f, g, p), k.clone());
                            k
                        }
                    };
                    for i in matching_rows(&page_rows.keys, &keys, probe.row)? {
                        let position = group.first_row + (page.first_row + i) as u64;
                        if delete_indexes.iter().any(|d| d.deletes_position(&file.path, file.seq, position))
                            || key_deleted(&delete_indexes, file.seq, key, &probe.key)
                        {
                            continue;
                        }
                        candidates.push(Candidate { probe: n, page: (f, g, p), i, position, undecided });
                        if !undecided {
                            break 'files; // a primary key has one live row
                        }
                    }
                }
            }
        }
    }

    let mut wanted: HashMap<(usize, usize), Vec<&Candidate>> = HashMap::new();
    for c in &candidates {
        wanted.entry((c.page.0, c.page.1)).or_default().push(c);
    }
    // Per row group: its candidates' positions (in the group's order) and their rows decoded.
    let mut rows: HashMap<(usize, usize), (Vec<u64>, RecordBatch)> = HashMap::with_capacity(wanted.len());
    for ((f, g), mut want) in wanted {
        want.sort_unstable_by_key(|c| c.position);
        want.dedup_by_key(|c| c.position);
        let at: Vec<(&PageRows, usize)> = want.iter().map(|c| (&*decoded[&c.page], c.i)).collect();
        let path = &files[f].path;
        let handle = lookup_cache.handle(path)?;
        let batch = indexes[&f].rows((&handle, &lookup_cache.dictionaries), path, g, &at)?;
        rows.insert((f, g), (want.iter().map(|c| c.position).collect(), batch));
    }
    let mut found: Vec<(usize, RecordBatch, (String, u64))> = vec![]; // (probe row, row, position)
    let mut answered = vec![false; probes.len()];
    for c in &candidates {
        if answered[c.probe] {
            continue;
        }
        let (f, g, _) = c.page;
        let (positions, batch) = &rows[&(f, g)];
        let at = positions.binary_search(&c.position).map_err(|_| Error::internal("a candidate row not decoded"))?;
        let row = batch.slice(at, 1);
        let (probe, index) = (&probes[c.probe], &indexes[&f]);
        if c.undecided && equality_deleted(&delete_indexes, files[f].seq, key, &probe.key, index, &row)? {
            continue;
        }
        answered[c.probe] = true;
        let row = project(&row, index, req.output, &out_schema)?;
        found.push((probe.row, row, (files[f].path.clone(), c.position)));
    }
    found.sort_by_key(|(row, _, _)| *row);
    stats::ROWS_FOUND.fetch_add(found.len() as u64, Relaxed);
    let rows: Vec<RecordBatch> = found.iter().map(|(_, b, _)| b.clone()).collect();
    Ok(Found {
        batch: match rows.as_slice() {
            [row] => row.clone(), // a point query's one row: no copy
            _ => arrow::compute::concat_batches(&out_schema, &rows)?,
        },
        positions: found.into_iter().map(|(_, _, p)| p).collect(),
    })
}

/// The key at row `row` of `keys` as an equality on the key's columns (None: a column cannot be
/// translated, so nothing is pruned by it).
fn key_equality(schema: &Schema, key: &KeyColumns, keys: &[ArrayRef], row: usize) -> Option<Prune> {
    let parts = key
        .field_ids
        .iter()
        .zip(keys)
        .map(|(&field_id, array)| {
            let ty = schema.field_by_id(field_id)?.field_type.as_primitive_type()?;
            Some(Prune::Compare { field_id, cmp: Cmp::Eq, value: datum_at(array, row, ty)? })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Prune::And(parts))
}

/// The distinct keys of `keys`, in order; keys with a NULL column match nothing and are dropped.
fn probes(key: &KeyColumns, encoders: &ColumnEncoders, keys: &[ArrayRef]) -> Result<Vec<Probe>> {
    let encoded = key.converter()?.convert_columns(keys)?;
    let columns: Vec<Vec<Box<[u8]>>> = (0..keys.len()).map(|c| encoders.column(c, &keys[c])).collect::<Result<_>>()?;
    let mut seen = KeySet::default();
    let mut out = vec![];
    for row in 0..encoded.num_rows() {
        if keys.iter().any(|k| k.is_null(row)) || !seen.insert(encoded.row(row).data()) {
            continue;
        }
        out.push(Probe {
            row,
            key: encoded.row(row).data().into(),
            columns: columns.iter().map(|c| c[row].clone()).collect(),
        });
    }
    Ok(out)
}

/// False when a bloom filter proves the key absent.
fn may_contain(blooms: &[Option<parquet::bloom_filter::Sbbf>], values: &[Option<Vec<u8>>]) -> bool {
    blooms.iter().zip(values).all(|(b, v)| match (b, v) {
        (Some(b), Some(v)) => b.check(&v[..]),
        _ => true,
    })
}

/// The rows whose key columns `columns` equal the key at row `row` of `keys`. One comparator per
/// column, called per row: a page holds about a hundred rows, for which building comparison
/// kernels' boolean arrays cost more than the comparisons.
fn matching_rows(columns: &[ArrayRef], keys: &[ArrayRef], row: usize) -> Result<Vec<usize>> {
    // The common key, one BIGINT column: its values compared directly (the generic comparators
    // cost a point query ~6k instructions, a tenth of its decode).
    if let ([column], [key]) = (columns, keys) {
        if let (Some(column), Some(key)) = (column.as_primitive_opt::<Int64Type>(), key.as_primitive_opt::<Int64Type>())
        {
            if key.is_null(row) {
                return Ok(vec![]);
            }
            let wanted = key.value(row);
            let values = column.values().iter().enumerate();
            return Ok(values.filter(|(i, v)| **v == wanted && column.is_valid(*i)).map(|(i, _)| i).collect());
        }
    }
    let comparators = columns
        .iter()
        .zip(keys)
        .map(|(column, key)| make_comparator(column.as_ref(), key.as_ref(), SortOptions::default()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let rows = columns.first().map_or(0, |c| c.len());
    Ok((0..rows).filter(|&i| comparators.iter().all(|cmp| cmp(i, row).is_eq())).collect())
}

/// Whether equality deletes `eq` are on the primary key (so a key alone tells what they remove).
fn on_key(eq: &EqualityDeletes, key: &KeyColumns) -> bool {
    eq.field_ids == key.field_ids && eq.types == key.types
}

/// Whether an equality delete on the primary key that applies to a data file with sequence `seq`
/// removes the key `key_bytes`.
fn key_deleted(indexes: &[&DeleteIndex], seq: i64, key: &KeyColumns, key_bytes: &[u8]) -> bool {
    indexes.iter().flat_map(|d| d.equality_for(seq)).filter(|eq| on_key(eq, key)).any(|eq| key_in(eq, key_bytes))
}

fn key_in(eq: &EqualityDeletes, key_bytes: &[u8]) -> bool {
    eq.range.as_ref().is_some_and(|range| range.contains(key_bytes)) && eq.keys.contains(key_bytes)
}

/// Whether an equality delete that applies to a data file with sequence `seq` removes `row` (one
/// row of that file, all its columns, with primary key `key_bytes`).
fn equality_deleted(
    indexes: &[&DeleteIndex],
    seq: i64,
    key: &KeyColumns,
    key_bytes: &[u8],
    index: &DataFileIndex,
    row: &RecordBatch,
) -> Result<bool> {
    for deletes in indexes {
        for eq in deletes.equality_for(seq) {
            if eq_deletes(eq, key, key_bytes, index, row)? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

fn eq_deletes(
    eq: &EqualityDeletes,
    key: &KeyColumns,
    key_bytes: &[u8],
    index: &DataFileIndex,
    row: &RecordBatch,
) -> Result<bool> {
    if on_key(eq, key) {
        return Ok(key_in(eq, key_bytes));
    }
    // Deletes on other columns (another writer's): encode this row's values of those columns.
    let columns = index.columns_by_id(&eq.field_ids, &eq.types, row.num_rows(), |c| Some(row.column(c)))?;
    let encoded = eq.converter()?.convert_columns(&columns)?;
    Ok(eq.keys.contains(encoded.row(0).data()))
}

/// A row of a file's batch as a row of `output` (columns matched by field id).
fn project(
    row: &RecordBatch,
    index: &DataFileIndex,
    output: &Schema,
    out_schema: &ArrowSchemaRef,
) -> Result<RecordBatch> {
    let columns = output
        .as_struct()
        .fields()
        .iter()
        .zip(out_schema.fields())
        .map(|(f, a)| match index.column_of(f.id) {
            Some(root) => conform_array(row.column(root), a.data_type()),
            None => crate::format::defaults::missing_column(Some(f), a.data_type(), 1),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(RecordBatch::try_new(out_schema.clone(), columns)?)
}
