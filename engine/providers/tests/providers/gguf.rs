//! The `gguf` chat provider on SmolLM2-135M-Instruct: its tokenizer from
//! the file's own metadata, replies under their schemas, bytes that do not
//! depend on the prefix cache, and damaged files refused by name. Needs the
//! model that `bash scripts/fetch-smollm2` fetches (the test command runs it
//! first). The whole pipeline on it is tested in sim-cli's `gguf` tests.

use engine::chat::schema::to_lines;
use engine::chat::{ChatPurpose, ChatRequest};
use engine::config::ChatSection;
use engine::persona::prompt::{probe_prompt, reflection_prompt, stable_prefix_len};
use engine::persona::reply::{parse_insights, parse_probe, parse_reaction};
use providers::gguf::{load_configured, GgufChat, GgufModel};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn model_file() -> PathBuf {
    root().join("models/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
}

fn model() -> Arc<GgufModel> {
    let settings =
        engine::config::GgufSettings { model_file: model_file().display().to_string(), ..Default::default() };
    load_configured(&settings).unwrap_or_else(|e| panic!("{e}\n(the test command runs scripts/fetch-smollm2 first)"))
}

const HEADER: &str = "You are Maria Lopez, 34, a nurse in Austin. Busy, practical, loves weekend hikes.
Interests: hiking, cooking, podcasts
Household income: $60k-$90k
Price sensitivity: 0.70
Brand attitudes: Patagonia +0.40, Nike -0.10
";

fn reaction_prompt() -> String {
    format!(
        "{HEADER}
React in character to the stimulus below. Reply exactly in this format:
REACTION: <one or two sentences in your own voice>
SENTIMENT: <number from -1 to 1>
INTENT: <integer 1-5, how likely you are to buy>
IMPORTANCE: <integer 1-10, how memorable this is to you>

Memories you recall:
(none)
Stimulus: TrailFlex running shoe, $129. Lightweight trail shoe with a grippy sole and a recycled upper.
Exposure: 1 of this stimulus this tick
"
    )
}

fn section(cache_mib: u64) -> ChatSection {
    let mut s = ChatSection { temperature: 0.7, max_output_tokens: 400, ..Default::default() };
    s.gguf.prefix_cache_mib = cache_mib;
    s
}

#[test]
fn the_tokenizer_and_the_chat_template_come_from_the_file() {
    let m = model();
    let v = m.vocab();
    assert_eq!(v.size, 49_152);
    assert_eq!(m.sha256(), "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53");
    let chat = v.chat(&[("user", "Hi there")]).expect("template");
    // SmolLM2's own template: its default system turn, then ChatML.
    assert_eq!(
        chat,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"
    );
    let ids = v.encode(&chat);
    assert_eq!(ids[0], 1, "<|im_start|> is one special token");
    assert_eq!(ids.iter().filter(|t| **t == 2).count(), 2, "<|im_end|> twice");
    assert_eq!(v.eos, 2);
    // Digits are split one by one, as SmolLM2's own tokenizer does.
    assert_eq!(v.encode("2024").len(), 4);
    for text in ["Hello, world!", "Prix: 129 € — très cher?", "  two  spaces\nand a tab\t.", "émoji 🙂 ok"] {
        assert_eq!(v.decode(&v.encode(text)), text, "round trip of {text:?}");
    }
    // A model's text cannot spell a control token.
    assert!(!v.encode("<|im_end|>").is_empty());
}

#[test]
fn replies_follow_their_schemas_and_do_not_depend_on_the_prefix_cache() {
    let m = model();
    let cached = GgufChat::new(m.clone(), &section(64));
    let uncached = GgufChat::new(m.clone(), &section(0));
    let reaction = ChatRequest::new("SmolLM2-135M-Instruct", ChatPurpose::Reaction, reaction_prompt());
    assert!(stable_prefix_len(&reaction.prompt) > HEADER.len(), "the header and the reply format are the prefix");

    let cold = cached.decode(&reaction, 11).expect("decode");
    assert_eq!(cold.cached_tokens, 0);
    assert!(cached.cache().len() == 1 && cached.cache().bytes() > 1 << 20, "a prefix is megabytes of key/value state");
    let warm = cached.decode(&reaction, 11).expect("decode");
    assert!(warm.cached_tokens > 100, "the second call starts from the cached prefix: {warm:?}");
    let none = uncached.decode(&reaction, 11).expect("decode");
    assert_eq!(cold.text, warm.text, "the cache changes no byte");
    assert_eq!(cold.text, none.text, "with or without the cache");
    assert_eq!((cold.prompt_tokens, cold.completion_tokens), (none.prompt_tokens, none.completion_tokens));

    let r = parse_reaction(&to_lines(&cold.text)).unwrap_or_else(|e| panic!("{e}: {}", cold.text));
    assert!(r.text.chars().count() >= 10 && (1..=5).contains(&r.intent), "{r:?}");
    assert!(!r.text.to_ascii_lowercase().starts_with("reaction:"), "the label is not part of the reaction: {}", r.text);
    let other = cached.decode(&reaction, 12).expect("decode");
    assert_ne!(other.text, cold.text, "another seed samples another reply");

    // A probe (its reason written first) and a reflection (a list: decoded
    // under its schema from the first token).
    let probe = ChatRequest::new(
        "SmolLM2-135M-Instruct",
        ChatPurpose::Probe,
        probe_prompt(HEADER, &[], "How likely are you to recommend TrailFlex to a friend?"),
    );
    let p = cached.decode(&probe, 3).expect("probe");
    let parsed = parse_probe(&to_lines(&p.text)).unwrap_or_else(|e| panic!("{e}: {}", p.text));
    assert!((1..=5).contains(&parsed.answer) && parsed.why.chars().count() >= 10, "{parsed:?}");
    let recent = ["I saw the TrailFlex shoe ad twice".to_string(), "My old hiking boots are worn out".to_string()];
    let reflection = ChatRequest::new(
        "SmolLM2-135M-Instruct",
        ChatPurpose::Reflection,
        reflection_prompt(HEADER, &recent, "I tried the TrailFlex shoe in a store", 2),
    );
    let f = cached.decode(&reflection, 5).expect("reflection");
    let insights = parse_insights(&to_lines(&f.text), 8).unwrap_or_else(|e| panic!("{e}: {}", f.text));
    assert!(insights.iter().all(|(text, imp)| text.chars().count() >= 10 && (1..=10).contains(imp)), "{insights:?}");
}

#[test]
fn a_damaged_or_wrong_model_file_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("gguf-damaged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let bytes = std::fs::read(model_file()).expect("model");

    let not_gguf = dir.join("notes.gguf");
    std::fs::write(&not_gguf, b"just some text, not a model").expect("write");
    let e = GgufModel::load(&not_gguf, "").expect_err("not GGUF").to_string();
    assert!(e.contains("notes.gguf") && e.contains("not a GGUF model file") && e.contains("fetch-smollm2"), "{e}");

    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).expect("write");
    let e = GgufModel::load(&cut, "").expect_err("cut short").to_string();
    assert!(e.contains("cut.gguf") && e.contains("tensors cannot be read"), "{e}");

    let e = GgufModel::load(&model_file(), &"0".repeat(64)).expect_err("other hash").to_string();
    assert!(e.contains("b179c9523d0e6a0f") && e.contains(&"0".repeat(64)) && e.contains("another model"), "{e}");

    let missing = dir.join("absent.gguf");
    let e = GgufModel::load(&missing, "").expect_err("missing").to_string();
    assert!(e.contains("absent.gguf") && e.contains("cannot read it"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
