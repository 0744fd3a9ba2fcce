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
    /// The uuids of tables this server answered staged creates with, not yet created: a commit
    /// creating a table keeps one of these (and the location made from it) once; any other
    /// uuid a client assigns is replaced by a new one (a client must not give a table another
    /// table's identity, live or dropped: consumers follow tables by uuid).
    pub staged: std::sync::Mutex<StagedUuids>,
}

/// The uuids of staged creates, the oldest forgotten past a bound (a client that staged and never
/// committed must not grow the server).
#[derive(Default)]
pub struct StagedUuids {
    order: std::collections::VecDeque<uuid::Uuid>,
}

impl StagedUuids {
    const KEPT: usize = 4096;

    pub fn remember(&mut self, uuid: uuid::Uuid) {
        if self.order.len() == Self::KEPT {
            self.order.pop_front();
        }
        self.order.push_back(uuid);
    }

    /// Whether this server staged `uuid` and no table took it yet.
    pub fn holds(&self, uuid: uuid::Uuid) -> bool {
        self.order.contains(&uuid)
    }

    /// `uuid` taken by a table (its commit landed): it is never kept again.
    pub fn taken(&mut self, uuid: uuid::Uuid) {
        self.order.retain(|u| *u != uuid);
    }
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
