//! Scoring a synthetic panel against the people it stands for.
//!
//! The respondents are split at random (seeded) into two halves. The
//! demographic baseline is fitted on the first; every figure, the model's
//! included, is scored on the second, the held-out half. Each source of
//! answers (the model, a second run of it, the baselines) is compared with
//! the people on:
//!
//! - **distribution**: KS similarity (1 - D) for ordinal questions, total
//!   variation for nominal ones, the Wasserstein distance in scale points
//!   and the spread ratio (synthetic sd / human sd), ordinal only;
//! - **subgroups**: for each band of each subgroup, the human and the
//!   synthetic mean (for a nominal question, the share choosing its first
//!   option), and their correlation across all bands;
//! - **individuals**: exact-match and within-one rates against each
//!   respondent's own answer, and a confusion matrix.
//!
//! Baselines: uniform random answers; draws from the fitted half's
//! marginal distribution; and draws from the fitted half's distribution in
//! the respondent's demographic cell (every subgroup's band at once), or
//! the marginal where the cell holds fewer than [`MIN_CELL`] people.
//! Reliability is the model's agreement with its own second run.
//!
//! Every figure carries a 95% percentile interval over
//! [`Settings::resamples`] bootstrap resamples of the held-out respondents.
//!
//! With survey weights ([`normalised`]), every share, mean and rate is
//! weighted: the people's distribution, each source's, the band means,
//! the match rates, the forecast figures, the baselines' fitted counts
//! (a demographic cell still needs [`MIN_CELL`] people). The bootstrap
//! draws respondents with replacement, each carrying its weight. The
//! confusion matrix counts people, unweighted.

use crate::panel::Respondent;
use crate::question::{Kind, Survey};
use crate::stats;
use engine::rng::{Purpose, Stream};
use serde::Serialize;

/// Fewest fitted respondents a demographic cell needs before the baseline
/// draws from it rather than from the marginal.
pub const MIN_CELL: usize = 5;

/// Fewest held-out respondents a subgroup band needs to enter the
/// correlation across bands.
pub const MIN_BAND: usize = 5;

/// One synthetic answer: the option chosen (1 for the first), the pmf it
/// stands for in the panel's distribution (one-hot for a direct answer,
/// SSR's pmf otherwise), and the forecast it makes of the respondent's own
/// answer, which log-loss and the Brier score judge.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The option, from 1.
    pub point: u8,
    /// Probability of each option.
    pub pmf: Vec<f64>,
    /// The probability the source gives each option for this respondent;
    /// `None` for one sampled answer (a draw forecasts nothing, and its
    /// one-hot would score infinite log-loss on every miss). A baseline's
    /// is the distribution it draws from.
    pub forecast: Option<Vec<f64>>,
}

impl Answer {
    /// A direct answer: all mass on `point` of `k`.
    pub fn direct(point: u8, k: usize) -> Answer {
        let mut pmf = vec![0.0; k];
        pmf[usize::from(point) - 1] = 1.0;
        Answer { point, pmf, forecast: None }
    }

    /// A draw `point` from the distribution `forecast` (a baseline's
    /// answer): the draw enters the panel's distribution, the
    /// distribution is the forecast.
    pub fn drawn(point: u8, forecast: Vec<f64>) -> Answer {
        Answer { forecast: Some(forecast.clone()), ..Answer::direct(point, forecast.len()) }
    }

    /// An SSR answer: for an ordinal question the option nearest the pmf's
    /// expectation, for a nominal one the most likely option.
    pub fn from_pmf(pmf: Vec<f64>, kind: Kind) -> Answer {
        let point = match kind {
            Kind::Ordinal => stats::mean(&pmf).round().clamp(1.0, pmf.len() as f64) as u8,
            Kind::Nominal => (pmf.iter().enumerate().fold(0, |b, (i, p)| if *p > pmf[b] { i } else { b }) + 1) as u8,
        };
        Answer { point, forecast: Some(pmf.clone()), pmf }
    }
}

