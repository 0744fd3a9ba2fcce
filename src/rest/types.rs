//! The protocol's JSON payloads (apache/iceberg `open-api/rest-catalog-open-api.yaml`), written
//! here: `iceberg-catalog-rest` is a client crate whose config and error types are private. Table
//! metadata itself is the iceberg crate's `TableMetadata`, which serializes in the spec's form.

use std::collections::{BTreeMap, HashMap};

use iceberg::spec::{Schema, SortOrder, TableMetadata, UnboundPartitionSpec};
use iceberg::{TableRequirement, TableUpdate};
use serde::{Deserialize, Serialize};

/// `GET /v1/config`: no defaults or overrides (the server serves one lake, with no prefix), and
/// the routes it serves, so clients use none other.
#[derive(Serialize)]
pub struct CatalogConfig {
    pub defaults: BTreeMap<String, String>,
    pub overrides: BTreeMap<String, String>,
    pub endpoints: Vec<&'static str>,
}

#[derive(Serialize)]
pub struct ListNamespacesResponse {
    pub namespaces: Vec<Vec<String>>,
    #[serde(rename = "next-page-token")]
    pub next_page_token: Option<String>,
}

#[derive(Serialize)]
pub struct NamespaceResponse {
    pub namespace: Vec<String>,
    pub properties: BTreeMap<String, String>,
}

#[derive(Serialize)]
pub struct TableIdentifier {
    pub namespace: Vec<String>,
    pub name: String,
}

#[derive(Serialize)]
pub struct ListTablesResponse {
    pub identifiers: Vec<TableIdentifier>,
    #[serde(rename = "next-page-token")]
    pub next_page_token: Option<String>,
}

#[derive(Serialize)]
pub struct LoadTableResult<'a> {
    /// (none for a staged create: the table has no metadata file yet)
    #[serde(rename = "metadata-location", skip_serializing_if = "Option::is_none")]
    pub metadata_location: Option<&'a str>,
    pub metadata: &'a TableMetadata,
    pub config: BTreeMap<String, String>,
}

/// `POST .../tables/{table}`: requirements and updates are the iceberg crate's (the spec's
/// JSON); the identifier, when sent, repeats the path's.
#[derive(Deserialize)]
pub struct CommitTableRequest {
    #[serde(default)]
    pub requirements: Vec<TableRequirement>,
    #[serde(default)]
    pub updates: Vec<TableUpdate>,
}

/// `POST .../namespaces/{namespace}/tables`: a table as the client describes it; with
/// `stage-create` only its metadata is answered, and a commit asserting its absence creates it.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CreateTableRequest {
    pub name: String,
    pub location: Option<String>,
    pub schema: Schema,
    pub partition_spec: Option<UnboundPartitionSpec>,
    pub write_order: Option<SortOrder>,
    #[serde(default)]
    pub stage_create: bool,
    #[serde(default)]
    pub properties: HashMap<String, String>,
}

/// `POST /v1/transactions/commit`: several tables' changes, all or none.
#[derive(Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CommitTransactionRequest {
    pub table_changes: Vec<TableChange>,
}

#[derive(Deserialize)]
pub struct TableChange {
    pub identifier: ChangedTable,
    #[serde(default)]
    pub requirements: Vec<TableRequirement>,
    #[serde(default)]
    pub updates: Vec<TableUpdate>,
}

#[derive(Deserialize)]
pub struct ChangedTable {
    pub namespace: Vec<String>,
    pub name: String,
}

#[derive(Serialize)]
pub struct CommitTableResponse<'a> {
    #[serde(rename = "metadata-location")]
    pub metadata_location: &'a str,
    pub metadata: &'a TableMetadata,
}

/// The protocol's error model: `{"error": {"message", "type", "code"}}`.
#[derive(Serialize)]
pub struct ErrorModel<'a> {
    pub error: ErrorBody<'a>,
}

#[derive(Serialize)]
pub struct ErrorBody<'a> {
    pub message: &'a str,
    #[serde(rename = "type")]
    pub kind: &'a str,
    pub code: u16,
}

/// `POST /v1/oauth/tokens` (OAuth2 client credentials, RFC 6749 4.4): form fields. The client's
/// id and secret come here (PyIceberg) or in a Basic `Authorization` header (DuckDB).
#[derive(Deserialize, Default)]
pub struct TokenRequest {
    pub grant_type: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
}

#[derive(Serialize)]
pub struct TokenResponse<'a> {
    pub access_token: &'a str,
    pub token_type: &'static str,
    pub expires_in: u64,
    pub issued_token_type: &'static str,
}

/// An OAuth2 error (RFC 6749 5.2), the token route's own error form.
#[derive(Serialize)]
pub struct OAuthError<'a> {
    pub error: &'static str,
    pub error_description: &'a str,
}
