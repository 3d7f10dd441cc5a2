//! Asking the configured chat model every survey question, for every
//! respondent, with guardrail retries: both runs of the panel (each behind
//! its own chat log, so that a continued validation buys no answer twice),
//! the reasons asked apart, and rating the free text by SSR.

use crate::dir::VALIDATION;
use crate::error::{Error, Result};
use crate::preflight::Estimate;
use crate::watch::Watch;
use actors::progress::Progress;
use engine::chat::schema::to_lines;
use engine::chat::{ChatError, ChatPort, ChatPurpose, ChatRequest, ChatResult, OptionProbabilities};
use engine::config::{AnswerMode, AnswerOrder, ChatProvider, Config};
use engine::cost::Spend;
use engine::digest::DigestWriter;
use engine::persona::reply::{parse_shares, parse_survey};
use engine::rng::Stream;
use futures::StreamExt;
use providers::cache::CacheCounters;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use survey::score::Answer;
use survey::{Question, Respondent, Survey};

/// One respondent's reply to one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    /// The option chosen, from 1; `None` when no attempt gave a valid answer.
    pub point: Option<u8>,
    /// The stated reason (the free text SSR rates), or why it failed.
    pub why: String,
    /// Attempts made (guardrail retries included).
    pub attempts: u32,
    /// What every attempt was billed.
    pub spend: Spend,
    /// Some attempt's tokens were estimated (the scripted model, or a
    /// server that reported no usage), not reported.
    pub estimated: bool,
    /// In probabilities mode: the model's probability of each option
    /// (`point` is the answer the panel rule takes from them).
    pub probabilities: Option<Vec<f64>>,
    /// In probabilities mode: the share of the model's probability the
    /// options held at the answer, before renormalising.
    pub mass: Option<f64>,
    /// In probabilities mode, when `mass` was below `[answers]
    /// min_option_mass`: the options' mass when weighed again with their
    /// tokens raised (the probabilities are that reading's).
    pub raised: Option<f64>,
}

/// Every reply of one run: `replies[q][r]`.
pub type Replies = Vec<Vec<Asked>>;

/// The order `respondent` is shown `question`'s options in: as asked, or
/// with `permute`, a permutation seeded by it, the question and the
/// respondent. Line `i + 1` of the prompt shows option `order[i]`.
pub fn option_order(question: &Question, respondent: &Respondent, permute: Option<u64>) -> Vec<usize> {
    let k = question.options.len();
    let mut order: Vec<usize> = (0..k).collect();
    if let Some(seed) = permute {
        let key = DigestWriter::new("survey option order v1").u64(seed).str(&question.id).str(&respondent.id).finish();
        Stream::from_key(key.0).shuffle(&mut order);
    }
    order
}

/// `asked` with its answer and probabilities taken from the shown order
/// back to `question`'s own. A point answer from probabilities is the
/// panel rule's on them in the question's order (the rounded mean of an
/// ordinal scale means nothing in a shuffled one).
fn in_question_order(mut asked: Asked, order: &[usize], question: &Question) -> Asked {
    asked.point = asked.point.map(|d| order[usize::from(d) - 1] as u8 + 1);
    if let Some(shown) = asked.probabilities.take() {
        let mut own = vec![0.0; shown.len()];
        order.iter().zip(&shown).for_each(|(&o, p)| own[o] = *p);
        asked.point = Some(Answer::from_pmf(own.clone(), question.kind).point);
        asked.probabilities = Some(own);
    }
    asked
}

/// What one reply makes of the answer: the option and its reason, or (in
/// `verbalized` mode) the shares, normalised.
fn parse_reply(text: &str, question: &Question, shares: bool) -> Result<(u8, String, Option<Vec<f64>>), String> {
    let lines = to_lines(text);
    match shares {
        true => parse_shares(&lines, question.points()).map(|p| {
            let point = Answer::from_pmf(p.clone(), question.kind).point;
            (point, "the shares of people like the persona it gave".to_string(), Some(p))
        }),
        false => parse_survey(&lines, question.points()).map(|p| (p.answer, p.why, None)),
    }
    .map_err(|e| e.to_string())
}