/// A named source of answers: `answers[q][r]`, `None` where the model
/// gave no valid answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Source {
    /// Its name in the report (`model (direct)`).
    pub name: String,
    /// Per question, per respondent.
    pub answers: Vec<Vec<Option<Answer>>>,
    /// For a calibrated model, per question: how much of its blend the
    /// model carries (1 for the model alone).
    pub model_weight: Option<Vec<f64>>,
}

impl Source {
    /// A source of `answers` named `name`.
    pub fn new(name: impl Into<String>, answers: Vec<Vec<Option<Answer>>>) -> Source {
        Source { name: name.into(), answers, model_weight: None }
    }
}

/// How the scoring draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settings {
    /// Seed of the split, the baselines and the bootstrap.
    pub seed: u64,
    /// Bootstrap resamples. Default 1,000.
    pub resamples: usize,
}

/// A figure and its 95% interval; `null` where it is undefined (a spread
/// ratio when the people do not vary, a correlation over too few bands).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figure {
    /// The value on the held-out half.
    pub value: Option<f64>,
    /// The 2.5th and 97.5th bootstrap percentiles.
    pub interval: Option<[f64; 2]>,
}

/// One source's figures on one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SourceScore {
    /// The source's name.
    pub name: String,
    /// Held-out respondents it answered (with a human answer).
    pub answered: usize,
    /// Held-out respondents with a human answer it gave none for.
    pub missing: usize,
    /// Its distribution over the options.
    pub pmf: Vec<f64>,
    /// 1 - KS distance (ordinal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ks_similarity: Option<Figure>,
    /// Total variation distance (nominal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_variation: Option<Figure>,
    /// Wasserstein distance in scale points (ordinal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wasserstein: Option<Figure>,
    /// Synthetic sd over human sd (ordinal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread_ratio: Option<Figure>,
    /// Correlation of human and synthetic band means across subgroups.
    pub subgroup_correlation: Figure,
    /// Share answering exactly as the respondent did.
    pub exact_match: Figure,
    /// Share within one option of the respondent (ordinal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub within_one: Option<Figure>,
    /// Mean log-loss (nats) of its forecasts of each respondent's answer;
    /// null for sampled answers (see `forecast_note`).
    pub log_loss: Figure,
    /// Mean (multi-class) Brier score of the same forecasts, 0 to 2.
    pub brier: Figure,
    /// Mean probability its forecasts give each respondent's own answer.
    pub own_probability: Figure,
    /// SimBench's score of its distribution: 100 x (1 - TV(it, people) /
    /// TV(uniform, people)); 0 is uniform's, 100 the people's own, below 0
    /// worse than uniform. Null when the people are uniform.
    pub simbench: Figure,
    /// Why its forecast figures are null, when they are.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forecast_note: Option<String>,
    /// For a calibrated model: how much of its blend the model carries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_weight: Option<f64>,
    /// Counts by (human option, synthetic option).
    pub confusion: Vec<Vec<u32>>,
}

/// One band's means.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BandScore {
    /// The subgroup's name.
    pub subgroup: String,
    /// The band's label.
    pub band: String,
    /// Held-out respondents in it with a human answer.
    pub n: usize,
    /// The people's mean (share of the first option, for nominal).
    pub human: Figure,
    /// Each source's mean, in the sources' order.
    pub sources: Vec<Figure>,
}

/// The model's agreement with its own second run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reliability {
    /// The runs compared.
    pub runs: [String; 2],
    /// Share of respondents given the same option by both.
    pub exact_match: Figure,
    /// Distribution agreement: 1 - KS distance (ordinal) or 1 - total
    /// variation (nominal).
    pub distribution_similarity: Figure,
}

/// Everything scored on one question.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuestionScore {
    /// The question's id.
    pub id: String,
    /// Ordinal or nominal.
    pub kind: Kind,
    /// Its options.
    pub options: Vec<String>,
    /// Held-out respondents with a human answer.
    pub held_out: usize,
    /// The people's distribution on the held-out half.
    pub human_pmf: Vec<f64>,
    /// The people's mean and sd (ordinal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub human_mean_sd: Option<[f64; 2]>,
    /// Each source, the model's first.
    pub sources: Vec<SourceScore>,
    /// Means by subgroup band.
    pub bands: Vec<BandScore>,
    /// The model against its second run, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reliability: Option<Reliability>,
    /// The model against the imputer, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versus_imputer: Option<Versus>,
}

