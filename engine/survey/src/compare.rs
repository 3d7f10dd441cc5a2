//! Several models compared on the same respondents.
//!
//! Every model answered the same survey for the same respondents, so each
//! comparison is paired: for each pair of models, and for each model
//! against each baseline, the difference in one figure over the held-out
//! respondents both answered, with a paired bootstrap interval (each
//! resample scores both on the same respondents, each carrying its weight).
//!
//! - The figure is the held-out log-loss (lower is better) when both
//!   forecast, else the exact-match rate (higher is better), as
//!   [`crate::score::Versus`] judges the model against the imputer.
//! - Beside it, the difference in the question's distribution figure: KS
//!   similarity for an ordinal question (higher is better), total
//!   variation for a nominal one (lower is better).
//! - Overall, the same differences averaged over the questions, from the
//!   same resamples.
//!
//! A model's rank is 1 plus the number of models whose difference with it
//! lies wholly on their side: models whose intervals cover 0 tie.

use crate::score::{figure, held_out, Answer, Figure, Settings, Source};
use crate::stats;
use crate::{Kind, Survey};
use engine::rng::{Purpose, Stream};
use serde::Serialize;

/// One source against another on one question (or overall).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pair {
    /// The first: a model.
    pub a: String,
    /// The second: another model, or a baseline.
    pub b: String,
    /// `log_loss` (lower is better) when both forecast, else `exact_match`
    /// (higher is better).
    pub figure: &'static str,
    /// a's figure minus b's, over the held-out respondents both answered.
    pub difference: Figure,
    /// `ks_similarity` (ordinal; higher is better) or `total_variation`
    /// (nominal; lower is better); overall, their mean, each question's
    /// turned so that higher is better (`distribution_score`).
    pub distribution_figure: &'static str,
    /// a's distribution figure minus b's, on the same respondents.
    pub distribution_difference: Figure,
    /// On `figure`: `a better`, `b better` or `tied` (the interval covers 0
    /// or is undefined).
    pub verdict: &'static str,
}

/// A model's place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Standing {
    /// The model.
    pub name: String,
    /// 1 plus the number of models better than it beyond doubt.
    pub rank: usize,
    /// The figure it was ranked on.
    pub figure: &'static str,
    /// Its value on the held-out half (overall: the mean over questions).
    pub value: Option<f64>,
}

/// The comparison on one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionComparison {
    /// The question's id.
    pub question: String,
    /// Each pair of models, then each model against each baseline.
    pub pairs: Vec<Pair>,
    /// The models, best first.
    pub ranking: Vec<Standing>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Per question, in the survey's order.
    pub questions: Vec<QuestionComparison>,
    /// Over every question: each pair's differences averaged.
    pub overall: Vec<Pair>,
    /// The models over every question, best first.
    pub ranking: Vec<Standing>,
}

/// What one pair gives on one question over some respondents: the forecast
/// difference (log-loss, when both forecast), the exact-match difference
/// and the distribution difference (higher-is-better form for overall
/// means: the ordinal similarity, or minus the total variation).
#[derive(Clone, Copy, Default)]
struct PairDraw {
    log_loss: Option<f64>,
    exact: Option<f64>,
    distribution: Option<f64>,
}

struct QuestionData<'a> {
    kind: Kind,
    k: usize,
    /// Respondent index -> its human answer, on the held-out half.
    human: Vec<Option<u8>>,
    sources: Vec<&'a [Option<Answer>]>,
}

