//! The aggregates of a recorded run that its report shows: built from the
//! trace alone (no model call), one tick frame at a time, so that memory
//! stays bounded by the panel size (a few bytes per persona), never by the
//! number of outcomes.
//!
//! [`Builder::tick`] takes the frames in order; [`Builder::finish`] gives
//! the [`Analysis`]. Reactions are picked in a second pass
//! ([`Picker`]), once each stimulus's mean is known.

use crate::config::Config;
use crate::error::Error;
use crate::memory::Change;
use crate::persona::profile::{Profile, Traits};
use crate::store::trace::record::{Header, RunEnd, TickFrame};
use crate::turn::{Outcome, Status};

use crate::summary::Distribution;
use serde::Serialize;
use std::collections::BTreeMap;

mod picks;

pub use picks::{observation_vectors, Picker};

/// The traits a report can cross intent with.
pub const TRAITS: &[&str] = &["age", "income", "city", "occupation", "interests"];

/// Cells with fewer respondents than this are shown greyed out.
pub const MIN_CELL: u64 = 5;

/// SSR over one stimulus and tick: the mean pmf and expected rating.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SsrCell {
    /// Respondents rated.
    pub n: u64,
    /// Mean pmf.
    pub pmf: [f64; 5],
    /// Mean expected rating.
    pub expected: f64,
}

/// One stimulus over the ticks.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StimulusIntent {
    /// Stimulus id.
    pub stimulus: String,
    /// Per tick (1-based, in order): the direct distribution.
    pub ticks: BTreeMap<u32, Distribution>,
    /// Per tick: SSR, when the run measured it.
    pub ssr: BTreeMap<u32, SsrCell>,
    /// All ticks together.
    pub all: Distribution,
    /// Sum of sentiment and count of positive reactions, all ticks.
    #[serde(skip)]
    sentiment: (f64, u64),
}

/// One cell of a crosstab.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Cell {
    /// Respondents.
    pub n: u64,
    /// Mean intent (direct).
    pub mean_intent: f64,
    /// Share of reactions with positive sentiment.
    pub positive_share: f64,
    /// Fewer than [`MIN_CELL`] respondents: shown greyed out.
    pub small: bool,
    #[serde(skip)]
    sums: (u64, u64),
}

/// Mean intent and positive share by one trait's values, per stimulus.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Segments {
    /// The trait.
    pub by: String,
    /// Whether a persona can hold several values (then it counts in the
    /// cell of each).
    pub many_valued: bool,
    /// Its values, in table order.
    pub values: Vec<String>,
    /// Per stimulus, one cell per value.
    pub cells: BTreeMap<String, Vec<Cell>>,
    /// The largest difference in mean intent between two of its segments
    /// (cells of at least [`MIN_CELL`] respondents), over the stimuli:
    /// tables are shown largest first.
    pub largest_difference: f64,
}

/// Typical and unusual reactions to one stimulus.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Picks {
    /// Stimulus id.
    pub stimulus: String,
    /// Closest to the stimulus's mean (intent, sentiment).
    pub typical: Vec<Pick>,
    /// Farthest from it.
    pub unusual: Vec<Pick>,
}

/// One picked reaction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pick {
    /// Persona label.
    pub persona: String,
    /// Tick.
    pub tick: u32,
    /// Intent.
    pub intent: u8,
    /// Sentiment.
    pub sentiment: f32,
    /// The words.
    pub text: String,
    #[serde(skip)]
    distance: f64,
}

/// Money and tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Costs {
    /// nano-USD by stage: chat, retrieval embedding, memory embedding.
    pub by_stage: BTreeMap<String, u64>,
    /// nano-USD by model.
    pub by_model: BTreeMap<String, u64>,
    /// Chat input, chat output and embedding input tokens.
    pub tokens: BTreeMap<String, u64>,
    /// Embedding port invocations, texts submitted upstream (after dedup),
    /// texts served from the cache, physical requests.
    pub embedding: BTreeMap<String, u64>,
    /// The ten most expensive personas: (label, nano-USD).
    pub top_personas: Vec<(String, u64)>,
    /// The price table's label, and what each model's price is.
    pub price_label: String,
    /// `nominal`, `configured` or `local`, for chat and embedding.
    pub price_kinds: BTreeMap<String, String>,
    /// What SSR's texts cost (part of the memory-embedding stage).
    pub ssr_nano_usd: u64,
    /// What a chat prompt token served from the provider's cache costs.
    pub cached_input_price: String,
}