/// The model (the first source) against the imputer on one question: the
/// mean difference in one figure over the held-out respondents both
/// answered (a respondent the model gave no answer is left out of both),
/// with a paired bootstrap interval (each resample scores both on the same
/// respondents).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Versus {
    /// `log_loss` when the model forecasts (lower is better), else
    /// `exact_match` (higher is better).
    pub figure: &'static str,
    /// The model's figure minus the imputer's.
    pub difference: Figure,
    /// `beats`, `loses to` or `ties with`: whether the interval lies
    /// wholly on the model's side, wholly on the imputer's, or covers 0.
    pub verdict: &'static str,
}

/// The source name of the imputer baseline ([`crate::impute`]).
pub const IMPUTER: &str = "imputer";

/// The model against the imputer: the paired difference in log-loss
/// (lower is better) when the model forecasts, else in exact match.
fn versus(full: &Draw, draws: &[Draw]) -> Option<Versus> {
    let m = if full.paired[0].is_some() { 0 } else { 1 };
    let diff = |d: &Draw| d.paired[m];
    let difference = figure(diff(full), draws.iter().map(diff));
    let [lo, hi] = difference.interval?;
    let better = if m == 0 { hi < 0.0 } else { lo > 0.0 };
    let worse = if m == 0 { lo > 0.0 } else { hi < 0.0 };
    Some(Versus {
        figure: if m == 0 { "log_loss" } else { "exact_match" },
        difference,
        verdict: if better {
            "beats"
        } else if worse {
            "loses to"
        } else {
            "ties with"
        },
    })
}

/// The whole score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scores {
    /// Respondents scored (the sample).
    pub respondents: usize,
    /// Of which in the fitted half.
    pub fitted: usize,
    /// Of which in the held-out half.
    pub held_out: usize,
    /// Bootstrap resamples behind each interval.
    pub resamples: usize,
    /// Per question, in the survey's order.
    pub questions: Vec<QuestionScore>,
}

/// Survey weights scaled to mean 1, so that all-equal weights are exactly
/// the unweighted figures (the baselines' half-count smoothing sees the
/// same counts), doubling every weight changes nothing, and multiplying
/// them by another constant changes nothing but rounding. `None` when
/// they sum to 0, or to more than a float holds.
pub fn normalised(raw: &[f64]) -> Option<Vec<f64>> {
    if raw.first().is_some_and(|w| *w > 0.0 && w.is_finite() && raw.iter().all(|x| x.to_bits() == w.to_bits())) {
        // All equal: exactly the unweighted figures, whatever the rounding
        // of n / total would give.
        return Some(vec![1.0; raw.len()]);
    }
    let total: f64 = raw.iter().sum();
    let scale = raw.len() as f64 / total;
    (total > 0.0 && total.is_finite() && scale.is_finite()).then(|| raw.iter().map(|w| w * scale).collect())
}

/// Which half each respondent is in: `true` for held out. A seeded
/// shuffle, the first half (rounded down) fitted.
pub fn held_out(n: usize, seed: u64) -> Vec<bool> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut s = Stream::derive(seed, 0, 1, Purpose::Survey);
    s.shuffle(&mut order);
    let mut out = vec![true; n];
    order.iter().take(n / 2).for_each(|&i| out[i] = false);
    out
}

