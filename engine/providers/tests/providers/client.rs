use engine::config::EmbeddingSection;
use engine::cost::Price;
use engine::embed::upstream::ModelledSettings;
use engine::embed::{embed_stage, EmbedError, EmbedKey, EmbedRole, EmbeddingPort, Plan, Strategy};
use engine::testing::block_on_ready;
use engine::BoxFuture;
use parking_lot::Mutex;
use providers::clock::SimulatedSleeper;
use providers::embed::provider::{EmbedProvider, ProviderReply, ProviderRequest};
use providers::upstream::{FailureKind, ProviderError};
use providers::{InferenceClient, ModelledProvider, TextCache};
use std::sync::Arc;
use std::time::Duration;

fn key() -> EmbedKey {
    EmbedKey { role: EmbedRole::Memory, model: "m".into(), dim: 16 }
}

fn settings(batch: usize, max_tokens: u64, retries: u32) -> EmbeddingSection {
    EmbeddingSection {
        batch_size: batch,
        max_tokens_per_request: max_tokens,
        concurrency: 3,
        requests_per_minute: 0,
        tokens_per_minute: 0,
        max_retries: retries,
        backoff_base_ms: 1,
        backoff_max_ms: 2,
        ..EmbeddingSection::default()
    }
}

/// 1 nano-USD per token, so costs read as tokens.
const PRICE: Price =
    Price { input_nano_per_mtok: 1_000_000, output_nano_per_mtok: 0, cached_input_nano_per_mtok: 1_000_000 };

