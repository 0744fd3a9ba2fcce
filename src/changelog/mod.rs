//! The changelog: what each snapshot inserted, deleted or updated, decoded from its data and
//! delete files, and its net effect over a window (collapse).
//!
//! Layers, bottom up: `types` (the columns and tags), `compare` (whole-row comparison),
//! `filters`, `snapshot` (one snapshot decoded), `decode` (a window decoded), `collapse` (a
//! window netted), `window` (which snapshots a query asks for, and which of those it gets).

pub mod collapse;
pub mod compare;
pub mod decode;
pub mod filters;
pub mod snapshot;
pub mod types;
pub mod window;
