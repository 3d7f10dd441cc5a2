//! Live chat through a Batch API (`[chat] mode = "batch"`): OpenAI's
//! `/v1/files` and `/v1/batches`, which vLLM's and other servers' batch
//! front ends copy. Every call is billed at the batch price.
//!
//! The chat stage runs every job of its window at once and tells the port
//! when each conversation begins and ends. A *round* goes out when every
//! conversation under way is waiting on the port: the reactions first,
//! then the probes, reflections and guardrail retries that follow them.
//! Its requests, deduplicated by digest and sorted, become JSONL lines
//! (`custom_id` = the request digest) split at the API's limits; each file
//! is uploaded (`POST /files`, purpose `batch`) and submitted (`POST
//! /batches`, window `24h`), and the submission is written to the chat log
//! before the port waits. The batch is polled from within a second,
//! backing off to `poll_max_ms`; its output and error files are then read
//! and mapped back by `custom_id`. A line that failed or that the batch
//! never answered (expired, cancelled) fails its request like a failed
//! call. A resumed run polls the batches its log records instead of
//! submitting their requests again.
//!
//! A small round of guardrail retries alone goes online at the online
//! price (`direct_retries_at_most`), and so does any request made outside
//! a conversation (the connection check).

use crate::chat::{parse_completion, server_seed, ChatClient, HttpChat, UpstreamCall};
use crate::clock::{Sleeper, TokioSleeper};
use crate::provider::{FailureKind, ProviderError};
use engine::chat::{
    BatchJournal, ChatAttempt, ChatError, ChatPort, ChatReply, ChatRequest, ChatResult, FailureClass, SubmittedBatch,
};
use engine::config::{BatchSettings, ChatSection};
use engine::cost::{estimate_tokens, Price, Spend};
use engine::digest::Digest;
use engine::BoxFuture;
use parking_lot::Mutex;
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The chat port over a Batch API.
pub struct BatchChat {
    inner: Arc<Inner>,
}

struct Inner {
    http: HttpChat,
    /// `…/v1`, without a trailing slash.
    base: String,
    online: Arc<ChatClient>,
    price: Price,
    settings: BatchSettings,
    seed: u64,
    max_retries: u32,
    state: Mutex<State>,
    journal: Mutex<Option<Arc<dyn BatchJournal>>>,
    /// Requests in batches a resumed run's log recorded, by digest.
    earlier: Mutex<HashMap<Digest, String>>,
    clock: Arc<dyn Sleeper>,
    /// Batches submitted, lines sent, lines failed, lines awaited now.
    batches: AtomicU64,
    lines: AtomicU64,
    failed_lines: AtomicU64,
    waiting: AtomicU64,
    billed: AtomicU64,
}

#[derive(Default)]
struct State {
    active: usize,
    pending: Vec<(ChatRequest, tokio::sync::oneshot::Sender<ChatResult<ChatReply>>)>,
}

type Round = Vec<(ChatRequest, tokio::sync::oneshot::Sender<ChatResult<ChatReply>>)>;

impl BatchChat {
    /// The port for `[chat]` in batch mode: `online` answers what is sent
    /// directly; `price` is the batch price. The key comes from the
    /// environment, as for online calls.
    pub fn new(section: &ChatSection, online: Arc<ChatClient>, price: Price, seed: u64) -> engine::Result<BatchChat> {
        let http = HttpChat::new(section)?;
        let base = section.http.endpoints().first().map(|b| b.trim_end_matches('/').to_string()).unwrap_or_default();
        Ok(BatchChat {
            inner: Arc::new(Inner {
                http,
                base,
                online,
                price,
                settings: section.batch.clone(),
                seed,
                max_retries: section.max_retries,
                state: Mutex::new(State::default()),
                journal: Mutex::new(None),
                earlier: Mutex::new(HashMap::new()),
                clock: Arc::new(TokioSleeper::new()),
                batches: AtomicU64::new(0),
                lines: AtomicU64::new(0),
                failed_lines: AtomicU64::new(0),
                waiting: AtomicU64::new(0),
                billed: AtomicU64::new(0),
            }),
        })
    }

