//! A GGUF model's tokenizer and chat template, from its own metadata
//! (`tokenizer.ggml.*`, `tokenizer.chat_template`): there is no hub to
//! fetch a `tokenizer.json` from, and none is needed.
//!
//! The vocabulary is byte-level BPE (`tokenizer.ggml.model = "gpt2"`, the
//! Llama 3, SmolLM and Qwen families). It is rebuilt as a Hugging Face
//! tokenizer (vocabulary, merges, and the pre-tokenizer the file names in
//! `tokenizer.ggml.pre`, split by the regular expressions llama.cpp uses
//! for it) and, for constrained decoding, as
//! llguidance's token trie over every token's bytes.
//!
//! - Control tokens (`<|im_start|>`, `<|im_end|>`) are special in both: the
//!   template's markers become single tokens, and a model's text can never
//!   spell one.
//! - User-defined tokens (Qwen's `<tool_call>`) are matched whole in text,
//!   as llama.cpp matches them, and may be written.
//! - Unused tokens (Qwen's `[PAD151665]` and the rest) are never sampled.
//! - BOS goes before a prompt when the file sets
//!   `tokenizer.ggml.add_bos_token` and the template has not written it;
//!   the template gets the file's BOS and EOS texts.

use candle_core::quantized::gguf_file::{Content, Value};
use serde_json::json;
use std::sync::Arc;
use toktrie::{TokEnv, TokRxInfo, TokTrie, TokenId, TokenizerEnv};

/// `tokenizer.ggml.token_type` of a control token.
const CONTROL: i32 = 3;
/// `tokenizer.ggml.token_type` of a user-defined token.
const USER_DEFINED: i32 = 4;
/// `tokenizer.ggml.token_type` of an unused token.
const UNUSED: i32 = 5;

/// llama.cpp's split for Llama 3's pre-tokenizer (`llama-bpe`): its
/// adaptation of the original's case-insensitive contractions, and digits
/// in runs of up to three.
const LLAMA3_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// llama.cpp's split for Qwen2's pre-tokenizer (`qwen2`): Llama 3's, with
/// every digit on its own.
const QWEN2_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// llama.cpp's split for GPT-2's pre-tokenizer (`gpt-2`).
const GPT2_SPLIT: &str = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// llama.cpp's splits, applied in turn, for a file that names no
/// pre-tokenizer or `default`.
const DEFAULT_SPLITS: [&str; 4] = [r"[\p{P}\$\+<=>\^~\|]+", GPT2_SPLIT, r"\p{N}+", r"[0-9][0-9][0-9]"];

/// The pre-tokenizer of `tokenizer.ggml.pre`, as a Hugging Face
/// `pre_tokenizer`, or why not (the name and those read).
///
/// - `smollm`: digits one by one, then GPT-2's byte-level split;
/// - `qwen2`, `llama-bpe` (`llama3`) and `gpt-2`: one split by llama.cpp's
///   regular expression, then the bytes mapped without a further split;
/// - `default` (and a file that names none): llama.cpp's four splits in
///   turn (punctuation runs, GPT-2's, digit runs, then threes of ASCII
///   digits).
pub(crate) fn pre_tokenizer(pre: Option<&str>) -> Result<serde_json::Value, String> {
    let byte_level =
        |regex: bool| json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": regex});
    // Each regular expression splits every piece the ones before it left
    // (matches and the text between them both kept), as llama.cpp applies
    // its list; then the bytes are mapped.
    let split = |patterns: &[&str]| {
        let mut steps: Vec<serde_json::Value> = patterns
            .iter()
            .map(|p| json!({"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": false}))
            .collect();
        steps.push(byte_level(false));
        json!({"type": "Sequence", "pretokenizers": steps})
    };
    match pre {
        Some("smollm") => Ok(json!({"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": true},
            byte_level(true),
        ]})),
        Some("qwen2") => Ok(split(&[QWEN2_SPLIT])),
        Some("llama-bpe" | "llama3" | "llama-v3") => Ok(split(&[LLAMA3_SPLIT])),
        Some("gpt-2") => Ok(split(&[GPT2_SPLIT])),
        Some("default") | None => Ok(split(&DEFAULT_SPLITS)),
        Some(other) => Err(format!(
            "its pre-tokenizer is \"{other}\" (tokenizer.ggml.pre); this provider reads smollm, qwen2, llama-bpe, gpt-2 and default"
        )),
    }
}

