//! What a server's request handlers share: the lake, who may ask, and the counters.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::catalog::WeakCatalog;

/// What a server's requests have done (`skade_servers`).
#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub commits: AtomicU64,
    pub errors: AtomicU64,
}

pub struct ServerState {
    pub catalog: WeakCatalog,
    pub lake: String,
    pub access: Access,
    pub stats: Arc<Stats>,
    /// Requests working on the lake at once (each on a thread of its own, which a request that
    /// timed out keeps until its work ends): more wait their turn.
    pub work: Arc<tokio::sync::Semaphore>,
}

/// How many requests work on the lake at once.
pub const WORKERS: usize = 32;

pub type Shared = Arc<ServerState>;

/// What a server asks of its clients.
pub struct Access {
    /// The bearer token every request must carry (None: the server is open).
    pub token: Option<String>,
    /// The client id and secret the token route exchanges for the token.
    pub client: Option<(String, String)>,
}
