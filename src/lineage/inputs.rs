//! Inputs from outside the catalog, named as OpenLineage names datasets: a file is namespace
//! `file` and its absolute path, an object store URL `scheme://bucket` and its key; a table of
//! another DuckDB database `duckdb://<its file>` (or `duckdb://memory/<name>` for one in
//! memory) and `schema.table`; a table of another skade catalog as Spark's Iceberg integration
//! names it (namespace `file`, its location).

use std::path::Path;

use crate::catalog::store::{ColumnRecord, InputRecord};
use crate::catalog::TableInfo;

fn input(namespace: String, name: String) -> InputRecord {
    InputRecord {
        table_uuid: None,
        namespace,
        name,
        snapshot_id: None,
        table: None,
        metadata_location: None,
        columns: vec![],
    }
}

/// `path` made absolute, `.` and `..` resolved by their text (the file may be gone since).
fn absolute(path: &str) -> String {
    let absolute = std::path::absolute(Path::new(path)).unwrap_or_else(|_| Path::new(path).to_path_buf());
    let mut parts: Vec<std::path::Component> = vec![];
    for c in absolute.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if matches!(parts.last(), Some(std::path::Component::Normal(_))) {
                    parts.pop();
                }
            }
            c => parts.push(c),
        }
    }
    parts.iter().collect::<std::path::PathBuf>().display().to_string()
}

/// A file a query read, as it named it (a path, relative or absolute, or a URL).
pub fn file(path: &str) -> InputRecord {
    if let Some((scheme, rest)) = path.split_once("://") {
        if scheme == "file" {
            return file(rest);
        }
        let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
        // object stores name the key without a leading slash; others keep the path
        let key = match scheme {
            "s3" | "s3a" | "gs" | "gcs" | "az" | "azure" | "abfss" | "r2" => key.to_string(),
            _ => format!("/{key}"),
        };
        return input(format!("{scheme}://{authority}"), key);
    }
    input("file".into(), absolute(path))
}

/// A table of another attached DuckDB database: its file (empty: in memory, named `database`)
/// and its columns.
pub fn duckdb_table(
    database_path: &str,
    database: &str,
    qualified_name: &str,
    columns: Vec<ColumnRecord>,
) -> InputRecord {
    let namespace = match database_path {
        "" | ":memory:" => format!("duckdb://memory/{database}"),
        p => format!("duckdb://{}", file(p).name),
    };
    InputRecord { columns, ..input(namespace, qualified_name.to_string()) }
}

/// A table of another skade catalog, at the snapshot the query read, with its columns then
/// (recorded now: the other catalog's files may be gone when the event is made).
pub fn skade_table(table: &TableInfo) -> InputRecord {
    let md = &table.metadata;
    let snapshot_id = match table.version {
        crate::read::time_travel::Version::Snapshot(id) => Some(id),
        crate::read::time_travel::Version::Current => md.current_snapshot_id(),
        crate::read::time_travel::Version::Empty => None,
    };
    let schema = snapshot_id
        .and_then(|id| md.snapshot_by_id(id))
        .and_then(|s| s.schema_id())
        .and_then(|id| md.schema_by_id(id))
        .unwrap_or_else(|| md.current_schema());
    let columns = schema
        .as_struct()
        .fields()
        .iter()
        .map(|f| ColumnRecord { name: f.name.clone(), data_type: f.field_type.to_string() })
        .collect();
    InputRecord {
        snapshot_id,
        table: Some(table.record.qualified_name()),
        columns,
        ..input("file".into(), table.metadata.location().trim_end_matches('/').to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_urls_are_named_as_openlineage_names_them() {
        let s3 = file("s3://bucket/dir/x.parquet");
        assert_eq!((s3.namespace.as_str(), s3.name.as_str()), ("s3://bucket", "dir/x.parquet"));
        let local = file("/tmp/a/../x.csv");
        assert_eq!((local.namespace.as_str(), local.name.as_str()), ("file", "/tmp/x.csv"));
        assert!(file("rel.csv").name.ends_with("/rel.csv"));
        assert_eq!(file("file:///tmp/y.csv").name, "/tmp/y.csv");
        assert_eq!(duckdb_table("", "mem", "main.t", vec![]).namespace, "duckdb://memory/mem");
    }
}