/// The tokenizer, its trie and the chat template.
pub struct Vocab {
    tokenizer: tokenizers::Tokenizer,
    env: TokEnv,
    template: String,
    /// BOS's text, put before a prompt whose template did not write it
    /// (`tokenizer.ggml.add_bos_token`).
    bos: Option<String>,
    /// The BOS and EOS texts the template may use.
    bos_text: String,
    eos_text: String,
    /// The token that ends a reply (the template's end of turn).
    pub eos: TokenId,
    /// Tokens in the vocabulary.
    pub size: usize,
}

impl std::fmt::Debug for Vocab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vocab").field("size", &self.size).field("eos", &self.eos).finish_non_exhaustive()
    }
}

fn strings(content: &Content, key: &str) -> Result<Vec<String>, String> {
    let value = content.metadata.get(key).ok_or_else(|| format!("its metadata has no {key}"))?;
    let items = value.to_vec().map_err(|e| format!("{key} is not a list ({e})"))?;
    items.iter().map(|v| v.to_string().cloned().map_err(|e| format!("{key} holds a non-string ({e})"))).collect()
}

fn number(content: &Content, key: &str) -> Option<u32> {
    content.metadata.get(key).and_then(|v| v.to_u32().ok())
}

/// The special tokens a chat model ends its turn with, in the order tried.
const END_OF_TURN: [&str; 3] = ["<|im_end|>", "<|eot_id|>", "<end_of_turn>"];

impl Vocab {
    /// Reads the vocabulary and the chat template from a GGUF file's
    /// metadata. Refuses a tokenizer other than byte-level BPE and a model
    /// without a chat template, saying which.
    pub fn from_gguf(content: &Content) -> Result<Vocab, super::error::GgufError> {
        Self::read(content).map_err(super::error::GgufError::File)
    }

