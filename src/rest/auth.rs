//! Who may use a server: nobody is asked without a token; with one, every request but the token
//! route must carry it (`Authorization: Bearer`), and `POST /v1/oauth/tokens` hands it out for
//! the configured client id and secret (OAuth2 client credentials, which PyIceberg's `credential`
//! and DuckDB's CLIENT_ID/CLIENT_SECRET use). Secrets are compared in constant time.

use axum::extract::rejection::FormRejection;
use axum::extract::{Form, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine;
use subtle::ConstantTimeEq;

use super::errors::{RestError, RestResult};
use super::state::{Access, Shared};
use super::types::{OAuthError, TokenRequest, TokenResponse};

/// How long clients may treat a token as valid: it lasts as long as the server, but clients
/// refresh before the time given and on a 401.
const TOKEN_SECONDS: u64 = 3600;

fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

/// Refuses a request without the server's token. An open server ignores `Authorization`
/// (PyIceberg with no token sends `Bearer None`).
pub fn check(access: &Access, headers: &HeaderMap) -> RestResult<()> {
    let Some(token) = &access.token else {
        return Ok(());
    };
    let sent = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| scheme(v, "bearer"));
    match sent {
        Some(sent) if same(sent.trim(), token) => Ok(()),
        Some(_) => Err(RestError::unauthorized("the bearer token is not this server's")),
        None => Err(RestError::unauthorized(
            "this server requires a bearer token (Authorization: Bearer <token>), or client credentials at \
             /v1/oauth/tokens",
        )),
    }
}

fn oauth_error(status: StatusCode, error: &'static str, description: &str) -> Response {
    (status, Json(OAuthError { error, error_description: description })).into_response()
}

/// The credentials of an `Authorization` value of `scheme` (matched case-insensitively, as
/// RFC 9110 says).
fn scheme<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let (name, rest) = value.split_once(' ')?;
    name.eq_ignore_ascii_case(scheme).then(|| rest.trim())
}

/// The client id and secret of a Basic `Authorization` header: as sent, and form-decoded as
/// RFC 6749 2.3.1 has clients encode them (PyIceberg and DuckDB send them unencoded).
fn basic(headers: &HeaderMap) -> Vec<(String, String)> {
    let Some(text) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| scheme(v, "basic"))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .and_then(|d| String::from_utf8(d).ok())
    else {
        return vec![];
    };
    let Some((id, secret)) = text.split_once(':') else {
        return vec![];
    };
    let form = |s: &str| url::form_urlencoded::parse(format!("x={s}").as_bytes()).next().map(|(_, v)| v.into_owned());
    let mut sent = vec![(id.to_string(), secret.to_string())];
    sent.extend(form(id).zip(form(secret)));
    sent
}

/// `POST /v1/oauth/tokens`.
pub async fn token(
    State(shared): State<Shared>,
    headers: HeaderMap,
    form: std::result::Result<Form<TokenRequest>, FormRejection>,
) -> Response {
    let form = match form {
        Ok(Form(form)) => form,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return oauth_error(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request", "the request body is too large");
        }
        Err(_) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "the token request must be a form (application/x-www-form-urlencoded)",
            )
        }
    };
    if form.grant_type.as_deref() != Some("client_credentials") {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "this server grants client_credentials only",
        );
    }
    let access = &shared.access;
    let (Some(token), Some((id, secret))) = (&access.token, &access.client) else {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "this server has no client credentials configured (skade_serve's client_id and client_secret)",
        );
    };
    let sent = match (form.client_id, form.client_secret) {
        (Some(i), Some(s)) => vec![(i, s)],
        _ => basic(&headers),
    };
    match sent.iter().any(|(i, s)| same(i, id) & same(s, secret)) {
        true => Json(TokenResponse {
            access_token: token,
            token_type: "bearer",
            expires_in: TOKEN_SECONDS,
            issued_token_type: "urn:ietf:params:oauth:token-type:access_token",
        })
        .into_response(),
        false => oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", "unknown client id or wrong secret"),
    }
}