/// The baselines for `survey`: uniform, marginal and demographic answers
/// for every respondent, fitted on the respondents not `held_out`.
pub fn baselines(
    survey: &Survey,
    respondents: &[Respondent],
    human: &[Vec<Option<u8>>],
    weights: &[f64],
    held_out: &[bool],
    seed: u64,
) -> Vec<Source> {
    let cells: Vec<Vec<Option<usize>>> =
        respondents.iter().map(|r| survey.subgroups.iter().map(|g| g.band_of(r)).collect()).collect();
    let mut uniform = Vec::new();
    let mut marginal = Vec::new();
    let mut demographic = Vec::new();
    for (q, question) in survey.questions.iter().enumerate() {
        let k = question.options.len();
        let mut s = Stream::derive(seed, q as u32 + 1, 2, Purpose::Survey);
        let fitted = |r: usize| !held_out[r];
        let mut counts = vec![0.0; k];
        // Per cell: the weighted counts, and how many people they are.
        let mut by_cell: std::collections::BTreeMap<&[Option<usize>], (Vec<f64>, usize)> = Default::default();
        for (r, a) in human[q].iter().enumerate() {
            if let (Some(a), true) = (a, fitted(r)) {
                counts[usize::from(*a) - 1] += weights[r];
                let cell = by_cell.entry(&cells[r]).or_insert_with(|| (vec![0.0; k], 0));
                cell.0[usize::from(*a) - 1] += weights[r];
                cell.1 += 1;
            }
        }
        let draw = |s: &mut Stream, weights: &[f64]| {
            let total: f64 = weights.iter().sum();
            let pick = if total > 0.0 { s.weighted(weights) } else { s.below(k) };
            Some(Answer::drawn(pick as u8 + 1, stats::smoothed(weights)))
        };
        let (mut u, mut m, mut d) = (Vec::new(), Vec::new(), Vec::new());
        for cell in &cells {
            u.push(Some(Answer::drawn(s.below(k) as u8 + 1, vec![1.0 / k as f64; k])));
            m.push(draw(&mut s, &counts));
            let in_cell = by_cell.get(cell.as_slice()).filter(|c| c.1 >= MIN_CELL).map(|c| &c.0);
            d.push(draw(&mut s, in_cell.unwrap_or(&counts)));
        }
        uniform.push(u);
        marginal.push(m);
        demographic.push(d);
    }
    vec![Source::new("uniform", uniform), Source::new("marginal", marginal), Source::new("demographic", demographic)]
}

/// The figures of one resample: per source, in [`SourceScore`]'s order,
/// then the bands' human and source means, then reliability's two.
struct Draw {
    sources: Vec<[Option<f64>; 11]>,
    /// The model minus the imputer, over the respondents both answered:
    /// mean log-loss (where both forecast), exact-match rate.
    paired: [Option<f64>; 2],
    bands: Vec<Vec<Option<f64>>>,
    reliability: [Option<f64>; 2],
}

/// One question's data, restricted to the held-out half.
struct Question<'a> {
    kind: Kind,
    k: usize,
    human: Vec<u8>,
    /// Each held-out respondent's weight (all 1 when unweighted).
    weight: Vec<f64>,
    sources: Vec<Vec<Option<&'a Answer>>>,
    bands: Vec<(usize, usize, Vec<usize>)>,
    rerun: Option<Vec<Option<&'a Answer>>>,
    /// The imputer's index among the sources, when there is one.
    imputer: Option<usize>,
}

