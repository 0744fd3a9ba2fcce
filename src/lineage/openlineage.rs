//! A lineage event as an OpenLineage 2-0-2 RunEvent: one COMPLETE run per committed transaction,
//! its datasets named as Spark's Iceberg integration names tables (namespace `file`, the table's
//! location), so skade's runs join the same graph as Spark and Airflow runs.

use chrono::{DateTime, SecondsFormat};
use iceberg::spec::{NestedFieldRef, TableMetadata, Type};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::events::{DatasetRef, Lifecycle, LineageEvent};
use crate::catalog::Catalog;

pub const SCHEMA_URL: &str = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent";
/// skade as the producer of events and facets (a URI, as OpenLineage asks).
pub const PRODUCER: &str = concat!("urn:skade:", env!("CARGO_PKG_VERSION"));
/// The schema of skade's own run facet (`skade_commit`), shipped in docs/design/lineage.md.
const COMMIT_FACET_SCHEMA: &str = "urn:skade:facets:SkadeCommitRunFacet:1-0-0";

fn facet_url(name: &str, version: &str) -> String {
    format!("https://openlineage.io/spec/facets/{version}/{name}.json")
}

/// A facet: its fields with the producer and the schema OpenLineage asks every facet to carry.
fn facet(schema_url: String, fields: Value) -> Value {
    let mut out = Map::new();
    out.insert("_producer".into(), PRODUCER.into());
    out.insert("_schemaURL".into(), schema_url.into());
    if let Value::Object(fields) = fields {
        out.extend(fields);
    }
    Value::Object(out)
}

/// What an event needs from its ATTACH beyond the event itself.
pub struct Naming<'a> {
    pub catalog: &'a Catalog,
    /// The jobs' namespace (OPENLINEAGE_NAMESPACE).
    pub namespace: &'a str,
}

impl Naming<'_> {
    /// The catalog's short name: its file's name without the extension.
    fn catalog_name(&self) -> String {
        let identity = self.catalog.identity();
        if crate::io::object::is_object(&identity) {
            // (a lake in a bucket is named by its prefix's last part, as a file by its stem)
            return identity.rsplit('/').next().unwrap_or(&identity).to_string();
        }
        let path = self.catalog.path();
        path.file_stem().unwrap_or(path.as_os_str()).to_string_lossy().into_owned()
    }
}

/// The run id: the same for the same event every time it is made (a redelivery is recognizably
/// the same run), a UUIDv7 as OpenLineage recommends: its time is the commit's, its random bits
/// a hash of the catalog and the event's commit range.
pub fn run_id(catalog: &Catalog, event: &LineageEvent) -> Uuid {
    let mut input = catalog.identity().into_bytes();
    input.extend_from_slice(&event.first_seq.to_le_bytes());
    input.extend_from_slice(&event.last_seq.to_le_bytes());
    let hash = twox_hash::XxHash3_128::oneshot(&input).to_le_bytes();
    let mut random = [0u8; 10];
    random.copy_from_slice(&hash[..10]);
    let millis = (event.committed_at_us.max(0) / 1000) as u64;
    uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid()
}