    fn read(content: &Content) -> Result<Vocab, String> {
        let kind = content.metadata.get("tokenizer.ggml.model").and_then(|v| v.to_string().ok().cloned());
        if kind.as_deref() != Some("gpt2") {
            return Err(format!(
                "its tokenizer is {kind:?}; this provider reads byte-level BPE vocabularies (\"gpt2\": SmolLM2, Llama 3, Qwen)"
            ));
        }
        let tokens = strings(content, "tokenizer.ggml.tokens")?;
        let merges = strings(content, "tokenizer.ggml.merges")?;
        let types: Vec<i32> = match content.metadata.get("tokenizer.ggml.token_type") {
            Some(Value::Array(items)) => items.iter().map(|v| v.to_i32().unwrap_or(1)).collect(),
            Some(_) | None => vec![1; tokens.len()],
        };
        let template = match content.metadata.get("tokenizer.chat_template") {
            Some(v) => v.to_string().map_err(|e| format!("tokenizer.chat_template is not text ({e})"))?.clone(),
            None => return Err("its metadata has no tokenizer.chat_template: it is not a chat model".into()),
        };
        let vocab: serde_json::Map<String, serde_json::Value> =
            tokens.iter().enumerate().map(|(i, t)| (t.clone(), json!(i))).collect();
        // Control tokens are special; user-defined ones are matched whole
        // in text too, but are not special.
        let added: Vec<serde_json::Value> = tokens
            .iter()
            .zip(&types)
            .enumerate()
            .filter(|(_, (_, kind))| matches!(**kind, CONTROL | USER_DEFINED))
            .map(|(i, (t, kind))| {
                json!({"id": i, "content": t, "single_word": false, "lstrip": false, "rstrip": false,
                       "normalized": false, "special": *kind == CONTROL})
            })
            .collect();
        let pre = content.metadata.get("tokenizer.ggml.pre").and_then(|v| v.to_string().ok().cloned());
        let pre_tokenizer = pre_tokenizer(pre.as_deref())?;
        let byte_level =
            json!({"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true});
        let spec = json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": added,
            "normalizer": null,
            "pre_tokenizer": pre_tokenizer,
            "post_processor": null,
            "decoder": byte_level,
            "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                      "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false,
                      "vocab": vocab, "merges": merges},
        });
        let tokenizer: tokenizers::Tokenizer =
            spec.to_string().parse().map_err(|e| format!("its vocabulary does not make a tokenizer ({e})"))?;
        let mut words = llguidance::token_bytes_from_tokenizer_json(&spec)
            .map_err(|e| format!("its vocabulary does not make a token trie ({e})"))?;
        for (i, t) in tokens.iter().enumerate() {
            if matches!(types.get(i), Some(&CONTROL | &UNUSED)) {
                // llguidance's spelling of a special token: 0xff, then its name.
                words[i] = [&[TokTrie::SPECIAL_TOKEN_MARKER][..], t.as_bytes()].concat();
            }
        }
        let id = |name: &str| tokens.iter().position(|t| t == name).map(|i| i as TokenId);
        let eos = END_OF_TURN
            .iter()
            .find_map(|t| id(t))
            .or_else(|| number(content, "tokenizer.ggml.eos_token_id"))
            .ok_or("its metadata names no end-of-turn token")?;
        let mut info = TokRxInfo::new(tokens.len() as u32, eos);
        let bos_id = number(content, "tokenizer.ggml.bos_token_id");
        info.tok_bos = bos_id;
        let text_of = |id: Option<u32>| id.and_then(|i| tokens.get(i as usize)).cloned().unwrap_or_default();
        let bos_text = text_of(bos_id);
        let eos_text = text_of(number(content, "tokenizer.ggml.eos_token_id"));
        let add_bos = content.metadata.get("tokenizer.ggml.add_bos_token").and_then(|v| v.to_bool().ok());
        let bos = (add_bos == Some(true) && !bos_text.is_empty()).then(|| bos_text.clone());
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(Env { trie, tokenizer: tokenizer.clone() });
        Ok(Vocab { tokenizer, env, template, bos, bos_text, eos_text, eos, size: tokens.len() })
    }

    /// llguidance's view of the vocabulary.
    pub fn env(&self) -> &TokEnv {
        &self.env
    }

    /// The token ids of `text`, special markers included.
    pub fn encode(&self, text: &str) -> Vec<TokenId> {
        self.tokenizer.encode_fast(text, false).map(|e| e.get_ids().to_vec()).unwrap_or_default()
    }

    /// The text of `tokens` (special tokens left out).
    pub fn decode(&self, tokens: &[TokenId]) -> String {
        String::from_utf8_lossy(&self.env.tok_trie().decode(tokens)).into_owned()
    }

    /// The conversation `messages` ((role, content) pairs) in the model's own
    /// chat template, ending with the opening of the assistant's turn.
    pub fn chat(&self, messages: &[(&str, &str)]) -> Result<String, super::error::GgufError> {
        self.render(messages).map_err(super::error::GgufError::File)
    }

    fn render(&self, messages: &[(&str, &str)]) -> Result<String, String> {
        let mut env = minijinja::Environment::new();
        env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
        });
        env.add_template("chat", &self.template).map_err(|e| format!("its chat template does not parse ({e})"))?;
        let messages: Vec<serde_json::Value> =
            messages.iter().map(|(role, content)| json!({"role": role, "content": content})).collect();
        let template = env.get_template("chat").map_err(|e| e.to_string())?;
        let text = template
            .render(minijinja::context! {
                messages => messages,
                add_generation_prompt => true,
                bos_token => self.bos_text,
                eos_token => self.eos_text,
            })
            .map_err(|e| format!("its chat template failed ({e})"))?;
        Ok(match &self.bos {
            Some(bos) if !text.starts_with(bos.as_str()) => format!("{bos}{text}"),
            Some(_) | None => text,
        })
    }
}

