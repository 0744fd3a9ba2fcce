//! The routes a server serves, and how a request reaches the lake: its catalog work runs on a
//! thread of its own (the core's blocking entries must not run on a tokio worker), in a skade
//! transaction begun for it, which sees one consistent state of the lake.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};

use super::auth;
use super::ddl;
use super::errors::{RestError, RestResult};
use super::lake::{existing_schema, existing_table, reading};
use super::names::{schema_of, table_of};
use super::state::Shared;
use super::tables;
use super::types::{
    CatalogConfig, ListNamespacesResponse, ListTablesResponse, LoadTableResult, NamespaceResponse, TableIdentifier,
};

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
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces",
    "DELETE /v1/{prefix}/namespaces/{namespace}",
    "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "POST /v1/{prefix}/transactions/commit",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
];

pub fn router(shared: Shared) -> Router {
    Router::new()
        .route("/v1/config", get(config))
        .route("/v1/namespaces", get(list_namespaces).post(ddl::create_namespace))
        .route("/v1/namespaces/{namespace}", get(load_namespace).head(namespace_exists).delete(ddl::drop_namespace))
        .route("/v1/namespaces/{namespace}/properties", post(ddl::update_namespace_properties))
        .route("/v1/tables/rename", post(ddl::rename_table))
        .route("/v1/namespaces/{namespace}/tables", get(list_tables).post(tables::create_table))
        .route("/v1/transactions/commit", post(tables::commit_transaction))
        .route("/v1/namespaces/{namespace}/register", post(tables::register_table))
        .route(
            "/v1/namespaces/{namespace}/tables/{table}",
            get(load_table).head(table_exists).post(tables::commit_table).delete(ddl::drop_table),
        )
        .fallback(unknown_route)
        .layer(middleware::from_fn_with_state(shared.clone(), guard))
        .route("/v1/oauth/tokens", post(auth::token))
        .method_not_allowed_fallback(wrong_method)
        .layer(middleware::from_fn_with_state(shared.clone(), count))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(shared)
}

/// Counts requests and errors, and answers a request that runs too long with 503.
async fn count(State(shared): State<Shared>, request: Request, next: Next) -> Response {
    shared.stats.requests.fetch_add(1, Ordering::Relaxed);
    let writes = request.method() == axum::http::Method::POST || request.method() == axum::http::Method::DELETE;
    let response = match tokio::time::timeout(REQUEST_TIMEOUT, next.run(request)).await {
        Ok(response) => response,
        // (a write's work goes on where it runs: it may still land, which the client must learn
        // by reloading, not by retrying blind)
        Err(_) if writes => RestError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "CommitStateUnknownException",
            format!(
                "the request took longer than {} s: it may still land; reload before retrying",
                REQUEST_TIMEOUT.as_secs()
            ),
        )
        .into_response(),
        Err(_) => RestError::unavailable(format!(
            "the request took longer than {} s and was abandoned",
            REQUEST_TIMEOUT.as_secs()
        ))
        .into_response(),
    };
    if response.status().is_client_error() || response.status().is_server_error() {
        shared.stats.errors.fetch_add(1, Ordering::Relaxed);
        return as_error_model(response).await;
    }
    response
}

/// An error answer not in the protocol's form (an extractor's rejection: a path that is not
/// UTF-8, a body that is not JSON) in it, its text as the message: clients show that message.
async fn as_error_model(response: Response) -> Response {
    let json = response
        .headers()
        .get(axum::http::header::CONTENT_TYPE)
        .is_some_and(|t| t.as_bytes().starts_with(b"application/json"));
    if json || response.status() == StatusCode::NOT_FOUND && response.headers().is_empty() {
        return response;
    }
    let status = response.status();
    let text = axum::body::to_bytes(response.into_body(), 4096).await.unwrap_or_default();
    let kind = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "RequestTooLargeException",
        s if s.is_server_error() => "InternalServerError",
        _ => "BadRequestException",
    };
    let message = String::from_utf8_lossy(&text).trim().to_string();
    let message = if message.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { message };
    RestError::new(status, kind, message).into_response()
}

async fn wrong_method(request: Request) -> RestError {
    RestError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "BadRequestException",
        format!(
            "{} is not served on {} (GET /v1/config lists the routes served)",
            request.method(),
            request.uri().path()
        ),
    )
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

