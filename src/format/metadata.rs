//! Iceberg table metadata files: creation, naming, durable writes and a cache of parsed files.
//! A metadata.json is immutable once written, so the cache is keyed by its location and is
//! never stale.
//!
//! Writing one is done here rather than by the iceberg crate's `Serialize`: a metadata.json
//! repeats every snapshot the table keeps, and the crate's serializer deep-copies the whole
//! metadata (every snapshot's summary map) before writing it, so a one-row commit's CPU grew with
//! the table's history (after a few hundred commits, most of it). A snapshot never changes once
//! committed: its JSON text is kept (`SnapshotTexts`) and copied into each later file; the rest
//! of the file is serialized from borrowed parts with the crate's own types. The file has the
//! fields of the crate's v2 writer, in its order; a test checks that the crate parses every file
//! back to the metadata it was written from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iceberg::spec::{
    FormatVersion, MetadataLog, PartitionSpec, PartitionStatisticsFile, Schema, SnapshotLog, SnapshotRef,
    SnapshotReference, SnapshotRetention, SortOrder, StatisticsFile, Summary, TableMetadata, TableMetadataBuilder,
    UnboundPartitionSpec, MAIN_BRANCH,
};
use serde::Serialize;
use uuid::Uuid;

/// Table property recording when skade created the table (ms since the epoch, UTC).
pub const CREATED_AT_MS: &str = "skade.created-at-ms";

use super::duckdb_types::{self, DuckdbTypes};
use crate::error::{Error, Result};
use crate::io::write_new;

/// Metadata of a new, empty v2 table partitioned by `spec` and sorted by `sort_order` (both of
/// `schema`'s field ids). `kept` are DuckDB types Iceberg stores as another type, by the field ids
/// of `schema` (kept in a table property by the ids the table's fields get: see `duckdb_types`);
/// `primary_key` the key columns in declared order (a composite key's order is kept in a table
/// property: see `schema::KEY_ORDER_PROPERTY`).
pub fn new_table(
    schema: Schema,
    spec: UnboundPartitionSpec,
    sort_order: SortOrder,
    location: &str,
    table_uuid: Uuid,
    kept: &DuckdbTypes,
    primary_key: &[String],
) -> Result<TableMetadata> {
    new_table_with(schema, spec, sort_order, location, table_uuid, kept, primary_key, HashMap::new(), FormatVersion::V2)
}

/// [`new_table`] with `extra` table properties (another engine's, for a table it creates over
/// the REST protocol; skade's own defaults win over none of them but its creation stamps), in
/// Iceberg format `version` (2, or 3: row lineage).
#[allow(clippy::too_many_arguments)]
pub fn new_table_with(
    schema: Schema,
    spec: UnboundPartitionSpec,
    sort_order: SortOrder,
    location: &str,
    table_uuid: Uuid,
    kept: &DuckdbTypes,
    primary_key: &[String],
    extra: HashMap<String, String>,
    version: FormatVersion,
) -> Result<TableMetadata> {
    let mut properties = HashMap::from([
        ("write.format.default".to_string(), "parquet".to_string()),
        ("write.parquet.compression-codec".to_string(), "snappy".to_string()),
        ("created-by".to_string(), format!("skade {}", env!("CARGO_PKG_VERSION"))),
        (CREATED_AT_MS.to_string(), chrono::Utc::now().timestamp_millis().to_string()),
    ]);
    for (key, value) in extra {
        if key != "created-by" && key != CREATED_AT_MS {
            properties.insert(key, value);
        }
    }
    let build = |properties: HashMap<String, String>| -> Result<TableMetadata> {
        let built = TableMetadataBuilder::new(
            schema.clone(),
            spec.clone(),
            sort_order.clone(),
            location.to_string(),
            version,
            properties,
        )?
        .assign_uuid(table_uuid)
        .build()?;
        Ok(built.metadata)
    };
    if kept.is_empty() && primary_key.len() < 2 {
        return build(properties);
    }
    // the builder assigns the final field ids: learn them, then build with the properties
    let first = build(properties.clone())?;
    let field_id = |name: &str| {
        first
            .current_schema()
            .as_struct()
            .fields()
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.id)
            .ok_or_else(|| Error::internal(format!("column {name} vanished from the new table's schema")))
    };
    if !kept.is_empty() {
        // (the same fields in the same places: matched by place, nested ones too)
        let mut ids = HashMap::new();
        super::field_path::id_map(schema.as_struct().fields(), first.current_schema().as_struct().fields(), &mut ids);
        let mut types = DuckdbTypes::default();
        for (id, ty) in &kept.0 {
            let id = ids.get(id).ok_or_else(|| Error::internal(format!("field {id} vanished from the new table")))?;
            types.0.insert(*id, ty.clone());
        }
        properties.insert(duckdb_types::PROPERTY.to_string(), types.property());
    }
    let key_ids: Vec<i32> = primary_key.iter().map(|k| field_id(k)).collect::<Result<_>>()?;
    if let Some(order) = super::schema::key_order_property(&key_ids) {
        properties.insert(super::schema::KEY_ORDER_PROPERTY.to_string(), order);
    }
    build(properties)
}

