use super::*;
use crate::embed::upstream::HttpSettings;

#[test]
fn empty_file_gives_defaults() {
    let c = RawConfig::from_toml("", "c.toml").and_then(|r| r.resolve("c.toml"));
    assert_eq!(c.map(|c| c.hash()).ok(), Some(Config::defaults().hash()));
}

#[test]
fn unknown_field_is_named_with_its_line() {
    let err = RawConfig::from_toml("[chat]\nconcurency = 3\n", "my.toml").unwrap_err().to_string();
    assert!(err.contains("my.toml"), "{err}");
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("concurency"), "{err}");
}

#[test]
fn invalid_value_names_file_and_field() {
    let raw = RawConfig::from_toml("[embedding]\ndim = 2\n", "my.toml").expect("parses");
    let err = raw.resolve("my.toml").unwrap_err().to_string();
    assert!(err.contains("my.toml") && err.contains("embedding.dim"), "{err}");
    let raw = RawConfig::from_toml("[answers]\nmin_option_mass = 1.5\n", "my.toml").expect("parses");
    let err = raw.resolve("my.toml").unwrap_err().to_string();
    assert!(err.contains("answers.min_option_mass") && err.contains("[0, 1], got 1.5"), "{err}");
}

#[test]
fn content_hash_ignores_operational_settings() {
    let with = |t: &str| RawConfig::from_toml(t, "t").and_then(|r| r.resolve("t")).expect("valid");
    let base = Config::defaults();
    let ops = with("[embedding]\nbatch_size = 3\nconcurrency = 9\ncache = false\n[embedding.modelled]\nlatency_ms = 1.0\n[chat]\nconcurrency = 2\n[prices]\nchat_input_usd_per_mtok = 9.0\n");
    assert_eq!(ops.content_hash(), base.content_hash());
    assert_ne!(ops.hash(), base.hash());
    for content in [
        "[retrieval]\nk = 2\n",
        "[embedding]\ndim = 64\n",
        "[chat]\nmalformed_rate = 0.5\n",
        "[run]\nhours_per_tick = 2\n",
        "[consolidation]\nenabled = true\n",
    ] {
        assert_ne!(with(content).content_hash(), base.content_hash(), "{content}");
    }
    // The endpoint's address is operational; asking it for shorter vectors is not.
    let http = "[embedding]\nprovider = \"openai\"\n[embedding.http]\nbase_url = \"http://a\"\n";
    let moved = with(&http.replace("http://a", "http://b"));
    assert_eq!(with(http).content_hash(), moved.content_hash());
    assert_ne!(with(http).content_hash(), with(&format!("{http}send_dimensions = true\n")).content_hash());
}

#[test]
fn prices_are_per_model_with_labels() {
    let cfg = |text: &str| RawConfig::from_toml(text, "t").expect("parses").resolve("t").expect("valid");
    let d = Config::defaults();
    assert_eq!((d.embedding_price_label, d.chat_price_label), (PriceLabel::Nominal, PriceLabel::Nominal));
    assert_eq!(d.embedding_price, Price::from_usd_per_mtok(0.02, 0.0));
    let minilm = cfg("[embedding]\nprovider = \"minilm\"\n[embedding.minilm]\nmodel_dir = \"m\"\n");
    assert_eq!((minilm.raw.embedding.model.as_str(), minilm.raw.embedding.dim), (MINILM_MODEL, MINILM_DIM));
    assert_eq!(
        (minilm.embedding_price, minilm.embedding_price_label),
        (Price::from_usd_per_mtok(0.0, 0.0), PriceLabel::Local)
    );
    let own =
        cfg("[prices]\nchat_input_usd_per_mtok = 1.0\n[prices.models.\"local-hash-v1\"]\ninput_usd_per_mtok = 0.5\n");
    assert_eq!(
        (own.embedding_price, own.embedding_price_label),
        (Price::from_usd_per_mtok(0.5, 0.0), PriceLabel::Configured)
    );
    assert_eq!((own.chat_price, own.chat_price_label), (Price::from_usd_per_mtok(1.0, 0.6), PriceLabel::Configured));
    let bad = RawConfig::from_toml("[prices.models.x]\ninput_usd_per_mtok = -1.0\n", "t").expect("parses");
    assert!(bad.resolve("t").expect_err("negative").to_string().contains("prices.models"));
    // Cached input: its own price when the model's row gives one, else the
    // input price; the config's hash is unchanged by the new key's absence.
    let row = "[chat]\nprovider = \"openai\"\nmodel = \"m\"\n[chat.http]\nbase_url = \"http://127.0.0.1:1/v1\"\n[prices.models.m]\ninput_usd_per_mtok = 2.5\noutput_usd_per_mtok = 10.0\n";
    let cached = cfg(&format!("{row}cached_input_usd_per_mtok = 1.25\n"));
    assert_eq!(cached.chat_price, Price::from_usd_per_mtok(2.5, 10.0).with_cached_usd_per_mtok(1.25));
    assert!(cached.raw.prices.cached_input_description("m").starts_with("1.25 USD per million"));
    let plain = cfg(row);
    assert_eq!(plain.chat_price.cached_input_nano_per_mtok, plain.chat_price.input_nano_per_mtok);
    assert!(plain.raw.prices.cached_input_description("m").starts_with("the input price"));
    assert!(!plain.to_toml().contains("cached_input"), "{}", plain.to_toml());
    let bad = RawConfig::from_toml(&format!("{row}cached_input_usd_per_mtok = -1.0\n"), "t").expect("parses");
    assert!(bad.resolve("t").expect_err("negative").to_string().contains("prices.models"));
}

