//! Avro name rules without regular expressions.
//!
//! Every manifest and manifest list the iceberg crate writes or reads carries an Avro schema,
//! which apache-avro parses and validates name by name with regular expressions (one PikeVM run
//! per record, field and namespace). Measured under callgrind, that was about a fifth of the CPU
//! of a one-row commit (`core_commits`). apache-avro lets a process install its own validators
//! once; these apply the same rules (the Avro specification's names: `[A-Za-z_][A-Za-z0-9_]*`,
//! namespaces of such names joined by dots) by scanning the bytes. Written by hand because the
//! crate offers no faster validator; the tests pin them to the specification's cases.

use std::sync::Once;

use apache_avro::error::Details;
use apache_avro::schema::Namespace;
use apache_avro::validator::{
    set_enum_symbol_name_validator, set_record_field_name_validator, set_schema_name_validator,
    set_schema_namespace_validator, EnumSymbolNameValidator, RecordFieldNameValidator, SchemaNameValidator,
    SchemaNamespaceValidator,
};
use apache_avro::AvroResult;

/// Installs the validators for this process, before any Avro is parsed (a validator apache-avro
/// already initialised keeps the default: only slower).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = set_schema_name_validator(Box::new(Rules));
        let _ = set_schema_namespace_validator(Box::new(Rules));
        let _ = set_record_field_name_validator(Box::new(Rules));
        let _ = set_enum_symbol_name_validator(Box::new(Rules));
    });
}

/// The rule for each kind of name, as apache-avro's own messages state it.
const NAME_RULE: &str = "[A-Za-z_][A-Za-z0-9_]*";
const FULL_NAME_RULE: &str = "[namespace.]name, each part [A-Za-z_][A-Za-z0-9_]*";
const NAMESPACE_RULE: &str = "empty, or names [A-Za-z_][A-Za-z0-9_]* joined by dots";

struct Rules;

/// `[A-Za-z_][A-Za-z0-9_]*`
fn is_name(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z' | b'a'..=b'z' | b'_'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Empty, or names joined by dots.
fn is_namespace(s: &str) -> bool {
    s.is_empty() || s.split('.').all(is_name)
}

impl SchemaNameValidator for Rules {
    fn validate(&self, schema_name: &str) -> AvroResult<(String, Namespace)> {
        let invalid = || Details::InvalidSchemaName(schema_name.to_string(), FULL_NAME_RULE).into();
        match schema_name.rsplit_once('.') {
            None if is_name(schema_name) => Ok((schema_name.to_string(), None)),
            Some((namespace, name)) if is_name(name) && is_namespace(namespace) => {
                Ok((name.to_string(), Some(namespace.to_string())))
            }
            _ => Err(invalid()),
        }
    }
}

impl SchemaNamespaceValidator for Rules {
    fn validate(&self, namespace: &str) -> AvroResult<()> {
        if is_namespace(namespace) {
            Ok(())
        } else {
            Err(Details::InvalidNamespace(namespace.to_string(), NAMESPACE_RULE).into())
        }
    }
}

impl RecordFieldNameValidator for Rules {
    fn validate(&self, name: &str) -> AvroResult<()> {
        check_name(name, Details::FieldName, "field name")
    }
}

impl EnumSymbolNameValidator for Rules {
    fn validate(&self, symbol: &str) -> AvroResult<()> {
        check_name(symbol, Details::EnumSymbolName, "symbol")
    }
}

/// `Ok` when `s` is a name, else the `invalid` error, its message saying what a `what` must be.
fn check_name(s: &str, invalid: fn(String) -> Details, what: &str) -> AvroResult<()> {
    if is_name(s) {
        Ok(())
    } else {
        Err(invalid(format!("{s} (a {what} is {NAME_RULE})")).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_specification() {
        for ok in ["a", "_", "A_1", "manifest_file", "r102", "_x9"] {
            assert!(is_name(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a.b", "é", "a b", " a"] {
            assert!(!is_name(bad), "{bad}");
        }
        for ok in ["", "a", "a.b", "org.apache.iceberg", "_a._b1"] {
            assert!(is_namespace(ok), "{ok}");
        }
        for bad in [".", "a.", ".a", "a..b", "a.1b", "a-b.c"] {
            assert!(!is_namespace(bad), "{bad}");
        }
    }

    #[test]
    fn full_names_split_like_the_specification_regex() {
        let split = |s: &str| SchemaNameValidator::validate(&Rules, s).ok();
        assert_eq!(split("manifest_entry"), Some(("manifest_entry".into(), None)));
        assert_eq!(split("a.b.r2"), Some(("r2".into(), Some("a.b".into()))));
        // an empty namespace before the dot is allowed, and kept as empty
        assert_eq!(split(".r"), Some(("r".into(), Some(String::new()))));
        for bad in ["", "a.", "a..r", "1.r", "a.1r", "a-b.r", "r-1"] {
            assert_eq!(split(bad), None, "{bad}");
        }
        assert!(SchemaNamespaceValidator::validate(&Rules, "a.b").is_ok());
        assert!(SchemaNamespaceValidator::validate(&Rules, "a..b").is_err());
        assert!(RecordFieldNameValidator::validate(&Rules, "data_file").is_ok());
        assert!(RecordFieldNameValidator::validate(&Rules, "data-file").is_err());
        assert!(EnumSymbolNameValidator::validate(&Rules, "DATA").is_ok());
        assert!(EnumSymbolNameValidator::validate(&Rules, "9").is_err());
    }
}
