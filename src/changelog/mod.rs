//! The changelog: what each snapshot inserted, deleted or updated, decoded from its data and
//! delete files, and its net effect over a window (collapse).

pub mod changelog;
pub mod collapse;
