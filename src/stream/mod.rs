//! Change streams over the commit log: named consumers' reads (`pending`, `rows`, `consume`),
//! the wait for the next commit (`wait`), and the push stream for embedders (`change_stream`).

pub mod change_stream;
pub mod consume;
pub mod pending;
pub mod rows;
pub mod wait;

pub use change_stream::{ChangeStream, ChangeWindow, ConsumerCursor};
