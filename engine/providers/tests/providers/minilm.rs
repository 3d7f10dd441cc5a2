//! The MiniLM provider against an independent reference, and its
//! exactness through the inference client. Needs the model that `bash
//! scripts/fetch-minilm` fetches (the test command runs it first).

use engine::config::{Config, RawConfig, MINILM_DIM, MINILM_MODEL};
use engine::embed::{EmbedKey, EmbedRole, EmbeddingPort};
use providers::embed::minilm::{load_shared, MiniLm, MAX_TOKENS};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model() -> Arc<MiniLm> {
    let dir = root().join("models/all-MiniLM-L6-v2");
    load_shared(&dir).unwrap_or_else(|e| panic!("{e}\n(the test command runs scripts/fetch-minilm first)"))
}

/// The exactness corpus: 205 texts, from the empty text and single words
/// to texts past the 256-piece limit, non-ASCII included.
pub fn corpus() -> Vec<String> {
    let text = std::fs::read_to_string(root().join("fixtures/minilm/corpus.txt")).expect("corpus");
    text.lines().skip(1).map(str::to_string).collect()
}

fn cos(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()
}

fn num(v: &serde_json::Value) -> f64 {
    v.as_f64().expect("a number")
}

#[test]
fn vectors_match_sentence_transformers_and_the_published_similarities() {
    let m = model();
    let text = std::fs::read_to_string(root().join("fixtures/minilm/reference.json")).expect("reference");
    let reference: serde_json::Value = serde_json::from_str(&text).expect("json");
    let texts: Vec<String> =
        reference["texts"].as_array().expect("texts").iter().map(|t| t.as_str().expect("text").into()).collect();
    let vectors: Vec<Vec<f32>> = texts.iter().map(|t| m.embed_one(t).expect("embeds")).collect();
    for (i, (v, want)) in vectors.iter().zip(reference["first_components"].as_array().expect("components")).enumerate()
    {
        assert_eq!(v.len(), MINILM_DIM);
        assert!((cos(v, v) - 1.0).abs() < 1e-5, "text {i} is not unit length");
        for (k, w) in want.as_array().expect("row").iter().enumerate() {
            let got = f64::from(v[k]);
            assert!((got - num(w)).abs() < 1e-3, "text {i} component {k}: {got} against {}", num(w));
        }
    }
    for (t, want) in texts.iter().zip(reference["token_counts"].as_array().expect("counts")) {
        assert_eq!(m.token_count(t).expect("tokenises") as u64, want.as_u64().expect("count"), "{t:.40}");
    }
    let published = &reference["published"]["pairs"];
    for pair in reference["pairs"].as_array().expect("pairs").iter().chain(published.as_array().expect("pairs")) {
        let (i, j, want) =
            (pair[0].as_u64().expect("i") as usize, pair[1].as_u64().expect("j") as usize, num(&pair[2]));
        let got = cos(&vectors[i], &vectors[j]);
        assert!((got - want).abs() < 1e-3, "cos({i}, {j}) = {got}, the reference says {want}");
    }
}

/// The bits of every vector, in order, as one hex digest line.
fn vectors_digest(vectors: &[Vec<f32>]) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    for v in vectors {
        for x in v {
            h.update(x.to_bits().to_le_bytes());
        }
    }
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Every third text of the exactness corpus, long ones included: what the
/// thread-count children embed.
fn sample(corpus: &[String]) -> Vec<String> {
    corpus.iter().step_by(3).cloned().collect()
}