impl QuestionData<'_> {
    fn pair(&self, x: usize, y: usize, sample: &[usize], weights: &[f64]) -> PairDraw {
        let (mut ll, mut nl, mut exact, mut n) = (0.0, 0.0, 0.0, 0.0);
        let (mut hc, mut xc, mut yc) = (vec![0.0; self.k], vec![0.0; self.k], vec![0.0; self.k]);
        for &r in sample {
            let (Some(h), Some(a), Some(b)) = (self.human[r], &self.sources[x][r], &self.sources[y][r]) else {
                continue;
            };
            let w = weights[r];
            exact += w * (f64::from(u8::from(a.point == h)) - f64::from(u8::from(b.point == h)));
            n += w;
            hc[usize::from(h) - 1] += w;
            xc.iter_mut().zip(&a.pmf).for_each(|(s, p)| *s += w * p);
            yc.iter_mut().zip(&b.pmf).for_each(|(s, p)| *s += w * p);
            if let (Some(fa), Some(fb)) = (&a.forecast, &b.forecast) {
                ll += w * (stats::log_loss(fa, h) - stats::log_loss(fb, h));
                nl += w;
            }
        }
        if n <= 0.0 {
            return PairDraw::default();
        }
        let (hp, xp, yp) = (stats::pmf(&hc), stats::pmf(&xc), stats::pmf(&yc));
        // Higher is better for both kinds here: x's KS similarity minus
        // y's, or y's total variation minus x's.
        let distribution = match self.kind {
            Kind::Ordinal => stats::ks_distance(&hp, &yp) - stats::ks_distance(&hp, &xp),
            Kind::Nominal => stats::total_variation(&hp, &yp) - stats::total_variation(&hp, &xp),
        };
        PairDraw { log_loss: (nl > 0.0).then(|| ll / nl), exact: Some(exact / n), distribution: Some(distribution) }
    }

    /// Whether both of `x` and `y` forecast every respondent both answered
    /// (and answered any).
    fn forecasts(&self, x: usize, y: usize) -> bool {
        let both: Vec<(&Answer, &Answer)> = self.sources[x]
            .iter()
            .zip(self.sources[y])
            .zip(&self.human)
            .filter_map(|((a, b), h)| Some((a.as_ref()?, b.as_ref()?)).filter(|_| h.is_some()))
            .collect();
        !both.is_empty() && both.iter().all(|(a, b)| a.forecast.is_some() && b.forecast.is_some())
    }

    /// Source `x`'s own figure on the held-out half: its mean log-loss, or
    /// its exact-match rate.
    fn own(&self, x: usize, log_loss: bool, weights: &[f64]) -> Option<f64> {
        let (mut sum, mut n) = (0.0, 0.0);
        for (r, (a, h)) in self.sources[x].iter().zip(&self.human).enumerate() {
            let (Some(a), Some(h)) = (a, h) else { continue };
            let v = match (log_loss, &a.forecast) {
                (true, Some(f)) => stats::log_loss(f, *h),
                (true, None) => continue,
                (false, _) => f64::from(u8::from(a.point == *h)),
            };
            sum += weights[r] * v;
            n += weights[r];
        }
        (n > 0.0).then(|| sum / n)
    }
}

fn verdict(log_loss: bool, difference: &Figure) -> &'static str {
    match difference.interval {
        Some([_, hi]) if log_loss && hi < 0.0 => "a better",
        Some([lo, _]) if log_loss && lo > 0.0 => "b better",
        Some([lo, _]) if !log_loss && lo > 0.0 => "a better",
        Some([_, hi]) if !log_loss && hi < 0.0 => "b better",
        _ => "tied",
    }
}

/// Whether model `i` is better than model `j` beyond doubt, `difference(p)`
/// being model pair `p`'s (the first minus the second) on the figure
/// (log-loss when `log_loss`, else exact match).
fn beats(pairs: &[(usize, usize)], log_loss: bool, i: usize, j: usize, difference: impl Fn(usize) -> Figure) -> bool {
    let Some(p) = pairs.iter().position(|&x| x == (i.min(j), i.max(j))) else { return false };
    verdict(log_loss, &difference(p)) == if i < j { "a better" } else { "b better" }
}

/// The models' ranking on one figure: `values[m]` is model m's (a model
/// with none, having answered nobody, is left out), and `beats(i, j)` says
/// whether model i is better than model j beyond doubt on that figure.
fn ranking(
    models: &[&str],
    values: &[Option<f64>],
    figure: &'static str,
    beats: impl Fn(usize, usize) -> bool,
) -> Vec<Standing> {
    let ranked: Vec<usize> = (0..models.len()).filter(|&m| values[m].is_some()).collect();
    let mut out: Vec<Standing> = ranked
        .iter()
        .map(|&m| Standing {
            name: models[m].to_string(),
            rank: 1 + ranked.iter().filter(|&&o| o != m && beats(o, m)).count(),
            figure,
            value: values[m],
        })
        .collect();
    let lower_first = figure == "log_loss";
    out.sort_by(|x, y| {
        let (a, b) = (x.value.unwrap_or(0.0), y.value.unwrap_or(0.0));
        x.rank.cmp(&y.rank).then(if lower_first { a.total_cmp(&b) } else { b.total_cmp(&a) })
    });
    out
}