/// Memory over one tick.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MemoryTick {
    /// Tick.
    pub tick: u32,
    /// Memories created, by kind.
    pub created: BTreeMap<String, u64>,
    /// Promotions.
    pub promoted: u64,
    /// Expiries.
    pub expired: u64,
    /// Clusters formed.
    pub clustered: u64,
    /// Records per tier at the end of the tick: working, shortTerm,
    /// longTerm, expired (new memories enter working).
    pub tiers: BTreeMap<String, u64>,
}

/// Failures of one stage and cause.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FailureGroup {
    /// The stage (or `refused`).
    pub stage: String,
    /// The cause.
    pub cause: String,
    /// Jobs.
    pub count: u64,
    /// The first few: (tick, persona label, stimulus).
    pub first: Vec<(u32, String, String)>,
}

/// The run at a glance.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Overview {
    /// Panel size.
    pub personas: u32,
    /// Ticks asked for.
    pub ticks: u32,
    /// Ticks in the trace.
    pub ticks_recorded: u32,
    /// Scenario origin.
    pub scenario: String,
    /// Seed.
    pub seed: u64,
    /// Chat model and whether it is scripted, modelled or live.
    pub chat_model: String,
    /// `scripted`, `modelled` or `live`.
    pub chat_kind: String,
    /// Embedding model.
    pub embedding_model: String,
    /// Its provider.
    pub embedding_provider: String,
    /// How intent was measured.
    pub intent_method: String,
    /// The last digests.
    pub digest: String,
    /// The last full digest.
    pub full_digest: String,
    /// `finished`, `stopped early: ...` or `unfinished`.
    pub status: String,
    /// The engine that recorded it.
    pub engine_version: String,
    /// Jobs, ok, failed, refused.
    pub jobs: [u64; 4],
}

/// Everything the report shows.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Analysis {
    /// At a glance.
    pub overview: Overview,
    /// Intent per stimulus.
    pub intent: Vec<StimulusIntent>,
    /// Crosstabs, largest differences first.
    pub segments: Vec<Segments>,
    /// Typical and unusual reactions.
    pub reactions: Vec<Picks>,
    /// How reactions were picked.
    pub reactions_method: String,
    /// Probe answers.
    pub probes: BTreeMap<String, Distribution>,
    /// Costs.
    pub costs: Costs,
    /// Memory per tick.
    pub memory: Vec<MemoryTick>,
    /// Failures, most frequent first.
    pub failures: Vec<FailureGroup>,
}

/// One trait's value indices per persona (a bit set for interests).
struct TraitIndex {
    name: String,
    values: Vec<String>,
    many: bool,
    of: Vec<u64>,
}

fn age_band(traits: &Traits, age: u8) -> usize {
    traits.age_bands.iter().position(|b| (b.min..=b.max).contains(&age)).unwrap_or(0)
}

impl TraitIndex {
    /// An empty index of trait `name`'s values.
    fn new(name: &str, traits: &Traits) -> crate::Result<TraitIndex> {
        let values: Vec<String> = match name {
            "age" => traits.age_bands.iter().map(|b| format!("{}-{}", b.min, b.max)).collect(),
            "income" => traits.income_bands.iter().map(|b| b.label.to_string()).collect(),
            "city" => traits.cities.iter().map(|c| c.name.to_string()).collect(),
            "occupation" => traits.occupations.iter().map(|o| o.to_string()).collect(),
            "interests" => traits.interests.iter().map(|i| i.to_string()).collect(),
            other => return Err(Error::UnknownTrait { name: other.into(), known: TRAITS.join(", ") }),
        };
        let many = name == "interests";
        if many && values.len() > 64 {
            return Err(Error::Fixture {
                source_name: "trace header trait table".into(),
                field: "interests".into(),
                cause: format!("{} interests; a report crosses at most 64", values.len()),
            });
        }
        Ok(TraitIndex { name: name.into(), values, many, of: Vec::new() })
    }

