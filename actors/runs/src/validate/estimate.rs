//! A validation's pre-flight estimate: every question it will ask,
//! counted, priced on the prompt and reply lengths a pilot of the first
//! respondents measured.

use crate::preflight::Estimate;
use engine::config::{AnswerMode, Config};
use engine::cost::{estimate_tokens, Spend};
use engine::estimate::{Calls, Observed, Span};
use survey::{Respondent, Survey};

/// What a validation asks: every question of every respondent, in `runs`
/// runs, each respondent after its interview so far (`earlier`).
#[derive(Clone, Copy)]
pub(super) struct Asking<'a> {
    pub(super) survey: &'a Survey,
    pub(super) respondents: &'a [Respondent],
    pub(super) earlier: &'a [String],
    pub(super) runs: f64,
}

/// Respondents whose prompts are built to measure the prompts' length.
const SAMPLED: usize = 64;

/// The engine's token estimate of every prompt of `people`, in question
/// order (as asked, without permutation: the lengths are the same).
fn prompts(cfg: &Config, panel: Asking<'_>, people: &[Respondent]) -> Observed {
    let survey = panel.survey;
    let mut o = Observed::default();
    for (p, r) in people.iter().enumerate() {
        let earlier = panel.earlier.get(p).map_or("", String::as_str);
        for q in &survey.questions {
            let order: Vec<usize> = (0..q.options.len()).collect();
            let prompt = match cfg.raw.answers.mode {
                AnswerMode::Verbalized => q.shares_prompt_in(survey.context.as_deref(), r, &order, earlier),
                AnswerMode::Sample | AnswerMode::Probabilities => {
                    q.prompt_in(survey.context.as_deref(), r, &order, earlier)
                }
            };
            o.add(estimate_tokens(&prompt) as f64);
        }
    }
    o
}

/// The estimate of asking `panel` every question: `pilot`, when given, is
/// what each answer of the first respondents (`piloted`) took: its
/// attempts and their bill.
pub(super) fn estimate(
    cfg: &Config,
    panel: Asking<'_>,
    piloted: &[Respondent],
    pilot: Option<&[(u32, Spend)]>,
) -> Estimate {
    let cap = cfg.raw.chat.max_output_tokens as f64;
    let questions = panel.survey.questions.len() as f64;
    let people = panel.respondents.len() as f64;
    let runs = panel.runs;
    let reasons = cfg.raw.answers.mode != AnswerMode::Sample && cfg.raw.answers.reasons;
    let sampled = prompts(cfg, panel, &panel.respondents[..panel.respondents.len().min(SAMPLED)]);
    let base = sampled.mean().unwrap_or(0.0);
    let retry = match cfg.raw.answers.mode {
        AnswerMode::Probabilities => 1.0,
        AnswerMode::Sample | AnswerMode::Verbalized => 2.0,
    };
    let (mut per_ask, mut prompt, mut reply) = (Observed::default(), Observed::default(), Observed::default());
    let (mut input, mut hit) = (0u64, 0u64);
    for (attempts, spend) in pilot.into_iter().flatten().filter(|(n, _)| *n > 0) {
        let n = f64::from(*attempts);
        per_ask.add(n);
        prompt.add(spend.input_tokens as f64 / n);
        reply.add(spend.output_tokens as f64 / n);
        input += spend.input_tokens;
        hit += spend.cached_input_tokens;
    }
    let mut said = Vec::new();
    let answers = match (prompt.span(), reply.span(), per_ask.span()) {
        (Some(p), Some(r), Some(n)) => {
            let local = prompts(cfg, panel, piloted).mean().unwrap_or(0.0);
            let scale = if local > 0.0 { base / local } else { 1.0 };
            said.push(format!(
                "pilot: every question of the first {} respondent(s), {} answers; prompts took {:.0} to {:.0} tokens, replies {:.0} to {:.0} (mean {:.1}); the validation reuses them",
                piloted.len(),
                per_ask.n,
                p.low,
                p.high,
                r.low,
                r.high,
                r.expected
            ));
            Calls {
                what: "answers",
                count: Span::exact(runs * people * questions).times(n),
                prompt: Span::new(p.low * scale, p.expected * scale, p.high * scale),
                // A few replies do not show a model's longest: the high case
                // takes twice their mean (at least their longest), under the cap.
                reply: Span::new(r.low, r.expected, r.high.max(2.0 * r.expected).min(cap)),
            }
        }
        _ => {
            said.push(format!(
                "no pilot: replies priced at max_output_tokens ({cap}) in the expected and high cases, 1 token in the low case"
            ));
            Calls {
                what: "answers",
                count: Span::new(
                    runs * people * questions,
                    runs * people * questions,
                    runs * people * questions * retry,
                ),
                prompt: Span::exact(base),
                reply: Span::new(1.0, cap, cap),
            }
        }
    };
    let ratio = if base > 0.0 { answers.prompt.expected / base } else { 1.0 };
    let mut plan = vec![answers];
    if reasons {
        plan.push(Calls {
            what: "reasons",
            count: Span::new(people * questions, people * questions, 2.0 * people * questions),
            prompt: Span::exact(ratio * base),
            reply: Span::new(1.0, cap, cap),
        });
        said.push(format!(
            "the reasons ({:.0} questions asked again in sample mode) are not piloted: their replies are priced at max_output_tokens",
            people * questions
        ));
    }
    said.push(format!(
        "{:.0} questions ({people} respondents x {questions} questions x {runs} runs), counted",
        runs * people * questions
    ));
    // The second run asks the first run's prompts again: a prompt cache
    // may serve all of them (the low case).
    let share = if input > 0 { hit as f64 / input as f64 } else { 0.0 };
    let best = if runs > 1.0 { (share + 1.0) / 2.0 } else { share };
    if cfg.chat_price.cached_input_nano_per_mtok != cfg.chat_price.input_nano_per_mtok {
        said.push(format!(
            "prompt caching: {:.0}% of prompt tokens cached as in the pilot (low: {:.0}%, the second run's prompts being the first's; high: none)",
            100.0 * share,
            100.0 * best
        ));
    }
    let mut e = Estimate::priced(&plan, &cfg.chat_price, Span { low: best, expected: share, high: 0.0 });
    e.pilot = pilot.map(|answers| {
        let mut report = engine::estimate::PilotReport { jobs: 0, ..Default::default() };
        for (attempts, spend) in answers {
            report.jobs += 1;
            report.calls += u64::from(*attempts);
            report.spend.add(spend);
        }
        report
    });
    e.assumptions = said;
    e
}