/// Compares `models` (each the model's answers `[q][r]`, the model's name
/// its source name) with each other and with `baselines`, on the held-out
/// half of `settings.seed`'s split, each respondent weighted by
/// `weights[r]`. Every source answers the same respondents.
pub fn compare(
    survey: &Survey,
    human: &[Vec<Option<u8>>],
    weights: &[f64],
    models: &[Source],
    baselines: &[Source],
    settings: Settings,
) -> Comparison {
    let n = weights.len();
    let split = held_out(n, settings.seed);
    let rows: Vec<usize> = (0..n).filter(|&r| split[r]).collect();
    let sources: Vec<&Source> = models.iter().chain(baselines).collect();
    let data: Vec<QuestionData<'_>> = survey
        .questions
        .iter()
        .enumerate()
        .map(|(q, question)| QuestionData {
            kind: question.kind,
            k: question.options.len(),
            human: (0..n).map(|r| if split[r] { human[q][r] } else { None }).collect(),
            sources: sources.iter().map(|s| s.answers[q].as_slice()).collect(),
        })
        .collect();
    let pairs: Vec<(usize, usize)> =
        (0..models.len()).flat_map(|a| (a + 1..sources.len()).map(move |b| (a, b))).collect();
    let mut stream = Stream::derive(settings.seed, 0, 6, Purpose::Survey);
    let samples: Vec<Vec<usize>> = (0..settings.resamples)
        .map(|_| (0..rows.len()).map(|_| rows[stream.below(rows.len().max(1))]).collect())
        .collect();
    // [question][pair] over all held-out, and [draw][question][pair].
    let full: Vec<Vec<PairDraw>> =
        data.iter().map(|d| pairs.iter().map(|&(a, b)| d.pair(a, b, &rows, weights)).collect()).collect();
    let draws: Vec<Vec<Vec<PairDraw>>> = samples
        .iter()
        .map(|s| data.iter().map(|d| pairs.iter().map(|&(a, b)| d.pair(a, b, s, weights)).collect()).collect())
        .collect();
    let names: Vec<&str> = sources.iter().map(|s| s.name.as_str()).collect();
    let model_names = &names[..models.len()];
    let distribution_figure = |kind: Kind| if kind == Kind::Ordinal { "ks_similarity" } else { "total_variation" };
    let pick = |d: &PairDraw, log_loss: bool| if log_loss { d.log_loss } else { d.exact };
    let mut questions = Vec::new();
    for (q, d) in data.iter().enumerate() {
        let mut out_pairs = Vec::new();
        for (p, &(a, b)) in pairs.iter().enumerate() {
            let log_loss = d.forecasts(a, b);
            let difference = figure(pick(&full[q][p], log_loss), draws.iter().map(|x| pick(&x[q][p], log_loss)));
            // The distribution figure as the question states it (total
            // variation: lower is better, so the difference turns back).
            let sign = if d.kind == Kind::Ordinal { 1.0 } else { -1.0 };
            let dist = |x: &PairDraw| x.distribution.map(|v| sign * v);
            let distribution_difference = figure(dist(&full[q][p]), draws.iter().map(|x| dist(&x[q][p])));
            out_pairs.push(Pair {
                a: names[a].to_string(),
                b: names[b].to_string(),
                figure: if log_loss { "log_loss" } else { "exact_match" },
                verdict: verdict(log_loss, &difference),
                difference,
                distribution_figure: distribution_figure(d.kind),
                distribution_difference,
            });
        }
        // The ranking's one figure: log-loss when every model forecasts;
        // each pair of models judged on it.
        let log_loss = (0..models.len()).all(|m| d.forecasts(m, m));
        let values: Vec<Option<f64>> = (0..models.len()).map(|m| d.own(m, log_loss, weights)).collect();
        let difference = |p: usize| figure(pick(&full[q][p], log_loss), draws.iter().map(|x| pick(&x[q][p], log_loss)));
        let better = |i, j| beats(&pairs, log_loss, i, j, difference);
        let ranked = ranking(model_names, &values, if log_loss { "log_loss" } else { "exact_match" }, better);
        questions.push(QuestionComparison {
            question: survey.questions[q].id.clone(),
            pairs: out_pairs,
            ranking: ranked,
        });
    }
    // Overall: each pair's per-question differences averaged over the
    // questions where the pair has one, on the same resamples (a resample
    // missing one of those questions is dropped); the figure is log-loss
    // when it was on every question.
    let average = |p: usize, get: &dyn Fn(&PairDraw) -> Option<f64>| {
        let defined: Vec<usize> = (0..data.len()).filter(|&q| get(&full[q][p]).is_some()).collect();
        let mean = |per_q: &[Vec<PairDraw>]| {
            let values: Option<Vec<f64>> = defined.iter().map(|&q| get(&per_q[q][p])).collect();
            values.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64)
        };
        figure(mean(&full), draws.iter().map(|x| mean(x)))
    };
    let mut overall = Vec::new();
    for (p, &(a, b)) in pairs.iter().enumerate() {
        let log_loss = data.iter().all(|d| d.forecasts(a, b));
        let difference = average(p, &|x: &PairDraw| pick(x, log_loss));
        overall.push(Pair {
            a: names[a].to_string(),
            b: names[b].to_string(),
            figure: if log_loss { "log_loss" } else { "exact_match" },
            verdict: verdict(log_loss, &difference),
            difference,
            distribution_figure: "distribution_score",
            distribution_difference: average(p, &|x: &PairDraw| x.distribution),
        });
    }
    let log_loss = data.iter().all(|d| (0..models.len()).all(|m| d.forecasts(m, m)));
    let values: Vec<Option<f64>> = (0..models.len())
        .map(|m| {
            let own: Vec<f64> = data.iter().filter_map(|d| d.own(m, log_loss, weights)).collect();
            (!own.is_empty()).then(|| own.iter().sum::<f64>() / own.len() as f64)
        })
        .collect();
    let better = |i, j| beats(&pairs, log_loss, i, j, |p| average(p, &|x: &PairDraw| pick(x, log_loss)));
    let ranking = ranking(model_names, &values, if log_loss { "log_loss" } else { "exact_match" }, better);
    Comparison { questions, overall, ranking }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::Answer;
    use crate::Suite;

    /// A source answering respondent `r`, whose answer is `h`, to a question
    /// of `k` options, as `answer(r, h, k, kind)` says.
    fn source(suite: &Suite, name: &str, answer: &dyn Fn(usize, u8, usize, Kind) -> Option<Answer>) -> Source {
        let answers = suite
            .survey
            .questions
            .iter()
            .zip(&suite.answers.by_question)
            .map(|(q, column)| {
                column.iter().enumerate().map(|(r, h)| h.and_then(|h| answer(r, h, q.options.len(), q.kind))).collect()
            })
            .collect();
        Source::new(name, answers)
    }

    /// A forecast giving the answer `h` probability `own`, the rest spread.
    fn forecast(own: f64, h: u8, k: usize, kind: Kind) -> Answer {
        let rest = (1.0 - own) / (k - 1) as f64;
        Answer::from_pmf((1..=k).map(|o| if o == usize::from(h) { own } else { rest }).collect(), kind)
    }

    /// Models that forecast each respondent's own answer with 0.9, 0.6 and
    /// 0.6 (the rest spread evenly): the first beats both, the other two
    /// tie with each other exactly; against uniform, all win; the ranking
    /// follows. The differences are the log-loss gaps, computed by hand.
    #[test]
    fn a_better_model_ranks_first_and_equal_models_tie() {
        let suite = Suite::builtin("anes96").expect("built in");
        let human = &suite.answers.by_question;
        let n = suite.panel.respondents.len();
        let model = |name: &str, own: f64| source(&suite, name, &|_, h, k, kind| Some(forecast(own, h, k, kind)));
        let models = [model("good", 0.9), model("fair", 0.6), model("same", 0.6)];
        let uniform = source(&suite, "uniform", &|_, _, k, kind| Some(Answer::from_pmf(vec![1.0 / k as f64; k], kind)));
        let weights = vec![1.0; n];
        let c = compare(&suite.survey, human, &weights, &models, &[uniform], Settings { seed: 42, resamples: 200 });
        for (q, question) in c.questions.iter().zip(&suite.survey.questions) {
            let k = question.options.len() as f64;
            let pair = |a: &str, b: &str| question_pair(q, a, b);
            let good_fair = pair("good", "fair");
            assert_eq!((good_fair.figure, good_fair.verdict), ("log_loss", "a better"));
            let gap = good_fair.difference.value.expect("defined");
            assert!((gap - (0.6f64.ln() - 0.9f64.ln())).abs() < 1e-12, "{}: {gap}", q.question);
            let tie = pair("fair", "same");
            assert_eq!((tie.difference.value, tie.verdict), (Some(0.0), "tied"));
            let versus = pair("fair", "uniform");
            let want = -0.6f64.ln() - k.ln();
            assert!((versus.difference.value.expect("defined") - want).abs() < 1e-12, "{}", q.question);
            assert_eq!(versus.verdict, "a better");
            // The distribution figure as the question states it: fair's
            // pooled forecasts against uniform's, on the held-out half.
            let split = held_out(n, 42);
            let (mut hc, mut fc) = (vec![0.0; question.options.len()], vec![0.0; question.options.len()]);
            let qi = suite.survey.questions.iter().position(|x| x.id == q.question).expect("the question");
            for (r, h) in human[qi].iter().enumerate() {
                let (Some(h), true) = (h, split[r]) else { continue };
                hc[usize::from(*h) - 1] += 1.0;
                let f = models[1].answers[qi][r].as_ref().expect("answered");
                fc.iter_mut().zip(&f.pmf).for_each(|(s, p)| *s += p);
            }
            let (hp, fp, up) = (stats::pmf(&hc), stats::pmf(&fc), vec![1.0 / k; question.options.len()]);
            let want = match question.kind {
                Kind::Ordinal => stats::ks_distance(&hp, &up) - stats::ks_distance(&hp, &fp),
                Kind::Nominal => stats::total_variation(&hp, &fp) - stats::total_variation(&hp, &up),
            };
            let got = versus.distribution_difference.value.expect("defined");
            assert!((got - want).abs() < 1e-12, "{}: {got} against {want}", q.question);
            let ranks: Vec<(&str, usize)> = q.ranking.iter().map(|s| (s.name.as_str(), s.rank)).collect();
            assert_eq!(ranks, [("good", 1), ("fair", 2), ("same", 2)], "{}", q.question);
            assert_eq!(q.pairs.len(), 3 + 3, "three model pairs, three against the baseline");
        }
        let ranks: Vec<(&str, usize)> = c.ranking.iter().map(|s| (s.name.as_str(), s.rank)).collect();
        assert_eq!(ranks, [("good", 1), ("fair", 2), ("same", 2)]);
        assert_eq!(c.overall[0].verdict, "a better");
    }

    /// Pairing at work: two models whose forecasts swing from respondent to
    /// respondent, one always a little better, differ beyond doubt only
    /// because each resample scores both on the same respondents. Sampled
    /// answers are judged by exact match ("b better" when the second is
    /// right); a model that answered nobody is left out of the ranking.
    #[test]
    fn pairing_exact_match_and_a_silent_model() {
        let suite = Suite::builtin("anes96").expect("built in");
        let human = &suite.answers.by_question;
        let source =
            |name: &str, answer: &dyn Fn(usize, u8, usize, Kind) -> Option<Answer>| source(&suite, name, answer);
        let swing = |r: usize| 0.35 + 0.6 * ((r * 7919) % 100) as f64 / 100.0;
        let models = [
            source("worse", &|r, h, k, kind| Some(forecast(swing(r) - 0.02, h, k, kind))),
            source("better", &|r, h, k, kind| Some(forecast(swing(r), h, k, kind))),
            source("silent", &|_, _, _, _| None),
        ];
        let weights = vec![1.0; suite.panel.respondents.len()];
        let c = compare(&suite.survey, human, &weights, &models, &[], Settings { seed: 7, resamples: 300 });
        assert_eq!(c.questions.len(), suite.survey.questions.len());
        for q in &c.questions {
            let pair = question_pair(q, "worse", "better");
            let [lo, hi] = pair.difference.interval.expect("an interval");
            assert!(pair.verdict == "b better" && 0.0 < lo && hi < 0.1, "{}: [{lo}, {hi}]", q.question);
            let silent = question_pair(q, "worse", "silent");
            assert_eq!((silent.difference.value, silent.verdict), (None, "tied"));
            let ranks: Vec<(&str, usize)> = q.ranking.iter().map(|s| (s.name.as_str(), s.rank)).collect();
            assert_eq!(ranks, [("better", 1), ("worse", 2)], "{}: the silent model is left out", q.question);
        }
        let direct = [
            source("wrong", &|_, h, k, _| Some(Answer::direct((h % k as u8) + 1, k))),
            source("right", &|_, h, k, _| Some(Answer::direct(h, k))),
        ];
        let c = compare(&suite.survey, human, &weights, &direct, &[], Settings { seed: 7, resamples: 100 });
        for q in &c.questions {
            let pair = question_pair(q, "wrong", "right");
            assert_eq!((pair.figure, pair.difference.value, pair.verdict), ("exact_match", Some(-1.0), "b better"));
            assert_eq!(q.ranking[0].name, "right");
        }
        assert_eq!((c.ranking[0].name.as_str(), c.ranking[0].value), ("right", Some(1.0)));
    }

    fn question_pair<'a>(q: &'a QuestionComparison, a: &str, b: &str) -> &'a Pair {
        q.pairs.iter().find(|p| p.a == a && p.b == b).expect("the pair")
    }
}
