//! `skade_add_files` within a transaction: Parquet files a user already has become data files of
//! a table where they lie (`write::adopt`), as one statement of the transaction. At commit they
//! are one `append` snapshot like an INSERT's (the changelog shows their rows as INSERTs), whose
//! metadata also maps the files' column names to field ids. Nothing is staged unless every file
//! fits; the files are never moved, copied or removed (see `format::expire::owns_file`).

use std::collections::{BTreeMap, HashSet};

use rayon::prelude::*;

use super::transaction::Transaction;
use crate::error::{Error, Result};
use crate::format::name_mapping;
use crate::io::{canonical, local_path, sync_files};
use crate::write::adopt::{adopt, Adopted};

/// What an adoption staged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddedFiles {
    pub files: u64,
    pub rows: u64,
}

impl Transaction {
    /// Adopts the Parquet files at `paths` (globs already expanded) into table `uuid`, or refuses
    /// them all, naming the file that does not fit and why. Returns the real paths adopted (how
    /// the table names them) and what was staged.
    pub fn add_files(&self, uuid: &str, paths: &[String]) -> Result<(Vec<String>, AddedFiles)> {
        self.check_writable()?;
        let table = self.table_by_uuid(uuid)?;
        self.check_table_writable(&table)?;
        let shown = table.shown_name();
        let refused = |path: &str, why: &str| Error::invalid(format!("cannot add {path} to table {shown}: {why}"));
        if paths.is_empty() {
            return Err(Error::invalid(format!("skade_add_files: no file to add to table {shown}")));
        }
        // Real paths (`..` and links resolved): no spelling of a path can place a file inside a
        // table's folder, where maintenance removes what no snapshot uses.
        let real: Vec<String> =
            paths.iter().map(|p| canonical(p).map_err(|e| refused(p, &e.message))).collect::<Result<_>>()?;
        let folders = self.table_folders()?;
        let live = self.live_paths(&table)?;
        let mut seen = HashSet::new();
        for (path, real) in paths.iter().zip(&real) {
            if !seen.insert(real.as_str()) {
                return Err(refused(path, "it is named twice"));
            }
            if let Some((_, owner)) = folders.iter().find(|(folder, _)| real.starts_with(folder.as_str())) {
                return Err(refused(
                    path,
                    &format!(
                        "it lies in the folder of table {owner}, whose files skade manages; add files from \
                         outside the catalog's tables"
                    ),
                ));
            }
            if live.contains(real.as_str()) {
                return Err(refused(path, "it is already a data file of the table"));
            }
        }
        // Footers are read in parallel; the first file (in the order given) that does not fit is
        // the one named.
        let adopted: Vec<Result<Adopted>> = real.par_iter().map(|p| adopt(p, &table.metadata, &shown)).collect();
        let adopted = adopted.into_iter().collect::<Result<Vec<_>>>()?;
        let mut names = BTreeMap::new();
        for a in &adopted {
            names.extend(a.names.iter().map(|(n, id)| (n.clone(), *id)));
        }
        // (checked again at commit against the head's mapping: a concurrent adoption's names)
        let existing = table.metadata.properties().get(name_mapping::PROPERTY).map(String::as_str);
        name_mapping::merged(existing, table.metadata.current_schema(), &names)
            .map_err(|e| Error::invalid(format!("cannot add these files to table {shown}: {}", e.message)))?;
        // Best effort: a file another process just wrote is made durable before the commit names
        // it; one on a read-only file system cannot be synced, and needs not be.
        let _ = sync_files(real.iter().map(String::as_str));
        let added =
            AddedFiles { files: adopted.len() as u64, rows: adopted.iter().map(|a| a.file.record_count()).sum() };
        self.stage_adopted(uuid, adopted.into_iter().map(|a| a.file).collect(), names)?;
        Ok((real, added))
    }

    /// The folder of each table of this transaction's view (`<folder>/`, as a local path) and the
    /// table's name: files there are the tables' own.
    fn table_folders(&self) -> Result<Vec<(String, String)>> {
        let st = self.lock()?;
        Ok(st
            .view
            .tables
            .values()
            .filter_map(|t| {
                let (folder, _) = local_path(&t.metadata_location).rsplit_once("/metadata/")?;
                Some((format!("{folder}/"), self.shown_name(t)))
            })
            .collect())
    }

    /// The data files of the table's current snapshot (a file added twice would hold its rows
    /// twice).
    fn live_paths(&self, table: &super::transaction::TableInfo) -> Result<HashSet<String>> {
        let Some(snapshot) = table.metadata.current_snapshot() else {
            return Ok(HashSet::new());
        };
        let files = self.catalog().inner.read_caches.manifests.snapshot_files(&table.metadata, snapshot)?;
        Ok(files.data.iter().map(|e| local_path(e.file().file_path()).to_string()).collect())
    }
}
