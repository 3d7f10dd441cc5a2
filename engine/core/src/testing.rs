//! Test builders, behind the `testing` feature: ports with fixed answers
//! and a tiny executor for ports that never wait.

use crate::chat::{ChatPort, ChatPurpose, ChatReply, ChatRequest};
use crate::cost::Spend;
use crate::BoxFuture;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::future::Future;

/// A chat port that answers from fixed queues, one per purpose, in order;
/// when a queue runs dry it fails. Each reply bills one input and one output
/// token at 1 nano-USD each, so tests can count calls by cost.
#[derive(Debug, Default)]
pub struct FixedChat {
    queues: Mutex<BTreeMap<u8, Vec<String>>>,
    /// Every request seen, in order.
    pub seen: Mutex<Vec<ChatRequest>>,
}

impl FixedChat {
    /// Queues `replies` for `purpose`, first reply first.
    pub fn with(self, purpose: ChatPurpose, replies: &[&str]) -> Self {
        let mut q: Vec<String> = replies.iter().rev().map(|s| s.to_string()).collect();
        {
            let mut queues = self.queues.lock();
            q.extend(queues.remove(&purpose.digest_code()).unwrap_or_default());
            queues.insert(purpose.digest_code(), q);
        }
        self
    }
}

impl ChatPort for FixedChat {
    fn complete<'a>(&'a self, request: &'a ChatRequest) -> BoxFuture<'a, crate::chat::ChatResult<ChatReply>> {
        {
            let mut seen = self.seen.lock();
            seen.push(request.clone());
        }
        let next = self.queues.lock().get_mut(&request.purpose.digest_code()).and_then(Vec::pop);
        let out = match next {
            Some(text) => Ok(ChatReply {
                text,
                spend: Spend { input_tokens: 1, output_tokens: 1, nano_usd: 2, ..Spend::default() },
                estimated: false,
                attempts: Vec::new(),
            }),
            None => Err(crate::chat::ChatError::Provider {
                cause: format!("no fixed reply left for {:?}", request.purpose),
                spend: Spend::default(),
                attempts: Vec::new(),
            }),
        };
        Box::pin(std::future::ready(out))
    }
}

/// An embedding port that answers at once with the local embedder's
/// vectors: it splits each invocation into physical requests of at most
/// `batch_size` texts and bills each by estimated tokens at `price`. No
/// cache, no limits, no retries: the `providers` crate tests those.
#[derive(Debug, Clone)]
pub struct LocalPort {
    /// Texts per physical request.
    pub batch_size: usize,
    /// Price of embedding input tokens.
    pub price: crate::cost::Price,
}

impl crate::embed::EmbeddingPort for LocalPort {
    fn embed<'a>(
        &'a self,
        key: &'a crate::embed::EmbedKey,
        texts: &'a [String],
    ) -> BoxFuture<'a, crate::embed::EmbedResult<crate::embed::EmbedBatch>> {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let calls = crate::embed::upstream::split_requests(&refs, self.batch_size, u64::MAX)
            .into_iter()
            .map(|members| {
                let tokens = members.iter().map(|i| crate::cost::estimate_tokens(refs[*i])).sum();
                let texts = members.iter().map(|i| *i as u32).collect();
                crate::embed::EmbedCall { texts, attempts: 1, spend: self.price.bill(tokens, 0) }
            })
            .collect();
        let vectors = texts.iter().map(|t| crate::embed::local::embed_text(t, key.dim).into()).collect();
        Box::pin(std::future::ready(Ok(crate::embed::EmbedBatch { vectors, calls, cache_hits: 0 })))
    }
}

/// Runs a future that never waits (the embedded ports complete at once).
pub fn block_on_ready<F: Future>(f: F) -> F::Output {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("block_on_ready: the future waited; use a real runtime"),
    }
}

/// A panel dispatched in place: every persona's state in a vector, each
/// stage a plain call on the calling thread, the ports given. It answers as
/// the `actors` crate's persona hosts do, so a tick through
/// [`crate::tick::run_tick`] here gives the coordinator's digests: a persona
/// listed in the config's `[faults] panic` for a tick is gone from that
/// tick's retrieval stage ("failed during tick N"). Panics are not caught.
pub struct Sequential {
    cfg: crate::config::Config,
    scenario: crate::scenario::Scenario,
    states: Vec<Option<crate::persona::PersonaState>>,
    chat: std::sync::Arc<dyn ChatPort>,
    embedder: Option<std::sync::Arc<crate::store::trace::EmbedRecorder>>,
    /// How embedding stages submit texts.
    pub strategy: crate::embed::Strategy,
}

