//! Schema and table names, and where their files live. A name becomes a directory under the
//! warehouse, so every name is checked before it can reach a path: nothing may escape the
//! warehouse folder.

use std::borrow::Cow;
use std::path::{Component, Path};

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

/// A table as messages name it: as a user writes it in SQL, qualified with `database`, the name
/// its catalog is attached under in DuckDB (`lake.orders` in schema main, `lake.sales.orders` in
/// another), each part double-quoted where SQL needs it (`lake."my orders"`). The same text names
/// the table in a function's argument (`skade_snapshots('lake.orders')`). Without a database (a
/// transaction of the Rust API, no ATTACH behind it): `schema.table`.
pub fn table_shown(database: Option<&str>, schema: &str, table: &str) -> String {
    let (schema_part, table_part) = (sql_identifier(schema), sql_identifier(table));
    match database {
        Some(db) if key(schema) == DEFAULT_SCHEMA => format!("{}.{table_part}", sql_identifier(db)),
        Some(db) => format!("{}.{schema_part}.{table_part}", sql_identifier(db)),
        None => format!("{schema_part}.{table_part}"),
    }
}

/// `name` as one SQL identifier: as it is when it needs no quotes (letters, digits and
/// underscores, not starting with a digit), else in double quotes, a double quote in it doubled
/// (as DuckDB quotes one; its parser of qualified names in a string argument reads it back).
pub fn sql_identifier(name: &str) -> Cow<'_, str> {
    // (DuckDB's scanner takes any non-ASCII character in an unquoted identifier, as PostgreSQL's)
    let plain = |c: char| c == '_' || c.is_ascii_alphanumeric() || !c.is_ascii();
    match name.chars().next() {
        Some(first) if !first.is_ascii_digit() && name.chars().all(plain) => Cow::Borrowed(name),
        _ => Cow::Owned(format!("\"{}\"", name.replace('"', "\"\""))),
    }
}

/// `<data_path>/<schema>/<table>`, after checking both names and that the result stays inside.
/// A data path in a bucket (`s3://…`) is joined as a key: the names hold no separator and are
/// not `.` or `..`, which `validate` checked.
pub fn table_location(data_path: &str, schema: &str, table: &str) -> Result<String> {
    validate("schema", schema)?;
    validate("table", table)?;
    if crate::io::object::is_object(data_path) {
        return Ok(format!("{}/{schema}/{table}", data_path.trim_end_matches('/')));
    }
    let data_path = Path::new(data_path);
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
    location
        .into_os_string()
        .into_string()
        .map_err(|_| Error::invalid(format!("table \"{schema}.{table}\": not a UTF-8 path")))
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
    fn tables_are_shown_as_sql_names_them_in_their_attached_database() {
        assert_eq!(table_shown(Some("lake"), "main", "orders"), "lake.orders");
        assert_eq!(table_shown(Some("lake"), "Main", "Orders"), "lake.Orders");
        assert_eq!(table_shown(Some("lake_b"), "s", "t"), "lake_b.s.t");
        assert_eq!(table_shown(None, "main", "orders"), "main.orders");
        assert_eq!(table_shown(Some("my lake"), "a.b", "1st"), "\"my lake\".\"a.b\".\"1st\"");
        assert_eq!(table_shown(Some("lake"), "main", "say \"hi\""), "lake.\"say \"\"hi\"\"\"");
        assert_eq!(table_shown(Some("lake"), "main", "ü_t2"), "lake.ü_t2");
    }

    #[test]
    fn location_stays_inside_the_warehouse() {
        let root = "/lake/data";
        assert_eq!(table_location(root, "main", "t").unwrap(), "/lake/data/main/t");
        assert_eq!(table_location("s3://b/wh/", "main", "t").unwrap(), "s3://b/wh/main/t");
        assert!(table_location("s3://b/wh", "..", "t").is_err());
        assert!(table_location(root, "..", "t").is_err());
        assert!(table_location(root, "main", "/abs").is_err());
    }
}