#[test]
fn minilm_fixes_model_and_dim_and_its_directory_stays_out_of_the_hash() {
    let raw = |text: &str| RawConfig::from_toml(text, "t").expect("parses");
    let base = "[embedding]\nprovider = \"minilm\"\n";
    let err = raw(&format!("{base}dim = 64\n[embedding.minilm]\nmodel_dir = \"m\"\n")).resolve("t").expect_err("dim");
    assert!(err.to_string().contains("embedding.dim") && err.to_string().contains("384"), "{err}");
    let err = raw(base).resolve("t").expect_err("no directory").to_string();
    assert!(err.contains("model_dir") && err.contains("fetch-minilm"), "{err}");
    let at = |dir: &str, sha: &str| {
        raw(&format!("{base}[embedding.minilm]\nmodel_dir = \"{dir}\"\nweights_sha256 = \"{sha}\"\n"))
            .resolve("t")
            .expect("valid")
    };
    assert_eq!(at("a", "11").hash(), at("b", "11").hash());
    assert_eq!(at("a", "11").content_hash(), at("b", "11").content_hash());
    assert_ne!(at("a", "11").hash(), at("a", "22").hash());
    assert_ne!(at("a", "11").content_hash(), at("a", "22").content_hash());
    // The kernel level is operational: recorded, out of both hashes.
    let level = |kernel: &str| {
        raw(&format!("{base}[embedding.minilm]\nmodel_dir = \"a\"\nweights_sha256 = \"11\"\nkernel = \"{kernel}\"\n"))
            .resolve("t")
            .expect("valid")
    };
    let portable = level("portable");
    assert_eq!(portable.raw.embedding.minilm.kernel, KernelLevel::Portable);
    assert!(portable.to_toml().contains("kernel = \"portable\""), "the level is recorded");
    assert_eq!((portable.hash(), portable.content_hash()), (at("a", "11").hash(), at("a", "11").content_hash()));
    let err = RawConfig::from_toml(&format!("{base}[embedding.minilm]\nkernel = \"fast\"\n"), "t").expect_err("fast");
    assert!(err.to_string().contains("fast") && err.to_string().contains("portable"), "{err}");
}

