use crate::http::serve;
use engine::chat::{ChatError, ChatPort, ChatPurpose, ChatRequest, FailureClass};
use engine::config::{ChatProvider, ChatSection, StructuredOutput};
use engine::cost::Price;
use engine::embed::upstream::HttpSettings;
use providers::chat::{ChatClient, HttpChat};
use providers::clock::SimulatedSleeper;
use std::sync::Arc;
use std::time::Duration;

/// 1 nano-USD per prompt token, 2 per completion token.
const PRICE: Price =
    Price { input_nano_per_mtok: 1_000_000, output_nano_per_mtok: 2_000_000, cached_input_nano_per_mtok: 1_000_000 };

fn section(urls: &[&str], key_env: &str) -> ChatSection {
    let http = HttpSettings {
        base_urls: urls.iter().map(|u| u.to_string()).collect(),
        api_key_env: key_env.into(),
        request_timeout_ms: 300,
        ..HttpSettings::chat()
    };
    ChatSection {
        provider: ChatProvider::Openai,
        model: "test-model".into(),
        concurrency: 1,
        max_retries: 2,
        http,
        ..ChatSection::default()
    }
}

fn client(section: &ChatSection, clock: &Arc<SimulatedSleeper>) -> ChatClient {
    let upstream = Arc::new(HttpChat::new(section).expect("upstream"));
    ChatClient::new(upstream, section, PRICE, 7).with_clock(clock.clone())
}

fn completion(content: &str, usage: bool) -> String {
    let usage = if usage { ", \"usage\": {\"prompt_tokens\": 11, \"completion_tokens\": 5}" } else { "" };
    format!(
        "{{\"model\": \"test-model\", \"choices\": [{{\"message\": {{\"role\": \"assistant\", \"content\": {}}}}}]{usage}}}",
        serde_json::to_string(content).expect("json")
    )
}

