//! Namespaces and table names as clients send them: a namespace is a path segment whose levels
//! are joined by the unit separator (0x1F, `%1F`), decoded by the router. skade's schemas are one
//! level, and every name is checked as SQL names are, before it reaches the catalog (nothing a
//! client names escapes the warehouse).

use super::errors::{RestError, RestResult};
use crate::catalog::names;

/// The one schema a namespace path segment names.
pub fn schema_of(namespace: &str) -> RestResult<String> {
    if namespace.contains('\u{1f}') {
        return Err(RestError::bad_request(format!(
            "namespace {} has several levels: a skade lake's namespaces (its schemas) have one",
            names::shown(&namespace.replace('\u{1f}', "."))
        )));
    }
    names::validate("schema", namespace).map_err(RestError::from)?;
    Ok(namespace.to_string())
}

pub fn table_of(table: &str) -> RestResult<String> {
    names::validate("table", table).map_err(RestError::from)?;
    Ok(table.to_string())
}

pub fn shown(name: &str) -> String {
    names::shown(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_level_valid_names_only() {
        assert_eq!(schema_of("main").unwrap(), "main");
        assert_eq!(schema_of("a\u{1f}b").unwrap_err().status.as_u16(), 400);
        for bad in ["..", "a/b", "", "x\ny"] {
            assert_eq!(schema_of(bad).unwrap_err().status.as_u16(), 400, "{bad:?}");
            assert_eq!(table_of(bad).unwrap_err().status.as_u16(), 400, "{bad:?}");
        }
    }
}