async fn ask_one(
    chat: &dyn ChatPort,
    model: &str,
    prompt: String,
    question: &Question,
    retries: u32,
    shares: bool,
) -> Asked {
    let first = ChatRequest::new(model, ChatPurpose::Survey, prompt).with_options(question.points());
    let first = if shares { first.verbalized() } else { first };
    let mut spend = Spend::default();
    let mut why = String::new();
    let mut estimated = false;
    for attempt in 0..=retries {
        let request = first.attempt(attempt);
        match chat.complete(&request).await {
            Ok(reply) => {
                spend.add(&reply.spend);
                estimated |= reply.estimated;
                match parse_reply(&reply.text, question, shares) {
                    Ok((point, why, probabilities)) => {
                        return Asked {
                            point: Some(point),
                            why,
                            attempts: attempt + 1,
                            spend,
                            estimated,
                            probabilities,
                            mass: None,
                            raised: None,
                        }
                    }
                    Err(e) => why = format!("no valid answer after {} attempts: {e}", attempt + 1),
                }
            }
            Err(e) => {
                spend.add(&e.spend());
                let why = format!("the chat model failed: {e}");
                return Asked {
                    point: None,
                    why,
                    attempts: attempt + 1,
                    spend,
                    estimated,
                    probabilities: None,
                    mass: None,
                    raised: None,
                };
            }
        }
    }
    Asked { point: None, why, attempts: retries + 1, spend, estimated, probabilities: None, mass: None, raised: None }
}

/// The request that asks for `question`'s option probabilities.
pub fn weigh_request(cfg: &Config, question: &Question, prompt: String) -> ChatRequest {
    ChatRequest::new(cfg.raw.chat.model.as_str(), ChatPurpose::Survey, prompt).with_options(question.points())
}

/// What the model's option probabilities for `question` make of its
/// answer. A port that cannot give them fails the whole validation (the
/// error names the setting); a provider's failure is this answer's.
fn weighed(result: ChatResult<OptionProbabilities>, question: &Question) -> crate::Result<Asked> {
    match result {
        Ok(p) => {
            let answer = Answer::from_pmf(p.probabilities.clone(), question.kind);
            let mut why = format!("the options had {:.4} of the model's probability at the answer", p.mass);
            if let Some(r) = p.raised {
                let _ = write!(why, "; weighed again with their tokens raised, {r:.4}");
            }
            Ok(Asked {
                point: Some(answer.point),
                why,
                attempts: 1,
                spend: p.spend,
                estimated: p.estimated,
                probabilities: Some(p.probabilities),
                mass: Some(p.mass),
                raised: p.raised,
            })
        }
        Err(e @ ChatError::Engine(_)) => Err(crate::Error::Chat(e)),
        Err(e) => Ok(Asked {
            point: None,
            why: format!("the chat model failed: {e}"),
            attempts: 1,
            spend: e.spend(),
            estimated: false,
            probabilities: None,
            mass: None,
            raised: None,
        }),
    }
}

/// Where a run of the panel reports: its label on the bar, and where the
/// bar goes.
pub struct Round<'a> {
    /// The label (`run 1 of 2`).
    pub label: &'a str,
    /// The progress sink.
    pub progress: &'a dyn Progress,
    /// The seed of the options' permutation, when they are permuted.
    pub permute: Option<u64>,
    /// Per respondent, the interview so far that precedes every question
    /// ([`survey::interview::transcript`] of the given answers; empty
    /// strings for none).
    pub earlier: &'a [String],
}