/// RFC 3339 in UTC, microseconds kept.
pub fn event_time(us: i64) -> String {
    DateTime::from_timestamp_micros(us).unwrap_or_default().to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The job: one per catalog, operation and output, so the runs of a recurring load group.
fn job_name(naming: &Naming, event: &LineageEvent) -> String {
    let outputs: Vec<&str> = event.outputs.iter().map(|o| o.table.as_deref().unwrap_or(o.name.as_str())).collect();
    let mut name =
        format!("{}.{}.{}", naming.catalog_name(), event.operation.as_str().to_lowercase(), outputs.join(","));
    if name.len() > 255 {
        let mut cut = 252;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
        name.push_str("...");
    }
    name
}

/// The RunEvent of `event`.
pub fn run_event(naming: &Naming, event: &LineageEvent) -> Value {
    let run_facets = json!({
        "processing_engine": facet(
            facet_url("ProcessingEngineRunFacet", "1-1-1"),
            json!({"name": "skade", "version": env!("CARGO_PKG_VERSION"),
                   "openlineageAdapterVersion": env!("CARGO_PKG_VERSION")}),
        ),
        "skade_commit": facet(
            COMMIT_FACET_SCHEMA.into(),
            json!({"commitSeq": event.last_seq, "firstCommitSeq": event.first_seq,
                   "operation": event.operation.as_str(), "actor": event.actor,
                   "catalog": naming.catalog.identity()}),
        ),
    });
    let job_facets = json!({
        "jobType": facet(
            facet_url("JobTypeJobFacet", "2-0-4"),
            json!({"processingType": "BATCH", "integration": "SKADE", "jobType": "COMMIT"}),
        ),
    });
    json!({
        "eventType": "COMPLETE",
        "eventTime": event_time(event.committed_at_us),
        "producer": PRODUCER,
        "schemaURL": SCHEMA_URL,
        "run": {"runId": run_id(naming.catalog, event).to_string(), "facets": run_facets},
        "job": {"namespace": naming.namespace, "name": job_name(naming, event), "facets": job_facets},
        "inputs": event.inputs.iter().map(|d| input(naming, d)).collect::<Vec<_>>(),
        "outputs": event.outputs.iter().map(|d| output(naming, d)).collect::<Vec<_>>(),
    })
}

/// The metadata of a skade table (None: not one, or gone).
fn metadata_of(naming: &Naming, d: &DatasetRef) -> Option<std::sync::Arc<TableMetadata>> {
    naming.catalog.metadata_at(d.metadata_location.as_deref()?).ok()
}

/// The facets every dataset carries; a table has its schema (a skade table's at the snapshot, from
/// its metadata; another DuckDB database's as it was read), a table of this catalog its catalog
/// and symlink (`schema.table` in the catalog).
fn dataset_facets(naming: &Naming, d: &DatasetRef) -> Map<String, Value> {
    let mut facets = Map::new();
    facets.insert(
        "dataSource".into(),
        facet(facet_url("DatasourceDatasetFacet", "1-0-1"), json!({"name": d.namespace, "uri": d.namespace})),
    );
    if let Some(id) = d.snapshot_id {
        facets.insert(
            "version".into(),
            facet(facet_url("DatasetVersionDatasetFacet", "1-0-1"), json!({"datasetVersion": id.to_string()})),
        );
    }
    if let Some(l) = d.lifecycle {
        facets.insert(
            "lifecycleStateChange".into(),
            facet(facet_url("LifecycleStateChangeDatasetFacet", "1-0-1"), json!({"lifecycleStateChange": l.as_str()})),
        );
    }
    let fields: Option<Vec<Value>> = match metadata_of(naming, d) {
        _ if d.lifecycle == Some(Lifecycle::Drop) => None,
        Some(md) => {
            let schema = match d.snapshot_id.and_then(|id| md.snapshot_by_id(id)).and_then(|s| s.schema_id()) {
                Some(id) => md.schema_by_id(id).cloned().unwrap_or_else(|| md.current_schema().clone()),
                None => md.current_schema().clone(),
            };
            Some(schema.as_struct().fields().iter().map(schema_field).collect())
        }
        None if !d.columns.is_empty() => {
            Some(d.columns.iter().map(|c| json!({"name": c.name, "type": c.data_type})).collect())
        }
        None => None,
    };
    if let Some(fields) = fields {
        facets.insert("schema".into(), facet(facet_url("SchemaDatasetFacet", "1-2-0"), json!({"fields": fields})));
    }
    if !d.this_catalog {
        return facets;
    }
    let data_path = naming.catalog.data_path().to_string();
    let mut catalog = json!({"framework": "iceberg", "type": "skade", "name": naming.catalog_name(),
                             "warehouseUri": file_uri(&data_path), "source": "skade"});
    if let Some(location) = &d.metadata_location {
        catalog["metadataUri"] = file_uri(location).into();
    }
    facets.insert("catalog".into(), facet(facet_url("CatalogDatasetFacet", "1-1-0"), catalog));
    if let Some(table) = &d.table {
        facets.insert(
            "symlinks".into(),
            facet(
                facet_url("SymlinksDatasetFacet", "1-0-1"),
                json!({"identifiers": [{"namespace": file_uri(&data_path), "name": table, "type": "TABLE"}]}),
            ),
        );
    }
    facets
}

/// A local path as a `file://` URI, percent-encoded (a space or an `ü` in it is no valid URI);
/// an `s3://` location is a URI already.
fn file_uri(path: &str) -> String {
    if crate::io::object::is_object(path) {
        return path.to_string();
    }
    url::Url::from_file_path(path).map(String::from).unwrap_or_else(|_| format!("file://{path}"))
}

fn schema_field(f: &NestedFieldRef) -> Value {
    let mut out = json!({"name": f.name});
    match f.field_type.as_ref() {
        Type::Struct(s) => {
            out["type"] = "struct".into();
            out["fields"] = s.fields().iter().map(schema_field).collect::<Vec<_>>().into();
        }
        other => out["type"] = other.to_string().into(),
    }
    if let Some(doc) = &f.doc {
        out["description"] = doc.clone().into();
    }
    out
}

fn input(naming: &Naming, d: &DatasetRef) -> Value {
    json!({"namespace": d.namespace, "name": d.name, "facets": dataset_facets(naming, d)})
}

fn output(naming: &Naming, d: &DatasetRef) -> Value {
    let mut out = json!({"namespace": d.namespace, "name": d.name, "facets": dataset_facets(naming, d)});
    if let Some(stats) = output_statistics(naming, d) {
        out["outputFacets"] = json!({"outputStatistics": stats});
    }
    out
}

/// What the output's snapshot wrote: rows, bytes and files added (its Iceberg summary).
fn output_statistics(naming: &Naming, d: &DatasetRef) -> Option<Value> {
    let md = metadata_of(naming, d)?;
    let snapshot = md.snapshot_by_id(d.snapshot_id?)?;
    let summary = &snapshot.summary().additional_properties;
    let number = |key: &str| summary.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    Some(facet(
        facet_url("OutputStatisticsOutputDatasetFacet", "1-0-2"),
        json!({
            "rowCount": number("added-records"),
            "size": number("added-files-size"),
            "fileCount": number("added-data-files") + number("added-delete-files"),
        }),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_becomes_a_percent_encoded_file_uri() {
        assert_eq!(super::file_uri("/tmp/a b/ü.skade.data"), "file:///tmp/a%20b/%C3%BC.skade.data");
        assert_eq!(super::file_uri("/w/x"), "file:///w/x");
    }
}