impl Question<'_> {
    fn nominal_share(a: &Answer) -> f64 {
        a.pmf[0]
    }

    fn value(&self, a: &Answer) -> f64 {
        match self.kind {
            Kind::Ordinal => stats::mean(&a.pmf),
            Kind::Nominal => Self::nominal_share(a),
        }
    }

    fn human_value(&self, h: u8) -> f64 {
        match self.kind {
            Kind::Ordinal => f64::from(h),
            Kind::Nominal => f64::from(u8::from(h == 1)),
        }
    }

    /// Every figure over the respondents `sample` (indices into the
    /// held-out half, repeats allowed).
    fn draw(&self, sample: &[usize]) -> Draw {
        let ordinal = self.kind == Kind::Ordinal;
        let mut members = vec![0u32; self.human.len()];
        sample.iter().for_each(|&i| members[i] += 1);
        // Each drawn respondent carries its weight, once per draw.
        let band_mean = |values: &dyn Fn(usize) -> Option<f64>, band: &[usize]| {
            let (mut sum, mut n) = (0.0, 0.0);
            for &i in band {
                if let (Some(v), m @ 1..) = (values(i), members[i]) {
                    let w = f64::from(m) * self.weight[i];
                    sum += v * w;
                    n += w;
                }
            }
            (n > 0.0).then(|| sum / n)
        };
        let human_band: Vec<Option<f64>> =
            self.bands.iter().map(|(_, _, b)| band_mean(&|i| Some(self.human_value(self.human[i])), b)).collect();
        let band_sizes: Vec<u32> = self.bands.iter().map(|(_, _, b)| b.iter().map(|&i| members[i]).sum()).collect();
        let mut bands = vec![human_band.clone()];
        let mut sources = Vec::new();
        for answers in &self.sources {
            let (mut hc, mut sp, mut exact, mut within, mut n) = (vec![0.0; self.k], vec![0.0; self.k], 0.0, 0.0, 0.0);
            let (mut ll, mut br, mut own_p, mut nf) = (0.0, 0.0, 0.0, 0.0);
            for &i in sample {
                let Some(a) = answers[i] else { continue };
                let (h, w) = (self.human[i], self.weight[i]);
                hc[usize::from(h) - 1] += w;
                sp.iter_mut().zip(&a.pmf).for_each(|(x, p)| *x += w * p);
                exact += w * f64::from(u8::from(a.point == h));
                within += w * f64::from(u8::from(a.point.abs_diff(h) <= 1));
                n += w;
                if let Some(f) = &a.forecast {
                    ll += w * stats::log_loss(f, h);
                    br += w * stats::brier(f, h);
                    own_p += w * f[usize::from(h) - 1];
                    nf += w;
                }
            }
            let (hp, sp) = (stats::pmf(&hc), stats::pmf(&sp));
            let own: Vec<Option<f64>> =
                self.bands.iter().map(|(_, _, b)| band_mean(&|i| answers[i].map(|a| self.value(a)), b)).collect();
            let (mut hx, mut sx) = (Vec::new(), Vec::new());
            for ((h, s), size) in human_band.iter().zip(&own).zip(&band_sizes) {
                if let (Some(h), Some(s), true) = (h, s, *size as usize >= MIN_BAND) {
                    hx.push(*h);
                    sx.push(*s);
                }
            }
            let some = n > 0.0;
            let hsd = stats::sd(&hp);
            let uniform_tv = stats::total_variation(&vec![1.0 / self.k as f64; self.k], &hp);
            let forecasts = nf > 0.0;
            sources.push([
                (some && ordinal).then(|| 1.0 - stats::ks_distance(&hp, &sp)),
                (some && !ordinal).then(|| stats::total_variation(&hp, &sp)),
                (some && ordinal).then(|| stats::wasserstein(&hp, &sp)),
                (some && ordinal && hsd > 0.0).then(|| stats::sd(&sp) / hsd),
                stats::pearson(&hx, &sx),
                some.then(|| exact / n),
                (some && ordinal).then(|| within / n),
                forecasts.then(|| ll / nf),
                forecasts.then(|| br / nf),
                forecasts.then(|| own_p / nf),
                (some && uniform_tv > 0.0).then(|| 100.0 * (1.0 - stats::total_variation(&sp, &hp) / uniform_tv)),
            ]);
            bands.push(own);
        }
        let reliability = self.rerun.as_ref().map_or([None, None], |rerun| {
            let (mut a, mut b, mut same, mut n) = (vec![0.0; self.k], vec![0.0; self.k], 0.0, 0.0);
            for &i in sample {
                if let (Some(x), Some(y)) = (self.sources[0][i], rerun[i]) {
                    let w = self.weight[i];
                    a.iter_mut().zip(&x.pmf).for_each(|(s, p)| *s += w * p);
                    b.iter_mut().zip(&y.pmf).for_each(|(s, p)| *s += w * p);
                    same += w * f64::from(u8::from(x.point == y.point));
                    n += w;
                }
            }
            let (a, b) = (stats::pmf(&a), stats::pmf(&b));
            let similarity =
                if ordinal { 1.0 - stats::ks_distance(&a, &b) } else { 1.0 - stats::total_variation(&a, &b) };
            [(n > 0.0).then(|| same / n), (n > 0.0).then_some(similarity)]
        });
        let paired = self.imputer.map_or([None, None], |j| {
            let (mut ll, mut nl, mut exact, mut n) = (0.0, 0.0, 0.0, 0.0);
            for &i in sample {
                let (Some(a), Some(b)) = (self.sources[0][i], self.sources[j][i]) else { continue };
                let (h, w) = (self.human[i], self.weight[i]);
                exact += w * (f64::from(u8::from(a.point == h)) - f64::from(u8::from(b.point == h)));
                n += w;
                if let (Some(fa), Some(fb)) = (&a.forecast, &b.forecast) {
                    ll += w * (stats::log_loss(fa, h) - stats::log_loss(fb, h));
                    nl += w;
                }
            }
            [(nl > 0.0).then(|| ll / nl), (n > 0.0).then(|| exact / n)]
        });
        Draw { sources, paired, bands, reliability }
    }
}