    /// Records the next persona's value(s).
    fn push(&mut self, p: &Profile, traits: &Traits) {
        let position = |v: &str| self.values.iter().position(|x| x == v).unwrap_or(0) as u64;
        let value = match self.name.as_str() {
            "age" => age_band(traits, p.age) as u64,
            "income" => position(&p.income),
            "city" => position(&p.city),
            "occupation" => position(&p.occupation),
            _ => p.interests.iter().fold(0u64, |bits, i| bits | 1 << position(i)),
        };
        self.of.push(value);
    }

    fn cells_of(&self, persona: u32) -> Vec<usize> {
        let v = self.of.get(persona as usize).copied().unwrap_or(0);
        if self.many {
            (0..self.values.len()).filter(|i| v & (1 << i) != 0).collect()
        } else {
            vec![v as usize]
        }
    }
}

/// Builds an [`Analysis`] frame by frame.
pub struct Builder {
    a: Analysis,
    traits: Vec<TraitIndex>,
    stimuli: BTreeMap<String, StimulusIntent>,
    segments: Vec<BTreeMap<String, Vec<Cell>>>,
    failures: BTreeMap<(String, String), FailureGroup>,
    spend: Vec<u64>,
    ssr_sums: BTreeMap<(String, u32), ([f64; 5], f64)>,
    strategy: crate::embed::Strategy,
    /// Records per tier so far, and the tier of each record ever promoted
    /// (the rest are in working until they expire).
    tiers: BTreeMap<String, u64>,
    promoted_to: std::collections::HashMap<crate::memory::RecordId, crate::memory::Tier>,
    /// Per stimulus, the sum of its observation memories' vectors and
    /// their count; `None` once a tick could not be matched (the report
    /// then picks by intent and sentiment throughout).
    centroids: Option<BTreeMap<String, (Vec<f64>, u64)>>,
}

impl Builder {
    /// A builder for the run `header` describes, crossing intent with the
    /// traits `by` (from [`TRAITS`]). Fails on an unknown trait, naming it.
    pub fn new(header: &Header, config: &Config, by: &[String]) -> crate::Result<Builder> {
        let traits = Traits::from_toml(&header.traits_source, "trace header trait table")?;
        let table = traits;
        let mut traits: Vec<TraitIndex> = by.iter().map(|t| TraitIndex::new(t, &table)).collect::<Result<_, _>>()?;
        // Each persona is drawn once, whatever the number of traits.
        if !traits.is_empty() {
            for id in 0..header.personas {
                let Some(p) = crate::persona::profile::draw(config, &table, header.seed, id) else { continue };
                traits.iter_mut().for_each(|t| t.push(&p, &table));
            }
        }
        let raw = &config.raw;
        let chat_kind = match raw.chat.provider {
            crate::config::ChatProvider::Scripted => "scripted",
            crate::config::ChatProvider::Modelled => "modelled",
            crate::config::ChatProvider::Openai => "live",
            crate::config::ChatProvider::Gguf => "local",
        };
        let overview = Overview {
            personas: header.personas,
            ticks: header.ticks,
            scenario: header.scenario_origin.clone(),
            seed: header.seed,
            chat_model: raw.chat.model.clone(),
            chat_kind: chat_kind.into(),
            embedding_model: raw.embedding.model.clone(),
            embedding_provider: format!("{:?}", raw.embedding.provider).to_lowercase(),
            intent_method: format!("{:?}", raw.intent.method).to_lowercase(),
            status: "unfinished (resume it with `sim-cli run --resume DIR`)".into(),
            engine_version: header.engine_version.clone(),
            ..Default::default()
        };
        let costs = Costs {
            price_label: raw.prices.label.clone(),
            cached_input_price: raw.prices.cached_input_description(&raw.chat.model),
            price_kinds: BTreeMap::from([
                ("chat".to_string(), config.chat_price_label.as_str().to_string()),
                ("embedding".to_string(), config.embedding_price_label.as_str().to_string()),
            ]),
            ..Default::default()
        };
        let mut a = Analysis { overview, costs, ..Default::default() };
        // A probe on its own scale is drawn over its options, whichever
        // were chosen.
        let scenario = crate::scenario::Scenario::from_toml(&header.scenario_source, "trace header scenario")?;
        for p in scenario.probes.iter().filter(|p| !p.options.is_empty()) {
            a.probes.insert(p.id.clone(), Distribution::with_points(p.points()));
        }
        Ok(Builder {
            segments: vec![BTreeMap::new(); traits.len()],
            traits,
            a,
            stimuli: BTreeMap::new(),
            failures: BTreeMap::new(),
            spend: vec![0; header.personas as usize],
            ssr_sums: BTreeMap::new(),
            strategy: header.strategy,
            tiers: BTreeMap::new(),
            promoted_to: std::collections::HashMap::new(),
            centroids: (raw.embedding.model() != crate::config::EmbeddingModel::Disabled).then(BTreeMap::new),
        })
    }

