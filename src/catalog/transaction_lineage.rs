//! Row lineage of an UPDATE (Iceberg v3, issue 46): the `_row_id` of each row an UPDATE (or a
//! MERGE's, an upsert's) replaces, found from the transaction's row ids (a data file and a
//! position), so the new row is written with it and keeps it (docs/design/iceberg-v3.md).

use std::collections::{BTreeMap, HashMap, HashSet};

use arrow::array::Int64Array;

use super::transaction::Transaction;
use crate::error::{Error, Result};
use crate::format::name_mapping::FileNames;
use crate::read::scan::{split_row_id, FileLineage, ScanPlan};

impl Transaction {
    /// The `_row_id` of the rows `row_ids` (from this transaction's scans of table `uuid`), in
    /// that order; null for rows that have none (written by this transaction and not carried
    /// over, or before the table became v3). Empty on a v2 table, whose rows have no ids.
    pub fn carried_row_ids(&self, uuid: &str, row_ids: &[i64]) -> Result<Int64Array> {
        let table = self.table_by_uuid(uuid)?;
        if table.metadata.format_version() < iceberg::spec::FormatVersion::V3 {
            return Ok(Int64Array::new_null(row_ids.len()));
        }
        // The files the rows are in (committed ones with their lineage, the transaction's own
        // with none yet), and the positions wanted of each.
        let (wanted, staged): (BTreeMap<String, Vec<u64>>, HashSet<String>) = {
            let st = self.lock()?;
            let wanted = st.file_ids.positions(row_ids)?;
            let changes = st.staged(uuid);
            let files = changes.into_iter().flat_map(|c| c.appends.iter().chain(&c.pending));
            let staged: HashSet<String> =
                files.filter(|f| wanted.contains_key(f.file_path())).map(|f| f.file_path().to_string()).collect();
            (wanted, staged)
        };
        let caches = self.catalog().inner.read_caches.clone();
        let mut committed: HashMap<&str, FileLineage> = HashMap::new();
        let files = match table.metadata.current_snapshot() {
            Some(snapshot) => caches.manifests.snapshot_files(&table.metadata, snapshot)?,
            None => Default::default(),
        };
        for e in files.data.iter().filter(|e| wanted.contains_key(e.file().file_path())) {
            let lineage = FileLineage { first_row_id: e.first_row_id, sequence_number: Some(e.sequence_number) };
            committed.insert(e.file().file_path(), lineage);
        }
        let names = FileNames::of(&table.metadata)?;
        let mut found: HashMap<(&str, u64), Option<i64>> = HashMap::new();
        for (path, positions) in &wanted {
            let lineage = match committed.get(path.as_str()) {
                Some(l) => *l,
                None if staged.contains(path) => FileLineage::default(),
                None => return Err(Error::internal(format!("{path} is no data file of the table"))),
            };
            let ids = ScanPlan::row_ids_of(&caches, path, positions, lineage, names.as_deref())?;
            found.extend(positions.iter().zip(ids).map(|(p, id)| ((path.as_str(), *p), id)));
        }
        let st = self.lock()?;
        Ok(row_ids
            .iter()
            .map(|&id| {
                let (file, pos) = split_row_id(id);
                st.file_ids
                    .paths
                    .get(file as usize)
                    .and_then(|path| found.get(&(path.as_str(), pos)).copied().flatten())
            })
            .collect())
    }
}