    /// Sends a round when every conversation under way waits on the port.
    fn maybe_send(&self, state: &mut State) {
        if state.pending.is_empty() || state.pending.len() < state.active {
            return;
        }
        let round = std::mem::take(&mut state.pending);
        let inner = Arc::clone(&self.inner);
        tokio::spawn(async move { inner.send_round(round).await });
    }
}

impl ChatPort for BatchChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, ChatResult<ChatReply>> {
        Box::pin(async move {
            let rx = {
                let mut state = self.inner.state.lock();
                match state.active {
                    0 => None,
                    _ => {
                        let (tx, rx) = tokio::sync::oneshot::channel();
                        state.pending.push((request.clone(), tx));
                        self.maybe_send(&mut state);
                        Some(rx)
                    }
                }
            };
            let Some(rx) = rx else { return self.inner.online.complete(request).await };
            rx.await.unwrap_or_else(|_| Err(failure("the batch port closed before answering", Vec::new())))
        })
    }

    fn endpoints(&self) -> Vec<engine::chat::EndpointCount> {
        let i = &self.inner;
        let mut out = vec![engine::chat::EndpointCount {
            url: engine::report::redact_url(&format!("{}/batches", i.base)),
            requests: i.lines.load(Ordering::Relaxed),
            failures: i.failed_lines.load(Ordering::Relaxed),
        }];
        out.extend(i.online.endpoints().into_iter().filter(|e| e.requests > 0));
        out
    }

    fn activity(&self) -> Option<engine::chat::ChatActivity> {
        let online = self.inner.online.activity().unwrap_or_default();
        Some(engine::chat::ChatActivity {
            in_flight: self.inner.waiting.load(Ordering::Relaxed) + online.in_flight,
            retries: online.retries,
            billed_nano_usd: self.inner.billed.load(Ordering::Relaxed) + online.billed_nano_usd,
        })
    }

    fn conversation_started(&self) {
        self.inner.state.lock().active += 1;
    }

    fn conversation_ended(&self) {
        let mut state = self.inner.state.lock();
        state.active = state.active.saturating_sub(1);
        self.maybe_send(&mut state);
    }

    fn attach_journal(&self, journal: Arc<dyn BatchJournal>, earlier: Vec<SubmittedBatch>) {
        *self.inner.journal.lock() = Some(journal);
        let mut known = self.inner.earlier.lock();
        for b in earlier {
            for r in b.requests {
                known.insert(r, b.batch_id.clone());
            }
        }
    }
}

/// A copy of `result` for a second waiter on the same request.
fn copy(result: &ChatResult<ChatReply>) -> ChatResult<ChatReply> {
    match result {
        Ok(r) => Ok(r.clone()),
        Err(ChatError::Provider { cause, spend, attempts }) => {
            Err(ChatError::Provider { cause: cause.clone(), spend: *spend, attempts: attempts.clone() })
        }
        Err(e @ ChatError::Engine(_)) => Err(failure(e.to_string(), Vec::new())),
    }
}

fn failure(cause: impl Into<String>, attempts: Vec<ChatAttempt>) -> ChatError {
    ChatError::Provider { cause: cause.into(), spend: Spend::default(), attempts }
}

/// A batch as `GET /batches/{id}` describes it.
#[derive(Debug, Deserialize)]
struct BatchObject {
    id: String,
    status: String,
    #[serde(default)]
    output_file_id: Option<String>,
    #[serde(default)]
    error_file_id: Option<String>,
    #[serde(default)]
    request_counts: Option<Counts>,
    #[serde(default)]
    errors: Option<serde_json::Value>,
}

#[derive(Debug, Default, Deserialize)]
struct Counts {
    #[serde(default)]
    total: u64,
    #[serde(default)]
    completed: u64,
    #[serde(default)]
    failed: u64,
}

#[derive(Debug, Deserialize)]
struct FileObject {
    id: String,
}

