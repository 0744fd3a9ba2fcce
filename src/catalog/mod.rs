//! The catalog: one redb file that names every schema and table and points at each table's
//! current Iceberg metadata, plus the commit path that moves those pointers.

pub mod check;
pub mod commit;
pub mod events;
pub mod maintenance;
pub mod names;
pub mod open;
pub mod options;
pub mod pinned;
pub mod state;
pub mod store;
pub mod transaction;

pub use self::open::{Catalog, CommitEvent, COMMIT_EVENT_BUFFER, EVENTUAL_FLUSH_INTERVAL};
pub use self::transaction::{TableInfo, Transaction};
