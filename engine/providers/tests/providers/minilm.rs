//! The MiniLM provider against an independent reference, and its
//! exactness through the inference client. Needs the model that `bash
//! scripts/fetch-minilm` fetches (the test command runs it first).

use engine::config::{Config, RawConfig, MINILM_DIM, MINILM_MODEL};
use engine::embed::{EmbedKey, EmbedRole, EmbeddingPort};
use providers::minilm::{load_shared, MiniLm, MAX_TOKENS};
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

#[test]
fn a_text_has_one_vector_whatever_its_batch() {
    let corpus = corpus();
    assert!(corpus.len() >= 200);
    let m = model();
    let alone: Vec<Vec<f32>> = corpus.iter().map(|t| m.embed_one(t).expect("embeds")).collect();
    let truncated_before = m.truncated_texts();
    assert!(
        corpus.iter().filter(|t| m.token_count(t).expect("tokenises") == MAX_TOKENS).count() >= 10,
        "the corpus reaches the truncation limit"
    );
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    for batch in [1, 7, 32] {
        let text = format!(
            "[embedding]\nprovider = \"minilm\"\nbatch_size = {batch}\ncache = false\n[embedding.minilm]\nmodel_dir = \"{}\"\n",
            root().join("models/all-MiniLM-L6-v2").display()
        );
        let cfg: Config = RawConfig::from_toml(&text, "t").expect("parses").resolve("t").expect("valid");
        assert_eq!((cfg.raw.embedding.model.as_str(), cfg.raw.embedding.dim), (MINILM_MODEL, MINILM_DIM));
        let client = providers::build_embedder(&cfg, 1).expect("client");
        let key = EmbedKey { role: EmbedRole::Memory, model: MINILM_MODEL.into(), dim: MINILM_DIM };
        let out = rt.block_on(client.embed(&key, &corpus)).expect("embeds");
        assert_eq!(out.calls.len(), corpus.len().div_ceil(batch));
        for (i, (v, want)) in out.vectors.iter().zip(&alone).enumerate() {
            assert!(
                v.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()),
                "text {i} differs at batch size {batch}"
            );
        }
        let billed: u64 = out.calls.iter().map(|c| c.spend.input_tokens).sum();
        let counted: u64 = corpus.iter().map(|t| m.token_count(t).expect("tokenises") as u64).sum();
        assert_eq!(billed, counted, "the model's own word pieces are billed");
        assert_eq!(out.calls.iter().map(|c| c.spend.nano_usd).sum::<u64>(), 0, "a local model costs nothing");
    }
    assert!(m.truncated_texts() > truncated_before, "truncations are counted");
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
    let settings =
        engine::config::MinilmSettings { model_dir: src.display().to_string(), weights_sha256: "00".repeat(32) };
    let err = providers::minilm::load_configured(&settings).expect_err("other weights").to_string();
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
