//! Table creation and commits over the protocol (`catalog/transaction_external*.rs` does the
//! work): a create (staged or not), a commit to one table (an `assert-create` commit creates it),
//! and `transactions/commit`, several tables' changes in one skade commit, all or none.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use iceberg::{TableRequirement, TableUpdate};
use serde::Serialize;

use super::ddl::{body, committing, committing_with, one_level};
use super::errors::{RestError, RestResult};
use super::lake::{commit_error, existing_schema, existing_table, reading};
use super::names::{schema_of, shown, table_of};
use super::state::Shared;
use super::types::{
    CommitTableRequest, CommitTableResponse, CommitTransactionRequest, CreateTableRequest, LoadTableResult,
};
use crate::catalog::transaction_external::Updated;
use crate::catalog::transaction_external_create::NewTable;
use crate::catalog::Transaction;
use crate::error::{Error, ErrorKind};

/// A value as the JSON body of an answer.
pub(super) fn json<T: Serialize>(value: &T) -> RestResult<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| {
        RestError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalServerError",
            format!("cannot write the answer: {e}"),
        )
    })
}

/// A JSON body, or the error, as the answer.
pub(super) fn answer(outcome: RestResult<Vec<u8>>) -> Response {
    match outcome {
        Ok(json) => ([(axum::http::header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(e) => e.into_response(),
    }
}

/// A create's name taken (by a table or a view) is the protocol's AlreadyExists.
fn create_error(e: Error) -> RestError {
    match e.kind {
        ErrorKind::Conflict => RestError::new(StatusCode::CONFLICT, "AlreadyExistsException", e.message),
        _ => commit_error(e),
    }
}

/// `POST .../namespaces/{namespace}/tables`: CREATE TABLE. Staged, the table's metadata is
/// answered and nothing is written: the client's commit asserting the table's absence creates
/// it (with the rows it wrote meanwhile, for CREATE TABLE AS).
pub async fn create_table(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(namespace): Path<String>,
    bytes: Bytes,
) -> Response {
    let created = async {
        let request: CreateTableRequest = body(&bytes, "create table")?;
        let (schema, name) = (schema_of(&namespace)?, table_of(&request.name)?);
        let new = NewTable {
            schema: request.schema,
            spec: request.partition_spec,
            order: request.write_order,
            location: request.location,
            properties: request.properties,
            uuid: None,
            version: None,
        };
        if request.stage_create {
            let shared_for_stage = shared.clone();
            return reading(&shared, move |txn| {
                let schema = existing_schema(txn, &schema)?;
                let md = txn.stage_external_table(&schema, &name, new).map_err(create_error)?;
                shared_for_stage.staged.lock().unwrap_or_else(|p| p.into_inner()).remember(md.uuid());
                json(&LoadTableResult { metadata_location: None, metadata: &md, config: Default::default() })
            })
            .await;
        }
        let json = committing(&shared, client, move |txn| {
            let schema = existing_schema(txn, &schema)?;
            let created = txn.create_external_table(&schema, &name, new).map_err(create_error)?;
            let metadata_location = Some(created.metadata_location.as_str());
            Ok(json(&LoadTableResult { metadata_location, metadata: &created.metadata, config: Default::default() }))
        })
        .await??;
        shared.stats.commits.fetch_add(1, Ordering::Relaxed);
        Ok(json)
    };
    answer(created.await)
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct RegisterTableRequest {
    name: String,
    metadata_location: String,
    #[serde(default)]
    overwrite: bool,
}

/// `POST .../namespaces/{namespace}/register`: a table whose metadata file the client wrote in
/// the lake's place for it (`Transaction::register_table` checks what it names).
pub async fn register_table(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path(namespace): Path<String>,
    bytes: Bytes,
) -> Response {
    let registered = async {
        let request: RegisterTableRequest = body(&bytes, "register table")?;
        let (schema, name) = (schema_of(&namespace)?, table_of(&request.name)?);
        if request.overwrite {
            return Err(RestError::new(
                StatusCode::NOT_ACCEPTABLE,
                "UnsupportedOperationException",
                "registering over an existing table (overwrite) is not served: drop it first",
            ));
        }
        let json = committing_with(&shared, client, true, move |txn| {
            let schema = existing_schema(txn, &schema)?;
            let table = txn.register_table(&schema, &name, &request.metadata_location).map_err(create_error)?;
            let metadata_location = Some(table.metadata_location.as_str());
            Ok(json(&LoadTableResult { metadata_location, metadata: &table.metadata, config: Default::default() }))
        })
        .await??;
        shared.stats.commits.fetch_add(1, Ordering::Relaxed);
        Ok(json)
    };
    answer(registered.await)
}

/// The uuids a change creating its table assigns.
fn assigned_uuids(requirements: &[TableRequirement], updates: &[TableUpdate]) -> Vec<uuid::Uuid> {
    let assigned = updates.iter().filter_map(|u| match u {
        TableUpdate::AssignUuid { uuid } => Some(*uuid),
        _ => None,
    });
    match creates(requirements) {
        true => assigned.collect(),
        false => vec![],
    }
}

/// After a commit landed: the staged uuids its creating changes assigned are taken (the commit
/// still held the identity turn when it landed, so none was kept twice).
fn take_staged_uuids(shared: &Shared, uuids: Vec<uuid::Uuid>) {
    let mut staged = shared.staged.lock().unwrap_or_else(|p| p.into_inner());
    uuids.into_iter().for_each(|u| staged.taken(u));
}

/// Whether a change creates its table (`assert-create`).
fn creates(requirements: &[TableRequirement]) -> bool {
    requirements.iter().any(|r| matches!(r, TableRequirement::NotExist))
}

/// One table's change in `txn`: an `assert-create` creates the table the updates describe;
/// otherwise the requirements are checked against the table and the updates applied.
fn apply_change(
    shared: &Shared,
    txn: &Transaction,
    namespace: &str,
    table: &str,
    requirements: &[TableRequirement],
    updates: Vec<TableUpdate>,
) -> RestResult<Updated> {
    let schema = existing_schema(txn, namespace)?;
    if creates(requirements) {
        if requirements.len() > 1 {
            return Err(RestError::bad_request(format!(
                "the commit creating table {}.{} asserts more than the table's absence",
                shown(&schema),
                shown(table)
            )));
        }
        // (taken once the commit lands, `take_staged_uuids`: a commit that fails keeps it for its retry)
        let staged_here = |uuid| shared.staged.lock().unwrap_or_else(|p| p.into_inner()).holds(uuid);
        return txn.create_table_by_commit(&schema, table, updates, staged_here).map_err(commit_error);
    }
    existing_table(txn, &schema, table)?;
    txn.update_table(&schema, table, requirements, updates).map_err(commit_error)
}

/// `POST .../tables/{table}`: another engine's commit, as a skade commit naming the client. A
/// requirement that fails, or a commit that lands on the table meanwhile, is 409
/// `CommitFailedException` (the client reloads and retries).
pub async fn commit_table(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    Path((namespace, table)): Path<(String, String)>,
    bytes: Bytes,
) -> Response {
    let committed = async {
        let (schema, table) = (schema_of(&namespace)?, table_of(&table)?);
        let request: CommitTableRequest = body(&bytes, "commit")?;
        let for_work = shared.clone();
        let creates = creates(&request.requirements);
        let assigned = assigned_uuids(&request.requirements, &request.updates);
        let json = committing_with(&shared, client, creates, move |txn| {
            let updated = apply_change(&for_work, txn, &schema, &table, &request.requirements, request.updates)?;
            let metadata_location = &updated.metadata_location;
            Ok(json(&CommitTableResponse { metadata_location, metadata: &updated.metadata }))
        })
        .await??;
        take_staged_uuids(&shared, assigned);
        shared.stats.commits.fetch_add(1, Ordering::Relaxed);
        Ok(json)
    };
    answer(committed.await)
}

/// `POST /v1/transactions/commit`: every table's change in one skade commit, all or none; a
/// table named twice is refused (its second change would not see its first).
pub async fn commit_transaction(
    State(shared): State<Shared>,
    ConnectInfo(client): ConnectInfo<SocketAddr>,
    bytes: Bytes,
) -> RestResult<StatusCode> {
    let request: CommitTransactionRequest = body(&bytes, "commit transaction")?;
    if request.table_changes.is_empty() {
        return Err(RestError::bad_request("the transaction changes no table"));
    }
    let mut changes = vec![];
    let mut seen = std::collections::HashSet::new();
    for change in request.table_changes {
        let (schema, table) = (one_level(&change.identifier.namespace)?, table_of(&change.identifier.name)?);
        let key = (crate::catalog::names::key(&schema), crate::catalog::names::key(&table));
        if !seen.insert(key) {
            return Err(RestError::bad_request(format!(
                "the transaction changes table {}.{} twice: send its changes as one",
                shown(&schema),
                shown(&table)
            )));
        }
        changes.push((schema, table, change.requirements, change.updates));
    }
    let for_work = shared.clone();
    let any_creates = changes.iter().any(|(_, _, requirements, _)| creates(requirements));
    let assigned: Vec<uuid::Uuid> = changes.iter().flat_map(|(_, _, r, u)| assigned_uuids(r, u)).collect();
    committing_with(&shared, client, any_creates, move |txn| {
        for (schema, table, requirements, updates) in changes {
            apply_change(&for_work, txn, &schema, &table, &requirements, updates)?;
        }
        Ok(())
    })
    .await?;
    take_staged_uuids(&shared, assigned);
    shared.stats.commits.fetch_add(1, Ordering::Relaxed);
    Ok(StatusCode::NO_CONTENT)
}