impl Sequential {
    /// `personas` personas drawn from `traits` with `seed`, on the scripted
    /// persona model and a [`LocalPort`] (batches of 64, at the config's
    /// embedding price).
    pub fn new(
        cfg: &crate::config::Config,
        scenario: &crate::scenario::Scenario,
        traits: &crate::persona::Traits,
        seed: u64,
        personas: u32,
    ) -> Sequential {
        let chat = crate::chat::ScriptedPersonaModel { seed, malformed_rate: 0.0, price: cfg.chat_price };
        let embedder: std::sync::Arc<dyn crate::embed::EmbeddingPort> =
            std::sync::Arc::new(LocalPort { batch_size: 64, price: cfg.embedding_price });
        let states = (0..personas)
            .map(|id| Some(crate::persona::PersonaState::new(crate::persona::generate(traits, seed, id))))
            .collect();
        Sequential {
            cfg: cfg.clone(),
            scenario: scenario.clone(),
            states,
            chat: std::sync::Arc::new(chat),
            embedder: None,
            strategy: crate::embed::Strategy::Batched,
        }
        .with_ports(Some(embedder), None)
    }

    /// The same panel on other ports: `embedder` (`None`: no embeddings)
    /// and, if given, `chat`.
    pub fn with_ports(
        mut self,
        embedder: Option<std::sync::Arc<dyn crate::embed::EmbeddingPort>>,
        chat: Option<std::sync::Arc<dyn ChatPort>>,
    ) -> Sequential {
        self.embedder = embedder.map(|e| std::sync::Arc::new(crate::store::trace::EmbedRecorder::new(e)));
        self.chat = chat.unwrap_or(self.chat);
        self
    }

    /// Each persona's interests, by index (for [`crate::tick::Book::new`]).
    pub fn interests(&self) -> Vec<Vec<std::sync::Arc<str>>> {
        self.states.iter().map(|s| s.as_ref().map(|s| s.profile.interests.clone()).unwrap_or_default()).collect()
    }

    /// Persona `p`'s state, unless it is gone.
    pub fn state(&self, p: u32) -> Option<&crate::persona::PersonaState> {
        self.states.get(p as usize).and_then(Option::as_ref)
    }

    /// Runs `stage` for each persona of `batch` that is still here.
    fn each<I, R>(
        &mut self,
        batch: Vec<(u32, I)>,
        mut stage: impl FnMut(&mut crate::persona::PersonaState, I) -> crate::tick::Answer<R>,
    ) -> Vec<crate::tick::Answer<R>> {
        batch
            .into_iter()
            .map(|(p, input)| match self.states.get_mut(p as usize).and_then(Option::as_mut) {
                Some(state) => {
                    let answer = stage(state, input);
                    if answer.is_err() {
                        self.states[p as usize] = None;
                    }
                    answer
                }
                None => Err(crate::tick::Gone("is not available".into())),
            })
            .collect()
    }
}

impl crate::tick::Dispatch for Sequential {
    fn retrieval_needs(
        &mut self,
        tick: u32,
        batch: Vec<(u32, Vec<crate::scenario::Job>)>,
    ) -> impl Future<Output = Vec<crate::tick::Answer<Vec<Option<String>>>>> + Send {
        let (cfg, scenario) = (self.cfg.clone(), self.scenario.clone());
        let ctx =
            crate::turn::TickContext { cfg: &cfg, scenario: &scenario, tick, now: crate::clock::SimTime::default() };
        let faults = &cfg.raw.faults.panic;
        let answers = self.each(batch, |state, jobs| {
            if faults.iter().any(|f| f.persona == state.profile.id && f.tick == tick) {
                return Err(crate::tick::Gone(format!("failed during tick {tick}")));
            }
            Ok(jobs.iter().map(|j| crate::turn::retrieval_need(state, j, &ctx)).collect())
        });
        std::future::ready(answers)
    }

    fn prepare(
        &mut self,
        tick: u32,
        now: crate::clock::SimTime,
        batch: Vec<(u32, Vec<crate::tick::QueriedJob>)>,
    ) -> impl Future<Output = Vec<crate::tick::Answer<crate::tick::Preparation>>> + Send {
        let (cfg, scenario) = (self.cfg.clone(), self.scenario.clone());
        let ctx = crate::turn::TickContext { cfg: &cfg, scenario: &scenario, tick, now };
        let answers = self.each(batch, |state, jobs| {
            Ok(jobs.iter().map(|(j, v)| crate::turn::prepare(state, j, v.as_deref(), &ctx)).collect())
        });
        std::future::ready(answers)
    }

