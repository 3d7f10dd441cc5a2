//! The `gguf` chat provider on SmolLM2-135M-Instruct: its tokenizer from
//! the file's own metadata, replies under their schemas, bytes that do not
//! depend on the prefix cache, and damaged files refused by name. Needs the
//! model that `bash scripts/fetch-model smollm2` fetches (the test command runs it
//! first). The whole pipeline on it is tested in sim-cli's `gguf` tests.

use candle_core::quantized::gguf_file;
use candle_core::Device;
use engine::chat::schema::to_lines;
use engine::chat::{ChatPurpose, ChatRequest};
use engine::config::ChatSection;
use engine::config::{GgufLayout, GgufSettings, KernelLevel};
use engine::persona::prompt::{probe_prompt, reflection_prompt, stable_prefix_len};
use engine::persona::reply::{parse_insights, parse_probe, parse_reaction};
use providers::chat::gguf::{load_configured, GgufChat, GgufModel, Level};
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
    load_configured(&settings)
        .unwrap_or_else(|e| panic!("{e}\n(the test command runs scripts/fetch-model smollm2 first)"))
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

/// SmolLM2's file with `tokenizer.ggml.pre` set to `name` (the value
/// replaced in the metadata, the tensor data realigned to 32 bytes), as
/// fixtures/smollm2/make_pre_tokens.py writes it.
fn with_pre_tokenizer(name: &str) -> Vec<u8> {
    let data = std::fs::read(model_file()).expect("model");
    let mut file = std::fs::File::open(model_file()).expect("model");
    let offset = gguf_file::Content::read(&mut file).expect("gguf").tensor_data_offset as usize;
    let old = [&6u64.to_le_bytes()[..], b"smollm"].concat();
    let at = data.windows(old.len()).position(|w| w == old.as_slice()).expect("pre is smollm");
    let mut out =
        [&data[..at], &(name.len() as u64).to_le_bytes(), name.as_bytes(), &data[at + old.len()..offset]].concat();
    out.resize(out.len().div_ceil(32) * 32, 0);
    out.extend_from_slice(&data[offset..]);
    out
}