    /// Adds one tick frame.
    pub fn tick(&mut self, frame: &TickFrame) {
        self.a.overview.ticks_recorded += 1;
        self.a.overview.digest = frame.digests.digest.hex();
        self.a.overview.full_digest = frame.digests.full_digest.hex();
        for o in &frame.outcomes {
            self.outcome(frame.tick, o);
        }
        let e = &mut self.a.costs.embedding;
        for x in &frame.embeddings {
            *e.entry("port invocations".into()).or_default() += 1;
            *e.entry("texts submitted".into()).or_default() += u64::from(x.texts);
            let (calls, hits) = match &x.result {
                Ok((_, calls, hits)) => (calls, *hits),
                Err((_, calls)) => (calls, 0),
            };
            *e.entry("texts served from the cache".into()).or_default() += hits;
            *e.entry("physical requests".into()).or_default() += calls.len() as u64;
        }
        self.centroid(frame);
        let mut m = MemoryTick { tick: frame.tick, ..Default::default() };
        for mem in &frame.memories {
            *m.created.entry(format!("{:?}", mem.kind).to_lowercase()).or_default() += 1;
        }
        let working = crate::memory::Tier::Working;
        *self.tiers.entry(working.as_str().into()).or_default() += frame.memories.len() as u64;
        for (_, changes) in &frame.consolidation {
            for c in changes {
                match c {
                    Change::Promoted { record, tier, .. } => {
                        m.promoted += 1;
                        let from = self.promoted_to.insert(record.origin(), *tier).unwrap_or(working);
                        self.move_tier(from, *tier);
                    }
                    Change::Expired { record, .. } => {
                        m.expired += 1;
                        let from = self.promoted_to.remove(&record.origin()).unwrap_or(working);
                        self.move_tier(from, crate::memory::Tier::Expired);
                    }
                    Change::Clustered { .. } => m.clustered += 1,
                    Change::Created { .. }
                    | Change::Decayed { .. }
                    | Change::Accessed { .. }
                    | Change::PromotionBlocked { .. }
                    | Change::Reset { .. }
                    | Change::Queued { .. }
                    | Change::Closed { .. } => {}
                }
            }
        }
        m.tiers = self.tiers.clone();
        self.a.memory.push(m);
    }

    fn move_tier(&mut self, from: crate::memory::Tier, to: crate::memory::Tier) {
        let count = self.tiers.entry(from.as_str().into()).or_default();
        *count = count.saturating_sub(1);
        *self.tiers.entry(to.as_str().into()).or_default() += 1;
    }