/// Whether `a` and `b` differ only by snapshots (appends, deletes, expiry): the same format,
/// columns (every schema, the current one), partition specs, sort orders and properties. A
/// change of columns made on one means the same on the other.
pub fn same_but_snapshots(a: &TableMetadata, b: &TableMetadata) -> bool {
    a.format_version() == b.format_version()
        && a.uuid() == b.uuid()
        && a.location() == b.location()
        && a.last_column_id() == b.last_column_id()
        && a.current_schema_id() == b.current_schema_id()
        && a.schemas_iter().len() == b.schemas_iter().len()
        && a.schemas_iter().all(|s| b.schema_by_id(s.schema_id()) == Some(s))
        && a.default_partition_spec_id() == b.default_partition_spec_id()
        && a.last_partition_id() == b.last_partition_id()
        && a.partition_specs_iter().len() == b.partition_specs_iter().len()
        && a.partition_specs_iter().all(|p| b.partition_spec_by_id(p.spec_id()) == Some(p))
        && a.default_sort_order_id() == b.default_sort_order_id()
        && a.sort_orders_iter().len() == b.sort_orders_iter().len()
        && a.sort_orders_iter().all(|o| b.sort_order_by_id(o.order_id) == Some(o))
        && a.properties() == b.properties()
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

/// The JSON text of `metadata`, as a metadata.json holds it.
pub fn to_json(metadata: &TableMetadata, texts: &SnapshotTexts) -> Result<Vec<u8>> {
    // skade writes v2 tables whose only reference is the main branch at the current snapshot
    // (the crate keeps `refs` private, so they are written from that rule); anything else goes
    // through the crate.
    let main = metadata.snapshot_for_ref(MAIN_BRANCH).map(|s| s.snapshot_id());
    if metadata.format_version() != FormatVersion::V2 || main != metadata.current_snapshot_id() {
        return Ok(serde_json::to_vec(metadata)?);
    }
    let head = HeadV2 {
        format_version: 2,
        table_uuid: metadata.uuid(),
        location: metadata.location(),
        last_sequence_number: metadata.last_sequence_number(),
        last_updated_ms: metadata.last_updated_ms(),
        last_column_id: metadata.last_column_id(),
        schemas: metadata.schemas_iter().map(|s| &**s).collect(),
        current_schema_id: metadata.current_schema_id(),
        partition_specs: metadata.partition_specs_iter().map(|s| &**s).collect(),
        default_spec_id: metadata.default_partition_spec_id(),
        last_partition_id: metadata.last_partition_id(),
        properties: Some(metadata.properties()).filter(|p| !p.is_empty()),
        current_snapshot_id: metadata.current_snapshot_id(),
        snapshot_log: metadata.history(),
        metadata_log: metadata.metadata_log(),
        sort_orders: metadata.sort_orders_iter().map(|s| &**s).collect(),
        default_sort_order_id: metadata.default_sort_order_id(),
        refs: main
            .map(|id| (MAIN_BRANCH, SnapshotReference::new(id, SnapshotRetention::branch(None, None, None))))
            .into_iter()
            .collect(),
        statistics: metadata.statistics_iter().collect(),
        partition_statistics: metadata.partition_statistics_iter().collect(),
    };
    let mut out = serde_json::to_vec(&head)?;
    if metadata.snapshots().len() > 0 {
        out.pop(); // the head object's closing brace: the snapshots are its last member
        out.extend_from_slice(br#","snapshots":["#);
        texts.append(metadata.snapshots(), &mut out)?;
        out.extend_from_slice(b"]}");
    }
    Ok(out)
}

/// The members of a v2 metadata.json but its snapshots, borrowed from the metadata.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct HeadV2<'a> {
    format_version: u8,
    table_uuid: Uuid,
    location: &'a str,
    last_sequence_number: i64,
    last_updated_ms: i64,
    last_column_id: i32,
    schemas: Vec<&'a Schema>,
    current_schema_id: i32,
    partition_specs: Vec<&'a PartitionSpec>,
    default_spec_id: i32,
    last_partition_id: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    properties: Option<&'a HashMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    current_snapshot_id: Option<i64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    snapshot_log: &'a [SnapshotLog],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    metadata_log: &'a [MetadataLog],
    sort_orders: Vec<&'a SortOrder>,
    default_sort_order_id: i64,
    refs: HashMap<&'a str, SnapshotReference>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    statistics: Vec<&'a StatisticsFile>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    partition_statistics: Vec<&'a PartitionStatisticsFile>,
}

/// A v2 snapshot's members, borrowed.
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct SnapshotV2<'a> {
    snapshot_id: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent_snapshot_id: Option<i64>,
    sequence_number: i64,
    timestamp_ms: i64,
    manifest_list: &'a str,
    summary: &'a Summary,
    #[serde(skip_serializing_if = "Option::is_none")]
    schema_id: Option<i32>,
}

