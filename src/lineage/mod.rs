//! Lineage: every commit as an event naming what it wrote (outputs) and what the committing
//! transaction read (inputs), derived from the durable commit log, so events can be rebuilt and
//! delivered again after any outage (see docs/design/lineage.md).

pub mod delivery;
pub mod events;
pub mod history;
pub mod inputs;
pub mod openlineage;
pub mod rows;
pub mod sink;
