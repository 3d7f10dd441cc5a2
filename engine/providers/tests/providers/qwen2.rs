//! The `gguf` provider on a second architecture: Qwen2.5-Coder-0.5B-Instruct
//! as Ollama and most downloads ship it (`Q4_K_M`: `Q4_K`, `Q6_K`, `Q5_0`
//! and `Q8_0` tensors). Its tokenizer against llama.cpp's ids, its forward
//! pass against candle's `quantized_qwen2` on the file's own blocks, batch
//! invariance, and a file of an unknown architecture refused by name.
//! Needs the model that `bash scripts/fetch-model qwen2.5-coder-0.5b`
//! fetches (the test command runs it first).

use candle_core::quantized::gguf_file;
use candle_core::Device;
use engine::config::GgufSettings;
use providers::chat::gguf::{load_configured, GgufModel, Level};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_file() -> PathBuf {
    root().join("models/qwen2.5-coder-0.5b/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf")
}

fn model() -> Arc<GgufModel> {
    let settings = GgufSettings { model_file: model_file().display().to_string(), ..Default::default() };
    load_configured(&settings)
        .unwrap_or_else(|e| panic!("{e}\n(the test command runs scripts/fetch-model qwen2.5-coder-0.5b first)"))
}

/// Every text of the corpus (English, contractions in both cases, digits,
/// accents, Cyrillic, CJK, Korean, Thai, Arabic, emoji sequences, runs of
/// whitespace, code, the chat markers, a user-defined token) gives the ids
/// llama.cpp's `llama-tokenize` gave on the same file
/// (fixtures/qwen2.5-coder-0.5b/make_tokens.py), and decodes back to its
/// text. The chat template is the file's, with Qwen's default system turn.
#[test]
fn the_tokenizer_gives_llama_cpps_ids_and_the_template_is_the_files() {
    let m = model();
    let v = m.vocab();
    assert_eq!((v.size, v.eos), (151_936, 151_645));
    assert_eq!(m.sha256(), "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32");
    let fixture = root().join("fixtures/qwen2.5-coder-0.5b/tokens.json");
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&fixture).expect("tokens.json")).expect("JSON");
    assert!(cases.len() >= 15);
    for case in &cases {
        let text = case["text"].as_str().expect("text");
        let want: Vec<u32> =
            case["ids"].as_array().expect("ids").iter().map(|i| i.as_u64().expect("id") as u32).collect();
        assert_eq!(v.encode(text), want, "ids of {text:?}");
        if !text.contains("<|") {
            assert_eq!(v.decode(&want), text, "round trip of {text:?}");
        }
    }
    let chat = v.chat(&[("user", "Hi there")]).expect("template");
    assert_eq!(
        chat,
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n\
         <|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    );
    // The unused tokens ([PAD151665] on) are never sampled; the end of turn is.
    let free = providers::chat::gguf::decode::free_mask(v);
    assert!(free.is_allowed(151_645) && free.is_allowed(9707));
    assert!(!free.is_allowed(151_665) && !free.is_allowed(151_935) && !free.is_allowed(151_644));
}

/// The project's forward pass against an independent implementation:
/// candle's quantized Qwen2 on the file's own `Q4_K`, `Q6_K`, `Q5_0` and
/// `Q8_0` blocks (its products on those blocks, activations in `Q8_K` or
/// `Q8_0`). The project holds `Q5_0` exactly and repacks the K-quants to
/// `Q8_0`, so the logits agree to rounding noise: cosine above 0.995 at
/// every step of a continuation that follows candle's most likely token,
/// and candle's choice within 1.0 of our most likely logit.
#[test]
fn the_forward_pass_agrees_with_candles_quantized_qwen2() {
    use candle_transformers::models::quantized_qwen2::ModelWeights;
    let m = model();
    let text = m.vocab().chat(&[("user", "Name three fruits that are red, and say why you like them.")]).expect("chat");
    let mut file = std::fs::File::open(model_file()).expect("model");
    let content = gguf_file::Content::read(&mut file).expect("gguf");
    let mut theirs = ModelWeights::from_gguf(content, &mut file, &Device::Cpu).expect("candle's model");
    let worst = super::gguf::assert_agrees_with(&m, &text, 6, None, |input, fed| theirs.forward(input, fed));
    eprintln!("qwen2 agreement with candle: lowest cosine {worst:.5}");
}

/// In random compositions of sequences sharing passes, at one and two
/// threads, every sequence's logits are the bits it gets alone.
#[test]
fn a_sequences_logits_are_the_same_bits_in_any_batch() {
    super::gguf::assert_batch_invariant(&model(), 2, 3);
}

/// A GGUF file whose `general.architecture` the provider does not run is
/// refused naming the file, that architecture and those it runs.
#[test]
fn a_file_of_an_unknown_architecture_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("gguf-arch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("mamba.gguf");
    let arch = gguf_file::Value::String("mamba".into());
    let blocks = gguf_file::Value::U32(2);
    let mut out = std::fs::File::create(&path).expect("create");
    gguf_file::write(&mut out, &[("general.architecture", &arch), ("mamba.block_count", &blocks)], &[]).expect("write");
    drop(out);
    let e = GgufModel::load(&path, "", Level::detect()).expect_err("unknown").to_string();
    assert!(e.contains("mamba.gguf") && e.contains("\"mamba\""), "{e}");
    assert!(e.contains("llama (Llama, SmolLM2)") && e.contains("qwen2 (Qwen2, Qwen2.5)"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
