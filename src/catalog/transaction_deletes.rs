//! Deletes on Iceberg v3 tables (issue 46): deletion vectors instead of position delete files.
//! A data file has at most one live deletion vector: a DELETE merges the positions it deletes
//! with the file's committed ones (its deletion vector, or the v2 position delete files written
//! before an upgrade) and with this transaction's earlier ones, writes the union as one new
//! deletion vector, and the commit removes the one it replaces (docs/design/iceberg-v3.md).

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{DataContentType, DataFile, DataFileFormat, Struct};

use super::transaction::{TableInfo, Transaction, TxnState};
use crate::error::Result;
use crate::runtime::block_on;
use crate::write::delete_writer;

/// The committed deletes of some data files: their deleted positions, and the deletion vector
/// holding them if one does (Puffin file, data file).
#[derive(Default)]
struct Committed {
    positions: Vec<u64>,
    deletion_vector: Option<(String, String)>,
}

impl Transaction {
    /// Stages one deletion vector for each data file of `by_path` (data file -> positions it
    /// deletes, ascending) of v3 table `table`.
    pub(super) fn stage_deletion_vectors(
        &self,
        table: &TableInfo,
        st: &mut TxnState,
        by_path: BTreeMap<String, Vec<u64>>,
    ) -> Result<()> {
        let inner = &self.catalog().inner;
        let uuid = table.record.uuid.as_str();
        let partitions = self.partitions_of(table, st, by_path.keys())?;
        let mut committed = self.committed_deletes(table, by_path.keys().map(String::as_str).collect())?;
        let default_spec = table.metadata.default_partition_spec_id();
        // This transaction's earlier deletion vectors of the files, by data file: merged, and
        // replaced once every new one is written (one pass: a transaction may delete from
        // thousands of files, many times).
        let earlier: HashMap<String, DataFile> = st
            .changes
            .get(uuid)
            .into_iter()
            .flat_map(|c| &c.deletes)
            .filter_map(|f| Some((f.referenced_data_file().filter(|p| by_path.contains_key(p))?, f.clone())))
            .collect();
        let mut made = vec![];
        let mut carried = vec![];
        for (path, mut positions) in by_path {
            if let Some(earlier) = earlier.get(&path) {
                let held = inner.read_caches.deletes.positions(earlier)?;
                positions.extend(held.by_path.get(&path).into_iter().flatten());
            }
            if let Some(mut c) = committed.remove(&path) {
                c.positions.sort_unstable();
                c.positions.dedup();
                carried.push((path.clone(), c.positions.len() as u64, c.deletion_vector));
                positions.extend(c.positions);
            }
            positions.sort_unstable();
            positions.dedup();
            let (spec_id, partition) = partitions.get(&path).cloned().unwrap_or((default_spec, Struct::empty()));
            let mut written = vec![];
            let result = block_on(delete_writer::deletion_vector(
                &inner.file_io,
                &table.metadata,
                &path,
                &positions,
                (spec_id, partition),
                &mut written,
            ));
            st.written.extend(written); // (removed by a rollback if the statement fails)
            made.push((result?, spec_id));
        }
        let superseded: HashSet<String> = earlier.values().map(|f| f.file_path().to_string()).collect();
        let changes = st.changes.entry(uuid.to_string()).or_default();
        changes.deletes.retain(|f| !superseded.contains(f.file_path()));
        let mut replaced: HashSet<(String, String)> = changes.replaced_dvs.iter().cloned().collect();
        for (path, count, deletion_vector) in carried {
            changes.carried_deletes.insert(path, count);
            if let Some(dv) = deletion_vector.filter(|dv| replaced.insert(dv.clone())) {
                changes.replaced_dvs.push(dv);
            }
        }
        for (file, spec_id) in made {
            if spec_id != default_spec {
                changes.spec_ids.insert(file.file_path().to_string(), spec_id);
            }
            changes.deletes.push(file);
        }
        changes.delete_base.get_or_insert_with(|| table.record.metadata_location.clone());
        st.written.retain(|p| !superseded.contains(p));
        self.discard(&superseded.into_iter().collect::<Vec<_>>());
        Ok(())
    }

    /// The committed deletes (as this transaction reads the table) of the data files `paths`.
    fn committed_deletes(&self, table: &TableInfo, paths: HashSet<&str>) -> Result<HashMap<String, Committed>> {
        let mut out: HashMap<String, Committed> = HashMap::new();
        let md = &table.metadata;
        let Some(snapshot) = md.current_snapshot() else { return Ok(out) };
        let caches = &self.catalog().inner.read_caches;
        let files = caches.manifests.snapshot_files(md, snapshot)?;
        for entry in files.deletes.iter().filter(|e| e.file().content_type() == DataContentType::PositionDeletes) {
            let file = entry.file();
            if file.file_format() == DataFileFormat::Puffin {
                let Some(data_file) = file.referenced_data_file().filter(|p| paths.contains(p.as_str())) else {
                    continue;
                };
                let held = caches.deletes.positions(file)?;
                let c = out.entry(data_file.clone()).or_default();
                c.positions.extend(held.by_path.get(&data_file).into_iter().flatten());
                c.deletion_vector = Some((file.file_path().to_string(), data_file));
            } else {
                // (position delete files from before an upgrade to v3: a deletion vector takes
                // them over, as readers may then ignore them)
                let held = caches.deletes.positions(file)?;
                for path in &paths {
                    if let Some(ps) = held.by_path.get(*path) {
                        out.entry(path.to_string()).or_default().positions.extend(ps);
                    }
                }
            }
        }
        Ok(out)
    }
}
