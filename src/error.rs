//! One error type for the whole core. Its [`ErrorKind`] travels over the C ABI as a status code,
//! and the shim turns each kind into the DuckDB exception a user expects for it.

use std::fmt;

/// What went wrong, in the terms a DuckDB user sees. The discriminants are the C ABI's status
/// codes (`SKADE_ERR_*` in `cpp/include/skade_ffi.h`): never renumber them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum ErrorKind {
    /// Bad arguments, unsupported values, malformed names.
    InvalidInput = 1,
    /// Unknown or duplicate schema/table/snapshot.
    Catalog = 2,
    /// A constraint (primary key, NOT NULL) would be violated.
    Constraint = 3,
    /// A concurrent commit won; the transaction may be retried.
    Conflict = 4,
    /// The file system failed.
    Io = 5,
    /// The feature is not built yet.
    NotImplemented = 6,
    /// A file on disk is not what it should be (not a skade catalog, unreadable metadata).
    Corrupt = 7,
    /// The catalog is read-only or held by another process.
    Permission = 8,
    /// A bug: an invariant of the core did not hold.
    Internal = 9,
    /// The query was interrupted (Ctrl-C, `con.interrupt()`) while the core waited.
    Interrupted = 10,
    /// A statement names what its table does not have (a column of SORTED BY): DuckDB's binder
    /// would have refused it, had the statement been bound against the table.
    Binder = 11,
}

#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidInput, message)
    }
    pub fn catalog(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Catalog, message)
    }
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }
    pub fn io(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Io, message)
    }
    pub fn corrupt(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Corrupt, message)
    }
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotImplemented, message)
    }
    pub fn permission(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Permission, message)
    }
    pub fn interrupted() -> Self {
        Error::new(ErrorKind::Interrupted, "Interrupted!")
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    pub fn constraint(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Constraint, message)
    }
    pub fn binder(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Binder, message)
    }

    /// Prefixes the message with what was being done, keeping the kind.
    pub fn context(mut self, what: impl fmt::Display) -> Self {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::io(io_message(&e))
    }
}

/// An I/O error's text as DuckDB words its own: the system's description ("No such file or
/// directory"), without the " (os error 2)" Rust's I/O errors append. The caller names the path.
pub fn io_message(e: &std::io::Error) -> String {
    without_os_codes(&e.to_string())
}

/// `text` without the " (os error N)" of Rust's I/O errors, wherever they are in it (an error
/// that wraps one repeats its text).
pub fn without_os_codes(text: &str) -> String {
    const MARK: &str = " (os error ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let digits = after.find(|c: char| !(c.is_ascii_digit() || c == '-')).unwrap_or(after.len());
        if digits > 0 && after[digits..].starts_with(')') {
            out.push_str(&rest[..at]);
            rest = &after[digits + 1..];
        } else {
            out.push_str(&rest[..at + MARK.len()]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

impl From<iceberg::Error> for Error {
    fn from(e: iceberg::Error) -> Self {
        use std::error::Error as _;
        let mut message = e.message().to_string();
        let mut source = e.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        let kind = match e.kind() {
            iceberg::ErrorKind::FeatureUnsupported => ErrorKind::NotImplemented,
            iceberg::ErrorKind::DataInvalid => ErrorKind::Corrupt,
            iceberg::ErrorKind::CatalogCommitConflicts => ErrorKind::Conflict,
            _ => ErrorKind::Io,
        };
        Error::new(kind, without_os_codes(&message))
    }
}

impl From<arrow::error::ArrowError> for Error {
    fn from(e: arrow::error::ArrowError) -> Self {
        Error::invalid(e.to_string())
    }
}

impl From<parquet::errors::ParquetError> for Error {
    fn from(e: parquet::errors::ParquetError) -> Self {
        Error::io(without_os_codes(&e.to_string()))
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::corrupt(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_read_as_duckdb_words_them() {
        let e = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(io_message(&e), "No such file or directory");
        assert_eq!(Error::from(e).message, "No such file or directory");
        assert_eq!(
            without_os_codes("cannot open /a/b (os error 2): Permission denied (os error 13)"),
            "cannot open /a/b: Permission denied"
        );
        // other parentheses stay
        for kept in ["a (os error x)", "value (os error ", "f(os error 2)", "(kept)"] {
            assert_eq!(without_os_codes(kept), kept);
        }
    }
}