    fn commit(
        &mut self,
        batch: Vec<(u32, crate::persona::PersonaCommit)>,
    ) -> impl Future<Output = Vec<crate::tick::Answer<crate::persona::state::Applied>>> + Send {
        std::future::ready(self.each(batch, |state, commit| Ok(state.apply(commit))))
    }

    fn embed<T: AsRef<str> + Send + Sync>(
        &mut self,
        role: crate::embed::EmbedRole,
        requests: Vec<(u32, T)>,
    ) -> impl Future<Output = crate::embed::StageResult> + Send {
        let e = &self.cfg.raw.embedding;
        let key = crate::embed::EmbedKey { role, model: e.model.clone(), dim: e.dim };
        let (embedder, strategy) = (self.embedder.clone(), self.strategy);
        async move {
            match embedder {
                Some(port) => {
                    crate::embed::embed_stage(&*port, &key, &crate::embed::Plan::new(requests), strategy).await
                }
                None => crate::embed::StageResult { vectors: vec![None; requests.len()], ..Default::default() },
            }
        }
    }

    fn converse(
        &mut self,
        tick: u32,
        ready: Vec<crate::turn::Prepared>,
        _progress: (u64, u64),
    ) -> impl Future<Output = (Vec<Option<crate::tick::Finished>>, Option<String>)> + Send {
        let (chat, cfg, scenario) = (std::sync::Arc::clone(&self.chat), self.cfg.clone(), self.scenario.clone());
        async move {
            let mut out = Vec::with_capacity(ready.len());
            for mut p in ready {
                let conversation = crate::turn::converse(&*chat, &p, &cfg, &scenario, tick).await;
                p.release_prompts();
                out.push(Some((p, Ok(conversation))));
            }
            (out, None)
        }
    }

    fn stage(&self, _tick: u32, _stage: &'static str, _done: u64, _total: u64) {}

    fn clock_ms(&self) -> f64 {
        0.0
    }

    fn embeddings(&mut self) -> Vec<crate::store::trace::EmbedExchange> {
        self.embedder.as_ref().map(|r| r.take()).unwrap_or_default()
    }
}

/// `value` against the subset of JSON Schema the reply schemas use
/// ([`crate::chat::schema`]): object (properties, required, no others),
/// array (minItems, maxItems), string (minLength, maxLength), integer and
/// number (minimum, maximum). The first breach, if any, named by its path
/// from `at`.
pub fn schema_breach(value: &serde_json::Value, schema: &serde_json::Value, at: &str) -> Option<String> {
    use serde_json::Value;
    let num = |k: &str| schema.get(k).and_then(Value::as_f64);
    let within = |n: usize, lo: &str, hi: &str| {
        num(lo).is_none_or(|lo| n as f64 >= lo) && num(hi).is_none_or(|hi| n as f64 <= hi)
    };
    match schema["type"].as_str() {
        Some("object") => {
            let Value::Object(map) = value else { return Some(format!("{at} is not an object")) };
            let Some(props) = schema["properties"].as_object() else { return Some(format!("{at}: no properties")) };
            if let Some(k) = map.keys().find(|k| !props.contains_key(*k)) {
                return Some(format!("{at}.{k} is not in the schema"));
            }
            for r in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                if !map.contains_key(r) {
                    return Some(format!("{at}.{r} is missing"));
                }
            }
            map.iter().find_map(|(k, v)| schema_breach(v, &props[k], &format!("{at}.{k}")))
        }
        Some("array") => {
            let Value::Array(items) = value else { return Some(format!("{at} is not an array")) };
            if !within(items.len(), "minItems", "maxItems") {
                return Some(format!("{at} has {} items, outside the schema's bounds", items.len()));
            }
            items.iter().enumerate().find_map(|(i, v)| schema_breach(v, &schema["items"], &format!("{at}[{i}]")))
        }
        Some("string") => match value.as_str() {
            Some(s) if within(s.chars().count(), "minLength", "maxLength") => None,
            Some(_) | None => Some(format!("{at} = {value} is not a string of the schema's length")),
        },
        Some(kind @ ("integer" | "number")) => {
            let Some(x) = value.as_f64() else { return Some(format!("{at} = {value} is not a number")) };
            let whole = kind == "number" || value.is_i64() || value.is_u64();
            let inside = num("minimum").is_none_or(|lo| x >= lo) && num("maximum").is_none_or(|hi| x <= hi);
            (!(whole && inside)).then(|| format!("{at} = {value} is out of range"))
        }
        other => Some(format!("{at}: unexpected schema type {other:?}")),
    }
}