    fn centroid(&mut self, frame: &TickFrame) {
        let Some(sums) = self.centroids.as_mut() else { return };
        let Some(found) = observation_vectors(frame, self.strategy) else {
            self.centroids = None;
            return;
        };
        for (i, v) in found {
            let Some(o) = frame.outcomes.get(frame.memories[i].position as usize) else { continue };
            let (sum, n) = sums.entry(o.stimulus.clone()).or_insert_with(|| (vec![0.0; v.len()], 0));
            sum.iter_mut().zip(v).for_each(|(a, b)| *a += f64::from(*b));
            *n += 1;
        }
    }

    /// Per stimulus, the mean vector of its observation memories, when
    /// every tick's could be read (empty otherwise).
    pub fn centroids(&self) -> BTreeMap<String, Vec<f64>> {
        self.centroids
            .iter()
            .flatten()
            .map(|(k, (sum, n))| (k.clone(), sum.iter().map(|x| x / (*n).max(1) as f64).collect()))
            .collect()
    }

    /// The embedding strategy the run used (how its stage submitted texts).
    pub fn strategy(&self) -> crate::embed::Strategy {
        self.strategy
    }

    fn outcome(&mut self, tick: u32, o: &Outcome) {
        let jobs = &mut self.a.overview.jobs;
        jobs[0] += 1;
        let persona = crate::persona::profile::label(o.persona);
        let (stage, cause) = match &o.status {
            Status::Ok => {
                jobs[1] += 1;
                (None, "")
            }
            Status::Failed { stage, reason } => {
                jobs[2] += 1;
                (Some(format!("{stage:?}")), reason.as_str())
            }
            Status::Refused { reason } => {
                jobs[3] += 1;
                (Some("refused".to_string()), reason.as_str())
            }
        };
        if let Some(stage) = stage {
            let g = self.failures.entry((stage.clone(), cause.to_string())).or_default();
            g.stage = stage;
            g.cause = cause.to_string();
            g.count += 1;
            if g.first.len() < 3 {
                g.first.push((tick, persona.clone(), o.stimulus.clone()));
            }
        }
        self.costs(o);
        for p in &o.probes {
            let d = self.a.probes.entry(p.id.clone()).or_default();
            match &p.reply {
                Some(r) => {
                    d.add(r.answer);
                    if let Some(pmf) = r.probabilities() {
                        d.add_pmf(&pmf);
                    }
                }
                None => d.unparsed += 1,
            }
        }
        let (Status::Ok, Some(r)) = (&o.status, &o.reaction) else { return };
        let s = self.stimuli.entry(o.stimulus.clone()).or_default();
        s.stimulus = o.stimulus.clone();
        s.ticks.entry(tick).or_default().add(r.intent);
        s.all.add(r.intent);
        if let Some(pmf) = o.intent_probabilities() {
            s.ticks.entry(tick).or_default().add_pmf(&pmf);
            s.all.add_pmf(&pmf);
        }
        s.sentiment.0 += f64::from(r.sentiment);
        s.sentiment.1 += u64::from(r.sentiment > 0.0);
        if let Some(ssr) = &o.ssr {
            let cell = s.ssr.entry(tick).or_default();
            let sums = self.ssr_sums.entry((o.stimulus.clone(), tick)).or_insert(([0.0; 5], 0.0));
            sums.0.iter_mut().zip(ssr.pmf).for_each(|(a, b)| *a += b);
            sums.1 += ssr.expected;
            cell.n += 1;
            cell.pmf = sums.0.map(|x| x / cell.n as f64);
            cell.expected = sums.1 / cell.n as f64;
        }
        for (t, index) in self.traits.iter().enumerate() {
            let row =
                self.segments[t].entry(o.stimulus.clone()).or_insert_with(|| vec![Cell::default(); index.values.len()]);
            for v in index.cells_of(o.persona) {
                let c = &mut row[v];
                c.n += 1;
                c.sums.0 += u64::from(r.intent);
                c.sums.1 += u64::from(r.sentiment > 0.0);
            }
        }
    }