/// A figure of `value` with the 95% interval of its `resampled` values.
pub(crate) fn figure(value: Option<f64>, resampled: impl Iterator<Item = Option<f64>>) -> Figure {
    let mut values: Vec<f64> = resampled.flatten().collect();
    Figure { value, interval: value.and(stats::interval95(&mut values)) }
}

/// Source `j`'s figures on one question: `full` over the held-out half,
/// `draws` over the bootstrap resamples.
fn source_score(j: usize, source: &Source, q: usize, data: &Question<'_>, full: &Draw, draws: &[Draw]) -> SourceScore {
    let name = &source.name;
    let ordinal = data.kind == Kind::Ordinal;
    let v = full.sources[j];
    let fig = |m: usize| figure(v[m], draws.iter().map(|d| d.sources[j][m]));
    let opt = |m: usize| v[m].is_some().then(|| fig(m));
    let mut confusion = vec![vec![0u32; data.k]; data.k];
    let mut pmf = vec![0.0; data.k];
    let mut answered = 0;
    for (i, a) in data.sources[j].iter().enumerate() {
        if let Some(a) = a {
            confusion[usize::from(data.human[i]) - 1][usize::from(a.point) - 1] += 1;
            pmf.iter_mut().zip(&a.pmf).for_each(|(x, p)| *x += data.weight[i] * p);
            answered += 1;
        }
    }
    SourceScore {
        name: name.to_string(),
        answered,
        missing: data.human.len() - answered,
        pmf: stats::pmf(&pmf),
        ks_similarity: if ordinal { opt(0) } else { None },
        total_variation: if ordinal { None } else { opt(1) },
        wasserstein: if ordinal { opt(2) } else { None },
        spread_ratio: ordinal.then(|| fig(3)),
        subgroup_correlation: fig(4),
        exact_match: fig(5),
        within_one: if ordinal { opt(6) } else { None },
        log_loss: fig(7),
        brier: fig(8),
        own_probability: fig(9),
        simbench: fig(10),
        forecast_note: (answered > 0 && data.sources[j].iter().flatten().all(|a| a.forecast.is_none())).then(|| {
            "one sampled answer per respondent forecasts nothing (a one-hot answer scores infinite log-loss on \
             every miss): log-loss, Brier and own-answer probability need a forecast (--answer-mode probabilities, \
             SSR or --calibrate)"
                .to_string()
        }),
        model_weight: source.model_weight.as_ref().and_then(|w| w.get(q).copied()),
        confusion,
    }
}

