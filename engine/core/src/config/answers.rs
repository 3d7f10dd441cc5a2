//! `[answers]`: how closed questions are answered (the mode, the option
//! order, reasons asked apart, the calibrations a run applies), and the one
//! reading of the mode's and the order's names.

use serde::{Deserialize, Serialize};

/// How a closed question (a survey question in `validate`) is answered.
///
/// Its names are spelled once, in [`AnswerMode::as_str`], and read once,
/// by its [`std::str::FromStr`]: the config (through serde), the CLI's
/// `--answer-mode` and the Python binding all parse with it.
///
/// ```
/// use engine::config::AnswerMode;
/// assert_eq!("verbalized".parse::<AnswerMode>(), Ok(AnswerMode::Verbalized));
/// assert_eq!(
///     "logits".parse::<AnswerMode>().unwrap_err(),
///     r#""logits": expected "sample", "probabilities" or "verbalized""#
/// );
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum AnswerMode {
    /// One sampled answer per persona, with its reason (the default).
    #[default]
    Sample,
    /// The model's probability of each option at the answer slot; no
    /// reason is generated.
    Probabilities,
    /// The persona is asked what share of people like it would choose
    /// each option, and replies with one share per option (validated and
    /// normalised; a malformed reply is retried like any other).
    Verbalized,
}

impl AnswerMode {
    /// Every mode, in the order messages list them.
    pub const ALL: [AnswerMode; 3] = [AnswerMode::Sample, AnswerMode::Probabilities, AnswerMode::Verbalized];

    /// Its name in the config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerMode::Sample => "sample",
            AnswerMode::Probabilities => "probabilities",
            AnswerMode::Verbalized => "verbalized",
        }
    }
}

/// The one reading of a name among `all` (as `name` spells them); the error
/// quotes what was given and lists what is accepted.
fn parse_name<T: Copy>(given: &str, all: &[T], name: impl Fn(T) -> &'static str) -> std::result::Result<T, String> {
    all.iter().copied().find(|v| name(*v) == given).ok_or_else(|| {
        let names: Vec<String> = all.iter().map(|v| format!("{:?}", name(*v))).collect();
        let list = match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.join(""),
        };
        format!("{given:?}: expected {list}")
    })
}

impl std::str::FromStr for AnswerMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        parse_name(s, &Self::ALL, Self::as_str)
    }
}

impl TryFrom<String> for AnswerMode {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        s.parse()
    }
}

impl From<AnswerMode> for &'static str {
    fn from(m: AnswerMode) -> &'static str {
        m.as_str()
    }
}

/// The order a closed question's options are shown in. Named and parsed
/// as [`AnswerMode`] is, in one place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "&'static str")]
pub enum AnswerOrder {
    /// As the question lists them (the default).
    #[default]
    AsAsked,
    /// A seeded permutation per persona and question, the answer mapped
    /// back: it controls the first- and last-option biases.
    Permuted,
}

impl AnswerOrder {
    /// Every order, in the order messages list them.
    pub const ALL: [AnswerOrder; 2] = [AnswerOrder::AsAsked, AnswerOrder::Permuted];

    /// Its name in the config and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            AnswerOrder::AsAsked => "as_asked",
            AnswerOrder::Permuted => "permuted",
        }
    }
}

impl std::str::FromStr for AnswerOrder {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        parse_name(s, &Self::ALL, Self::as_str)
    }
}

impl TryFrom<String> for AnswerOrder {
    type Error = String;
    fn try_from(s: String) -> std::result::Result<Self, String> {
        s.parse()
    }
}

impl From<AnswerOrder> for &'static str {
    fn from(o: AnswerOrder) -> &'static str {
        o.as_str()
    }
}

/// `[answers]`: how closed questions are answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnswersSection {
    /// `sample` (default), `probabilities` or `verbalized`.
    pub mode: AnswerMode,
    /// `as_asked` (default) or `permuted`.
    pub order: AnswerOrder,
    /// In `probabilities` or `verbalized` mode, `validate` also asks each
    /// question once in `sample` mode for the reason alone, which SSR then
    /// rates (default false: no reason is generated, and SSR is skipped).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub reasons: bool,
    /// The calibrations a run applies to its probes (`run --calibration
    /// FILE` resolves them from a `validate --calibrate` file into the
    /// run's configuration, so that replay needs no file).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calibrated: Vec<ProbeCalibration>,
    /// In `probabilities` mode on an OpenAI-compatible server: when the
    /// options hold less than this share of the answer token's top 20
    /// alternatives, the options are weighed again with their label tokens
    /// raised by `logit_bias`, and read from that second answer (default
    /// 0.5; 0 never asks again, 1 always does).
    #[serde(skip_serializing_if = "AnswersSection::is_default_min_option_mass")]
    pub min_option_mass: f64,
}

/// The default of `answers.min_option_mass`.
pub const DEFAULT_MIN_OPTION_MASS: f64 = 0.5;

impl Default for AnswersSection {
    fn default() -> Self {
        AnswersSection {
            mode: AnswerMode::default(),
            order: AnswerOrder::default(),
            reasons: false,
            calibrated: Vec::new(),
            min_option_mass: DEFAULT_MIN_OPTION_MASS,
        }
    }
}

/// A calibration a run applies to one probe: the probe's distribution p
/// becomes `w x temper(p, T) + (1 - w) x marginal`, with `temper(p, T)` =
/// p^(1/T) renormalised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeCalibration {
    /// The probe's id.
    pub probe: String,
    /// The calibrated question's id in the file, and the file's question
    /// digest.
    pub question: String,
    /// The question digest the file gave.
    pub digest: String,
    /// The temperature T.
    pub temperature: f64,
    /// The model's weight w in the blend.
    pub weight: f64,
    /// The fitted half's marginal distribution over the options.
    pub marginal: Vec<f64>,
}

impl ProbeCalibration {
    /// `p` calibrated.
    pub fn apply(&self, p: &[f64]) -> Vec<f64> {
        let t = self.temperature;
        let logs: Vec<Option<f64>> = p.iter().map(|x| (*x > 0.0).then(|| x.ln() / t)).collect();
        let top = logs.iter().flatten().fold(f64::NEG_INFINITY, |a, b| a.max(*b));
        let raw: Vec<f64> = logs.iter().map(|l| l.map_or(0.0, |l| (l - top).exp())).collect();
        let total: f64 = raw.iter().sum();
        raw.iter()
            .zip(&self.marginal)
            .map(|(r, m)| self.weight * if total > 0.0 { r / total } else { 0.0 } + (1.0 - self.weight) * m)
            .collect()
    }
}

impl AnswersSection {
    /// Whether it is the default (and so left out of the canonical form,
    /// which keeps every digest made before it existed).
    pub fn is_default(&self) -> bool {
        *self == AnswersSection::default()
    }

    fn is_default_min_option_mass(m: &f64) -> bool {
        m.to_bits() == DEFAULT_MIN_OPTION_MASS.to_bits()
    }
}
