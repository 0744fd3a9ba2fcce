//! Namespace and table DDL over the protocol: a namespace is a skade schema (create, drop), a
//! table is dropped or renamed as DROP TABLE and ALTER TABLE ... RENAME do; a namespace's
//! properties are kept in its schema's record. Each is a skade commit naming the client. Not
//! served (406): a rename into another namespace (skade renames within a schema).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::errors::{RestError, RestResult};
use super::lake::{actor, commit_error, existing_schema, existing_table, on_lake};
use super::names::{schema_of, shown, table_of};
use super::state::Shared;
use super::types::NamespaceResponse;
use crate::catalog::Transaction;

pub(super) fn body<T: DeserializeOwned>(bytes: &Bytes, what: &str) -> RestResult<T> {
    serde_json::from_slice(bytes)
        .map_err(|e| RestError::bad_request(format!("the {what} request is not one the protocol defines: {e}")))
}

/// Runs `work` in a transaction naming the client, and commits it.
pub(super) async fn committing<T: Send + 'static>(
    shared: &Shared,
    client: SocketAddr,
    work: impl FnOnce(&Transaction) -> RestResult<T> + Send + 'static,
) -> RestResult<T> {
    committing_with(shared, client, false, work).await
}

/// Requests that give a table a uuid a client chose (a register, a staged create's commit) take
/// turns in this process from checking that no table has it to their commit, so two of them
/// cannot both take one uuid. (Processes sharing a lake through its commit log do not share
/// these turns: a register there is checked against what the process has read.)
static IDENTITY_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`committing`], in the identity turn when `identity` says the work keeps a client's uuid.
pub(super) async fn committing_with<T: Send + 'static>(
    shared: &Shared,
    client: SocketAddr,
    identity: bool,
    work: impl FnOnce(&Transaction) -> RestResult<T> + Send + 'static,
) -> RestResult<T> {
    let actor = actor(shared, client);
    on_lake(shared, move |catalog| {
        let _turn = identity.then(|| IDENTITY_TURN.lock().unwrap_or_else(|p| p.into_inner()));
        let txn = catalog.with_actor(&actor).begin();
        let out = work(&txn)?;
        txn.commit().map_err(commit_error)?;
        Ok(out)
    })
    .await
}

/// The one schema a namespace array names.
pub(super) fn one_level(namespace: &[String]) -> RestResult<String> {
    match namespace {
        [name] => schema_of(name),
        _ => Err(RestError::bad_request(format!(
            "namespace {} has {} levels: a skade lake's namespaces (its schemas) have one",
            shown(&namespace.join(".")),
            namespace.len()
        ))),
    }
}

#[derive(Deserialize)]
pub struct CreateNamespaceRequest {
    namespace: Vec<String>,
    #[serde(default)]
    properties: BTreeMap<String, String>,
}

/// `POST /v1/namespaces`: CREATE SCHEMA.
pub async fn create_namespace(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    bytes: Bytes,
) -> RestResult<Json<NamespaceResponse>> {
    let request: CreateNamespaceRequest = body(&bytes, "create namespace")?;
    let name = one_level(&request.namespace)?;
    let created = name.clone();
    let properties = request.properties.clone();
    committing(&shared, client, move |txn| {
        if txn.schema(&created)?.is_some() {
            return Err(RestError::new(
                StatusCode::CONFLICT,
                "AlreadyExistsException",
                format!("namespace {} already exists", shown(&created)),
            ));
        }
        txn.create_schema(&created, false)?;
        if !properties.is_empty() {
            txn.alter_schema_properties(&created, properties, vec![])?;
        }
        Ok(())
    })
    .await?;
    Ok(Json(NamespaceResponse { namespace: vec![name], properties: request.properties }))
}

