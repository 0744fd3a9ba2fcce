//! The catalog: one redb file that names every schema, table and macro and points at each
//! table's current Iceberg metadata, plus the commit path that moves those pointers.

pub(crate) mod chains;
pub(crate) mod check;
pub mod checkpoint;
pub(crate) mod commit;
pub mod consumers;
pub mod events;
pub mod lake;
pub(crate) mod log_batch;
pub(crate) mod log_commit;
pub mod macros;
pub(crate) mod maintenance;
pub(crate) mod migrate;
pub mod names;
pub(crate) mod open;
pub mod options;
pub(crate) mod pinned;
pub(crate) mod rebase;
pub(crate) mod residency;
pub mod sinks;
pub(crate) mod state;
pub(crate) mod store;
pub mod tables;
pub mod transaction;
mod transaction_add_files;
mod transaction_alter;
mod transaction_consumers;
mod transaction_deletes;
pub mod transaction_external;
pub mod transaction_external_create;
mod transaction_lineage;
pub mod transaction_namespace;
pub(crate) mod turns;
pub mod views;

pub use self::log_commit::LogStatus;
pub use self::open::{Catalog, CommitEvent, WeakCatalog, COMMIT_EVENT_BUFFER, EVENTUAL_FLUSH_INTERVAL};
pub use self::transaction::{TableInfo, Transaction};
pub use self::transaction_add_files::AddedFiles;