async fn config() -> Json<CatalogConfig> {
    Json(CatalogConfig { defaults: BTreeMap::new(), overrides: BTreeMap::new(), endpoints: ENDPOINTS.to_vec() })
}

#[derive(serde::Deserialize)]
struct ListNamespacesQuery {
    parent: Option<String>,
}

/// The lake's schemas; those under `parent`: none (a skade schema has no children), or 404 when
/// `parent` does not exist.
async fn list_namespaces(
    State(shared): State<Shared>,
    Query(query): Query<ListNamespacesQuery>,
) -> RestResult<Json<ListNamespacesResponse>> {
    let parent = query.parent.filter(|p| !p.is_empty());
    let names = reading(&shared, move |txn| match parent {
        Some(parent) => existing_schema(txn, &read_schema(&parent)?).map(|_| vec![]),
        None => Ok(txn.schemas()?.iter().map(|s| s.name.clone()).collect::<Vec<_>>()),
    })
    .await?;
    Ok(Json(ListNamespacesResponse { namespaces: names.into_iter().map(|n| vec![n]).collect(), next_page_token: None }))
}

/// A namespace a read names: one that cannot exist (several levels, a name no schema can have)
/// does not, which existence checks (HEAD, PyIceberg's `namespace_exists`) must be told.
fn read_schema(namespace: &str) -> RestResult<String> {
    schema_of(namespace).map_err(|e| RestError::new(StatusCode::NOT_FOUND, "NoSuchNamespaceException", e.message))
}

fn read_table(table: &str) -> RestResult<String> {
    table_of(table).map_err(|e| RestError::new(StatusCode::NOT_FOUND, "NoSuchTableException", e.message))
}

async fn load_namespace(
    State(shared): State<Shared>,
    Path(namespace): Path<String>,
) -> RestResult<Json<NamespaceResponse>> {
    let schema = read_schema(&namespace)?;
    let record = reading(&shared, move |txn| {
        txn.schema(&schema)?.ok_or_else(|| RestError::no_namespace(&super::names::shown(&schema)))
    })
    .await?;
    let properties = record.properties.clone();
    Ok(Json(NamespaceResponse { namespace: vec![record.name.clone()], properties }))
}

async fn namespace_exists(State(shared): State<Shared>, Path(namespace): Path<String>) -> RestResult<StatusCode> {
    let schema = read_schema(&namespace)?;
    reading(&shared, move |txn| existing_schema(txn, &schema)).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn list_tables(
    State(shared): State<Shared>,
    Path(namespace): Path<String>,
) -> RestResult<Json<ListTablesResponse>> {
    let schema = read_schema(&namespace)?;
    let (schema, names) = reading(&shared, move |txn| {
        let schema = existing_schema(txn, &schema)?;
        let names: Vec<String> =
            txn.tables(&schema)?.iter().filter(|t| t.kind.is_table()).map(|t| t.name.clone()).collect();
        Ok((schema, names))
    })
    .await?;
    let identifiers = names.into_iter().map(|name| TableIdentifier { namespace: vec![schema.clone()], name }).collect();
    Ok(Json(ListTablesResponse { identifiers, next_page_token: None }))
}

async fn load_table(State(shared): State<Shared>, Path((namespace, table)): Path<(String, String)>) -> Response {
    let found = async {
        let (schema, table) = (read_schema(&namespace)?, read_table(&table)?);
        reading(&shared, move |txn| {
            let info = existing_table(txn, &schema, &table)?;
            let body = LoadTableResult {
                metadata_location: Some(&info.record.metadata_location),
                metadata: &info.metadata,
                config: BTreeMap::new(),
            };
            tables::json(&body)
        })
        .await
    };
    tables::answer(found.await)
}

async fn table_exists(
    State(shared): State<Shared>,
    Path((namespace, table)): Path<(String, String)>,
) -> RestResult<StatusCode> {
    let (schema, table) = (read_schema(&namespace)?, read_table(&table)?);
    reading(&shared, move |txn| existing_table(txn, &schema, &table).map(|_| ())).await?;
    Ok(StatusCode::NO_CONTENT)
}