/// The tokenizer environment llguidance asks for.
struct Env {
    trie: TokTrie,
    tokenizer: tokenizers::Tokenizer,
}

impl TokenizerEnv for Env {
    fn tok_trie(&self) -> &TokTrie {
        &self.trie
    }

    fn tokenize_bytes(&self, s: &[u8]) -> Vec<TokenId> {
        let text = String::from_utf8_lossy(s);
        self.tokenizer.encode_fast(text.as_ref(), false).map(|e| e.get_ids().to_vec()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::Vocab;
    use candle_core::quantized::gguf_file::{self, Value};

    /// A vocabulary of a few tokens with `pre` and `add_bos`, its chat
    /// template `template`, read back through GGUF.
    fn vocab(pre: &str, add_bos: bool, template: &str) -> Result<Vocab, String> {
        let strings = |v: &[&str]| Value::Array(v.iter().map(|s| Value::String((*s).into())).collect());
        let tokens = strings(&["<s>", "<|im_end|>", "a", "b", "ab", "\u{0120}"]);
        let merges = strings(&["a b"]);
        let types = Value::Array([3, 3, 1, 1, 1, 1].iter().map(|t| Value::I32(*t)).collect());
        let (model, pre, template) =
            (Value::String("gpt2".into()), Value::String(pre.into()), Value::String(template.into()));
        let (bos, eos, add) = (Value::U32(0), Value::U32(1), Value::Bool(add_bos));
        let metadata = [
            ("tokenizer.ggml.model", &model),
            ("tokenizer.ggml.pre", &pre),
            ("tokenizer.ggml.tokens", &tokens),
            ("tokenizer.ggml.merges", &merges),
            ("tokenizer.ggml.token_type", &types),
            ("tokenizer.ggml.bos_token_id", &bos),
            ("tokenizer.ggml.eos_token_id", &eos),
            ("tokenizer.ggml.add_bos_token", &add),
            ("tokenizer.chat_template", &template),
        ];
        let mut image = std::io::Cursor::new(Vec::new());
        gguf_file::write(&mut image, &metadata, &[]).map_err(|e| e.to_string())?;
        image.set_position(0);
        let content = gguf_file::Content::read(&mut image).map_err(|e| e.to_string())?;
        Vocab::read(&content)
    }

    /// BOS goes first when the file asks for it, once: whether the
    /// template writes it (from the `bos_token` it is given) or not; never
    /// when the file does not ask.
    #[test]
    fn bos_is_put_first_once_when_the_file_asks() {
        let plain = "{% for m in messages %}{{ m.content }}{% endfor %}";
        let with_bos = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
        let chat = |add: bool, template: &str| vocab("qwen2", add, template).expect("vocab").chat(&[("user", "ab")]);
        assert_eq!(chat(true, plain).expect("chat"), "<s>ab");
        assert_eq!(chat(true, with_bos).expect("chat"), "<s>ab");
        assert_eq!(chat(false, plain).expect("chat"), "ab");
        let v = vocab("qwen2", true, plain).expect("vocab");
        assert_eq!(
            v.encode(&v.chat(&[("user", "ab")]).expect("chat")),
            [0, 4],
            "<s> one special token, then the merge"
        );
    }

    #[test]
    fn an_unknown_pre_tokenizer_is_refused_by_name() {
        let e = vocab("tekken", false, "x").expect_err("unknown");
        assert!(e.contains("\"tekken\"") && e.contains("tokenizer.ggml.pre") && e.contains("qwen2"), "{e}");
    }
}