    fn costs(&mut self, o: &Outcome) {
        let c = &mut self.a.costs;
        let s = &o.spend;
        for (stage, spend) in [
            ("chat", s.chat),
            ("retrieval embedding", s.retrieval_embedding_estimate),
            ("memory embedding", s.memory_embedding_estimate),
        ] {
            *c.by_stage.entry(stage.into()).or_default() += spend.nano_usd;
        }
        *c.tokens.entry("chat input".into()).or_default() += s.chat.input_tokens;
        if s.chat.cached_input_tokens > 0 {
            *c.tokens.entry("chat input from the prompt cache".into()).or_default() += s.chat.cached_input_tokens;
        }
        *c.tokens.entry("chat output".into()).or_default() += s.chat.output_tokens;
        let embedding = s.retrieval_embedding_estimate.input_tokens + s.memory_embedding_estimate.input_tokens;
        *c.tokens.entry("embedding input".into()).or_default() += embedding;
        c.ssr_nano_usd += o.ssr.as_ref().map_or(0, |r| r.cost.nano_usd);
        if let Some(total) = self.spend.get_mut(o.persona as usize) {
            *total += s.total().nano_usd;
        }
    }

    /// The end frame of a finished run.
    pub fn end(&mut self, end: &RunEnd) {
        self.a.overview.digest = end.digests.digest.hex();
        self.a.overview.full_digest = end.digests.full_digest.hex();
        self.a.overview.status = match &end.stopped {
            Some(s) => format!("stopped early after tick {}: {}", s.after_tick, s.detail),
            None => "finished".into(),
        };
    }

    /// The aggregates; `config` names the models the costs go to.
    pub fn finish(mut self, config: &Config) -> Analysis {
        let c = &mut self.a.costs;
        let chat = c.by_stage.get("chat").copied().unwrap_or(0);
        let embed = c.by_stage.iter().filter(|(k, _)| k.as_str() != "chat").map(|(_, v)| *v).sum::<u64>();
        c.by_model.insert(config.raw.chat.model.clone(), chat);
        *c.by_model.entry(config.raw.embedding.model.clone()).or_default() += embed;
        let mut top: Vec<(u32, u64)> = self.spend.iter().enumerate().map(|(i, s)| (i as u32, *s)).collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        c.top_personas = top.into_iter().take(10).map(|(i, s)| (crate::persona::profile::label(i), s)).collect();
        self.a.intent = self.stimuli.into_values().collect();
        for (t, index) in self.traits.iter().enumerate() {
            let mut table = Segments {
                by: index.name.clone(),
                many_valued: index.many,
                values: index.values.clone(),
                cells: std::mem::take(&mut self.segments[t]),
                largest_difference: 0.0,
            };
            for row in table.cells.values_mut() {
                for cell in row.iter_mut() {
                    let n = cell.n.max(1) as f64;
                    cell.mean_intent = cell.sums.0 as f64 / n;
                    cell.positive_share = cell.sums.1 as f64 / n;
                    cell.small = cell.n < MIN_CELL;
                }
                let means: Vec<f64> = row.iter().filter(|c| !c.small).map(|c| c.mean_intent).collect();
                let spread = means.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                    - means.iter().copied().fold(f64::INFINITY, f64::min);
                if spread.is_finite() {
                    table.largest_difference = table.largest_difference.max(spread);
                }
            }
            self.a.segments.push(table);
        }
        self.a.segments.sort_by(|a, b| b.largest_difference.total_cmp(&a.largest_difference));
        let mut failures: Vec<FailureGroup> = self.failures.into_values().collect();
        failures.sort_by_key(|f| std::cmp::Reverse(f.count));
        self.a.failures = failures;
        self.a.reactions_method = if self.centroids.as_ref().is_some_and(|c| !c.is_empty()) {
            format!(
                "nearest to and farthest from the centroid of each stimulus's observation memories' vectors ({}, as the trace holds them)",
                config.raw.embedding.model
            )
        } else {
            "closest to and farthest from each stimulus's mean (intent, sentiment): the trace holds no vectors to match \
             (no embedding model, or a failed stage)"
                .into()
        };
        self.a
    }
}
