//! HTTP(S) to an upstream, through rustls, for both sides (the embedding
//! provider and the chat upstreams): a JSON post, and every answer that is
//! not a 2xx classified as a [`ProviderError`] whose message names the URL
//! without credentials.

use crate::upstream::{FailureKind, ProviderError};
use serde::Serialize;

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