/// The property the packed forward pass keeps: a text's vector is the same
/// bits alone, in any batch (any companions, any order, any size, packs
/// split at the token budget or not), through the inference client at any
/// batch size, at any kernel level and at any thread count. Random
/// batches of the exactness corpus are drawn from a seeded stream; the
/// thread counts run in child processes of this test (rayon sizes its
/// global pool once per process, from `RAYON_NUM_THREADS`).
#[test]
fn a_text_has_one_vector_alone_in_any_batch_and_at_any_thread_count() {
    use engine::rng::{Purpose, Stream};
    let corpus = corpus();
    assert!(corpus.len() >= 200);
    let m = model();
    if std::env::var_os("MINILM_THREADS_CHILD").is_some() {
        // A child: the sample packed in one call, as a digest.
        let vectors: Vec<Vec<f32>> =
            m.embed_packed(&sample(&corpus)).expect("embeds").into_iter().map(|(v, _)| v).collect();
        println!("vectors digest: {}", vectors_digest(&vectors));
        return;
    }
    let alone: Vec<Vec<f32>> = corpus.iter().map(|t| m.embed_one(t).expect("embeds")).collect();
    let same = |v: &[f32], i: usize| v.iter().zip(&alone[i]).all(|(a, b)| a.to_bits() == b.to_bits());
    let truncated_before = m.truncated_texts();
    let counts: Vec<usize> = corpus.iter().map(|t| m.token_count(t).expect("tokenises")).collect();
    assert!(counts.iter().filter(|n| **n == MAX_TOKENS).count() >= 10, "the corpus reaches the truncation limit");

    // Random batches, and one of long texts only, past the token budget.
    let mut s = Stream::derive(11, 0, 0, Purpose::Testing);
    let mut cases: Vec<Vec<usize>> =
        (0..8).map(|_| (0..1 + s.below(40)).map(|_| s.below(corpus.len())).collect()).collect();
    cases.push((0..corpus.len()).filter(|i| counts[*i] >= 200).take(24).collect());
    let mut split = 0;
    for (case, picks) in cases.iter().enumerate() {
        let texts: Vec<String> = picks.iter().map(|i| corpus[*i].clone()).collect();
        split += usize::from(picks.iter().map(|i| counts[*i]).sum::<usize>() > providers::embed::minilm::PASS_TOKENS);
        let packed = m.embed_packed(&texts).expect("embeds");
        for ((v, n), i) in packed.iter().zip(picks) {
            assert!(same(v, *i), "case {case}: text {i} differs in a batch of {}", picks.len());
            assert_eq!(*n, counts[*i]);
        }
    }
    assert!(split > 0, "some batch spans more than one pass");
    // At every kernel level this CPU runs: the portable build (the
    // baseline CPU's instructions) gives the same bits as the fastest.
    let some: Vec<String> = corpus.iter().step_by(7).cloned().collect();
    let portable = m.embed_packed_at(providers::kernel::Level::Portable, &some).expect("embeds");
    for ((v, _), i) in portable.iter().zip((0..corpus.len()).step_by(7)) {
        assert!(same(v, i), "text {i}: the portable kernels give other bits");
    }

    // Through the inference client: requests of 7 and of 64 texts.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    for batch in [7, 64] {
        let text = format!(
            "[embedding]\nprovider = \"minilm\"\nbatch_size = {batch}\ncache = false\n[embedding.minilm]\nmodel_dir = \"{}\"\n",
            root().join("models/all-MiniLM-L6-v2").display()
        );
        let cfg: Config = RawConfig::from_toml(&text, "t").expect("parses").resolve("t").expect("valid");
        assert_eq!((cfg.raw.embedding.model.as_str(), cfg.raw.embedding.dim), (MINILM_MODEL, MINILM_DIM));
        let client = providers::build_embedder(&cfg, 1).expect("client");
        let key = EmbedKey { role: EmbedRole::Memory, model: MINILM_MODEL.into(), dim: MINILM_DIM };
        let out = rt.block_on(client.embed(&key, &corpus)).expect("embeds");
        assert!(out.calls.len() >= corpus.len().div_ceil(batch), "requests of at most {batch} texts");
        for (i, v) in out.vectors.iter().enumerate() {
            assert!(same(v, i), "text {i} differs at batch size {batch}");
        }
        let billed: u64 = out.calls.iter().map(|c| c.spend.input_tokens).sum();
        assert_eq!(billed, counts.iter().sum::<usize>() as u64, "the model's own word pieces are billed");
        assert_eq!(out.calls.iter().map(|c| c.spend.nano_usd).sum::<u64>(), 0, "a local model costs nothing");
    }
    assert!(m.truncated_texts() > truncated_before, "truncations are counted");

    // At 1 and 3 threads, in child processes.
    let want: Vec<Vec<f32>> = (0..corpus.len()).step_by(3).map(|i| alone[i].clone()).collect();
    let want = vectors_digest(&want);
    let exe = std::env::current_exe().expect("the test binary");
    for threads in ["1", "3"] {
        let out = std::process::Command::new(&exe)
            .args(["--exact", "minilm::a_text_has_one_vector_alone_in_any_batch_and_at_any_thread_count"])
            .args(["--nocapture", "--test-threads", "1"])
            .env("MINILM_THREADS_CHILD", "1")
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("the child runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        // The harness prints the line after the test's name.
        let got = stdout.lines().find_map(|l| Some(l.split_once("vectors digest: ")?.1.trim().to_string()));
        assert!(out.status.success(), "{threads} threads: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(got.as_deref(), Some(want.as_str()), "{threads} threads give other bits");
    }
}

#[test]
fn a_wrong_or_missing_model_directory_is_refused_with_the_fix() {
    let empty = std::env::temp_dir().join(format!("minilm-missing-{}", std::process::id()));
    let err = MiniLm::load(&empty).expect_err("nothing there").to_string();
    assert!(err.contains("config.json") && err.contains("scripts/fetch-minilm"), "{err}");
    // Another model: a config of another width beside the right files.
    let other = std::env::temp_dir().join(format!("minilm-other-{}", std::process::id()));
    std::fs::create_dir_all(&other).expect("dir");
    let src = root().join("models/all-MiniLM-L6-v2");
    let config = std::fs::read_to_string(src.join("config.json")).expect("config");
    std::fs::write(other.join("config.json"), config.replace("\"hidden_size\": 384", "\"hidden_size\": 768"))
        .expect("write");
    let err = MiniLm::load(&other).expect_err("another model").to_string();
    assert!(err.contains("holds another model") && err.contains("768"), "{err}");
    // Damaged weights.
    std::fs::write(other.join("config.json"), config).expect("write");
    std::fs::copy(src.join("tokenizer.json"), other.join("tokenizer.json")).expect("copy");
    std::fs::write(other.join("model.safetensors"), b"not weights").expect("write");
    let err = MiniLm::load(&other).expect_err("damaged").to_string();
    assert!(err.contains("model.safetensors") && err.contains("fetch-minilm"), "{err}");
    std::fs::remove_dir_all(&other).ok();
    // Weights other than the ones a config records.
    let settings = engine::config::MinilmSettings {
        model_dir: src.display().to_string(),
        weights_sha256: "00".repeat(32),
        ..Default::default()
    };
    let err = providers::embed::minilm::load_configured(&settings).expect_err("other weights").to_string();
    assert!(err.contains("the config records"), "{err}");
}

/// Spearman's rank correlation, with average ranks for ties.
fn spearman(x: &[f64], y: &[f64]) -> f64 {
    let ranks = |v: &[f64]| -> Vec<f64> {
        let mut idx: Vec<usize> = (0..v.len()).collect();
        idx.sort_by(|a, b| v[*a].total_cmp(&v[*b]));
        let mut r = vec![0.0; v.len()];
        let mut i = 0;
        while i < idx.len() {
            let mut j = i;
            while j + 1 < idx.len() && v[idx[j + 1]].total_cmp(&v[idx[i]]).is_eq() {
                j += 1;
            }
            for k in i..=j {
                r[idx[k]] = (i + j) as f64 / 2.0 + 1.0;
            }
            i = j + 1;
        }
        r
    };
    let (rx, ry) = (ranks(x), ranks(y));
    let n = x.len() as f64;
    let (mx, my) = (rx.iter().sum::<f64>() / n, ry.iter().sum::<f64>() / n);
    let cov: f64 = rx.iter().zip(&ry).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sd = |r: &[f64], m: f64| r.iter().map(|a| (a - m).powi(2)).sum::<f64>().sqrt();
    cov / (sd(&rx, mx) * sd(&ry, my))
}

#[test]
fn ssr_on_minilm_ranks_a_graded_set_of_statements_by_intent() {
    #[derive(serde::Deserialize)]
    struct Graded {
        statements: Vec<Statement>,
    }
    #[derive(serde::Deserialize)]
    struct Statement {
        grade: u8,
        text: String,
    }
    let text = std::fs::read_to_string(root().join("fixtures/intent/graded.toml")).expect("graded set");
    let graded: Graded = toml::from_str(&text).expect("toml");
    let m = model();
    let sets = engine::intent::builtin_anchor_sets();
    let anchors: Vec<Vec<Vec<f32>>> =
        sets.iter().map(|s| s.statements.iter().map(|t| m.embed_one(t).expect("embeds")).collect()).collect();
    let views: Vec<Vec<&[f32]>> = anchors.iter().map(|s| s.iter().map(Vec::as_slice).collect()).collect();
    let (mut grades, mut expected) = (Vec::new(), Vec::new());
    for s in &graded.statements {
        let v = m.embed_one(&s.text).expect("embeds");
        let (_, e) = engine::intent::rate(&v, &views, 0.0, 1.0);
        grades.push(f64::from(s.grade));
        expected.push(e);
    }
    let rho = spearman(&grades, &expected);
    eprintln!("SSR on MiniLM, graded set of {}: Spearman rho {rho:.3}", grades.len());
    for g in 1..=5 {
        let es: Vec<String> = grades
            .iter()
            .zip(&expected)
            .filter(|(x, _)| x.total_cmp(&f64::from(g)).is_eq())
            .map(|(_, e)| format!("{e:.2}"))
            .collect();
        eprintln!("  grade {g}: {}", es.join(" "));
    }
    assert!(rho >= 0.7, "rank correlation {rho:.3} with the grades, under 0.7");
}