fn request() -> ChatRequest {
    ChatRequest::new("test-model", ChatPurpose::Reaction, "How do you feel about the mug?")
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

const REPLY: &str = "{\"reaction\": \"Nice.\", \"sentiment\": 0.5, \"intent\": 4, \"importance\": 3}";

#[test]
fn a_reply_is_billed_from_usage_and_the_request_asks_for_the_schema() {
    rt().block_on(async {
        std::env::set_var("SIM_TEST_CHAT_KEY", "chat-key-1");
        let (url, seen) = serve(vec![(200, "", completion(REPLY, true)), (200, "", completion(REPLY, false))]).await;
        let clock = Arc::new(SimulatedSleeper::new());
        let c = client(&section(&[&url], "SIM_TEST_CHAT_KEY"), &clock);
        let r = c.complete(&request()).await.expect("reply");
        assert_eq!((r.text.as_str(), r.spend.input_tokens, r.spend.output_tokens), (REPLY, 11, 5));
        assert_eq!((r.spend.nano_usd, r.estimated), (11 + 10, false), "billed from usage");
        let estimated = c.complete(&request()).await.expect("reply");
        assert!(estimated.estimated, "no usage: an estimate, labelled");
        let sent = seen.lock()[0].clone();
        assert!(sent.starts_with("POST /v1/chat/completions"), "{sent}");
        assert!(sent.contains("Bearer chat-key-1"));
        for needle in ["\"response_format\"", "\"json_schema\"", "\"intent\"", "\"seed\"", "\"max_tokens\":400"] {
            assert!(sent.contains(needle), "request lacks {needle}: {sent}");
        }
    });
}

/// OpenAI, vLLM and llama.cpp's server report the prompt tokens their
/// prefix cache served in `usage.prompt_tokens_details.cached_tokens`.
#[test]
fn cached_prompt_tokens_are_read_and_billed_at_the_cached_price() {
    rt().block_on(async {
        let body = completion(REPLY, true).replace(
            "\"completion_tokens\": 5}",
            "\"completion_tokens\": 5, \"prompt_tokens_details\": {\"cached_tokens\": 8}}",
        );
        let (url, _) = serve(vec![(200, "", body)]).await;
        let clock = Arc::new(SimulatedSleeper::new());
        let section = section(&[&url], "");
        let price = Price { cached_input_nano_per_mtok: 500_000, ..PRICE };
        let c = ChatClient::new(Arc::new(HttpChat::new(&section).expect("upstream")), &section, price, 7)
            .with_clock(clock.clone());
        let r = c.complete(&request()).await.expect("reply");
        // 3 fresh prompt tokens at 1, 8 cached at 0.5 and 5 completion
        // tokens at 2 nano-USD each.
        assert_eq!((r.spend.input_tokens, r.spend.cached_input_tokens, r.spend.nano_usd), (11, 8, 3 + 4 + 10));
    });
}

#[test]
fn transient_failures_are_retried_after_their_wait_and_permanent_ones_are_not() {
    rt().block_on(async {
        let script = vec![
            (429, "retry-after: 2\r\n", "{}".to_string()),
            (500, "", "oops".to_string()),
            (200, "", completion(REPLY, true)),
            (401, "", "{\"error\": \"bad key\"}".to_string()),
            (200, "", "this is not json".to_string()),
        ];
        let (url, seen) = serve(script).await;
        let clock = Arc::new(SimulatedSleeper::new());
        let c = client(&section(&[&url], ""), &clock);
        let r = c.complete(&request()).await.expect("third time lucky");
        assert_eq!(r.text, REPLY);
        assert!(clock.waits()[0] >= Duration::from_secs(2), "the retry-after is honoured: {:?}", clock.waits());
        // Every transport attempt is on the record: its class and status,
        // the endpoint, the model the server named, its latency.
        let errors: Vec<Option<(FailureClass, &str)>> =
            r.attempts.iter().map(|a| a.error.as_ref().map(|(c, m)| (*c, m.as_str()))).collect();
        assert_eq!(r.attempts.iter().map(|a| a.attempt).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(errors[0].is_some_and(|(c, m)| c == FailureClass::RateLimited && m.contains("429")), "{errors:?}");
        assert!(errors[1].is_some_and(|(c, m)| c == FailureClass::Server && m.contains("500")), "{errors:?}");
        assert_eq!(errors[2], None);
        let last = &r.attempts[2];
        assert_eq!(
            (last.endpoint.clone(), last.model.as_deref()),
            (format!("{url}/chat/completions"), Some("test-model"))
        );
        assert_eq!(last.spend, r.spend, "only the answering attempt was billed");
        let now = c.activity().expect("a transport reports its activity");
        assert_eq!((now.in_flight, now.retries, now.billed_nano_usd), (0, 2, r.spend.nano_usd));
        match c.complete(&request()).await {
            Err(ChatError::Provider { cause, attempts, .. }) => {
                assert!(cause.contains("401") && cause.contains("not retried"), "{cause}");
                assert_eq!(attempts.len(), 1);
            }
            other => panic!("expected a permanent failure, got {other:?}"),
        }
        match c.complete(&request()).await {
            Err(ChatError::Provider { cause, .. }) => assert!(cause.contains("unreadable reply"), "{cause}"),
            other => panic!("expected an unreadable reply, got {other:?}"),
        }
        assert_eq!(seen.lock().len(), 5, "the 401 and the bad body were each sent once");
    });
}

#[test]
fn a_server_that_never_answers_times_out() {
    rt().block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let mut held = Vec::new();
            for _ in 0..3 {
                if let Ok((sock, _)) = listener.accept().await {
                    held.push(sock);
                }
            }
            tokio::time::sleep(Duration::from_secs(3)).await;
        });
        let clock = Arc::new(SimulatedSleeper::new());
        let c = client(&section(&[&url], ""), &clock);
        match c.complete(&request()).await {
            Err(ChatError::Provider { cause, .. }) => {
                assert!(cause.contains("timed out") && cause.contains("3 attempt(s)"), "{cause}")
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
    });
}