#[test]
fn intent_settings_are_checked_and_resolved_into_the_config() {
    let raw = |text: &str| RawConfig::from_toml(text, "i.toml").expect("parses");
    assert!(Config::defaults().raw.intent.anchor_sets.is_empty(), "direct needs no anchors");
    let both = raw("[intent]\nmethod = \"both\"\n").resolve("i.toml").expect("valid");
    assert_eq!(both.raw.intent.anchor_sets, crate::intent::builtin_anchor_sets());
    assert!(both.to_toml().contains("purchase-plain"), "the resolved sets are recorded");
    let four = "[intent]\nmethod = \"ssr\"\n[[intent.anchor_sets]]\nname = \"mine\"\nstatements = [\"a\", \"b\", \"c\", \"d\"]\n";
    let err = raw(four).resolve("i.toml").expect_err("four").to_string();
    assert!(err.contains("i.toml") && err.contains("intent.anchor_sets") && err.contains("has 4 statements"), "{err}");
    let dup = "[[intent.anchor_sets]]\nname = \"mine\"\nstatements = [\"a\", \"b\", \"a\", \"d\", \"e\"]\n";
    assert!(raw(dup).resolve("i.toml").expect_err("dup").to_string().contains("statements 1 and 3 are the same"));
    let off = "[embedding]\nmodel = \"none\"\n[intent]\nmethod = \"ssr\"\n";
    assert!(raw(off).resolve("i.toml").expect_err("no embedder").to_string().contains("intent.method"));
    let t = raw("[intent]\ntemperature = -1.0\n").resolve("i.toml").expect_err("temperature").to_string();
    assert!(t.contains("intent.temperature"), "{t}");
}

#[test]
fn round_trips_through_toml() {
    let c = Config::defaults();
    let again = RawConfig::from_toml(&c.to_toml(), "x").and_then(|r| r.resolve("x"));
    assert_eq!(again.map(|c| c.hash()).ok(), Some(c.hash()));
}

/// `[chat.http]` written for its `base_url` alone keeps the chat timeouts
/// (60 s read, 120 s request), not the embedding ones a derived reader
/// would fill in; what it does write wins; `[embedding.http]` keeps its own
/// defaults; an unknown key is still refused. Every other section's
/// defaults come from its own type's `Default`, which the section's parent
/// uses too, so only this field had two sets of defaults.
#[test]
fn a_written_chat_http_section_keeps_the_chat_defaults() {
    let raw = |text: &str| RawConfig::from_toml(text, "t").expect("parses");
    let http = raw("[chat]\nprovider = \"openai\"\nmodel = \"m\"\n[chat.http]\nbase_url = \"http://127.0.0.1:9/v1\"\n")
        .chat
        .http;
    assert_eq!((http.read_timeout_ms, http.request_timeout_ms), (60_000, 120_000));
    assert_eq!((http.base_url.as_str(), http.api_key_env.as_str()), ("http://127.0.0.1:9/v1", "OPENAI_API_KEY"));
    assert_eq!(raw("").chat.http, HttpSettings::chat(), "left out: the chat defaults");
    assert_eq!(raw("[chat.http]\nread_timeout_ms = 5\n").chat.http.read_timeout_ms, 5, "written: kept");
    assert_eq!(raw("[chat.http]\nread_timeout_ms = 5\n").chat.http.request_timeout_ms, 120_000);
    let embedding = raw("[embedding.http]\nbase_url = \"http://127.0.0.1:9/v1\"\n").embedding.http;
    assert_eq!((embedding.read_timeout_ms, embedding.request_timeout_ms), (30_000, 60_000));
    let err = RawConfig::from_toml("[chat.http]\nread_timeout = 5\n", "t").err().map(|e| e.to_string());
    assert!(err.as_deref().is_some_and(|e| e.contains("read_timeout") && e.contains("t")), "{err:?}");
}