/// The JSON text of committed snapshots, by snapshot id. An entry holds the snapshot it was made
/// from and serves only that snapshot (the same `Arc`, or an equal one): a snapshot id reused by
/// another table or by a rebased commit is serialized again, never served stale text.
#[derive(Default)]
pub struct SnapshotTexts {
    entries: Mutex<HashMap<i64, (SnapshotRef, Box<str>)>>,
}

/// About 1 KB per entry (the text, and the snapshot it keeps alive).
const MAX_SNAPSHOT_TEXTS: usize = 32_768;

impl SnapshotTexts {
    /// Appends the texts of `snapshots`, comma-separated.
    fn append<'a>(&self, snapshots: impl Iterator<Item = &'a SnapshotRef>, out: &mut Vec<u8>) -> Result<()> {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        for (i, snapshot) in snapshots.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            let id = snapshot.snapshot_id();
            match entries.get(&id) {
                Some((s, text)) if Arc::ptr_eq(s, snapshot) || s == snapshot => out.extend_from_slice(text.as_bytes()),
                _ => {
                    let text = serde_json::to_string(&SnapshotV2 {
                        snapshot_id: id,
                        parent_snapshot_id: snapshot.parent_snapshot_id(),
                        sequence_number: snapshot.sequence_number(),
                        timestamp_ms: snapshot.timestamp_ms(),
                        manifest_list: snapshot.manifest_list(),
                        summary: snapshot.summary(),
                        schema_id: snapshot.schema_id(),
                    })?;
                    out.extend_from_slice(text.as_bytes());
                    if entries.len() >= MAX_SNAPSHOT_TEXTS {
                        entries.clear();
                    }
                    entries.insert(id, (snapshot.clone(), text.into_boxed_str()));
                }
            }
        }
        Ok(())
    }
}

pub fn read(location: &str) -> Result<TableMetadata> {
    let bytes = crate::io::input::read_whole(location, "table metadata file")?;
    serde_json::from_slice(&bytes)
        .map_err(|e| Error::corrupt(format!("table metadata file {location} is not valid Iceberg metadata: {e}")))
}