#[test]
fn a_fleet_routes_around_a_failing_endpoint() {
    rt().block_on(async {
        let (bad, _) = serve((0..3).map(|_| (503, "", "down".to_string())).collect()).await;
        let (good, seen) = serve((0..6).map(|_| (200, "", completion(REPLY, true))).collect()).await;
        let clock = Arc::new(SimulatedSleeper::new());
        let mut s = section(&[&bad, &good], "");
        s.structured_output = StructuredOutput::None;
        let c = client(&s, &clock);
        for _ in 0..4 {
            assert_eq!(c.complete(&request()).await.expect("the fleet answers").text, REPLY);
        }
        use std::sync::atomic::Ordering;
        assert_eq!(c.stats[0].failures.load(Ordering::Relaxed), 1, "one failure, then the retry went elsewhere");
        assert_eq!(c.stats[1].requests.load(Ordering::Relaxed), 4, "the healthy endpoint serves the rest");
        let sent = seen.lock()[0].clone();
        assert!(!sent.contains("response_format") && sent.contains("JSON Schema"), "none mode asks in words");
    });
}

#[test]
fn credentials_in_the_base_url_stay_out_of_every_message_and_attempt() {
    rt().block_on(async {
        let (url, _) = serve(vec![(401, "", "{\"error\": \"no\"}".to_string())]).await;
        let with_user = url.replacen("http://", "http://alice:hunter2@", 1);
        let clock = Arc::new(SimulatedSleeper::new());
        let settings = section(&[&with_user], "");
        let upstream = HttpChat::new(&settings).expect("upstream");
        let shown = format!("{upstream:?}");
        let c = ChatClient::new(Arc::new(upstream), &settings, PRICE, 7).with_clock(clock);
        let Err(ChatError::Provider { cause, attempts, .. }) = c.complete(&request()).await else {
            panic!("expected a 401")
        };
        let recorded = format!("{cause} {attempts:?} {shown}");
        assert!(!recorded.contains("hunter2") && !recorded.contains("alice"), "{recorded}");
        assert!(cause.contains("401"), "{cause}");
    });
}

/// A live reply that parses as JSON but breaks the schema's ranges (intent
/// 9) is refused by the guardrail, retried as a new request, and the job
/// fails with every billed call kept.
#[test]
fn a_reply_that_breaks_the_schema_is_retried_then_fails_the_job_with_its_costs() {
    use engine::clock::Clock;
    use engine::config::RawConfig;
    use engine::persona::{generate, PersonaState, Traits};
    use engine::scenario::Scenario;
    use engine::turn::{converse, prepare, ChatFailure, TickContext};
    rt().block_on(async {
        let bad = "{\"reaction\": \"Wow.\", \"sentiment\": 0.5, \"intent\": 9, \"importance\": 3}";
        let (url, seen) = serve(vec![(200, "", completion(bad, true)), (200, "", completion(bad, true))]).await;
        let clock = Arc::new(SimulatedSleeper::new());
        let c = client(&section(&[&url], ""), &clock);
        let cfg = RawConfig::from_toml("[chat]\nmax_guardrail_retries = 1\n", "t")
            .and_then(|r| r.resolve("t"))
            .expect("valid");
        let scenario = Scenario::builtin("default").expect("built in");
        let state = PersonaState::new(generate(&Traits::builtin(), 1, 0));
        let jobs = scenario.jobs(1, 1, 1, |_| &[]);
        let ctx = TickContext { cfg: &cfg, scenario: &scenario, tick: 1, now: Clock::with_hours_per_tick(24).at(1) };
        let prepared = prepare(&state, &jobs[0], None, &ctx).expect("within budget");
        let conversation = converse(&c, &prepared, &cfg, &scenario, 1).await;
        assert!(
            matches!(conversation.result, Err(ChatFailure::NoValidReply { attempts: 2, .. })),
            "{:?}",
            conversation.result
        );
        assert_eq!(seen.lock().len(), 2, "one request per guardrail attempt");
        let seed = |sent: &str| {
            sent.split("\"seed\":").nth(1).map(|t| t.chars().take_while(char::is_ascii_digit).collect::<String>())
        };
        let seeds: Vec<Option<String>> = seen.lock().iter().map(|s| seed(s)).collect();
        assert!(seeds[0].is_some() && seeds[0] != seeds[1], "the retry does not resend the seed: {seeds:?}");
        let billed: Vec<u64> = conversation.calls.iter().map(|c| c.spend.nano_usd).collect();
        assert_eq!(billed, [21, 21], "both refused replies stay billed to the job");
        assert_ne!(conversation.calls[0].request, conversation.calls[1].request, "the retry is a new request");
    });
}