/// A provider that scripts failures per (first text, attempt) and records
/// every request it sees.
#[derive(Default)]
struct Scripted {
    seen: Mutex<Vec<(Vec<String>, u32)>>,
    fail: Vec<(&'static str, u32, FailureKind, Option<u64>)>,
    short: bool,
}

impl EmbedProvider for Scripted {
    fn request<'a>(&'a self, req: ProviderRequest<'a>) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        {
            let mut s = self.seen.lock();
            s.push((req.texts.to_vec(), req.attempt));
        }
        let first = req.texts[0].as_str();
        let out = match self.fail.iter().find(|(t, a, _, _)| *t == first && *a == req.attempt) {
            Some((_, _, kind, billed)) => {
                Err(ProviderError { kind: *kind, message: format!("scripted {kind:?}"), billed_tokens: *billed })
            }
            None => {
                let n = if self.short { req.texts.len() - 1 } else { req.texts.len() };
                Ok(ProviderReply { vectors: vec![vec![0.25; req.dim]; n], billed_tokens: None })
            }
        };
        Box::pin(std::future::ready(out))
    }
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn texts(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn chunks_by_count_and_tokens_with_uneven_texts_and_cache_hits() {
    let provider = Arc::new(Scripted::default());
    let client = InferenceClient::new(provider.clone(), settings(3, 10, 0), PRICE, Some(TextCache::in_memory()), 1);
    let long = "x".repeat(60);
    let first = texts(&["aaaa", "bbbb", "cccc", "dddd", &long, "eeee"]);
    let b = rt().block_on(client.embed(&key(), &first)).expect("ok");
    let carried: Vec<Vec<u32>> = b.calls.iter().map(|c| c.texts.clone()).collect();
    assert_eq!(
        carried,
        vec![vec![0, 1, 2], vec![3], vec![4], vec![5]],
        "3 per request, 10 tokens per request, a longer text alone"
    );
    assert_eq!(b.calls.iter().map(|c| c.spend.nano_usd).collect::<Vec<_>>(), vec![3, 1, 15, 1]);
    assert_eq!(b.cache_hits, 0);
    // Second invocation: four of five texts are cached; only "ffff" goes upstream.
    let second = texts(&["bbbb", "ffff", &long, "aaaa", "eeee"]);
    let b2 = rt().block_on(client.embed(&key(), &second)).expect("ok");
    assert_eq!(b2.cache_hits, 4);
    assert_eq!(b2.calls.len(), 1);
    assert_eq!(b2.calls[0].texts, vec![1]);
    assert_eq!(b2.vectors.len(), 5);
}

#[test]
fn the_cache_never_crosses_models_or_dimensions() {
    let provider = Arc::new(Scripted::default());
    let client = InferenceClient::new(provider.clone(), settings(8, 100, 0), PRICE, Some(TextCache::in_memory()), 1);
    let one = texts(&["same text"]);
    let other_model = EmbedKey { model: "other".into(), ..key() };
    let other_dim = EmbedKey { dim: 8, ..key() };
    for k in [key(), other_model, other_dim, key()] {
        let _ = rt().block_on(client.embed(&k, &one)).expect("ok");
    }
    assert_eq!(provider.seen.lock().len(), 3, "only the repeat of the first key is a hit");
}

#[test]
fn transient_failures_are_retried_and_billed_permanent_ones_are_not() {
    let provider = Arc::new(Scripted {
        fail: vec![
            ("aaaa", 0, FailureKind::RateLimited { retry_after_ms: Some(1) }, None),
            ("aaaa", 1, FailureKind::Server, Some(7)),
            ("zzzz", 0, FailureKind::Permanent, None),
        ],
        ..Default::default()
    });
    let client = InferenceClient::new(provider.clone(), settings(1, 100, 3), PRICE, None, 1);
    let b = rt().block_on(client.embed(&key(), &texts(&["aaaa", "bbbb"]))).expect("recovers");
    assert_eq!(b.calls[0].attempts, 3);
    assert_eq!(b.calls[0].spend.nano_usd, 7 + 1, "the billed 5xx is kept, the 429 billed nothing");
    let err = rt().block_on(client.embed(&key(), &texts(&["bbbb", "zzzz"]))).expect_err("permanent");
    match err {
        e @ EmbedError::Provider { .. } => {
            assert!(e.to_string().contains("not retried"), "{e}");
            assert_eq!(e.incurred().nano_usd, 1, "the chunk that succeeded is still paid for");
        }
        other => panic!("{other}"),
    }
    let zzzz = provider.seen.lock().iter().filter(|(t, _)| t[0] == "zzzz").count();
    assert_eq!(zzzz, 1, "a permanent error is never retried");
}

#[test]
fn retries_run_out() {
    let provider = Arc::new(Scripted {
        fail: (0..3).map(|a| ("aaaa", a, FailureKind::Timeout, None)).collect(),
        ..Default::default()
    });
    let client = InferenceClient::new(provider, settings(4, 100, 2), PRICE, None, 1);
    let err = rt().block_on(client.embed(&key(), &texts(&["aaaa"]))).expect_err("three timeouts").to_string();
    assert!(err.contains("3 attempt(s), retries exhausted"), "{err}");
}

#[test]
fn a_short_result_is_an_error_and_is_never_cached() {
    let provider = Arc::new(Scripted { short: true, ..Default::default() });
    let client = InferenceClient::new(provider.clone(), settings(8, 100, 0), PRICE, Some(TextCache::in_memory()), 1);
    let err = rt().block_on(client.embed(&key(), &texts(&["aaaa", "bbbb"]))).expect_err("short").to_string();
    assert!(err.contains("1 vectors for 2 texts"), "{err}");
    let _ = rt().block_on(client.embed(&key(), &texts(&["aaaa", "bbbb"])));
    assert_eq!(provider.seen.lock().len(), 2, "nothing was cached");
}

#[test]
fn stage_failure_fails_every_consumer_and_keeps_costs() {
    let provider =
        Arc::new(Scripted { fail: vec![("cccc", 0, FailureKind::Permanent, Some(3))], ..Default::default() });
    let client = InferenceClient::new(provider, settings(2, 100, 0), PRICE, None, 1);
    let plan = Plan::new(vec![(0, "aaaa"), (1, "bbbb"), (2, "cccc"), (3, "aaaa")]);
    let r = rt().block_on(embed_stage(&client, &key(), &plan, Strategy::Batched));
    assert_eq!(r.failed.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3], "one port call: all consumers fail");
    assert!(r.vectors.iter().all(Option::is_none));
    let allocated: u64 = r.allocation.values().map(|s| s.nano_usd).sum();
    assert_eq!(allocated, r.provider_spend.nano_usd);
    assert_eq!(r.provider_spend.nano_usd, 2 + 3);
}

