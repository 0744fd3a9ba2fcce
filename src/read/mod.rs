//! Reading rows: scan planning (manifests, filters, the deletes of each file), row-group pruning,
//! merge-on-read deletes, primary keys as encoded rows, time travel, and the caches reads share.

pub mod caches;
pub mod deletes;
pub mod filter;
pub mod key_bounds;
pub mod keys;
pub mod row_groups;
pub mod scan;
pub mod select;
pub mod skippable;
pub mod time_travel;
