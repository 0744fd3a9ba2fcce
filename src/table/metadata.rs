//! Iceberg table metadata files: creation, naming, durable writes and a cache of parsed files.
//! A metadata.json is immutable once written, so the cache is keyed by its location and is
//! never stale.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use iceberg::spec::{FormatVersion, Schema, SortOrder, TableMetadata, TableMetadataBuilder, UnboundPartitionSpec};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::io::{local_path, write_new};

/// Metadata of a new, empty, unpartitioned v2 table.
pub fn new_table(schema: Schema, location: &str, table_uuid: Uuid) -> Result<TableMetadata> {
    let properties = HashMap::from([
        ("write.format.default".to_string(), "parquet".to_string()),
        ("write.parquet.compression-codec".to_string(), "snappy".to_string()),
        ("created-by".to_string(), format!("skade {}", env!("CARGO_PKG_VERSION"))),
        (super::time_travel::CREATED_AT_MS.to_string(), chrono::Utc::now().timestamp_millis().to_string()),
    ]);
    let built = TableMetadataBuilder::new(
        schema,
        UnboundPartitionSpec::builder().build(),
        SortOrder::unsorted_order(),
        location.to_string(),
        FormatVersion::V2,
        properties,
    )?
    .assign_uuid(table_uuid)
    .build()?;
    Ok(built.metadata)
}

/// `<table>/metadata/<version>-<uuid>.metadata.json`, Iceberg's conventional name.
pub fn metadata_location(table_location: &str, version: u64) -> String {
    format!("{table_location}/metadata/{version:05}-{}.metadata.json", Uuid::new_v4())
}

/// The version after the one `location` holds (0 when its name carries no version).
pub fn next_version(location: &str) -> u64 {
    let file = location.rsplit('/').next().unwrap_or("");
    let digits: String = file.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<u64>().map(|v| v + 1).unwrap_or(0)
}

/// Writes `metadata` to a new file at `location`, never replacing one. The commit that points at
/// it makes it durable.
pub fn write(location: &str, metadata: &TableMetadata) -> Result<()> {
    let bytes = serde_json::to_vec(metadata)?;
    write_new(Path::new(local_path(location)), &bytes)
}

pub fn read(location: &str) -> Result<TableMetadata> {
    let bytes = std::fs::read(local_path(location))
        .map_err(|e| Error::io(format!("cannot read table metadata file {location}: {e}")))?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::corrupt(format!("table metadata file {location} is not valid Iceberg metadata: {e}")))
}

/// Parsed metadata files by location.
#[derive(Default)]
pub struct MetadataCache {
    entries: Mutex<HashMap<String, Arc<TableMetadata>>>,
}

const CACHE_CAPACITY: usize = 4096;

impl MetadataCache {
    pub fn get(&self, location: &str) -> Result<Arc<TableMetadata>> {
        if let Some(m) = self.entries.lock().unwrap().get(location) {
            return Ok(m.clone());
        }
        let m = Arc::new(read(location)?);
        self.insert(location, m.clone());
        Ok(m)
    }

    pub fn insert(&self, location: &str, metadata: Arc<TableMetadata>) {
        let mut entries = self.entries.lock().unwrap();
        if entries.len() >= CACHE_CAPACITY {
            entries.clear();
        }
        entries.insert(location.to_string(), metadata);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_follow_the_file_name() {
        assert_eq!(next_version("/t/metadata/00000-abc.metadata.json"), 1);
        assert_eq!(next_version("/t/metadata/00041-abc.metadata.json"), 42);
        assert_eq!(next_version("/t/metadata/v3.metadata.json"), 0);
    }
}
