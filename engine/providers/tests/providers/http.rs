use engine::config::EmbeddingSection;
use engine::cost::Price;
use engine::embed::upstream::HttpSettings;
use engine::embed::{EmbedKey, EmbedRole, EmbeddingPort};
use parking_lot::Mutex;
use providers::{HttpProvider, InferenceClient};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A one-route HTTP/1.1 server on loopback: answers each request with the
/// next scripted (status, extra headers, body), records what it received,
/// and closes each connection. Bounded: it stops after the script.
pub(crate) async fn serve(script: Vec<(u16, &'static str, String)>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        for (status, headers, body) in script {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                let n = sock.read(&mut chunk).await.unwrap_or(0);
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let len = text
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break;
                    }
                }
            }
            log.lock().push(String::from_utf8_lossy(&buf).to_string());
            let reply = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes()).await;
            let _ = sock.shutdown().await;
        }
    });
    (url, seen)
}

fn client(url: &str, key_env: &str) -> InferenceClient {
    let settings = HttpSettings { base_url: url.into(), api_key_env: key_env.into(), ..Default::default() };
    let provider = Arc::new(HttpProvider::new(&settings).expect("provider"));
    let cs = EmbeddingSection {
        batch_size: 8,
        max_tokens_per_request: 10_000,
        concurrency: 1,
        requests_per_minute: 0,
        tokens_per_minute: 0,
        max_retries: 2,
        backoff_base_ms: 1,
        backoff_max_ms: 2,
        ..EmbeddingSection::default()
    };
    InferenceClient::new(provider, cs, Price::from_usd_per_mtok(0.001, 0.0), None, 0)
}

#[test]
fn embeds_through_an_openai_compatible_endpoint_with_retry_after() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        std::env::set_var("SIM_TEST_EMBED_KEY", "test-key-123");
        let ok = r#"{"data":[{"index":1,"embedding":[0.0,1.0,0.0]},{"index":0,"embedding":[1.0,0.0,0.0]}],"usage":{"prompt_tokens":11,"total_tokens":11}}"#;
        let (url, seen) = serve(vec![
            (429, "retry-after: 0\r\n", r#"{"error":"slow down"}"#.into()),
            (200, "", ok.into()),
        ])
        .await;
        let c = client(&url, "SIM_TEST_EMBED_KEY");
        let key = EmbedKey { role: EmbedRole::Memory, model: "text-embedding-3-small".into(), dim: 3 };
        let batch = c.embed(&key, &["first".into(), "second".into()]).await.expect("embeds after one 429");
        assert_eq!(&*batch.vectors[0], &[1.0, 0.0, 0.0], "results are placed by index");
        assert_eq!(batch.calls[0].attempts, 2);
        assert_eq!(batch.calls[0].spend.input_tokens, 11, "billed from the provider's usage");
        let seen = seen.lock();
        assert_eq!(seen.len(), 2);
        assert!(seen[1].starts_with("POST /v1/embeddings "), "{}", seen[1]);
        assert!(seen[1].to_ascii_lowercase().contains("authorization: bearer test-key-123"));
        assert!(seen[1].contains(r#""model":"text-embedding-3-small""#) && seen[1].contains(r#""input":["first","second"]"#));
    });
}

#[test]
fn client_errors_are_permanent_and_a_missing_key_is_named() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let (url, seen) = serve(vec![(401, "", r#"{"error":"bad key"}"#.into())]).await;
        let c = client(&url, "");
        let key = EmbedKey { role: EmbedRole::Memory, model: "m".into(), dim: 3 };
        let err = c.embed(&key, &["x".into()]).await.expect_err("401").to_string();
        assert!(err.contains("401") && err.contains("not retried"), "{err}");
        assert_eq!(seen.lock().len(), 1);
    });
    let missing = HttpSettings {
        base_url: "https://example.invalid/v1".into(),
        api_key_env: "SIM_TEST_UNSET_KEY_VAR".into(),
        ..Default::default()
    };
    let err = HttpProvider::new(&missing).expect_err("no key").to_string();
    assert!(err.contains("SIM_TEST_UNSET_KEY_VAR") && err.contains("not set"), "{err}");
}