/// `ask` for every question of every respondent (in respondent-major
/// order, the prompt in the respondent's option order, that order), at
/// most `cfg.chat.concurrency` at once, in a fixed order; a bar counts
/// them. `out[q][r]`.
async fn over_panel<'s, T, Fut>(
    cfg: &Config,
    survey: &'s Survey,
    people: &'s [Respondent],
    round: &Round<'_>,
    ask: impl Fn(&'s Question, String, Vec<usize>) -> Fut,
) -> Vec<Vec<T>>
where
    Fut: std::future::Future<Output = T>,
{
    let total = (survey.questions.len() * people.len()) as u64;
    let done = std::sync::atomic::AtomicU64::new(0);
    // Respondent by respondent, so that a local model's prefix cache serves
    // a respondent's description to its every question (the answers do not
    // depend on the order).
    let jobs = people.iter().enumerate().flat_map(|(p, r)| survey.questions.iter().map(move |q| (q, p, r)));
    let flat: Vec<T> = futures::stream::iter(jobs)
        .map(|(q, p, r)| {
            let done = &done;
            let order = option_order(q, r, round.permute);
            let earlier = round.earlier.get(p).map_or("", String::as_str);
            let prompt = match cfg.raw.answers.mode {
                AnswerMode::Verbalized => q.shares_prompt_in(survey.context.as_deref(), r, &order, earlier),
                AnswerMode::Sample | AnswerMode::Probabilities => {
                    q.prompt_in(survey.context.as_deref(), r, &order, earlier)
                }
            };
            let asked = ask(q, prompt, order);
            async move {
                let asked = asked.await;
                let n = done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                round.progress.stage(0, round.label, n, total);
                asked
            }
        })
        .buffered(cfg.raw.chat.concurrency.max(1))
        .collect()
        .await;
    let k = survey.questions.len();
    let mut out: Vec<Vec<T>> = (0..k).map(|_| Vec::with_capacity(people.len())).collect();
    for (i, asked) in flat.into_iter().enumerate() {
        out[i % k].push(asked);
    }
    out
}

/// [`ask_all`] in probabilities mode: each question's option
/// probabilities for every respondent, no reply generated.
pub async fn probabilities_all(
    cfg: &Config,
    chat: Arc<dyn ChatPort>,
    survey: &Survey,
    people: &[Respondent],
    round: &Round<'_>,
) -> crate::Result<Replies> {
    let asked = over_panel(cfg, survey, people, round, |q, prompt, order| {
        let chat = chat.clone();
        async move {
            let result = chat.option_probabilities(&weigh_request(cfg, q, prompt)).await;
            weighed(result, q).map(|a| in_question_order(a, &order, q))
        }
    })
    .await;
    asked.into_iter().map(|column| column.into_iter().collect()).collect()
}

/// Asks every question of every respondent through `chat`, with
/// guardrail retries.
pub async fn ask_all(
    cfg: &Config,
    chat: Arc<dyn ChatPort>,
    survey: &Survey,
    people: &[Respondent],
    round: &Round<'_>,
) -> Replies {
    let model = cfg.raw.chat.model.as_str();
    let retries = cfg.raw.chat.max_guardrail_retries;
    let shares = cfg.raw.answers.mode == AnswerMode::Verbalized;
    over_panel(cfg, survey, people, round, |q, prompt, order| {
        let chat = chat.clone();
        async move { in_question_order(ask_one(chat.as_ref(), model, prompt, q, retries, shares).await, &order, q) }
    })
    .await
}

/// The direct answers of `replies`, as the scorer takes them.
pub fn direct(survey: &Survey, replies: &Replies) -> Vec<Vec<Option<Answer>>> {
    survey
        .questions
        .iter()
        .zip(replies)
        .map(|(q, column)| {
            column
                .iter()
                .map(|a| match &a.probabilities {
                    Some(p) => Some(Answer::from_pmf(p.clone(), q.kind)),
                    None => a.point.map(|p| Answer::direct(p, q.options.len())),
                })
                .collect()
        })
        .collect()
}

/// SSR answers of `replies`: each valid reply's reason against the
/// question's anchors (its option labels, or its own statements), through
/// `cfg`'s embedder, with the `[intent]` epsilon and temperature.
pub fn ssr(
    cfg: &Config,
    survey: &Survey,
    replies: &Replies,
    threads: Option<u32>,
) -> crate::Result<Vec<Vec<Option<Answer>>>> {
    let mut texts: Vec<String> = survey.questions.iter().flat_map(|q| q.anchor_texts().iter().cloned()).collect();
    let anchors = texts.len();
    texts.extend(replies.iter().flatten().filter(|a| a.point.is_some()).map(|a| a.why.clone()));
    let vectors = crate::embed_texts(cfg, &texts, threads)?;
    let (anchor_vectors, mut answers) = (&vectors[..anchors], vectors[anchors..].iter());
    let intent = &cfg.raw.intent;
    let mut out = Vec::new();
    let mut at = 0;
    for (q, column) in survey.questions.iter().zip(replies) {
        let own = &anchor_vectors[at..at + q.options.len()];
        at += q.options.len();
        let rated = column
            .iter()
            .map(|a| {
                a.point?;
                let v = answers.next().expect("one vector per valid reply; this is a bug");
                let g: Vec<f64> = own.iter().map(|anchor| engine::embed::check::cosine(v, anchor)).collect();
                Some(Answer::from_pmf(survey::question::ssr_pmf(&g, intent.epsilon, intent.temperature), q.kind))
            })
            .collect();
        out.push(rated);
    }
    Ok(out)
}