/// Scores `sources` (the model's first; `rerun`, when given, is the
/// model's second run) against the people's answers `human[q][r]`, each
/// respondent weighted by `weights[r]` (see [`normalised`]).
pub fn score(
    survey: &Survey,
    respondents: &[Respondent],
    human: &[Vec<Option<u8>>],
    weights: &[f64],
    sources: &[Source],
    rerun: Option<&Source>,
    settings: Settings,
) -> Scores {
    let split = held_out(respondents.len(), settings.seed);
    let mut questions = Vec::new();
    for (q, question) in survey.questions.iter().enumerate() {
        let rows: Vec<usize> = (0..respondents.len()).filter(|&r| split[r] && human[q][r].is_some()).collect();
        let mut bands = Vec::new();
        for (g, group) in survey.subgroups.iter().enumerate() {
            for b in 0..group.bands.len() {
                let members =
                    rows.iter().enumerate().filter(|(_, &r)| group.band_of(&respondents[r]) == Some(b)).map(|(i, _)| i);
                bands.push((g, b, members.collect()));
            }
        }
        fn pick<'s>(s: &'s Source, q: usize, rows: &[usize]) -> Vec<Option<&'s Answer>> {
            rows.iter().map(|&r| s.answers[q][r].as_ref()).collect()
        }
        let data = Question {
            kind: question.kind,
            k: question.options.len(),
            human: rows.iter().map(|&r| human[q][r].expect("rows have a human answer; this is a bug")).collect(),
            weight: rows.iter().map(|&r| weights[r]).collect(),
            sources: sources.iter().map(|s| pick(s, q, &rows)).collect(),
            bands,
            rerun: rerun.map(|s| pick(s, q, &rows)),
            imputer: sources.iter().position(|s| s.name == IMPUTER),
        };
        let all: Vec<usize> = (0..rows.len()).collect();
        let full = data.draw(&all);
        let mut s = Stream::derive(settings.seed, q as u32 + 1, 3, Purpose::Survey);
        let draws: Vec<Draw> = (0..settings.resamples)
            .map(|_| {
                let sample: Vec<usize> = (0..rows.len()).map(|_| s.below(rows.len().max(1))).collect();
                data.draw(&sample)
            })
            .collect();
        let fig = |value: Option<f64>, get: &dyn Fn(&Draw) -> Option<f64>| figure(value, draws.iter().map(get));
        let mut human_counts = vec![0.0; data.k];
        data.human.iter().zip(&data.weight).for_each(|(h, w)| human_counts[usize::from(*h) - 1] += w);
        let human_pmf = stats::pmf(&human_counts);
        let ordinal = question.kind == Kind::Ordinal;
        let scores: Vec<SourceScore> =
            sources.iter().enumerate().map(|(j, src)| source_score(j, src, q, &data, &full, &draws)).collect();
        let band_scores = data
            .bands
            .iter()
            .enumerate()
            .map(|(b, (g, band, members))| BandScore {
                subgroup: survey.subgroups[*g].name.clone(),
                band: survey.subgroups[*g].bands[*band].label.clone(),
                n: members.len(),
                human: fig(full.bands[0][b], &|d| d.bands[0][b]),
                sources: (0..sources.len()).map(|j| fig(full.bands[j + 1][b], &|d| d.bands[j + 1][b])).collect(),
            })
            .collect();
        let reliability = rerun.map(|r| Reliability {
            runs: [sources[0].name.clone(), r.name.clone()],
            exact_match: fig(full.reliability[0], &|d| d.reliability[0]),
            distribution_similarity: fig(full.reliability[1], &|d| d.reliability[1]),
        });
        questions.push(QuestionScore {
            id: question.id.clone(),
            kind: question.kind,
            options: question.options.clone(),
            held_out: rows.len(),
            human_pmf: human_pmf.clone(),
            human_mean_sd: ordinal.then(|| [stats::mean(&human_pmf), stats::sd(&human_pmf)]),
            sources: scores,
            bands: band_scores,
            reliability,
            versus_imputer: data.imputer.and_then(|_| versus(&full, &draws)),
        });
    }
    let held = split.iter().filter(|h| **h).count();
    Scores {
        respondents: respondents.len(),
        fitted: respondents.len() - held,
        held_out: held,
        resamples: settings.resamples,
        questions,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Suite;

    /// Log-loss and Brier by hand: a forecast of (0.5, 0.3, 0.2).
    #[test]
    fn log_loss_and_brier_score_a_forecast() {
        let f = [0.5, 0.3, 0.2];
        assert!((stats::log_loss(&f, 2) - 0.3f64.ln().abs()).abs() < 1e-15);
        // (0.5)^2 + (0.3 - 1)^2 + (0.2)^2 = 0.25 + 0.49 + 0.04
        assert!((stats::brier(&f, 2) - 0.78).abs() < 1e-12);
        assert!((stats::log_loss(&[1.0, 0.0], 2) - 1e6f64.ln()).abs() < 1e-9, "floored, not infinite");
        assert_eq!(stats::smoothed(&[3.0, 0.0, 1.0]), vec![3.5 / 5.5, 0.5 / 5.5, 1.5 / 5.5]);
    }

    fn perfect(suite: &Suite) -> Source {
        let answers = suite
            .answers
            .by_question
            .iter()
            .zip(&suite.survey.questions)
            .map(|(column, q)| column.iter().map(|a| a.map(|p| Answer::direct(p, q.options.len()))).collect())
            .collect();
        Source::new("the people themselves", answers)
    }

    /// The people scored against themselves get every figure at its best,
    /// and the baselines fall in their expected order.
    #[test]
    fn the_people_themselves_score_perfectly_and_baselines_do_not() {
        let suite = Suite::builtin("anes96").expect("built in");
        let (people, human) = (&suite.panel.respondents, &suite.answers.by_question);
        let split = held_out(people.len(), 42);
        assert_eq!(split.iter().filter(|h| **h).count(), 472);
        let mut sources = vec![perfect(&suite)];
        let ones = vec![1.0; people.len()];
        sources.extend(baselines(&suite.survey, people, human, &ones, &split, 42));
        let scores = score(
            &suite.survey,
            people,
            human,
            &ones,
            &sources,
            Some(&perfect(&suite)),
            Settings { seed: 42, resamples: 200 },
        );
        assert_eq!((scores.fitted, scores.held_out), (472, 472));
        let close = |f: &Figure, want: f64| (f.value.expect("defined") - want).abs() < 1e-9;
        for q in &scores.questions {
            let me = &q.sources[0];
            assert!(close(&me.exact_match, 1.0) && close(&me.subgroup_correlation, 1.0), "{}", q.id);
            let rel = q.reliability.as_ref().expect("rerun given");
            assert!(close(&rel.exact_match, 1.0) && close(&rel.distribution_similarity, 1.0));
            let [uniform, marginal, demographic] = [&q.sources[1], &q.sources[2], &q.sources[3]];
            let exact = |s: &SourceScore| s.exact_match.value.expect("defined");
            assert!(exact(uniform) < exact(marginal) + 0.05 && exact(marginal) < 0.6, "{}: guessing is poor", q.id);
            assert_eq!(me.confusion.iter().flatten().sum::<u32>() as usize, q.held_out);
            // Forecasts: a baseline's is the distribution it draws from, so
            // uniform's log-loss is ln k exactly; sampled answers have none.
            let ll = |s: &SourceScore| s.log_loss.value.expect("a baseline forecasts");
            let k = q.options.len() as f64;
            assert!((ll(uniform) - k.ln()).abs() < 1e-12, "{}: uniform's log-loss {} is not ln {k}", q.id, ll(uniform));
            assert!(ll(marginal) < ll(uniform) && ll(demographic) < ll(uniform) + 0.05, "{}", q.id);
            let own = uniform.own_probability.value.expect("defined");
            assert!(
                (own - 1.0 / k).abs() < 1e-12
                    && (uniform.brier.value.expect("defined") - (1.0 - 1.0 / k)).abs() < 1e-12
            );
            assert!(me.log_loss.value.is_none() && me.brier.value.is_none() && me.forecast_note.is_some());
            assert!(close(&me.simbench, 100.0), "{}: the people's own distribution scores 100", q.id);
            assert!(uniform.forecast_note.is_none());
            if q.kind == Kind::Ordinal {
                let ks = |s: &SourceScore| s.ks_similarity.and_then(|f| f.value).expect("ordinal");
                assert!(close(me.ks_similarity.as_ref().expect("ks"), 1.0));
                assert!(close(me.wasserstein.as_ref().expect("w"), 0.0));
                assert!(close(me.spread_ratio.as_ref().expect("sd"), 1.0));
                assert!(ks(uniform) < ks(marginal) && ks(uniform) < ks(demographic), "{}", q.id);
                let [lo, hi] = marginal.ks_similarity.and_then(|f| f.interval).expect("an interval");
                assert!(lo <= ks(marginal) && ks(marginal) <= hi && hi - lo > 0.01, "a real interval: [{lo}, {hi}]");
            } else {
                assert!(close(me.total_variation.as_ref().expect("tv"), 0.0));
                assert!(me.within_one.is_none() && me.spread_ratio.is_none(), "nominal has no points");
            }
        }
    }
}
