//! Schema and table names, and where their files live. A name becomes a directory under the
//! warehouse, so every name is checked before it can reach a path: nothing may escape the
//! warehouse folder.

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

pub const DEFAULT_SCHEMA: &str = "main";

/// The schema of skade's lineage history (`skade_lineage.events`): written by skade only.
pub const LINEAGE_SCHEMA: &str = "skade_lineage";

/// Whether `schema` is skade's own (its tables are written by skade only).
pub fn is_reserved(schema: &str) -> bool {
    key(schema) == LINEAGE_SCHEMA
}

/// Names are matched case-insensitively, as in DuckDB, and stored as the user wrote them.
pub fn key(name: &str) -> String {
    name.to_lowercase()
}

/// Refuses names that could not be a single directory name inside the warehouse.
pub fn validate(what: &str, name: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::invalid(format!("invalid {what} name {}: {why}", shown(name))));
    // Schemas and tables are folders of the warehouse; other names follow the same rules.
    let folder = matches!(what, "schema" | "table");
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > 255 {
        return bad(&format!("it is {} bytes long, longer than 255", name.len()));
    }
    if name == "." || name == ".." {
        return bad(if folder { "it would escape the data folder" } else { "it is reserved (as for table names)" });
    }
    if name.contains('/') || name.contains('\\') {
        return bad(if folder {
            "it contains a path separator and would escape the data folder"
        } else {
            "it contains a path separator (not allowed, as in table names)"
        });
    }
    if name.chars().any(|c| c.is_control()) {
        return bad("it contains a control character");
    }
    Ok(())
}

/// A name as an error shows it: quoted, control characters escaped, a long one cut short.
pub fn shown(name: &str) -> String {
    const MOST: usize = 64;
    let escaped: String = name.chars().take(MOST).flat_map(char::escape_debug).collect();
    match name.chars().count() > MOST {
        true => format!("\"{escaped}...\""),
        false => format!("\"{escaped}\""),
    }
}

/// `<data_path>/<schema>/<table>`, after checking both names and that the result stays inside.
pub fn table_location(data_path: &Path, schema: &str, table: &str) -> Result<PathBuf> {
    validate("schema", schema)?;
    validate("table", table)?;
    let location = data_path.join(schema).join(table);
    let inside = location
        .strip_prefix(data_path)
        .map(|rest| rest.components().all(|c| matches!(c, Component::Normal(_))))
        .unwrap_or(false);
    if !inside {
        return Err(Error::invalid(format!(
            "table \"{schema}.{table}\" would be stored outside the data folder {}",
            data_path.display()
        )));
    }
    Ok(location)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_names_are_refused() {
        for bad in ["", ".", "..", "a/b", "../x", "/etc", "a\\b", "x\0y", "tab\tname"] {
            assert!(validate("table", bad).is_err(), "{bad:?} accepted");
        }
        for good in ["orders", "Orders 2024", "ü-ñ", "a.b", "...x"] {
            validate("table", good).unwrap();
        }
    }

    #[test]
    fn location_stays_inside_the_warehouse() {
        let root = Path::new("/lake/data");
        assert_eq!(table_location(root, "main", "t").unwrap(), Path::new("/lake/data/main/t"));
        assert!(table_location(root, "..", "t").is_err());
        assert!(table_location(root, "main", "/abs").is_err());
    }
}