/// Whether the panel is asked once: probabilities in the question's own
/// order, which a second run would only repeat.
pub(super) fn asked_once(cfg: &Config) -> bool {
    cfg.raw.answers.mode == AnswerMode::Probabilities && cfg.raw.answers.order == AnswerOrder::AsAsked
}

/// The seed of run `n`'s option permutation (1 or 2), when the options are
/// permuted: another permutation per run, so that a second run measures
/// order sensitivity.
pub(super) fn permutation(cfg: &Config, seed: u64, n: u64) -> Option<u64> {
    (cfg.raw.answers.order == AnswerOrder::Permuted).then(|| seed.wrapping_add(n - 1))
}

/// With `[answers] reasons = true` in a mode without reasons: every
/// question asked once more in sample mode (at `--seed`, in run 1's option
/// order, logged apart), for the reasons SSR rates.
pub(super) fn ask_reasons(
    cfg: &Config,
    seed: u64,
    watch: &Watch<'_>,
    Panel { survey, respondents, earlier, cache }: Panel<'_>,
    out: &Path,
) -> Result<Replies> {
    let mut sampled = cfg.clone();
    sampled.raw.answers.mode = AnswerMode::Sample;
    let rt = crate::runtime(watch.threads)?;
    let round =
        Round { label: "reasons", progress: watch.progress.as_ref(), permute: permutation(cfg, seed, 1), earlier };
    rt.block_on(async {
        let provider = providers::build_chat(&sampled, seed).map_err(actors::Error::from)?;
        let chat = open_chat_port(&sampled, (&provider, seed), &crate::dir::validation_reasons_wal(out), cache)?;
        Ok(ask_all(&sampled, chat, survey, respondents, &round).await)
    })
}

/// Who is asked what: the survey, the respondents, and each one's
/// interview so far.
#[derive(Clone, Copy)]
pub(super) struct Panel<'a> {
    pub(super) survey: &'a Survey,
    pub(super) respondents: &'a [Respondent],
    pub(super) earlier: &'a [String],
    /// What the response cache did, counted by every port that asks them.
    pub(super) cache: &'a Arc<providers::cache::CacheCounters>,
}

