//! The protocol's errors: a status and an exception type clients map to their own exceptions
//! (PyIceberg's `NoSuchTableError`, DuckDB's "no such table"). Messages are skade's, which name
//! the object; no file contents or traces.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use super::types::{ErrorBody, ErrorModel};
use crate::error::{Error, ErrorKind};

#[derive(Debug)]
pub struct RestError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
}

pub type RestResult<T> = std::result::Result<T, RestError>;

impl RestError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> RestError {
        RestError { status, kind, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> RestError {
        RestError::new(StatusCode::BAD_REQUEST, "BadRequestException", message)
    }

    pub fn no_namespace(shown: &str) -> RestError {
        RestError::new(StatusCode::NOT_FOUND, "NoSuchNamespaceException", format!("namespace {shown} does not exist"))
    }

    pub fn no_table(namespace: &str, table: &str) -> RestError {
        RestError::new(
            StatusCode::NOT_FOUND,
            "NoSuchTableException",
            format!("table {namespace}.{table} does not exist"),
        )
    }

    pub fn unauthorized(message: impl Into<String>) -> RestError {
        RestError::new(StatusCode::UNAUTHORIZED, "NotAuthorizedException", message)
    }

    pub fn unavailable(message: impl Into<String>) -> RestError {
        RestError::new(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailableException", message)
    }
}

impl From<Error> for RestError {
    fn from(e: Error) -> RestError {
        let (status, kind) = match e.kind {
            ErrorKind::InvalidInput | ErrorKind::Binder | ErrorKind::Constraint => {
                (StatusCode::BAD_REQUEST, "BadRequestException")
            }
            ErrorKind::Catalog => (StatusCode::NOT_FOUND, "NotFoundException"),
            ErrorKind::Conflict => (StatusCode::CONFLICT, "CommitFailedException"),
            ErrorKind::Permission => (StatusCode::FORBIDDEN, "ForbiddenException"),
            ErrorKind::NotImplemented => (StatusCode::NOT_ACCEPTABLE, "UnsupportedOperationException"),
            ErrorKind::Interrupted => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailableException"),
            ErrorKind::Io | ErrorKind::Corrupt | ErrorKind::Internal => {
                (StatusCode::INTERNAL_SERVER_ERROR, "InternalServerError")
            }
        };
        RestError::new(status, kind, e.message)
    }
}

impl IntoResponse for RestError {
    fn into_response(self) -> Response {
        let body =
            ErrorModel { error: ErrorBody { message: &self.message, kind: self.kind, code: self.status.as_u16() } };
        (self.status, Json(body)).into_response()
    }
}
