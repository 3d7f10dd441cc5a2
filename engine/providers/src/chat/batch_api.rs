//! Live chat through a Batch API (`[chat] mode = "batch"`): OpenAI's
//! `/v1/files` and `/v1/batches` (whose JSONL lines vLLM's offline
//! `run-batch` also reads and writes). Every call is billed at the batch
//! price.
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

use super::client::{server_seed, ChatClient};
use super::http::{parse_completion, HttpChat};
use super::upstream::{TokenUsage, UpstreamCall};
use crate::clock::{Sleeper, TokioSleeper};
use crate::upstream::{FailureKind, ProviderError};
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
    /// For files and polls: connect and read timeouts, no overall one (an
    /// input or output file may be 200 MB).
    files: reqwest::Client,
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
    /// Per batch under way: its lines done and in all, as last polled.
    polled: Mutex<HashMap<String, (u64, u64)>>,
    /// Status lines go to stderr only when no progress bar shows them.
    say: bool,
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
        let h = &section.http;
        let files = reqwest::Client::builder()
            .connect_timeout(Duration::from_millis(h.connect_timeout_ms))
            .read_timeout(Duration::from_millis(h.read_timeout_ms))
            .build()
            .map_err(|e| engine::Error::Config {
                source_name: "configuration".into(),
                field: "chat.http".into(),
                cause: format!("cannot build an HTTP client: {e}"),
            })?;
        let base = section.http.endpoints().first().map(|b| b.trim_end_matches('/').to_string()).unwrap_or_default();
        Ok(BatchChat {
            inner: Arc::new(Inner {
                http,
                files,
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
                polled: Mutex::new(HashMap::new()),
                say: !std::io::IsTerminal::is_terminal(&std::io::stderr()),
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
            url: engine::chat::redact_url(&format!("{}/batches", i.base)),
            requests: i.lines.load(Ordering::Relaxed),
            failures: i.failed_lines.load(Ordering::Relaxed),
        }];
        out.extend(i.online.endpoints().into_iter().filter(|e| e.requests > 0));
        out
    }

    fn activity(&self) -> Option<engine::chat::ChatActivity> {
        let online = self.inner.online.activity().unwrap_or_default();
        let polled = self.inner.polled.lock();
        let (done, lines) = polled.values().fold((0, 0), |(d, t), (done, total)| (d + done, t + total));
        Some(engine::chat::ChatActivity {
            in_flight: self.inner.waiting.load(Ordering::Relaxed) + online.in_flight,
            retries: online.retries,
            billed_nano_usd: self.inner.billed.load(Ordering::Relaxed) + online.billed_nano_usd,
            batches_waiting: polled.len() as u64,
            batch_lines: (lines, done),
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

/// `result` for a second waiter on the same request: the same answer,
/// with the bill left to the first.
fn unbilled(result: &ChatResult<ChatReply>) -> ChatResult<ChatReply> {
    match result {
        Ok(r) => Ok(ChatReply { spend: Spend::default(), attempts: Vec::new(), ..r.clone() }),
        Err(e) => Err(failure(e.to_string(), Vec::new())),
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
    /// Its line failed (billed nothing).
    Failed(String),
    /// The batch never answered it (expired, cancelled, failed as a whole,
    /// or gone): a resumed run submits such requests again.
    Unanswered(String),
}

impl Inner {
    /// Answers one round.
    async fn send_round(self: Arc<Self>, round: Round) {
        // One line per distinct request, in digest order.
        let mut waiters: BTreeMap<Digest, (ChatRequest, Vec<tokio::sync::oneshot::Sender<_>>)> = BTreeMap::new();
        for (request, tx) in round {
            waiters.entry(request.digest()).or_insert_with(|| (request, Vec::new())).1.push(tx);
        }
        // Requests a resumed run's log puts in a batch are polled there,
        // never bought again online.
        let (known, fresh): (Vec<&ChatRequest>, Vec<&ChatRequest>) = {
            let earlier = self.earlier.lock();
            waiters.values().map(|(r, _)| r).partition(|r| earlier.contains_key(&r.digest()))
        };
        let direct = !fresh.is_empty()
            && fresh.len() <= self.settings.direct_retries_at_most
            && fresh.iter().all(|r| r.attempt > 0);
        let (online, batched) = match direct {
            true => (fresh, known),
            false => (Vec::new(), known.into_iter().chain(fresh).collect()),
        };
        let client = &self.online;
        let online = online.into_iter().map(|r| async move { (r.digest(), client.complete(r).await) });
        let (mut results, batched) =
            futures::future::join(futures::future::join_all(online), self.through_batches(&batched)).await;
        results.extend(batched);
        for (digest, result) in results {
            let Some((_, txs)) = waiters.remove(&digest) else { continue };
            let mut txs = txs.into_iter();
            if let Some(first) = txs.next() {
                // Waiters on the same request share one answer, billed once.
                for tx in txs {
                    let _ = tx.send(unbilled(&result));
                }
                let _ = first.send(result);
            }
        }
        // Anything left unanswered (not expected) fails rather than hangs.
        for (digest, (_, txs)) in waiters {
            for tx in txs {
                let cause = format!("the batch port never answered request {}", &digest.hex()[..16]);
                let _ = tx.send(Err(failure(cause, Vec::new())));
            }
        }
    }

    /// Submits what no earlier batch carries, then waits for every batch the
    /// requests are in. Requests an earlier batch (of a run since killed)
    /// never answered are submitted again, once.
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
        let mut again = Vec::new();
        for (reqs, results) in self.wait_all(groups).await {
            for r in reqs {
                match results.get(&r.digest()) {
                    Some(LineResult::Unanswered(_)) | None => again.push(r),
                    Some(result) => out.push((r.digest(), self.answer(r, Some(result)))),
                }
            }
        }
        if !again.is_empty() {
            let mut earlier = self.earlier.lock();
            for r in &again {
                earlier.remove(&r.digest());
            }
            drop(earlier);
            eprintln!("{} requests of batches recorded before were never answered: submitting them again", again.len());
            fresh.extend(again);
        }
        let mut groups = BTreeMap::new();
        for (chunk, jsonl) in self.chunks(&fresh) {
            match self.submit(&chunk, &jsonl).await {
                Ok(id) => {
                    groups.insert(id, chunk);
                }
                Err(e) => {
                    let cause = format!("the batch could not be submitted: {}", e.message);
                    let attempt = self.attempt(Some((e.kind.class(), e.message.clone())), Spend::default());
                    self.failed_lines.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    out.extend(chunk.iter().map(|r| (r.digest(), Err(failure(cause.clone(), vec![attempt.clone()])))));
                }
            }
        }
        for (reqs, results) in self.wait_all(groups).await {
            out.extend(reqs.iter().map(|r| (r.digest(), self.answer(r, results.get(&r.digest())))));
        }
        out
    }

    /// Waits for every batch of `groups` at once.
    async fn wait_all<'r>(
        &self,
        groups: BTreeMap<String, Vec<&'r ChatRequest>>,
    ) -> Vec<(Vec<&'r ChatRequest>, HashMap<Digest, LineResult>)> {
        let waits = groups.iter().map(|(id, reqs)| self.collect(id, reqs));
        let results = futures::future::join_all(waits).await;
        groups.into_values().zip(results).collect()
    }

    /// The answer to `request` from what its batch said (a failure is
    /// counted here, once, whichever batch it came from).
    fn answer(&self, request: &ChatRequest, result: Option<&LineResult>) -> ChatResult<ChatReply> {
        let cause = match result {
            Some(LineResult::Answered(reply)) => return Ok(reply.clone()),
            Some(LineResult::Failed(cause) | LineResult::Unanswered(cause)) => cause.clone(),
            None => format!("no batch answered request {}", &request.digest().hex()[..16]),
        };
        self.failed_lines.fetch_add(1, Ordering::Relaxed);
        let attempt = self.attempt(Some((FailureClass::Permanent, cause.clone())), Spend::default());
        Err(failure(cause, vec![attempt]))
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

    /// `requests` with their JSONL lines, split at the line and byte limits.
    fn chunks<'r>(&self, requests: &[&'r ChatRequest]) -> Vec<(Vec<&'r ChatRequest>, String)> {
        let lines: Vec<String> = requests.iter().map(|r| self.line(r)).collect();
        let sizes: Vec<u64> = lines.iter().map(|l| l.len() as u64 + 1).collect();
        let groups = engine::embed::upstream::split_greedy(&sizes, self.settings.max_lines, self.settings.max_bytes);
        groups
            .into_iter()
            .map(|g| {
                let mut jsonl = String::with_capacity(g.iter().map(|&i| sizes[i] as usize).sum());
                for &i in &g {
                    jsonl.push_str(&lines[i]);
                    jsonl.push('\n');
                }
                (g.iter().map(|&i| requests[i]).collect(), jsonl)
            })
            .collect()
    }

    /// Uploads and submits `jsonl` (the lines of `requests`), records the batch in the
    /// log, and returns its id. Creating the batch is retried only after a
    /// 429: a timeout or a 5xx may have created it, and a second one would
    /// be paid for twice.
    async fn submit(&self, requests: &[&ChatRequest], jsonl: &str) -> Result<String, ProviderError> {
        let file: FileObject = self.retrying(|| self.upload(jsonl), FailureKind::transient).await?;
        let body = serde_json::json!({
            "input_file_id": file.id,
            "endpoint": "/v1/chat/completions",
            "completion_window": self.settings.completion_window,
        });
        let url = format!("{}/batches", self.base);
        let rate_limited = |k: FailureKind| matches!(k, FailureKind::RateLimited { .. });
        let batch: BatchObject = self
            .retrying(
                || crate::http::post_json(&self.http.client, &url, self.http.key.as_deref(), &body, no_hint),
                rate_limited,
            )
            .await?;
        let submitted = SubmittedBatch {
            batch_id: batch.id.clone(),
            input_file_id: file.id,
            requests: requests.iter().map(|r| r.digest()).collect(),
        };
        if let Some(j) = self.journal.lock().clone() {
            if let Err(e) = j.submitted(&submitted) {
                eprintln!(
                    "batch {}: submitted, but not recorded in the chat log ({e}); a resume would submit its requests again",
                    batch.id
                );
            }
        }
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.lines.fetch_add(requests.len() as u64, Ordering::Relaxed);
        self.polled.lock().insert(batch.id.clone(), (0, requests.len() as u64));
        if self.say {
            eprintln!("batch {}: submitted {} requests", batch.id, requests.len());
        }
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
            .files
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
        crate::http::send(self.authed(self.files.get(url)), url, no_hint).await
    }

    /// Retries a failure of `f` that `retry` accepts, up to the chat
    /// transport's retries, doubling a half-second wait.
    async fn retrying<T, F, Fut>(&self, f: F, retry: fn(FailureKind) -> bool) -> Result<T, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ProviderError>>,
    {
        let mut attempt = 0u32;
        loop {
            match f().await {
                Ok(v) => return Ok(v),
                Err(e) if retry(e.kind) && attempt < self.max_retries => {
                    self.clock.sleep(Duration::from_millis(500u64 << attempt.min(6))).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Retries a transient failure of `f` for as long as it lasts, waiting
    /// as polls do (a batch runs for hours: a network outage must not throw
    /// away what it ran). A permanent failure is returned.
    async fn persisting<T, F, Fut>(&self, what: &str, f: F) -> Result<T, ProviderError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ProviderError>>,
    {
        let mut wait = Duration::from_millis(self.settings.poll_first_ms);
        let mut said = false;
        loop {
            match f().await {
                Ok(v) => return Ok(v),
                Err(e) if e.kind.transient() => {
                    if !said {
                        eprintln!("{what}: {} (trying again until it answers)", e.message);
                        said = true;
                    }
                    // A 429's retry-after is honoured.
                    let asked = match e.kind {
                        FailureKind::RateLimited { retry_after_ms: Some(ms) } => Duration::from_millis(ms),
                        FailureKind::RateLimited { retry_after_ms: None }
                        | FailureKind::Server
                        | FailureKind::Timeout
                        | FailureKind::Permanent => Duration::ZERO,
                    };
                    self.clock.sleep(wait.max(asked)).await;
                    wait = (wait * 2).min(Duration::from_millis(self.settings.poll_max_ms));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Polls batch `id` until it ends, then reads its files, for the lines
    /// of `requests`.
    async fn collect(&self, id: &str, requests: &[&ChatRequest]) -> HashMap<Digest, LineResult> {
        let started = self.clock.now();
        self.waiting.fetch_add(requests.len() as u64, Ordering::Relaxed);
        let asked: HashMap<Digest, &ChatRequest> = requests.iter().map(|r| (r.digest(), *r)).collect();
        let result = self.wait_and_read(id, started, &asked).await;
        self.waiting.fetch_sub(requests.len() as u64, Ordering::Relaxed);
        self.polled.lock().remove(id);
        let (status, mut map) = match result {
            Ok(found) => found,
            Err(cause) => {
                (String::new(), requests.iter().map(|r| (r.digest(), LineResult::Unanswered(cause.clone()))).collect())
            }
        };
        // Lines an expired or cancelled batch never ran fail, unbilled.
        for r in requests {
            map.entry(r.digest()).or_insert_with(|| {
                LineResult::Unanswered(format!(
                    "batch {id} ended {status} without answering request {} (not billed)",
                    &r.digest().hex()[..16]
                ))
            });
        }
        map
    }

    async fn wait_and_read(
        &self,
        id: &str,
        started: Duration,
        asked: &HashMap<Digest, &ChatRequest>,
    ) -> Result<(String, HashMap<Digest, LineResult>), String> {
        let url = format!("{}/batches/{id}", self.base);
        let mut wait = Duration::from_millis(self.settings.poll_first_ms);
        let mut last = String::new();
        let batch = loop {
            self.clock.sleep(wait).await;
            wait = (wait * 2).min(Duration::from_millis(self.settings.poll_max_ms));
            let what = format!("batch {id}");
            let poll = self.persisting(&what, || async { read_json(self.get(&url).await?, &url).await });
            let b: BatchObject = poll.await.map_err(|e| format!("batch {id} could not be polled: {}", e.message))?;
            let c = b.request_counts.as_ref();
            if let Some(c) = c {
                self.polled.lock().insert(id.to_string(), (c.completed + c.failed, c.total));
            }
            let line = format!(
                "batch {id}: {} ({} of {} done, {} failed)",
                b.status,
                c.map_or(0, |c| c.completed),
                c.map_or(0, |c| c.total),
                c.map_or(0, |c| c.failed)
            );
            if line != last && self.say {
                eprintln!("{line}");
            }
            last = line;
            if matches!(b.status.as_str(), "completed" | "expired" | "cancelled" | "failed") {
                break b;
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
            let read = || async { self.get(&url).await?.text().await.map_err(|e| server(&url, &e.to_string())) };
            let text = self
                .persisting(&format!("batch {id}: file {file}"), read)
                .await
                .map_err(|e| format!("batch {id}: its file {file} could not be read: {}", e.message))?;
            for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
                let loose: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
                let Some(digest) = loose["custom_id"].as_str().and_then(Digest::from_hex) else { continue };
                let Some(request) = asked.get(&digest) else { continue };
                let result = match serde_json::from_value::<OutputLine>(loose) {
                    Ok(parsed) => self.line_result(id, parsed, request, latency_ms),
                    Err(e) => {
                        LineResult::Failed(format!("batch {id}: line {} of file {file} is unreadable: {e}", n + 1))
                    }
                };
                out.insert(digest, result);
            }
        }
        Ok((batch.status, out))
    }

    /// What one output or error line says about `request`.
    fn line_result(&self, id: &str, line: OutputLine, request: &ChatRequest, latency_ms: u64) -> LineResult {
        let failed = |cause: String| LineResult::Failed(format!("batch {id}: {cause}"));
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
        // Without `usage`, estimated as online calls are.
        let (usage, estimated) = match reply.usage {
            Some(u) => (u, false),
            None => {
                let (prompt, completion) = (estimate_tokens(&request.prompt), estimate_tokens(&reply.text));
                (TokenUsage { prompt, completion, cached: 0 }, true)
            }
        };
        let spend = self.price.bill_cached(usage.prompt, usage.cached, usage.completion);
        self.billed.fetch_add(spend.nano_usd, Ordering::Relaxed);
        let mut attempt = self.attempt(None, spend);
        attempt.latency_ms = latency_ms;
        attempt.model = reply.model;
        LineResult::Answered(ChatReply { text: reply.text, spend, estimated, attempts: vec![attempt] })
    }

    fn attempt(&self, error: Option<(FailureClass, String)>, spend: Spend) -> ChatAttempt {
        ChatAttempt {
            attempt: 0,
            endpoint: engine::chat::redact_url(&format!("{}/batches", self.base)),
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
        message: format!("{}: {why}", engine::chat::redact_url(url)),
        billed_tokens: None,
    }
}

async fn read_json<T: serde::de::DeserializeOwned>(resp: reqwest::Response, url: &str) -> Result<T, ProviderError> {
    resp.json().await.map_err(|e| ProviderError {
        kind: FailureKind::Permanent,
        message: format!("{}: unreadable reply: {}", engine::chat::redact_url(url), e.without_url()),
        billed_tokens: None,
    })
}
