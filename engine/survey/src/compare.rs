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

/// The models' ranking from the pairs among them.
fn ranking(models: &[&str], pairs: &[Pair], value: impl Fn(usize) -> (Option<f64>, &'static str)) -> Vec<Standing> {
    let mut out: Vec<Standing> = models
        .iter()
        .enumerate()
        .map(|(m, name)| {
            let beaten_by = pairs
                .iter()
                .filter(|p| {
                    (p.b == *name && p.verdict == "a better" && models.contains(&p.a.as_str()))
                        || (p.a == *name && p.verdict == "b better" && models.contains(&p.b.as_str()))
                })
                .count();
            let (value, figure) = value(m);
            Standing { name: (*name).to_string(), rank: 1 + beaten_by, figure, value }
        })
        .collect();
    out.sort_by(|x, y| {
        let lower_first = x.figure == "log_loss";
        let v = |s: &Standing| s.value.unwrap_or(if lower_first { f64::INFINITY } else { f64::NEG_INFINITY });
        let by_value = if lower_first { v(x).total_cmp(&v(y)) } else { v(y).total_cmp(&v(x)) };
        x.rank.cmp(&y.rank).then(by_value)
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
        let log_loss = (0..models.len()).all(|m| (0..models.len()).all(|o| m == o || d.forecasts(m, o)))
            && (models.len() > 1 || d.forecasts(0, 0));
        let ranked = ranking(model_names, &out_pairs, |m| {
            (d.own(m, log_loss, weights), if log_loss { "log_loss" } else { "exact_match" })
        });
        questions.push(QuestionComparison {
            question: survey.questions[q].id.clone(),
            pairs: out_pairs,
            ranking: ranked,
        });
    }
    // Overall: each pair's per-question differences averaged, on the same
    // resamples; the figure is log-loss when it was on every question.
    let mut overall = Vec::new();
    for (p, &(a, b)) in pairs.iter().enumerate() {
        let log_loss = data.iter().all(|d| d.forecasts(a, b));
        let mean = |per_q: &[Vec<PairDraw>], get: &dyn Fn(&PairDraw) -> Option<f64>| {
            let values: Option<Vec<f64>> = per_q.iter().map(|x| get(&x[p])).collect();
            values.filter(|v| !v.is_empty()).map(|v| v.iter().sum::<f64>() / v.len() as f64)
        };
        let main = |x: &PairDraw| pick(x, log_loss);
        let dist = |x: &PairDraw| x.distribution;
        let difference = figure(mean(&full, &main), draws.iter().map(|x| mean(x, &main)));
        overall.push(Pair {
            a: names[a].to_string(),
            b: names[b].to_string(),
            figure: if log_loss { "log_loss" } else { "exact_match" },
            verdict: verdict(log_loss, &difference),
            difference,
            distribution_figure: "distribution_score",
            distribution_difference: figure(mean(&full, &dist), draws.iter().map(|x| mean(x, &dist))),
        });
    }
    let log_loss = data.iter().all(|d| (0..models.len()).all(|m| (0..models.len()).all(|o| d.forecasts(m, o))));
    let ranking = ranking(model_names, &overall, |m| {
        let values: Option<Vec<f64>> = data.iter().map(|d| d.own(m, log_loss, weights)).collect();
        (
            values.map(|v| v.iter().sum::<f64>() / v.len().max(1) as f64),
            if log_loss { "log_loss" } else { "exact_match" },
        )
    });
    Comparison { questions, overall, ranking }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::Answer;
    use crate::Suite;

    /// Models that forecast each respondent's own answer with 0.9, 0.6 and
    /// 0.6 (the rest spread evenly): the first beats both, the other two
    /// tie with each other exactly; against uniform, all win; the ranking
    /// follows. The differences are the log-loss gaps, computed by hand.
    #[test]
    fn a_better_model_ranks_first_and_equal_models_tie() {
        let suite = Suite::builtin("anes96").expect("built in");
        let human = &suite.answers.by_question;
        let n = suite.panel.respondents.len();
        let model = |name: &str, own: f64| {
            let answers = suite
                .survey
                .questions
                .iter()
                .zip(human)
                .map(|(q, column)| {
                    let k = q.options.len();
                    column
                        .iter()
                        .map(|h| {
                            h.map(|h| {
                                let rest = (1.0 - own) / (k - 1) as f64;
                                let f: Vec<f64> =
                                    (1..=k).map(|o| if o == usize::from(h) { own } else { rest }).collect();
                                Answer::from_pmf(f, q.kind)
                            })
                        })
                        .collect()
                })
                .collect();
            Source::new(name, answers)
        };
        let models = [model("good", 0.9), model("fair", 0.6), model("same", 0.6)];
        let uniform = Source::new(
            "uniform",
            suite
                .survey
                .questions
                .iter()
                .zip(human)
                .map(|(q, c)| {
                    let k = q.options.len();
                    c.iter().map(|h| h.map(|_| Answer::from_pmf(vec![1.0 / k as f64; k], q.kind))).collect()
                })
                .collect(),
        );
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

    fn question_pair<'a>(q: &'a QuestionComparison, a: &str, b: &str) -> &'a Pair {
        q.pairs.iter().find(|p| p.a == a && p.b == b).expect("the pair")
    }
}