/// Batch mode: refused where no Batch API is (a scripted provider, several
/// endpoints) and with settings past the API's limits; billed at half the
/// online price unless the model's row says otherwise; never part of the
/// content a digest starts from.
#[test]
fn batch_mode_is_checked_priced_and_not_content() {
    let live = "[chat]\nprovider = \"openai\"\nmodel = \"m\"\n[chat.http]\nbase_url = \"http://127.0.0.1:1/v1\"\n";
    let resolve = |text: &str| RawConfig::from_toml(text, "t").expect("parses").resolve("t");
    let text = live.replace("model = \"m\"\n", "model = \"m\"\nmode = \"batch\"\n");
    let batch = resolve(&text).expect("valid");
    let online = resolve(live).expect("valid");
    assert_eq!(batch.raw.chat.mode, ChatMode::Batch);
    assert_eq!(batch.content_hash(), online.content_hash(), "the mode is not content");
    assert_ne!(batch.hash(), online.hash(), "but it is part of the config");
    let toml = online.to_toml();
    assert!(!toml.lines().any(|l| l.starts_with("mode =")) && !toml.contains("[chat.batch]"), "{toml}");
    // The default row and a row without batch prices: half of each price.
    assert_eq!(online.chat_batch_price, Price::from_usd_per_mtok(0.075, 0.3).with_cached_usd_per_mtok(0.075));
    let priced = resolve(&format!(
        "{text}[prices.models.m]\ninput_usd_per_mtok = 2.0\noutput_usd_per_mtok = 8.0\nbatch_discount = 0.25\n"
    ))
    .expect("valid");
    assert_eq!(priced.chat_batch_price, Price::from_usd_per_mtok(0.5, 2.0).with_cached_usd_per_mtok(0.5));
    let explicit = resolve(&format!(
        "{text}[prices.models.m]\ninput_usd_per_mtok = 2.0\nbatch_input_usd_per_mtok = 1.5\nbatch_output_usd_per_mtok = 0.0\n"
    ))
    .expect("valid");
    assert_eq!(
        (explicit.chat_batch_price.input_nano_per_mtok, explicit.chat_batch_price.output_nano_per_mtok),
        (1_500_000_000, 0)
    );
    let refused = |text: &str, field: &str| {
        let e = resolve(text).expect_err("refused").to_string();
        assert!(e.contains(field), "{field}: {e}");
    };
    refused("[chat]\nmode = \"batch\"\n", "chat.mode");
    refused(
        &text.replace("base_url = \"http://127.0.0.1:1/v1\"", "base_urls = [\"http://a/v1\", \"http://b/v1\"]"),
        "chat.http.base_urls",
    );
    refused(&format!("{text}[chat.batch]\nmax_lines = 50001\n"), "chat.batch.max_lines");
    refused(&format!("{text}[chat.batch]\npoll_first_ms = 0\n"), "chat.batch.poll_first_ms");
    refused(&format!("{text}[prices.models.m]\ninput_usd_per_mtok = 1.0\nbatch_discount = 1.5\n"), "batch_discount");
}

/// `[chat.gguf] batch` is operational, and its canonical form is the one
/// `workers` had, so that digests recorded before it still verify; a trace
/// header that still says `workers` reads back with its hash.
#[test]
fn the_gguf_batch_is_operational_and_keeps_the_canonical_form_workers_had() {
    let gguf = "[chat]\nprovider = \"gguf\"\nmodel = \"m\"\n[chat.gguf]\nmodel_file = \"m.gguf\"\ntop_p = 0.9\n";
    let with = |extra: &str| RawConfig::from_toml(&format!("{gguf}{extra}"), "t").and_then(|r| r.resolve("t"));
    let (eight, one) = (with("").expect("valid"), with("batch = 1\n").expect("valid"));
    assert_eq!(eight.raw.chat.gguf.batch, 8, "the default");
    assert_eq!(eight.content_hash(), one.content_hash());
    assert_ne!(eight.hash(), one.hash(), "the configuration's identity still names it");
    let content = serde_json::to_string(&eight.content()).expect("json");
    assert!(content.contains("\"workers\":1") && !content.contains("\"batch\""), "{content}");
    let scripted = serde_json::to_string(&Config::defaults().content()).expect("json");
    assert!(!scripted.contains("\"gguf\""), "no section where none was written: {scripted}");
    let err = with("batch = 0\n").expect_err("zero").to_string();
    assert!(err.contains("chat.gguf.batch") && err.contains("between 1 and 64"), "{err}");
    // An old header: `workers` reads back, hashes as written, and names
    // its replacement when a config file writes it.
    let old = with("workers = 1\n").expect("a recorded header resolves");
    assert_eq!(old.content_hash(), eight.content_hash());
    assert!(old.to_toml().contains("workers = 1"));
    let (field, cause) = old.raw.chat.gguf.retired_key().expect("retired");
    assert!(field == "chat.gguf.workers" && cause.contains("batch = 1"), "{cause}");
    assert_eq!(eight.raw.chat.gguf.retired_key(), None);
}