/// Both runs of the panel (at `--seed` and `--seed + 1`), after the live
/// model's connection check and the go-ahead on the estimate (made, when
/// asked for, on a pilot of the first respondents' questions, logged in
/// run 1's chat log so that the run is served them); when the
/// validation fails on a new directory before the go-ahead and before any
/// answer was bought but the first weighing, the directory is removed
/// again.
pub(super) fn ask_both(
    cfg: &Config,
    seed: u64,
    watch: &Watch<'_>,
    panel: Panel<'_>,
    (out, resumed): (&Path, bool),
    pilot: u32,
) -> Result<([Replies; 2], Option<Estimate>)> {
    let Panel { survey, respondents, earlier, cache } = panel;
    let rt = crate::runtime(watch.threads)?;
    let progress = watch.progress.as_ref();
    let (piloted, confirmed) = (std::cell::Cell::new(false), std::cell::Cell::new(false));
    let asked = (|| {
        // The connection check asks the server itself; the first weighing
        // goes through the response cache, as every answer does.
        let live = providers::build_chat(cfg, seed).map_err(actors::Error::from)?;
        let (p1, p2) = (permutation(cfg, seed, 1), permutation(cfg, seed, 2));
        let round = |label, permute| Round { label, progress, permute, earlier };
        // In probabilities mode the first question is weighed before
        // anything else, so that a provider that cannot give probabilities
        // says so before anything is bought.
        let first = chat_port(cfg, (&live, seed), out, 1, cache)?;
        if cfg.raw.answers.mode == AnswerMode::Probabilities {
            let (q, r) = (&survey.questions[0], &respondents[0]);
            let order = option_order(q, r, p1);
            let earlier = earlier.first().map_or("", String::as_str);
            let request = weigh_request(cfg, q, q.prompt_in(survey.context.as_deref(), r, &order, earlier));
            if let Err(e @ engine::chat::ChatError::Engine(_)) = rt.block_on(first.option_probabilities(&request)) {
                return Err(Error::Chat(e));
            }
        }
        let checked = std::cell::Cell::new(false);
        let check = || -> Result<()> {
            if !checked.get() {
                rt.block_on(crate::preflight::probe(cfg, live.as_ref(), progress))?;
                checked.set(true);
            }
            Ok(())
        };
        let made = std::cell::RefCell::new(None);
        let estimate = || -> Result<Estimate> {
            check()?;
            let ask = pilot > 0 && cfg.raw.chat.provider != ChatProvider::Scripted;
            let k = survey.questions.len().max(1);
            let people = &respondents[..(pilot as usize).div_ceil(k).min(respondents.len())];
            let asked = if ask {
                progress.note(&format!("pilot: asking every question of the first {} respondent(s)", people.len()));
                piloted.set(true);
                // Reopened, so that the first weighing is served from the log.
                let port = chat_port(cfg, (&live, seed), out, 1, cache)?;
                Some(rt.block_on(answers(cfg, port, survey, people, &round("pilot", p1)))?)
            } else {
                None
            };
            let spent: Option<Vec<(u32, Spend)>> =
                asked.map(|replies| replies.iter().flatten().map(|a| (a.attempts, a.spend)).collect());
            let runs = if asked_once(cfg) { 1.0 } else { 2.0 };
            let asking = super::estimate::Asking { survey, respondents, earlier, runs };
            let e = super::estimate::estimate(cfg, asking, people, spent.as_deref());
            *made.borrow_mut() = Some(e.clone());
            Ok(e)
        };
        (watch.confirm)(cfg, &estimate)?;
        confirmed.set(true);
        check()?;
        let estimate = made.into_inner();
        // Reopened: what was asked so far is served from the log.
        let first = chat_port(cfg, (&live, seed), out, 1, cache)?;
        rt.block_on(async {
            if asked_once(cfg) {
                let once = answers(cfg, first, survey, respondents, &round("probabilities", p1)).await?;
                return Ok(([once, Vec::new()], estimate));
            }
            let once = answers(cfg, first, survey, respondents, &round("run 1 of 2", p1)).await?;
            let provider = providers::build_chat(cfg, seed.wrapping_add(1)).map_err(actors::Error::from)?;
            let rerun = chat_port(cfg, (&provider, seed.wrapping_add(1)), out, 2, cache)?;
            let second = answers(cfg, rerun, survey, respondents, &round("run 2 of 2", p2)).await?;
            Ok(([once, second], estimate))
        })
    })();
    if asked.is_err() && !resumed && !piloted.get() && !confirmed.get() {
        let _ = std::fs::remove_file(crate::dir::validation_chat_wal(out, 1));
        if std::fs::read_dir(out).map(|d| d.count()).unwrap_or(0) <= 1 {
            let _ = std::fs::remove_file(out.join(VALIDATION));
            let _ = std::fs::remove_dir(out);
        }
    }
    asked
}

/// Every question of every one of `people`, in the configured answer mode.
async fn answers(
    cfg: &Config,
    chat: Arc<dyn ChatPort>,
    survey: &Survey,
    people: &[Respondent],
    round: &Round<'_>,
) -> Result<Replies> {
    match cfg.raw.answers.mode {
        AnswerMode::Probabilities => probabilities_all(cfg, chat, survey, people, round).await,
        AnswerMode::Sample | AnswerMode::Verbalized => Ok(ask_all(cfg, chat, survey, people, round).await),
    }
}

