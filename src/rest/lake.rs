//! How a request works on the lake: on a thread of its own (the core's blocking entries must not
//! run on a tokio worker), at most `state::WORKERS` at once, in a transaction of its own.

use std::net::SocketAddr;

use axum::http::StatusCode;

use super::errors::{RestError, RestResult};
use super::names::shown;
use super::state::Shared;
use crate::catalog::{Catalog, Transaction};
use crate::error::{Error, ErrorKind};

/// Runs `work` on the lake, on a thread of its own.
pub async fn on_lake<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce(&Catalog) -> RestResult<T> + Send + 'static,
) -> RestResult<T> {
    let weak = shared.catalog.clone();
    let lake = shared.lake.clone();
    let Ok(turn) = shared.work.clone().acquire_owned().await else {
        return Err(RestError::unavailable("the server is stopping"));
    };
    let (send, receive) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("skade-rest-request".into()).spawn(move || {
        let _turn = turn;
        let outcome = match weak.upgrade() {
            None => Err(RestError::unavailable(format!("lake {} was detached: this server is stopping", shown(&lake)))),
            Some(catalog) => work(&catalog),
        };
        let _ = send.send(outcome);
    });
    if let Err(e) = spawned {
        return Err(RestError::unavailable(format!("cannot start a thread for the request: {e}")));
    }
    receive.await.unwrap_or_else(|_| {
        Err(RestError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            "the request's work ended without an answer",
        ))
    })
}

/// Runs `work` in a read-only transaction of its own: one consistent state of the lake.
pub async fn reading<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce(&Transaction) -> RestResult<T> + Send + 'static,
) -> RestResult<T> {
    on_lake(shared, move |catalog| {
        let txn = catalog.begin();
        let out = work(&txn);
        txn.rollback();
        out
    })
    .await
}

/// The schema a namespace names, as the lake spells it (names match case-insensitively).
pub fn existing_schema(txn: &Transaction, namespace: &str) -> RestResult<String> {
    match txn.schema(namespace)? {
        Some(s) => Ok(s.name.clone()),
        None => Err(RestError::no_namespace(&shown(namespace))),
    }
}

/// The table a request names, with its metadata (a view is no table here).
pub fn existing_table(txn: &Transaction, namespace: &str, table: &str) -> RestResult<crate::catalog::TableInfo> {
    let schema = existing_schema(txn, namespace)?;
    // (`Transaction::table` finds tables only, never a view of the name)
    txn.table(&schema, table)?.ok_or_else(|| RestError::no_table(&schema, table))
}

/// Who a commit names as its actor: the client's id when the server exchanges client
/// credentials, and where it connected from.
pub fn actor(shared: &Shared, client: SocketAddr) -> String {
    match &shared.access.client {
        Some((id, _)) => format!("rest:{id}@{}", client.ip()),
        None => format!("rest:{}", client.ip()),
    }
}

/// A commit's errors in the protocol's terms: an I/O failure may have come after the pointer
/// moved, so its state is unknown to the client (which must reload before retrying).
pub fn commit_error(e: Error) -> RestError {
    match e.kind {
        ErrorKind::Io | ErrorKind::Internal | ErrorKind::Corrupt => {
            RestError::new(StatusCode::INTERNAL_SERVER_ERROR, "CommitStateUnknownException", e.message)
        }
        _ => RestError::from(e),
    }
}
