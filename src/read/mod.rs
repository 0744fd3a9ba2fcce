//! Reading rows: scan planning (manifests, filters, the deletes of each file), row-group pruning,
//! merge-on-read deletes, primary keys as encoded rows, time travel, and the caches reads share.

pub(crate) mod caches;
pub(crate) mod column_stats;
pub(crate) mod deletes;
pub mod filter;
pub(crate) mod key_bounds;
pub(crate) mod keys;
pub(crate) mod partition_prune;
pub(crate) mod row_groups;
pub(crate) mod scan;
pub(crate) mod select;
pub(crate) mod skippable;
pub mod time_travel;
