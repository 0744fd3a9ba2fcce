//! Running servers: each on a port of its own, on a small tokio runtime of its own (a stuck
//! client never starves the core's I/O runtime, and no DuckDB thread waits on a request). A
//! server stops at `skade_serve_stop`, when its lake is detached (a watcher sees the catalog
//! close), or with the process.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::accept;
use super::routes::router;
use super::state::{Access, ServerState, Stats, WORKERS};
use crate::catalog::{Catalog, WeakCatalog};
use crate::error::{Error, Result};

/// How a server is started (`skade_serve`'s parameters).
#[derive(Debug, Clone, Default)]
pub struct ServeOptions {
    /// The interface: loopback unless given.
    pub host: Option<String>,
    /// 0: any free port.
    pub port: u16,
    pub token: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

/// A running server as `skade_servers` shows it.
#[derive(Debug, Clone)]
pub struct ServerInfo {
    pub address: String,
    pub lake: String,
    pub requests: u64,
    pub commits: u64,
    pub errors: u64,
    pub token_required: bool,
}

struct Running {
    address: SocketAddr,
    lake: String,
    catalog: WeakCatalog,
    stats: Arc<Stats>,
    token_required: bool,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    /// Answered when the server stopped accepting and its requests in flight were answered.
    done: Option<tokio::sync::oneshot::Receiver<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Running {
    fn info(&self) -> ServerInfo {
        ServerInfo {
            address: format!("http://{}", self.address),
            lake: self.lake.clone(),
            requests: self.stats.requests.load(Ordering::Relaxed),
            commits: self.stats.commits.load(Ordering::Relaxed),
            errors: self.stats.errors.load(Ordering::Relaxed),
            token_required: self.token_required,
        }
    }

    /// Stops accepting, lets the requests in flight be answered (a commit's client learns its
    /// outcome), then ends the runtime. (Called from a DuckDB or the watcher's thread.)
    fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            if let Some(done) = self.done.take() {
                let _ = runtime.block_on(async { tokio::time::timeout(STOP_WAIT, done).await });
            }
            runtime.shutdown_timeout(Duration::from_millis(100));
        }
    }
}

static RUNNING: Mutex<Vec<Running>> = Mutex::new(Vec::new());

fn running() -> std::sync::MutexGuard<'static, Vec<Running>> {
    RUNNING.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long a stop waits for the requests in flight (they are bounded by the request timeout;
/// a longer one is cut).
const STOP_WAIT: Duration = Duration::from_secs(10);

/// How often a watcher looks whether its lake was detached.
const WATCH: Duration = Duration::from_millis(200);

/// Starts serving `catalog` (attached as `lake`); the server as `skade_servers` shows it.
pub fn serve(catalog: &Catalog, lake: &str, options: &ServeOptions) -> Result<ServerInfo> {
    let client = match (&options.client_id, &options.client_secret) {
        (Some(id), Some(secret)) if !id.is_empty() && !secret.is_empty() => Some((id.clone(), secret.clone())),
        (None, None) => None,
        _ => {
            return Err(Error::invalid(
                "skade_serve: client_id and client_secret go together (the OAuth2 client credentials the token \
                 route exchanges for the server's token)",
            ))
        }
    };
    if let Some(token) = &options.token {
        // (a bearer token is visible ASCII with no space, RFC 6750: another could never be sent)
        if token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::invalid(
                "skade_serve: token must be visible ASCII characters with no space (a bearer token clients can send)",
            ));
        }
    }
    // (client credentials with no token given: the token they are exchanged for is made here)
    let token = options.token.clone().or_else(|| client.as_ref().map(|_| uuid::Uuid::new_v4().simple().to_string()));
    let host = options.host.clone().unwrap_or_else(|| "127.0.0.1".to_string());
    let listener = TcpListener::bind((host.as_str(), options.port))
        .map_err(|e| Error::io(format!("skade_serve: cannot listen on {host}:{}: {e}", options.port)))?;
    let address = listener.local_addr().map_err(|e| Error::io(format!("skade_serve: {e}")))?;
    listener.set_nonblocking(true).map_err(|e| Error::io(format!("skade_serve: {e}")))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("skade-rest")
        .enable_all()
        .build()
        .map_err(|e| Error::io(format!("skade_serve: cannot start the server's runtime: {e}")))?;
    let stats = Arc::new(Stats::default());
    let shared = Arc::new(ServerState {
        catalog: catalog.downgrade(),
        lake: lake.to_string(),
        access: Access { token: token.clone(), client },
        stats: stats.clone(),
        work: Arc::new(tokio::sync::Semaphore::new(WORKERS)),
        staged: Default::default(),
    });
    let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
    let (finished, done) = tokio::sync::oneshot::channel::<()>();
    let listener = {
        let _entered = runtime.enter();
        tokio::net::TcpListener::from_std(listener).map_err(|e| Error::io(format!("skade_serve: {e}")))?
    };
    runtime.spawn(accept::run(listener, router(shared), stopped, finished));
    let server = Running {
        address,
        lake: lake.to_string(),
        catalog: catalog.downgrade(),
        stats,
        token_required: token.is_some(),
        shutdown: Some(shutdown),
        done: Some(done),
        runtime: Some(runtime),
    };
    let info = server.info();
    running().push(server);
    spawn_watcher();
    Ok(info)
}

/// Stops the servers of `lake_or_address` (a lake's name, or an address as `skade_servers`
/// shows it); how many.
pub fn stop(lake_or_address: &str) -> usize {
    let stopped: Vec<Running> = {
        let mut all = running();
        let (gone, kept) = std::mem::take(&mut *all)
            .into_iter()
            .partition(|r| r.lake.eq_ignore_ascii_case(lake_or_address) || r.info().address == lake_or_address);
        *all = kept;
        gone
    };
    let n = stopped.len();
    stopped.into_iter().for_each(Running::stop);
    n
}

pub fn servers() -> Vec<ServerInfo> {
    running().iter().map(Running::info).collect()
}

/// One thread for the process, while servers run: stops those whose lake was detached.
fn spawn_watcher() {
    static WATCHING: Mutex<bool> = Mutex::new(false);
    let mut watching = WATCHING.lock().unwrap_or_else(|p| p.into_inner());
    if *watching {
        return;
    }
    *watching = true;
    let spawned = std::thread::Builder::new().name("skade-rest-watch".into()).spawn(|| loop {
        std::thread::sleep(WATCH);
        let closed: Vec<Running> = {
            let mut all = running();
            let (gone, kept) = std::mem::take(&mut *all).into_iter().partition(|r| !r.catalog.is_open());
            *all = kept;
            gone
        };
        closed.into_iter().for_each(Running::stop);
        let mut watching = WATCHING.lock().unwrap_or_else(|p| p.into_inner());
        if running().is_empty() {
            *watching = false;
            return;
        }
    });
    if spawned.is_err() {
        *watching = false;
    }
}