/// The chat port of run `n` (1 or 2): for a live provider, behind the
/// run's own write-ahead log in `out`, so that an interrupted validation
/// continued with the same command buys no answer twice. (One log per run:
/// both runs send the same requests, under different seeds.)
pub(super) fn chat_port(
    cfg: &Config,
    (provider, seed): (&Arc<dyn ChatPort>, u64),
    out: &Path,
    n: u32,
    cache: &Arc<CacheCounters>,
) -> Result<Arc<dyn ChatPort>> {
    open_chat_port(cfg, (provider, seed), &crate::dir::validation_chat_wal(out, n), cache)
}

/// [`chat_port`] logging to `path`: `provider` (built for `seed`) behind
/// the response cache.
pub(super) fn open_chat_port(
    cfg: &Config,
    (provider, seed): (&Arc<dyn ChatPort>, u64),
    path: &Path,
    cache: &Arc<CacheCounters>,
) -> Result<Arc<dyn ChatPort>> {
    use engine::store::trace::{cassette::CassetteChat, wal};
    let chat = providers::with_response_cache(cfg, seed, Arc::clone(provider), cache);
    Ok(match cfg.raw.chat.provider {
        ChatProvider::Scripted => chat,
        ChatProvider::Modelled | ChatProvider::Openai | ChatProvider::Gguf => {
            // Answers are served from the log; a call that failed is asked again.
            let paid = wal::read_wal(path)?.0.into_iter().filter(|e| e.answer.is_ok()).collect();
            let logged: Arc<dyn ChatPort> = Arc::new(wal::WalChat::open(path, chat)?);
            Arc::new(CassetteChat::new(&[], Some(logged)).with_wal(paid))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use survey::Kind;

    fn question() -> Question {
        Question {
            id: "q".into(),
            text: "How?".into(),
            kind: Kind::Ordinal,
            options: ["a", "b", "c", "d", "e"].map(String::from).to_vec(),
            anchors: None,
        }
    }

    fn person(id: &str) -> Respondent {
        Respondent { id: id.into(), traits: Vec::new(), values: Default::default() }
    }

    /// A permutation per persona and question, the same for the same seed,
    /// another for another seed; as asked without one.
    #[test]
    fn options_are_shown_in_a_seeded_order_per_persona() {
        let q = question();
        assert_eq!(option_order(&q, &person("r1"), None), [0, 1, 2, 3, 4]);
        let orders: Vec<Vec<usize>> = (0..40).map(|i| option_order(&q, &person(&format!("r{i}")), Some(9))).collect();
        for o in &orders {
            let mut sorted = o.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, [0, 1, 2, 3, 4], "a permutation: {o:?}");
        }
        assert!(orders.iter().any(|o| o[0] != 0) && orders.iter().any(|o| o[0] == 0), "first options vary");
        assert_eq!(option_order(&q, &person("r1"), Some(9)), orders[1]);
        assert!((0..40).any(|i| option_order(&q, &person(&format!("r{i}")), Some(10)) != orders[i]), "another seed");
        let shown = q.prompt_in(None, &person("r1"), &[4, 3, 2, 1, 0], "");
        assert!(shown.contains("1. e\n2. d\n3. c\n4. b\n5. a\n"), "{shown}");
    }

    /// An answer and probabilities given in the shown order go back to the
    /// question's; the point of probabilities follows the panel rule in the
    /// question's own order.
    #[test]
    fn answers_are_mapped_back_to_the_questions_order() {
        let q = question();
        let order = [4, 3, 2, 1, 0];
        let asked = |point, probabilities| Asked {
            point: Some(point),
            why: String::new(),
            attempts: 1,
            spend: Spend::default(),
            estimated: false,
            probabilities,
            mass: None,
            raised: None,
        };
        assert_eq!(in_question_order(asked(1, None), &order, &q).point, Some(5), "shown first is the last option");
        let back = in_question_order(asked(3, Some(vec![0.7, 0.1, 0.1, 0.1, 0.0])), &order, &q);
        assert_eq!(back.probabilities.as_deref(), Some(&[0.0, 0.1, 0.1, 0.1, 0.7][..]));
        // Mean 0.1*2 + 0.1*3 + 0.1*4 + 0.7*5 = 4.4: option 4.
        assert_eq!(back.point, Some(4));
    }
}
