//! An OpenAI-compatible embeddings provider over HTTP(S), through rustls.
//!
//! It is used only when the configuration names it (`provider = "openai"`
//! with a base URL). The key is read from the environment variable the
//! configuration names, once, at start-up; it is sent in the
//! `Authorization` header and never logged, traced or reported.

use crate::provider::{EmbedProvider, FailureKind, ProviderError, ProviderReply, ProviderRequest};
use engine::embed::upstream::HttpSettings;
use engine::error::{Error, Result};
use engine::BoxFuture;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The HTTP provider.
pub struct HttpProvider {
    client: reqwest::Client,
    url: String,
    key: Option<String>,
    send_dimensions: bool,
}

impl std::fmt::Debug for HttpProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("HttpProvider")
            .field("url", &engine::chat::redact_url(&self.url))
            .field("key", &self.key.as_ref().map(|_| "<set>"))
            .finish()
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    input: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<usize>,
}

#[derive(Deserialize)]
struct Reply {
    data: Vec<Item>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Item {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
}

fn config_err(field: &str, cause: String) -> Error {
    Error::Config { source_name: "configuration".into(), field: format!("embedding.http.{field}"), cause }
}

impl HttpProvider {
    /// Builds the provider, reading the key from the environment.
    pub fn new(settings: &HttpSettings) -> Result<HttpProvider> {
        let base = settings.base_url.trim_end_matches('/');
        if !(base.starts_with("https://") || base.starts_with("http://")) {
            return Err(config_err(
                "base_url",
                format!("must be an http:// or https:// URL, got {:?}", settings.base_url),
            ));
        }
        let key = if settings.api_key_env.is_empty() {
            None
        } else {
            match std::env::var(&settings.api_key_env) {
                Ok(k) if !k.is_empty() => Some(k),
                _ => {
                    return Err(config_err(
                        "api_key_env",
                        format!("the environment variable {} is not set", settings.api_key_env),
                    ))
                }
            }
        };
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(settings.connect_timeout_ms))
            .read_timeout(Duration::from_millis(settings.read_timeout_ms))
            .timeout(Duration::from_millis(settings.request_timeout_ms))
            .build()
            .map_err(|e| config_err("base_url", format!("cannot build an HTTP client: {e}")))?;
        Ok(HttpProvider { client, url: format!("{base}/embeddings"), key, send_dimensions: settings.send_dimensions })
    }
}

impl EmbedProvider for HttpProvider {
    fn request<'a>(
        &'a self,
        req: ProviderRequest<'a>,
    ) -> BoxFuture<'a, std::result::Result<ProviderReply, ProviderError>> {
        Box::pin(async move {
            let body = Body { model: req.model, input: req.texts, dimensions: self.send_dimensions.then_some(req.dim) };
            let reply: Reply = post_json(&self.client, &self.url, self.key.as_deref(), &body, |_, _| None).await?;
            let mut items = reply.data;
            if items.iter().all(|i| i.index.is_some()) {
                items.sort_by_key(|i| i.index);
            }
            Ok(ProviderReply {
                vectors: items.into_iter().map(|i| i.embedding).collect(),
                billed_tokens: reply.usage.and_then(|u| u.prompt_tokens),
            })
        })
    }
}

/// Posts `body` as JSON to `url` (with `key` as a bearer token) and decodes
/// a 2xx answer as `T`. Anything else is a classified [`ProviderError`]
/// whose message names the URL without credentials (messages reach traces
/// and logs) and quotes the start of the server's answer; `hint(status,
/// body)` may add advice to it.
pub(crate) async fn post_json<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    body: &impl Serialize,
    hint: fn(u16, &str) -> Option<&'static str>,
) -> std::result::Result<T, ProviderError> {
    let mut r = client.post(url).json(body);
    if let Some(k) = key {
        r = r.bearer_auth(k);
    }
    let resp = send(r, url, hint).await?;
    resp.json().await.map_err(|e| ProviderError {
        kind: FailureKind::Permanent,
        message: format!("{}: unreadable reply: {}", engine::chat::redact_url(url), e.without_url()),
        billed_tokens: None,
    })
}

/// Sends `r` (a request to `url`) and returns a 2xx answer; anything else
/// is a classified [`ProviderError`], as [`post_json`] describes.
pub(crate) async fn send(
    r: reqwest::RequestBuilder,
    url: &str,
    hint: fn(u16, &str) -> Option<&'static str>,
) -> std::result::Result<reqwest::Response, ProviderError> {
    let shown = engine::chat::redact_url(url);
    let fail = |kind, message: String| ProviderError { kind, message, billed_tokens: None };
    let resp = match r.send().await {
        Ok(resp) => resp,
        Err(e) if e.is_timeout() => return Err(fail(FailureKind::Timeout, format!("{shown}: timed out"))),
        Err(e) => return Err(fail(FailureKind::Server, format!("{shown}: {}", e.without_url()))),
    };
    let status = resp.status();
    if !status.is_success() {
        let retry_after = resp
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|s| (s * 1000.0) as u64);
        let text = resp.text().await.unwrap_or_default();
        let snippet: String = text.chars().take(200).collect();
        let mut message = format!("{shown} answered {status}: {snippet}");
        if let Some(h) = hint(status.as_u16(), &text) {
            message.push_str(h);
        }
        return Err(fail(FailureKind::from_status(status.as_u16(), retry_after), message));
    }
    Ok(resp)
}
