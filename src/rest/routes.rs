//! The routes a server serves, and how a request reaches the lake: its catalog work runs on a
//! thread of its own (the core's blocking entries must not run on a tokio worker), in a skade
//! transaction begun for it, which sees one consistent state of the lake.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use super::auth;
use super::errors::{RestError, RestResult};
use super::names::{schema_of, shown, table_of};
use super::state::Shared;
use super::types::{
    CatalogConfig, ListNamespacesResponse, ListTablesResponse, LoadTableResult, NamespaceResponse, TableIdentifier,
};
use crate::catalog::Catalog;

/// Bodies larger than this are refused (413) before they are read whole.
pub const BODY_LIMIT: usize = 16 << 20;
/// A request that takes longer is answered 503 (a slow client, a stuck lake).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The routes this server serves, as `/v1/config` lists them: clients call no other.
const ENDPOINTS: &[&str] = &[
    "GET /v1/{prefix}/namespaces",
    "GET /v1/{prefix}/namespaces/{namespace}",
    "HEAD /v1/{prefix}/namespaces/{namespace}",
    "GET /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
];

pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/v1/config", get(config))
        .route("/v1/namespaces", get(list_namespaces))
        .route("/v1/namespaces/{namespace}", get(load_namespace).head(namespace_exists))
        .route("/v1/namespaces/{namespace}/tables", get(list_tables))
        .route("/v1/namespaces/{namespace}/tables/{table}", get(load_table).head(table_exists))
        .fallback(unknown_route)
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .route("/v1/oauth/tokens", post(auth::token))
        .layer(middleware::from_fn_with_state(shared.clone(), count))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared)
}

/// Counts requests and errors, and answers a request that runs too long with 503.
async fn count(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    shared.stats.requests.fetch_add(1, Ordering::Relaxed);
    let response = match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        Err(_) => RestError::unavailable(format!(
            "the request took longer than {} s and was abandoned",
            REQUEST_TIMEOUT.as_secs()
        ))
        .into_response(),
    };
    if response.status().is_client_error() || response.status().is_server_error() {
        shared.stats.errors.fetch_add(1, Ordering::Relaxed);
    }
    response
}

/// Every route but the token route needs the server's token (when it has one).
async fn guard(State(shared): State<Shared>, request: Request<Body>, next: Next) -> Response {
    match auth::check(&shared.access, request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

async fn unknown_route(request: Request) -> RestError {
    RestError::new(
        StatusCode::NOT_FOUND,
        "NotFoundException",
        format!(
            "{} {} is not a route this server serves (GET /v1/config lists them)",
            request.method(),
            request.uri().path()
        ),
    )
}

/// Runs `work` on the lake in a transaction of its own, on a thread of its own.
async fn on_lake<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce(&Catalog, &crate::catalog::Transaction) -> RestResult<T> + Send + 'static,
) -> RestResult<T> {
    let weak = shared.catalog.clone();
    let lake = shared.lake.clone();
    let (send, receive) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("skade-rest-request".into()).spawn(move || {
        let outcome = match weak.upgrade() {
            None => Err(RestError::unavailable(format!("lake {} was detached: this server is stopping", shown(&lake)))),
            Some(catalog) => {
                let txn = catalog.begin();
                let out = work(&catalog, &txn);
                txn.rollback();
                out
            }
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

async fn config() -> Json<CatalogConfig> {
    Json(CatalogConfig { defaults: BTreeMap::new(), overrides: BTreeMap::new(), endpoints: ENDPOINTS.to_vec() })
}

async fn list_namespaces(State(shared): State<Shared>) -> RestResult<Json<ListNamespacesResponse>> {
    let names =
        on_lake(&shared, |_, txn| Ok(txn.schemas()?.iter().map(|s| s.name.clone()).collect::<Vec<_>>())).await?;
    Ok(Json(ListNamespacesResponse { namespaces: names.into_iter().map(|n| vec![n]).collect(), next_page_token: None }))
}

/// The schema a namespace names, as the lake spells it (names match case-insensitively).
fn existing_schema(txn: &crate::catalog::Transaction, namespace: &str) -> RestResult<String> {
    match txn.schema(namespace)? {
        Some(s) => Ok(s.name.clone()),
        None => Err(RestError::no_namespace(&shown(namespace))),
    }
}

async fn load_namespace(
    State(shared): State<Shared>,
    Path(namespace): Path<String>,
) -> RestResult<Json<NamespaceResponse>> {
    let schema = schema_of(&namespace)?;
    let name = on_lake(&shared, move |_, txn| existing_schema(txn, &schema)).await?;
    Ok(Json(NamespaceResponse { namespace: vec![name], properties: BTreeMap::new() }))
}

async fn namespace_exists(State(shared): State<Shared>, Path(namespace): Path<String>) -> RestResult<StatusCode> {
    let schema = schema_of(&namespace)?;
    on_lake(&shared, move |_, txn| existing_schema(txn, &schema)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_tables(
    State(shared): State<Shared>,
    Path(namespace): Path<String>,
) -> RestResult<Json<ListTablesResponse>> {
    let schema = schema_of(&namespace)?;
    let (schema, names) = on_lake(&shared, move |_, txn| {
        let schema = existing_schema(txn, &schema)?;
        let names: Vec<String> =
            txn.tables(&schema)?.iter().filter(|t| t.kind.is_table()).map(|t| t.name.clone()).collect();
        Ok((schema, names))
    })
    .await?;
    let identifiers = names.into_iter().map(|name| TableIdentifier { namespace: vec![schema.clone()], name }).collect();
    Ok(Json(ListTablesResponse { identifiers, next_page_token: None }))
}

/// The table a request names, with its metadata (a view is no table here).
fn existing_table(
    txn: &crate::catalog::Transaction,
    namespace: &str,
    table: &str,
) -> RestResult<crate::catalog::TableInfo> {
    let schema = existing_schema(txn, namespace)?;
    let record = txn
        .tables(&schema)?
        .into_iter()
        .find(|t| t.kind.is_table() && crate::catalog::names::key(&t.name) == crate::catalog::names::key(table));
    if record.is_none() {
        return Err(RestError::no_table(&schema, table));
    }
    txn.table(&schema, table)?.ok_or_else(|| RestError::no_table(&schema, table))
}

async fn load_table(State(shared): State<Shared>, Path((namespace, table)): Path<(String, String)>) -> Response {
    let found = async {
        let (schema, table) = (schema_of(&namespace)?, table_of(&table)?);
        on_lake(&shared, move |_, txn| {
            let info = existing_table(txn, &schema, &table)?;
            let body = LoadTableResult {
                metadata_location: &info.record.metadata_location,
                metadata: &info.metadata,
                config: BTreeMap::new(),
            };
            serde_json::to_vec(&body).map_err(|e| {
                RestError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "InternalServerError",
                    format!("cannot write table metadata as JSON: {e}"),
                )
            })
        })
        .await
    };
    match found.await {
        Ok(json) => ([(axum::http::header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn table_exists(
    State(shared): State<Shared>,
    Path((namespace, table)): Path<(String, String)>,
) -> RestResult<StatusCode> {
    let (schema, table) = (schema_of(&namespace)?, table_of(&table)?);
    on_lake(&shared, move |_, txn| existing_table(txn, &schema, &table).map(|_| ())).await?;
    Ok(StatusCode::NO_CONTENT)
}