/// The `gpt-2` and `default` pre-tokenizers (llama.cpp's regular
/// expressions; `default` is also what a file naming none gets) give the
/// ids llama.cpp's `llama-tokenize` gave on the same vocabulary, for 20
/// texts (fixtures/smollm2/pre_tokens.json, with the script that made it).
#[test]
fn the_gpt2_and_default_pre_tokenizers_give_llama_cpps_ids() {
    let fixture = root().join("fixtures/smollm2/pre_tokens.json");
    let refs: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&fixture).expect("pre_tokens.json")).expect("JSON");
    let dir = std::env::temp_dir().join(format!("gguf-pre-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    for name in ["gpt-2", "default"] {
        let path = dir.join(format!("{name}.gguf"));
        std::fs::write(&path, with_pre_tokenizer(name)).expect("write");
        let m = GgufModel::load(&path, "", Level::detect()).expect("the patched file loads");
        let cases = refs[name].as_array().expect("cases");
        assert_eq!(cases.len(), 20, "{name}");
        for case in cases {
            let text = case["text"].as_str().expect("text");
            let want: Vec<u32> =
                case["ids"].as_array().expect("ids").iter().map(|i| i.as_u64().expect("id") as u32).collect();
            assert_eq!(m.vocab().encode(text), want, "{name}: ids of {text:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_damaged_or_wrong_model_file_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("gguf-damaged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let bytes = std::fs::read(model_file()).expect("model");

    let not_gguf = dir.join("notes.gguf");
    std::fs::write(&not_gguf, b"just some text, not a model").expect("write");
    let e = GgufModel::load(&not_gguf, "", providers::chat::gguf::Level::detect()).expect_err("not GGUF").to_string();
    assert!(
        e.contains("notes.gguf") && e.contains("not a GGUF model file") && e.contains("fetch-model smollm2"),
        "{e}"
    );

    let cut = dir.join("cut.gguf");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).expect("write");
    let e = GgufModel::load(&cut, "", providers::chat::gguf::Level::detect()).expect_err("cut short").to_string();
    assert!(e.contains("cut.gguf") && e.contains("tensors cannot be read"), "{e}");

    let e = GgufModel::load(&model_file(), &"0".repeat(64), providers::chat::gguf::Level::detect())
        .expect_err("other hash")
        .to_string();
    assert!(e.contains("b179c9523d0e6a0f") && e.contains(&"0".repeat(64)) && e.contains("another model"), "{e}");

    let missing = dir.join("absent.gguf");
    let e = GgufModel::load(&missing, "", providers::chat::gguf::Level::detect()).expect_err("missing").to_string();
    assert!(e.contains("absent.gguf") && e.contains("cannot read it"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The project's forward pass against an independent implementation:
/// candle's quantized Llama, on the same weights requantized to `Q8_0` by
/// candle's own code. The two round activations differently and sum in
/// other orders (candle's own single-row and many-row kernels differ by up
/// to 0.73 in a logit on this prompt), so along a continuation that
/// follows candle's most likely token the logits must agree to that noise:
/// cosine above 0.995, no logit off by 2.5, and candle's choice within 1.0
/// of our most likely logit.
#[test]
fn the_forward_pass_agrees_with_candles_quantized_llama() {
    use candle_transformers::models::quantized_llama::ModelWeights;
    let m = model();
    let text = m.vocab().chat(&[("user", "Name three fruits that are red, and say why you like them.")]).expect("chat");
    let mut file = std::fs::File::open(model_file()).expect("model");
    let content = gguf_file::Content::read(&mut file).expect("gguf");
    let (content, mut image) = requantize(&content, &mut file).unwrap();
    let mut theirs = ModelWeights::from_gguf(content, &mut image, &Device::Cpu).expect("candle's model");
    let forward = |input: &candle_core::Tensor, fed: usize| theirs.forward(input, fed);
    assert_agrees_with(&m, &text, 8, Some(2.5), forward);
}

/// Runs `steps` steps of a continuation of `text` on `m` and on a
/// reference (`forward`: candle's model on the token tensor at a position),
/// each step taking the reference's most likely token, and asserts at
/// every step a cosine above 0.995 between the two logit vectors, no logit
/// off by more than `max_gap` (when given), and the reference's choice
/// within 1.0 of our most likely logit. Returns the lowest cosine.
pub(crate) fn assert_agrees_with(
    m: &GgufModel,
    text: &str,
    steps: usize,
    max_gap: Option<f32>,
    mut forward: impl FnMut(&candle_core::Tensor, usize) -> candle_core::Result<candle_core::Tensor>,
) -> f64 {
    let mut tokens = m.vocab().encode(text);
    let mut seq = m.transformer().sequence();
    let top = |v: &[f32]| v.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)).map(|(i, x)| (i, *x)).expect("logits");
    let mut fed = 0;
    let mut worst = 1f64;
    for step in 0..steps {
        let new = &tokens[fed..];
        let ours = m.transformer().forward_one(&mut seq, new).expect("ours");
        let input = candle_core::Tensor::new(new, &Device::Cpu).and_then(|t| t.unsqueeze(0)).expect("input");
        let reference: Vec<f32> =
            forward(&input, fed).and_then(|l| l.squeeze(0)).and_then(|l| l.to_vec1()).expect("candle's forward");
        fed = tokens.len();
        let dot: f64 = ours.iter().zip(&reference).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum();
        let norm = |v: &[f32]| v.iter().map(|a| f64::from(*a).powi(2)).sum::<f64>().sqrt();
        let cos = dot / (norm(&ours) * norm(&reference));
        worst = worst.min(cos);
        let (theirs_best, _) = top(&reference);
        let (_, ours_max) = top(&ours);
        let diff = ours.iter().zip(&reference).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(
            cos > 0.995 && max_gap.is_none_or(|gap| diff < gap),
            "step {step}: logits agree with candle's (cosine {cos}, largest gap {diff})"
        );
        assert!(
            ours[theirs_best] >= ours_max - 1.0,
            "step {step}: candle's most likely token {theirs_best} is {} here, the best {ours_max}",
            ours[theirs_best]
        );
        tokens.push(theirs_best as u32);
    }
    worst
}

/// The file's tensors with every `Q4_1` tensor requantized to `Q8_0` by
/// candle's own quantizer, as a GGUF image in memory: the reference model
/// of the agreement test, on the weights the provider computes with.
fn requantize(
    content: &candle_core::quantized::gguf_file::Content,
    file: &mut std::fs::File,
) -> candle_core::Result<(candle_core::quantized::gguf_file::Content, std::io::Cursor<Vec<u8>>)> {
    use candle_core::quantized::{GgmlDType, QTensor};
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors = Vec::with_capacity(names.len());
    for name in &names {
        let t = content.tensor(file, name, &Device::Cpu)?;
        let t = if t.dtype() == GgmlDType::Q4_1 {
            QTensor::quantize(&t.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)?
        } else {
            t
        };
        tensors.push(t);
    }
    let mut keys: Vec<&String> = content.metadata.keys().collect();
    keys.sort();
    let metadata: Vec<(&str, &gguf_file::Value)> = keys.iter().map(|k| (k.as_str(), &content.metadata[*k])).collect();
    let named: Vec<(&str, &QTensor)> = names.iter().map(|n| n.as_str()).zip(&tensors).collect();
    let mut image = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut image, &metadata, &named)?;
    image.set_position(0);
    let requantized = gguf_file::Content::read(&mut image)?;
    Ok((requantized, image))
}

fn chat_at(level: Level, max_tokens: u64, layout: GgufLayout) -> GgufChat {
    let kernel = match level {
        Level::Avx2 => KernelLevel::Avx2,
        Level::Portable => KernelLevel::Portable,
    };
    let settings = GgufSettings { model_file: model_file().display().to_string(), kernel, ..Default::default() };
    let m = load_configured(&settings).expect("the model");
    assert_eq!(m.level(), level);
    let mut s = section(64);
    s.max_output_tokens = max_tokens;
    s.gguf.layout = layout;
    GgufChat::new(m, &s)
}

/// A request of each purpose, with a short prompt (the close does not
/// depend on what is asked).
fn requests() -> Vec<ChatRequest> {
    let m = "SmolLM2-135M-Instruct";
    [
        (ChatPurpose::Reaction, "React to a $129 trail shoe."),
        (ChatPurpose::Probe, "Would you recommend the shoe?"),
        (ChatPurpose::Reflection, "What have you learned about shoes?"),
        (ChatPurpose::Agent, "List facts about solar panels."),
        (ChatPurpose::Judge, "Score this report: solar is cheap."),
        (ChatPurpose::Survey, "Rate your health, 1 to 7."),
    ]
    .into_iter()
    .map(|(purpose, prompt)| ChatRequest::new(m, purpose, prompt).with_options(7))
    .collect()
}

/// Every kernel level this CPU runs gives the same logits, bit for bit,
/// and so the same replies and token counts.
#[test]
fn every_kernel_level_gives_the_same_bits() {
    let levels: Vec<Level> = [Level::Avx2, Level::Portable].into_iter().filter(|l| l.available()).collect();
    let tokens = model().vocab().encode("<|im_start|>user\nWhat is a trail shoe?<|im_end|>\n");
    let mut logits = Vec::new();
    let mut replies = Vec::new();
    for &level in &levels {
        let chat = chat_at(level, 60, GgufLayout::FreeText);
        let llama = load_configured(&GgufSettings {
            model_file: model_file().display().to_string(),
            kernel: if level == Level::Avx2 { KernelLevel::Avx2 } else { KernelLevel::Portable },
            ..Default::default()
        })
        .expect("model");
        let mut seq = llama.transformer().sequence();
        let l = llama.transformer().forward_one(&mut seq, &tokens).expect("forward");
        logits.push(l.iter().map(|x| x.to_bits()).collect::<Vec<u32>>());
        let request = ChatRequest::new("SmolLM2-135M-Instruct", ChatPurpose::Reaction, reaction_prompt());
        replies.push(chat.decode(&request, 21).expect("decode"));
    }
    for (i, level) in levels.iter().enumerate().skip(1) {
        assert!(logits[i] == logits[0], "{level:?} logits differ from {:?}'s", levels[0]);
        assert_eq!(replies[i], replies[0], "{level:?} reply");
    }
    assert!(levels.contains(&Level::Portable));
}

/// A reply under its grammar always parses and fits its schema, however
/// small the token limit: the budget keeps room for the close. With room
/// for the shortest reply it stays within the limit.
#[test]
fn a_tiny_token_limit_still_gives_replies_that_parse_and_fit_their_schema() {
    let before = providers::chat::gguf::throughput();
    for layout in [GgufLayout::FreeText, GgufLayout::Schema] {
        for limit in [1u64, 40] {
            let chat = chat_at(Level::detect(), limit, layout);
            for request in requests() {
                let d = chat.decode(&request, 3).expect("decode");
                let what = format!("{:?} at {limit} tokens, {layout:?}", request.purpose);
                let reply: serde_json::Value =
                    serde_json::from_str(&d.text).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", d.text));
                let schema = providers::chat::gguf::decode::grammar_schema(&request, limit as usize);
                assert_eq!(engine::testing::schema_breach(&reply, &schema, "reply"), None, "{what}: {reply}");
                if limit == 40 && layout == GgufLayout::Schema {
                    assert!(d.completion_tokens <= limit, "{what}: {} tokens", d.completion_tokens);
                }
            }
        }
    }
    assert!(providers::chat::gguf::throughput().since(&before).closes > 0, "the close ran");
}

/// The regularised upper incomplete gamma function Q(a, x): the
/// chi-square survival function is Q(df / 2, x / 2). A series below
/// a + 1, a continued fraction above (Numerical Recipes' gammq).
fn gamma_q(a: f64, x: f64) -> f64 {
    let ln_gamma = |z: f64| {
        // Lanczos, g = 7.
        const C: [f64; 9] = [
            0.999_999_999_999_809_9,
            676.520_368_121_885_1,
            -1_259.139_216_722_402_8,
            771.323_428_777_653_1,
            -176.615_029_162_140_6,
            12.507_343_278_686_905,
            -0.138_571_095_265_720_12,
            9.984_369_578_019_572e-6,
            1.505_632_735_149_311_6e-7,
        ];
        let z = z - 1.0;
        let t = z + 7.5;
        let s = C[1..].iter().enumerate().fold(C[0], |s, (i, c)| s + c / (z + i as f64 + 1.0));
        0.5 * (2.0 * std::f64::consts::PI).ln() + (z + 0.5) * t.ln() - t + s.ln()
    };
    let front = (-x + a * x.ln() - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut sum, mut term, mut n) = (1.0 / a, 1.0 / a, a);
        while term.abs() > sum.abs() * 1e-15 {
            n += 1.0;
            term *= x / n;
            sum += term;
        }
        1.0 - sum * front
    } else {
        let (mut b, mut c, mut d) = (x + 1.0 - a, 1.0 / f64::MIN_POSITIVE, 1.0 / (x + 1.0 - a));
        let mut h = d;
        for i in 1..500 {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = an * d + b;
            c = b + an / c;
            d = 1.0 / d;
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < 1e-15 {
                break;
            }
        }
        front * h
    }
}

/// An 11-option question, so that 10 and 11 take two digits.
fn eleven_options() -> ChatRequest {
    let options: String = (0..=10).map(|i| format!("{}. {i} out of 10\n", i + 1)).collect();
    let prompt = format!(
        "You are answering a survey as the person described below. Answer as they would, in their own voice.\n\
         About you:\n- Age: 41\n- Education: a bachelor's degree\nQuestion: How much do you trust your neighbours, \
         from 0 (not at all) to 10 (completely)?\nOptions:\n{options}\nReply exactly in this format:\n\
         ANSWER: <the number of your option, 1 to 11>\nWHY: <one sentence in your own voice>\n"
    );
    ChatRequest::new("SmolLM2-135M-Instruct", ChatPurpose::Survey, prompt).with_options(11)
}

/// The exact option probabilities at the answer slot agree with 1,000
/// draws sampled token by token at the same slot (temperature 1, top-p 1),
/// multi-token options included: a chi-square test over the options whose
/// expected count is at least 5 (the rest pooled).
#[test]
fn option_probabilities_agree_with_draws_at_the_same_slot() {
    let chat = GgufChat::new(model(), &section(64));
    let request = eleven_options();
    let w = chat.option_probabilities(&request).expect("probabilities");
    assert_eq!(w.probabilities.len(), 11);
    assert!((w.probabilities.iter().sum::<f64>() - 1.0).abs() < 1e-12, "{:?}", w.probabilities);
    assert!(w.mass > 0.0 && w.mass <= 1.0 + 1e-12, "mass {}", w.mass);
    assert!(w.probabilities[9] > 0.0 && w.probabilities[10] > 0.0, "10 and 11 are reached: {:?}", w.probabilities);
    let again = GgufChat::new(model(), &section(0)).option_probabilities(&request).expect("again");
    assert!(again.probabilities.iter().zip(&w.probabilities).all(|(a, b)| a.to_bits() == b.to_bits()), "bit for bit");
    let n = 1000;
    let draws = chat.decoder().option_draws(&request, n, 7).expect("draws");
    let mut seen = [0f64; 11];
    draws.iter().for_each(|&o| seen[usize::from(o) - 1] += 1.0);
    let (mut chi2, mut bins, mut pooled) = (0.0, 0, (0.0, 0.0));
    for (o, p) in w.probabilities.iter().enumerate() {
        let expected = p * n as f64;
        if expected >= 5.0 {
            chi2 += (seen[o] - expected).powi(2) / expected;
            bins += 1;
        } else {
            pooled = (pooled.0 + seen[o], pooled.1 + expected);
        }
    }
    if pooled.1 > 0.0 {
        chi2 += (pooled.0 - pooled.1).powi(2) / pooled.1.max(1e-9);
        bins += 1;
    }
    let p_value = gamma_q((bins - 1) as f64 / 2.0, chi2 / 2.0);
    assert!(
        p_value > 0.001,
        "chi-square {chi2:.2} on {} df: p = {p_value:.2e}; seen {seen:?}, expected {:?}",
        bins - 1,
        w.probabilities
    );
    // The test can fail: the draws are far from a uniform guess.
    let uniform: f64 = seen.iter().map(|s| (s - n as f64 / 11.0).powi(2) / (n as f64 / 11.0)).sum();
    assert!(gamma_q(5.0, uniform / 2.0) < 1e-6, "the draws look uniform: {seen:?}");
}

#[test]
fn the_chi_square_survival_function_matches_known_values() {
    // scipy.stats.chi2.sf(x, df): sf(3.84, 1) = 0.0500, sf(10, 4) = 0.0404, sf(2, 6) = 0.9197.
    for (x, df, want) in
        [(3.841_458_820_694_124, 1.0, 0.05), (10.0, 4.0, 0.040_427_681_994_512_8), (2.0, 6.0, 0.919_698_602_928_605_5)]
    {
        let got = gamma_q(df / 2.0, x / 2.0);
        assert!((got - want).abs() < 1e-9, "sf({x}, {df}) = {got}, want {want}");
    }
}

/// A sequence's script: its prompt in two chunks, then single tokens, as a
/// reply is run (the prefix, the rest, then token by token).
fn scripts(model: &GgufModel) -> Vec<Vec<Vec<u32>>> {
    let texts = [
        "<|im_start|>user\nWhat is a trail shoe? Answer in one line.<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>user\nRate your health from 1 to 7.<|im_end|>\n<|im_start|>assistant\nI would say",
        "<|im_start|>system\nYou are Maria, a nurse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n",
        "<|im_start|>user\nList three facts about solar panels, briefly, as a numbered list.<|im_end|>\n",
        "Once upon a time",
    ];
    texts
        .iter()
        .map(|t| {
            let tokens = model.vocab().encode(t);
            let cut = tokens.len() / 2;
            let mut chunks = vec![tokens[..cut].to_vec(), tokens[cut..].to_vec()];
            // Then tokens of another text, one at a time.
            chunks.extend(model.vocab().encode(" the cat sat on the mat").into_iter().map(|t| vec![t]));
            chunks
        })
        .collect()
}

/// Each chunk's logits, as bits, with each sequence run alone.
fn alone(model: &GgufModel, scripts: &[Vec<Vec<u32>>]) -> Vec<Vec<Vec<u32>>> {
    let llama = model.transformer();
    scripts
        .iter()
        .map(|chunks| {
            let mut seq = llama.sequence();
            chunks
                .iter()
                .map(|c| llama.forward_one(&mut seq, c).expect("forward").iter().map(|x| x.to_bits()).collect())
                .collect()
        })
        .collect()
}

/// The batch-invariance property: in random compositions (which sequences
/// share a pass, in which order, each at its own point of its script,
/// prompt chunks beside single tokens), at one and two threads, every
/// sequence's logits are the bits it gets alone. Seeded: the same
/// compositions every run.
#[test]
fn a_sequences_logits_are_the_same_bits_in_any_batch_and_at_any_thread_count() {
    assert_batch_invariant(&model(), 6, 10);
}

/// The batch-invariance property on `model`, over `trials` seeded trials
/// (see the test above), at least `min_shared` of their passes run by more
/// than one sequence; shared with the other architectures' tests.
pub(crate) fn assert_batch_invariant(model: &GgufModel, trials: usize, min_shared: usize) {
    let llama = model.transformer();
    let scripts = scripts(model);
    let pool = |n: usize| rayon::ThreadPoolBuilder::new().num_threads(n).build().expect("a pool");
    let reference = pool(1).install(|| alone(model, &scripts));
    let mut draws = engine::rng::Stream::from_key(*b"gguf batch invariance property 1");
    let mut pick = |n: usize| draws.below(n);
    let mut shared = 0;
    for trial in 0..trials {
        let threads = 1 + trial % 2;
        pool(threads).install(|| {
            let mut seqs: Vec<_> = scripts.iter().map(|_| llama.sequence()).collect();
            let mut at = vec![0usize; scripts.len()];
            loop {
                let open: Vec<usize> = (0..scripts.len()).filter(|&s| at[s] < scripts[s].len()).collect();
                if open.is_empty() {
                    break;
                }
                // A random non-empty subset of the open sequences, in a
                // random order.
                let mut chosen: Vec<usize> = open.iter().copied().filter(|_| pick(2) == 1).collect();
                if chosen.is_empty() {
                    chosen.push(open[pick(open.len())]);
                }
                for i in (1..chosen.len()).rev() {
                    chosen.swap(i, pick(i + 1));
                }
                shared += usize::from(chosen.len() > 1);
                let mut taken: Vec<(usize, providers::chat::gguf::transformer::Sequence)> =
                    chosen.iter().map(|&s| (s, std::mem::take(&mut seqs[s]))).collect();
                let mut steps: Vec<providers::chat::gguf::transformer::Step<'_>> = taken
                    .iter_mut()
                    .map(|(s, seq)| providers::chat::gguf::transformer::Step {
                        seq,
                        tokens: &scripts[*s][at[*s]],
                        logits: true,
                    })
                    .collect();
                let out = llama.forward(&mut steps).expect("forward");
                drop(steps);
                for ((s, seq), logits) in taken.into_iter().zip(out) {
                    let bits: Vec<u32> = logits.iter().map(|x| x.to_bits()).collect();
                    assert!(
                        bits == reference[s][at[s]],
                        "trial {trial}, {threads} threads: sequence {s} at chunk {} in a batch of {:?}",
                        at[s],
                        chosen
                    );
                    seqs[s] = seq;
                    at[s] += 1;
                }
            }
        });
    }
    assert!(shared >= min_shared, "the trials shared passes ({shared})");
}

/// Requests decoded at once share their forward passes (more than one
/// sequence a decode pass, measured), and each gets the reply it gets
/// alone, byte for byte.
#[test]
fn requests_decoded_at_once_share_passes_and_get_the_replies_they_get_alone() {
    let m = model();
    let mut s = section(64);
    s.max_output_tokens = 60;
    s.gguf.batch = 1;
    let single = GgufChat::new(Arc::clone(&m), &s);
    s.gguf.batch = 4;
    let batched = GgufChat::new(m, &s);
    let requests: Vec<ChatRequest> = requests().into_iter().take(4).collect();
    let want: Vec<_> = requests.iter().map(|r| single.decode(r, 5).expect("alone")).collect();
    let got: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = requests.iter().map(|r| scope.spawn(|| batched.decode(r, 5).expect("batched"))).collect();
        handles.into_iter().map(|h| h.join().expect("a decoding thread")).collect()
    });
    // Which request fills the prefix cache first depends on the timing;
    // the replies and their token counts do not.
    let bytes = |d: &[providers::chat::gguf::decode::Decoded]| {
        d.iter().map(|d| (d.text.clone(), d.prompt_tokens, d.completion_tokens)).collect::<Vec<_>>()
    };
    assert_eq!(bytes(&got), bytes(&want));
    let (passes, sequences) = batched.batcher().decode_passes();
    assert!(passes > 0 && sequences as f64 / passes as f64 > 1.5, "{sequences} sequences in {passes} passes");
    let (passes, sequences) = single.batcher().decode_passes();
    assert_eq!(sequences, passes, "batch 1: one sequence a pass");
}