/// `DELETE /v1/namespaces/{namespace}`: DROP SCHEMA, of an empty one only.
pub async fn drop_namespace(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(namespace): Path<String>,
) -> RestResult<StatusCode> {
    let name = schema_of(&namespace)?;
    committing(&shared, client, move |txn| {
        let schema = existing_schema(txn, &name)?;
        if !txn.tables(&schema)?.is_empty() {
            return Err(RestError::new(
                StatusCode::CONFLICT,
                "NamespaceNotEmptyException",
                format!("namespace {} is not empty: it holds tables or views", shown(&schema)),
            ));
        }
        txn.drop_schema(&schema, false, false)?;
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
pub struct UpdatePropertiesRequest {
    #[serde(default)]
    removals: Vec<String>,
    #[serde(default)]
    updates: BTreeMap<String, String>,
}

#[derive(serde::Serialize)]
pub struct UpdatePropertiesResponse {
    updated: Vec<String>,
    removed: Vec<String>,
    missing: Vec<String>,
}

/// `POST /v1/namespaces/{namespace}/properties`: the schema's properties set and removed, one
/// skade commit (none when nothing changes).
pub async fn update_namespace_properties(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(namespace): Path<String>,
    bytes: Bytes,
) -> RestResult<Json<UpdatePropertiesResponse>> {
    let request: UpdatePropertiesRequest = body(&bytes, "update namespace properties")?;
    if let Some(both) = request.removals.iter().find(|k| request.updates.contains_key(*k)) {
        return Err(RestError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "UnprocessableEntityException",
            format!("property {} is both updated and removed", shown(both)),
        ));
    }
    let name = schema_of(&namespace)?;
    let changed = committing(&shared, client, move |txn| {
        let schema = existing_schema(txn, &name)?;
        Ok(txn.alter_schema_properties(&schema, request.updates, request.removals)?)
    })
    .await?;
    Ok(Json(UpdatePropertiesResponse { updated: changed.updated, removed: changed.removed, missing: changed.missing }))
}

#[derive(Deserialize)]
pub struct DropTableQuery {
    /// (PyIceberg sends `True`/`False`, DuckDB `true`/`false`)
    #[serde(rename = "purgeRequested")]
    purge_requested: Option<String>,
}

/// `DELETE .../tables/{table}`: DROP TABLE. Its files stay until maintenance removes them
/// (`skade_remove_orphan_files`), purge requested or not: a consumer behind the drop, or time
/// travel, may still read them.
pub async fn drop_table(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((namespace, table)): Path<(String, String)>,
    Query(query): Query<DropTableQuery>,
) -> RestResult<StatusCode> {
    if let Some(purge) = &query.purge_requested {
        if !purge.eq_ignore_ascii_case("true") && !purge.eq_ignore_ascii_case("false") {
            return Err(RestError::bad_request(format!("purgeRequested={} is not true or false", shown(purge))));
        }
    }
    let (schema, table) = (schema_of(&namespace)?, table_of(&table)?);
    committing(&shared, client, move |txn| {
        let info = existing_table(txn, &schema, &table)?;
        txn.drop_table(&info.record.schema, &info.record.name, false)?;
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
pub struct RenameRequest {
    source: Identifier,
    destination: Identifier,
}

#[derive(Deserialize)]
struct Identifier {
    namespace: Vec<String>,
    name: String,
}

/// `POST /v1/tables/rename`: ALTER TABLE ... RENAME TO, within one namespace.
pub async fn rename_table(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    bytes: Bytes,
) -> RestResult<StatusCode> {
    let request: RenameRequest = body(&bytes, "rename table")?;
    let (from_schema, from) = (one_level(&request.source.namespace)?, table_of(&request.source.name)?);
    let (to_schema, to) = (one_level(&request.destination.namespace)?, table_of(&request.destination.name)?);
    committing(&shared, client, move |txn| {
        let info = existing_table(txn, &from_schema, &from)?;
        let target = existing_schema(txn, &to_schema)?;
        if crate::catalog::names::key(&target) != crate::catalog::names::key(&info.record.schema) {
            return Err(RestError::new(
                StatusCode::NOT_ACCEPTABLE,
                "UnsupportedOperationException",
                format!(
                    "table {}.{} cannot move to namespace {}: skade renames a table within its schema",
                    info.record.schema, info.record.name, target
                ),
            ));
        }
        if txn.tables(&target)?.iter().any(|t| crate::catalog::names::key(&t.name) == crate::catalog::names::key(&to)) {
            return Err(RestError::new(
                StatusCode::CONFLICT,
                "AlreadyExistsException",
                format!("table {}.{} already exists", target, shown(&to)),
            ));
        }
        txn.rename_table(&info.record.schema, &info.record.name, &to)?;
        Ok(())
    })
    .await?;
    Ok(StatusCode::NO_CONTENT)
}