/// One line of an output or error file.
#[derive(Debug, Deserialize)]
struct OutputLine {
    custom_id: String,
    #[serde(default)]
    response: Option<LineResponse>,
    #[serde(default)]
    error: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct LineResponse {
    status_code: u16,
    #[serde(default)]
    body: serde_json::Value,
}

/// What became of one request of a batch.
enum LineResult {
    Answered(ChatReply),
    Failed(String),
}

impl Inner {
    /// Answers one round.
    async fn send_round(self: Arc<Self>, round: Round) {
        // One line per distinct request, in digest order.
        let mut waiters: BTreeMap<Digest, (ChatRequest, Vec<tokio::sync::oneshot::Sender<_>>)> = BTreeMap::new();
        for (request, tx) in round {
            waiters.entry(request.digest()).or_insert_with(|| (request, Vec::new())).1.push(tx);
        }
        let retries_only = waiters.values().all(|(r, _)| r.attempt > 0);
        let results: Vec<(Digest, ChatResult<ChatReply>)> =
            if retries_only && waiters.len() <= self.settings.direct_retries_at_most {
                let online = &self.online;
                let online = waiters.iter().map(|(d, (r, _))| async move { (*d, online.complete(r).await) });
                futures::future::join_all(online).await
            } else {
                let requests: Vec<&ChatRequest> = waiters.values().map(|(r, _)| r).collect();
                self.through_batches(&requests).await
            };
        for (digest, result) in results {
            if let Some((_, txs)) = waiters.remove(&digest) {
                for tx in txs {
                    let _ = tx.send(copy(&result));
                }
            }
        }
        // Anything left unanswered (not expected) fails rather than hangs.
        for (_, (_, txs)) in waiters {
            for tx in txs {
                let _ = tx.send(Err(failure("the batch ended without an answer to this request", Vec::new())));
            }
        }
    }

    /// Submits what no earlier batch carries, then waits for every batch the
    /// requests are in.
    async fn through_batches(&self, requests: &[&ChatRequest]) -> Vec<(Digest, ChatResult<ChatReply>)> {
        let mut groups: BTreeMap<String, Vec<&ChatRequest>> = BTreeMap::new();
        let mut fresh = Vec::new();
        {
            let earlier = self.earlier.lock();
            for r in requests {
                match earlier.get(&r.digest()) {
                    Some(id) => groups.entry(id.clone()).or_default().push(r),
                    None => fresh.push(*r),
                }
            }
        }
        let mut out = Vec::new();
        for chunk in self.chunks(&fresh) {
            match self.submit(&chunk).await {
                Ok(id) => {
                    groups.insert(id, chunk);
                }
                Err(e) => {
                    let cause = format!("the batch could not be submitted: {}", e.message);
                    let attempt = self.attempt(0, Some((e.kind.class(), e.message.clone())), Spend::default());
                    out.extend(chunk.iter().map(|r| (r.digest(), Err(failure(cause.clone(), vec![attempt.clone()])))));
                }
            }
        }
        let waits = groups.iter().map(|(id, reqs)| self.collect(id, reqs));
        for (reqs, results) in groups.values().zip(futures::future::join_all(waits).await) {
            for r in reqs {
                let result = match results.get(&r.digest()) {
                    Some(LineResult::Answered(reply)) => Ok(reply.clone()),
                    Some(LineResult::Failed(cause)) => {
                        let attempt = self.attempt(0, Some((FailureClass::Permanent, cause.clone())), Spend::default());
                        Err(failure(cause.clone(), vec![attempt]))
                    }
                    None => Err(failure("the batch port lost this request's line", Vec::new())),
                };
                out.push((r.digest(), result));
            }
        }
        out
    }

    /// The JSONL line of `request`.
    fn line(&self, request: &ChatRequest) -> String {
        let call = UpstreamCall { request, attempt: 0, seed: server_seed(self.seed, &request.digest()) };
        let line = serde_json::json!({
            "custom_id": request.digest().hex(),
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": self.http.body(&call),
        });
        line.to_string()
    }

