//! An OpenAI-compatible embeddings provider over HTTP(S), through rustls.
//!
//! It is used only when the configuration names it (`provider = "openai"`
//! with a base URL). The key is read from the environment variable the
//! configuration names, once, at start-up; it is sent in the
//! `Authorization` header and never logged, traced or reported.

use super::provider::{EmbedProvider, ProviderReply, ProviderRequest};
use crate::http::post_json;
use crate::upstream::ProviderError;
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