#[test]
fn modelled_faults_depend_on_request_and_attempt_only() {
    let m = ModelledProvider::new(ModelledSettings { server_error: 0.5, seed: 3, ..Default::default() });
    let faults: Vec<_> = (0..64u8).map(|i| m.fault(&[i; 32], 0)).collect();
    assert_eq!(faults, (0..64u8).map(|i| m.fault(&[i; 32], 0)).collect::<Vec<_>>());
    let n = faults.iter().filter(|f| f.is_some()).count();
    assert!((16..48).contains(&n), "{n} of 64");
    assert_ne!(faults, (0..64u8).map(|i| m.fault(&[i; 32], 1)).collect::<Vec<_>>(), "a retry draws anew");
}

#[test]
fn rate_limits_and_backoff_wait_on_the_clock_they_are_given() {
    // Two requests per minute: the first two go at once, each later one
    // waits 30 simulated seconds. No runtime and no wall time are needed.
    let clock = Arc::new(SimulatedSleeper::new());
    let limited = EmbeddingSection { requests_per_minute: 2, concurrency: 1, ..settings(1, 100, 0) };
    let client = InferenceClient::new(Arc::new(Scripted::default()), limited, PRICE, None, 1).with_clock(clock.clone());
    let b = block_on_ready(client.embed(&key(), &texts(&["a", "b", "c", "d", "e"]))).expect("ok");
    assert_eq!(b.calls.len(), 5);
    assert_eq!(clock.waits(), vec![Duration::from_secs(30); 3]);
    // A 429 with a retry-after of 1.5 s: the backoff (at most 2 ms here)
    // never goes sooner.
    let clock = Arc::new(SimulatedSleeper::new());
    let provider = Arc::new(Scripted {
        fail: vec![("a", 0, FailureKind::RateLimited { retry_after_ms: Some(1_500) }, None)],
        ..Default::default()
    });
    let client = InferenceClient::new(provider, settings(1, 100, 1), PRICE, None, 1).with_clock(clock.clone());
    let b = block_on_ready(client.embed(&key(), &texts(&["a"]))).expect("recovers");
    assert_eq!((b.calls[0].attempts, clock.waits()), (2, vec![Duration::from_millis(1_500)]));
}

/// Concurrent per-text invocations decide cache hits in list order: the
/// first list with a text misses, every later one hits, whatever finishes
/// first; results come back in list order.
#[test]
fn concurrent_invocations_hit_the_cache_in_list_order() {
    let provider = Arc::new(Scripted::default());
    let client = InferenceClient::new(provider.clone(), settings(8, 100, 0), PRICE, Some(TextCache::in_memory()), 1);
    let lists: Vec<Vec<String>> = ["a", "b", "a", "c", "b", "a"].iter().map(|t| texts(&[t])).collect();
    let results = rt().block_on(client.embed_each(&key(), &lists));
    let hits: Vec<u64> = results.iter().map(|r| r.as_ref().expect("ok").cache_hits).collect();
    assert_eq!(hits, vec![0, 0, 1, 0, 1, 1]);
    let mut sent: Vec<String> = provider.seen.lock().iter().map(|(t, _)| t[0].clone()).collect();
    sent.sort();
    assert_eq!(sent, vec!["a", "b", "c"], "each text goes upstream once");
}