    /// `requests` split at the line and byte limits.
    fn chunks<'r>(&self, requests: &[&'r ChatRequest]) -> Vec<Vec<&'r ChatRequest>> {
        let mut out: Vec<Vec<&ChatRequest>> = Vec::new();
        let mut bytes = 0u64;
        for r in requests {
            let size = self.line(r).len() as u64 + 1;
            let full =
                out.last().is_none_or(|c| c.len() >= self.settings.max_lines || bytes + size > self.settings.max_bytes);
            if full {
                out.push(Vec::new());
                bytes = 0;
            }
            bytes += size;
            if let Some(c) = out.last_mut() {
                c.push(r);
            }
        }
        out
    }

    /// Uploads and submits one file of lines, records the batch in the
    /// log, and returns its id.
    async fn submit(&self, requests: &[&ChatRequest]) -> Result<String, ProviderError> {
        let mut jsonl = String::new();
        for r in requests {
            jsonl.push_str(&self.line(r));
            jsonl.push('\n');
        }
        let file: FileObject = self.retrying(|| self.upload(&jsonl)).await?;
        let body = serde_json::json!({
            "input_file_id": file.id,
            "endpoint": "/v1/chat/completions",
            "completion_window": self.settings.completion_window,
        });
        let url = format!("{}/batches", self.base);
        let batch: BatchObject = self
            .retrying(|| crate::http::post_json(&self.http.client, &url, self.http.key.as_deref(), &body, no_hint))
            .await?;
        let submitted = SubmittedBatch {
            batch_id: batch.id.clone(),
            input_file_id: file.id,
            requests: requests.iter().map(|r| r.digest()).collect(),
        };
        if let Some(j) = self.journal.lock().clone() {
            if let Err(e) = j.submitted(&submitted) {
                eprintln!("batch {}: submitted, but not recorded in the chat log ({e}); a resume would submit its requests again", batch.id);
            }
        }
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.lines.fetch_add(requests.len() as u64, Ordering::Relaxed);
        eprintln!("batch {}: submitted {} requests", batch.id, requests.len());
        Ok(batch.id)
    }

    /// `POST /files` with the JSONL as a multipart form.
    async fn upload(&self, jsonl: &str) -> Result<FileObject, ProviderError> {
        let boundary = "sim-batch-boundary-7d1f0c";
        let mut body = Vec::with_capacity(jsonl.len() + 512);
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n").as_bytes(),
        );
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"round.jsonl\"\r\n\
                 Content-Type: application/jsonl\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(jsonl.as_bytes());
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        let url = format!("{}/files", self.base);
        let r = self
            .http
            .client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, format!("multipart/form-data; boundary={boundary}"))
            .body(body);
        let resp = crate::http::send(self.authed(r), &url, no_hint).await?;
        read_json(resp, &url).await
    }

    fn authed(&self, r: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.http.key {
            Some(k) => r.bearer_auth(k),
            None => r,
        }
    }

    async fn get(&self, url: &str) -> Result<reqwest::Response, ProviderError> {
        crate::http::send(self.authed(self.http.client.get(url)), url, no_hint).await
    }

    /// Retries a transient failure of `f` with the chat transport's backoff.
    async fn retrying<T, F, Fut>(&self, f: F) -> Result<T, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ProviderError>>,
    {
        let mut attempt = 0u32;
        loop {
            match f().await {
                Ok(v) => return Ok(v),
                Err(e) if e.kind.transient() && attempt < self.max_retries => {
                    let wait = Duration::from_millis(500u64 << attempt.min(6));
                    self.clock.sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Polls batch `id` until it ends, then reads its files.
    async fn collect(&self, id: &str, requests: &[&ChatRequest]) -> HashMap<Digest, LineResult> {
        let started = self.clock.now();
        self.waiting.fetch_add(requests.len() as u64, Ordering::Relaxed);
        let result = self.wait_and_read(id, started).await;
        self.waiting.fetch_sub(requests.len() as u64, Ordering::Relaxed);
        let (status, mut map) = match result {
            Ok(found) => found,
            Err(cause) => {
                (String::new(), requests.iter().map(|r| (r.digest(), LineResult::Failed(cause.clone()))).collect())
            }
        };
        // Lines an expired or cancelled batch never ran fail, unbilled.
        for r in requests {
            map.entry(r.digest()).or_insert_with(|| {
                self.failed_lines.fetch_add(1, Ordering::Relaxed);
                LineResult::Failed(format!("batch {id} ended {status} without answering this request (not billed)"))
            });
        }
        map
    }

    async fn wait_and_read(
        &self,
        id: &str,
        started: Duration,
    ) -> Result<(String, HashMap<Digest, LineResult>), String> {
        let url = format!("{}/batches/{id}", self.base);
        let mut wait = Duration::from_millis(self.settings.poll_first_ms);
        let mut last = String::new();
        let batch = loop {
            self.clock.sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(self.settings.poll_max_ms));
            let b: BatchObject = match self.retrying(|| async { read_json(self.get(&url).await?, &url).await }).await {
                Ok(b) => b,
                Err(e) => return Err(format!("batch {id} could not be polled: {}", e.message)),
            };
            let c = b.request_counts.as_ref();
            let line = format!(
                "batch {id}: {} ({} of {} done, {} failed)",
                b.status,
                c.map_or(0, |c| c.completed),
                c.map_or(0, |c| c.total),
                c.map_or(0, |c| c.failed)
            );
            if line != last {
                eprintln!("{line}");
                last = line;
            }
            match b.status.as_str() {
                "completed" | "expired" | "cancelled" | "failed" => break b,
                _ => {}
            }
        };
        if batch.status == "failed" {
            let why = batch.errors.map(|e| e.to_string()).unwrap_or_else(|| "no reason given".into());
            return Err(format!("batch {id} failed: {why}"));
        }
        let latency_ms = self.clock.now().saturating_sub(started).as_millis() as u64;
        let mut out = HashMap::new();
        for file in [&batch.output_file_id, &batch.error_file_id].into_iter().flatten() {
            let url = format!("{}/files/{file}/content", self.base);
            let text = self
                .retrying(|| async { self.get(&url).await?.text().await.map_err(|e| server(&url, &e.to_string())) })
                .await
                .map_err(|e| format!("batch {id}: its file {file} could not be read: {}", e.message))?;
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                let parsed: OutputLine =
                    serde_json::from_str(line).map_err(|e| format!("batch {id}: file {file} has a bad line: {e}"))?;
                let Some(digest) = Digest::from_hex(&parsed.custom_id) else { continue };
                out.insert(digest, self.line_result(id, parsed, latency_ms));
            }
        }
        Ok((batch.status, out))
    }

    /// What one output or error line says.
    fn line_result(&self, id: &str, line: OutputLine, latency_ms: u64) -> LineResult {
        let failed = |cause: String| {
            self.failed_lines.fetch_add(1, Ordering::Relaxed);
            LineResult::Failed(format!("batch {id}: {cause}"))
        };
        if let Some(e) = line.error.filter(|e| !e.is_null()) {
            return failed(format!("line failed: {e}"));
        }
        let Some(resp) = line.response else { return failed("a line with neither a response nor an error".into()) };
        if !(200..300).contains(&resp.status_code) {
            return failed(format!("line answered {}: {}", resp.status_code, resp.body));
        }
        let reply = match parse_completion(resp.body) {
            Ok(r) => r,
            Err(e) => return failed(format!("unreadable completion: {e}")),
        };
        let (usage, estimated) = match reply.usage {
            Some(u) => (u, false),
            None => {
                let u = crate::chat::TokenUsage { prompt: 0, completion: estimate_tokens(&reply.text), cached: 0 };
                (u, true)
            }
        };
        let spend = self.price.bill_cached(usage.prompt, usage.cached, usage.completion);
        self.billed.fetch_add(spend.nano_usd, Ordering::Relaxed);
        let mut attempt = self.attempt(0, None, spend);
        attempt.latency_ms = latency_ms;
        attempt.model = reply.model;
        LineResult::Answered(ChatReply { text: reply.text, spend, estimated, attempts: vec![attempt] })
    }

    fn attempt(&self, attempt: u32, error: Option<(FailureClass, String)>, spend: Spend) -> ChatAttempt {
        ChatAttempt {
            attempt,
            endpoint: engine::report::redact_url(&format!("{}/batches", self.base)),
            model: None,
            error,
            spend,
            latency_ms: 0,
        }
    }
}

fn no_hint(_: u16, _: &str) -> Option<&'static str> {
    None
}

fn server(url: &str, why: &str) -> ProviderError {
    ProviderError {
        kind: FailureKind::Server,
        message: format!("{}: {why}", engine::report::redact_url(url)),
        billed_tokens: None,
    }
}

async fn read_json<T: serde::de::DeserializeOwned>(resp: reqwest::Response, url: &str) -> Result<T, ProviderError> {
    resp.json().await.map_err(|e| ProviderError {
        kind: FailureKind::Permanent,
        message: format!("{}: unreadable reply: {}", engine::report::redact_url(url), e.without_url()),
        billed_tokens: None,
    })
}