/// A server that rejects `response_format` fails at once, with advice.
#[test]
fn a_server_rejecting_response_format_is_told_to_use_plain_replies() {
    rt().block_on(async {
        let body = "{\"error\": {\"message\": \"Unrecognized request argument: response_format\"}}";
        let (url, seen) = serve(vec![(400, "", body.to_string())]).await;
        let c = client(&section(&[&url], ""), &Arc::new(SimulatedSleeper::new()));
        let Err(ChatError::Provider { cause, .. }) = c.complete(&request()).await else { panic!("expected a 400") };
        assert!(cause.contains("structured_output = \"none\"") && cause.contains("not retried"), "{cause}");
        assert_eq!(seen.lock().len(), 1);
    });
}

/// A completion whose one token comes with its `top_logprobs`, as OpenAI's
/// API returns them.
fn with_logprobs(top: &[(&str, f64)]) -> String {
    let top: Vec<serde_json::Value> =
        top.iter().map(|(t, p)| serde_json::json!({"token": t, "logprob": p.ln(), "bytes": t.as_bytes()})).collect();
    serde_json::json!({
        "model": "test-model",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": "3"},
            "logprobs": {"content": [{"token": "3", "logprob": -0.5, "top_logprobs": top}]},
            "finish_reason": "length",
        }],
        "usage": {"prompt_tokens": 40, "completion_tokens": 1},
    })
    .to_string()
}

/// `--answer-mode probabilities` on an OpenAI-compatible server: one
/// answer token with its 20 most likely alternatives; ` 3` and `3` both
/// count for option 3; the options the list misses share the mass it
/// leaves unseen; a server that returns no logprobs is a named setting
/// error, not a failed answer.
#[test]
fn option_probabilities_come_from_the_answer_tokens_logprobs() {
    rt().block_on(async {
        let top = [("3", 0.5), (" 3", 0.1), ("2", 0.2), ("Three", 0.05), ("4", 0.05), ("0", 0.02)];
        let plain = completion("3", true);
        let (url, seen) = serve(vec![(200, "", with_logprobs(&top)), (200, "", plain)]).await;
        let clock = Arc::new(SimulatedSleeper::new());
        let c = client(&section(&[&url], ""), &clock);
        let ask =
            ChatRequest::new("test-model", ChatPurpose::Survey, "Rate it.\nOptions:\n1. a\n2. b\n3. c\n4. d\n5. e\n")
                .with_options(5);
        let w = c.option_probabilities(&ask).await.expect("probabilities");
        // Listed: 0.92 in all, 0.85 on options; unseen 0.08, split between 1 and 5.
        let want = [0.04, 0.2, 0.6, 0.05, 0.04].map(|p| p / 0.93);
        for (got, want) in w.probabilities.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{:?} against {want:?}", w.probabilities);
        }
        assert!((w.mass - 0.85).abs() < 1e-9, "the options' mass {}", w.mass);
        assert_eq!((w.spend.input_tokens, w.spend.output_tokens), (40, 1), "billed from usage");
        let sent = seen.lock()[0].clone();
        for needle in ["\"logprobs\":true", "\"top_logprobs\":20", "\"max_tokens\":1", "number of your option only"] {
            assert!(sent.contains(needle), "request lacks {needle}: {sent}");
        }
        assert!(!sent.contains("response_format"), "a schema would make the first token a brace");
        match c.option_probabilities(&ask).await {
            Err(ChatError::Engine(e)) => {
                let text = e.to_string();
                assert!(text.contains("no logprobs") && text.contains("\"sample\""), "{text}");
            }
            other => panic!("a server without logprobs: {other:?}"),
        }
    });
}