/// Parsed metadata files by location, and the snapshot texts their writes reuse.
#[derive(Default)]
pub struct MetadataCache {
    entries: Mutex<HashMap<String, Arc<TableMetadata>>>,
    /// Metadata produced and not written yet (see `snapshot::Unwritten`): a commit building on
    /// one in flight finds it here, never evicted, as its file does not exist yet.
    pinned: Mutex<HashMap<String, Arc<TableMetadata>>>,
    texts: SnapshotTexts,
}

const CACHE_CAPACITY: usize = 4096;

impl MetadataCache {
    /// Writes `metadata` to a new file at `location`, never replacing one. The commit that points
    /// at it makes it durable.
    pub fn write(&self, location: &str, metadata: &TableMetadata) -> Result<()> {
        write_new(location, &to_json(metadata, &self.texts)?)
    }

    pub fn get(&self, location: &str) -> Result<Arc<TableMetadata>> {
        if let Some(m) = self.pinned.lock().unwrap().get(location) {
            return Ok(m.clone());
        }
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

    /// Keeps `metadata` for `location` until [`Self::unpin`], whatever is evicted meanwhile.
    pub fn pin(&self, location: &str, metadata: Arc<TableMetadata>) {
        self.pinned.lock().unwrap().insert(location.to_string(), metadata);
    }

    /// Ends a pin: cached as any other once `written`, forgotten otherwise.
    pub fn unpin(&self, location: &str, written: bool) {
        let metadata = self.pinned.lock().unwrap().remove(location);
        if let (Some(metadata), true) = (metadata, written) {
            self.insert(location, metadata);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn schema() -> Schema {
        use iceberg::spec::{NestedField, PrimitiveType, Type};
        let id = NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long));
        Schema::builder().with_fields(vec![id.into()]).build().unwrap()
    }

    /// A new unpartitioned table of one column at `location`.
    pub(crate) fn created(location: &str) -> TableMetadata {
        let spec = UnboundPartitionSpec::builder().build();
        new_table(schema(), spec, SortOrder::unsorted_order(), location, Uuid::new_v4(), &Default::default(), &[])
            .unwrap()
    }

    pub(crate) fn with_snapshot(base: &TableMetadata, id: i64, records: &str) -> TableMetadata {
        use iceberg::spec::{Operation, Snapshot};
        let summary = Summary {
            operation: Operation::Append,
            additional_properties: HashMap::from([("added-records".to_string(), records.to_string())]),
        };
        let snapshot = Snapshot::builder()
            .with_snapshot_id(id)
            .with_parent_snapshot_id(base.current_snapshot_id())
            .with_sequence_number(base.next_sequence_number())
            .with_timestamp_ms(base.last_updated_ms() + 1)
            .with_manifest_list(format!("/t/metadata/snap-{id}.avro"))
            .with_summary(summary)
            .with_schema_id(0)
            .build();
        TableMetadataBuilder::new_from_metadata(base.clone(), Some("/t/metadata/00000-x.metadata.json".into()))
            .add_snapshot(snapshot)
            .unwrap()
            .set_ref(MAIN_BRANCH, SnapshotReference::new(id, SnapshotRetention::branch(None, None, None)))
            .unwrap()
            .build()
            .unwrap()
            .metadata
    }

    #[test]
    fn pinned_metadata_is_served_without_its_file_until_unpinned() {
        let cache = MetadataCache::default();
        let md = Arc::new(created("/t"));
        // (a file that does not exist: what a chained commit's successor names before it is written)
        let location = std::env::temp_dir().join(format!("skade-pin-{}.metadata.json", Uuid::new_v4()));
        let location = location.to_string_lossy().to_string();
        cache.pin(&location, md.clone());
        for i in 0..=CACHE_CAPACITY {
            cache.insert(&format!("/elsewhere/{i}"), md.clone()); // (the cache is cleared on the way)
        }
        assert!(Arc::ptr_eq(&cache.get(&location).unwrap(), &md), "a pin outlives eviction");
        cache.unpin(&location, false);
        assert!(cache.get(&location).is_err(), "unwritten and unpinned: the file is read, and missing");
        cache.pin(&location, md.clone());
        cache.unpin(&location, true);
        assert!(Arc::ptr_eq(&cache.get(&location).unwrap(), &md), "written: cached as any other");
    }

    #[test]
    fn files_are_the_crates_json_and_texts_follow_their_snapshot() {
        let texts = SnapshotTexts::default();
        let created = created("/t");
        let one = with_snapshot(&created, 7, "1");
        let two = with_snapshot(&one, 8, "2");
        for md in [&created, &one, &two] {
            let ours: serde_json::Value = serde_json::from_slice(&to_json(md, &texts).unwrap()).unwrap();
            let crates: serde_json::Value = serde_json::to_value(md).unwrap();
            // the crate lists snapshots in hash order
            let sorted = |mut v: serde_json::Value| {
                if let Some(s) = v.get_mut("snapshots").and_then(|s| s.as_array_mut()) {
                    s.sort_by_key(|s| s["snapshot-id"].as_i64());
                }
                v
            };
            assert_eq!(sorted(ours), sorted(crates));
        }
        // Snapshot 8 again, with other contents (a rebased commit): not the text of the first.
        let other = with_snapshot(&one, 8, "3");
        let text = String::from_utf8(to_json(&other, &texts).unwrap()).unwrap();
        assert!(text.contains(r#""added-records":"3""#), "{text}");
        let parsed: TableMetadata = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed, other);
    }

    /// A table with columns a, b, c (ids 1, 2, 3) and key `key` (names in declared order).
    pub(crate) fn keyed_table(key: &[&str]) -> TableMetadata {
        use arrow::datatypes::{DataType, Field, Schema as ArrowSchema};
        let arrow = ArrowSchema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Int32, true),
        ]);
        let types = ["INTEGER".to_string(), "VARCHAR".into(), "INTEGER".into()];
        let key: Vec<String> = key.iter().map(|k| k.to_string()).collect();
        let nanoseconds = super::super::duckdb_types::Nanoseconds::Refuse;
        let (schema, kept) = super::super::schema::iceberg_schema(&arrow, &types, &[], &key, nanoseconds).unwrap();
        let unsorted = SortOrder::unsorted_order();
        new_table(schema, UnboundPartitionSpec::builder().build(), unsorted, "/t", Uuid::new_v4(), &kept, &key).unwrap()
    }

    #[test]
    fn a_composite_key_keeps_its_declared_order() {
        use super::super::schema::{declared_key_ids, KEY_ORDER_PROPERTY};
        let key_of = |md: &TableMetadata| declared_key_ids(md.current_schema(), md.properties());
        let md = keyed_table(&["B", "a"]);
        assert_eq!(key_of(&md), vec![2, 1]);
        // (through the metadata.json too)
        let parsed: TableMetadata = serde_json::from_slice(&to_json(&md, &SnapshotTexts::default()).unwrap()).unwrap();
        assert_eq!(key_of(&parsed), vec![2, 1]);
        assert_eq!(key_of(&keyed_table(&["a", "c"])), vec![1, 3]);
        // one key column: no order to keep, no property
        let single = keyed_table(&["c"]);
        assert_eq!(key_of(&single), vec![3]);
        assert!(!single.properties().contains_key(KEY_ORDER_PROPERTY));
        // a property that does not name the key's fields (another writer changed the key): field-id order
        let stale = HashMap::from([(KEY_ORDER_PROPERTY.to_string(), "3,1".to_string())]);
        assert_eq!(declared_key_ids(md.current_schema(), &stale), vec![1, 2]);
        let garbled = HashMap::from([(KEY_ORDER_PROPERTY.to_string(), "2,x".to_string())]);
        assert_eq!(declared_key_ids(md.current_schema(), &garbled), vec![1, 2]);
    }

    #[test]
    fn versions_follow_the_file_name() {
        assert_eq!(next_version("/t/metadata/00000-abc.metadata.json"), 1);
        assert_eq!(next_version("/t/metadata/00041-abc.metadata.json"), 42);
        assert_eq!(next_version("/t/metadata/v3.metadata.json"), 0);
    }
}
