//! Where lineage events go. A sink never fails or slows a commit: it runs on its own thread
//! (`delivery`), from the durable commit log, and its errors become delivery state.

use std::time::Duration;

use serde_json::Value;

/// What became of one event sent to a sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The sink holds it (an HTTP 2xx).
    Delivered,
    /// The sink refused it for good (an HTTP 4xx other than 408 and 429, or a redirect):
    /// recorded, skipped.
    Rejected(String),
    /// Try again later (down, slow, an HTTP 5xx, 408 or 429).
    Failed(String),
}

/// A destination of OpenLineage RunEvents.
pub trait LineageSink: Send + Sync {
    /// The sink's name in the catalog (its cursor's key) and in `skade_lineage_delivery`.
    fn name(&self) -> String;
    fn send(&self, event: &Value) -> Outcome;
}

/// POSTs each event as JSON to an OpenLineage collector's lineage endpoint (Marquez's
/// `/api/v1/lineage` unless OPENLINEAGE_ENDPOINT says otherwise).
pub struct HttpSink {
    url: String,
    api_key: Option<String>,
    agent: ureq::Agent,
}

/// A collector that answers nothing within this is down for this attempt.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

impl HttpSink {
    pub fn new(url: String, api_key: Option<String>) -> Self {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(HTTP_TIMEOUT))
            .timeout_connect(Some(Duration::from_secs(5)))
            .http_status_as_error(false)
            // (a redirected POST would become a GET: a redirect is the URL to fix, not to follow)
            .max_redirects(0)
            .build()
            .into();
        HttpSink { url, api_key, agent }
    }
}

impl LineageSink for HttpSink {
    fn name(&self) -> String {
        format!("openlineage {}", self.url)
    }

    fn send(&self, event: &Value) -> Outcome {
        let mut request = self.agent.post(&self.url).header("Content-Type", "application/json");
        if let Some(key) = &self.api_key {
            request = request.header("Authorization", format!("Bearer {key}"));
        }
        match request.send(event.to_string()) {
            Err(e) => Outcome::Failed(format!("POST {}: {e}", self.url)),
            Ok(mut response) => {
                let status = response.status().as_u16();
                if (200..300).contains(&status) {
                    return Outcome::Delivered;
                }
                let body = response.body_mut().with_config().limit(4096).read_to_string().unwrap_or_default();
                let message = format!("POST {} answered HTTP {status}: {}", self.url, body.trim());
                match status {
                    300..=399 => Outcome::Rejected(format!(
                        "{message} (a redirect to {}: set OPENLINEAGE_URL to the collector itself)",
                        response.headers().get("location").and_then(|l| l.to_str().ok()).unwrap_or("nowhere")
                    )),
                    408 | 429 => Outcome::Failed(message),
                    400..=499 => Outcome::Rejected(message),
                    _ => Outcome::Failed(message),
                }
            }
        }
    }
}
