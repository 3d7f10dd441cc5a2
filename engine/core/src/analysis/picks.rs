//! The report's second pass over a run's frames: each stimulus's three
//! most typical and three most unusual reactions ([`Picker`]), once the
//! first pass ([`super::Builder`]) has given each stimulus's mean.

use super::{Analysis, Pick, Picks};
use crate::store::trace::record::TickFrame;
use crate::turn::{Outcome, Status};
use std::collections::BTreeMap;

/// The vectors of a tick's observation memories, by memory index in
/// `frame.memories`, when the trace lets them be matched exactly: every
/// job that reacted committed (so the memory stage's requests are the
/// committed memories, in order, then any SSR texts) and every memory
/// invocation succeeded. A batched stage submitted its texts deduplicated
/// in first-occurrence order; the per-persona strategies one invocation per
/// request. `None` otherwise.
pub fn observation_vectors(frame: &TickFrame, strategy: crate::embed::Strategy) -> Option<Vec<(usize, &[f32])>> {
    if frame.outcomes.iter().any(|o| o.reaction.is_some() && o.status != Status::Ok) {
        return None;
    }
    let mut vectors: Vec<&[f32]> = Vec::new();
    for x in frame.embeddings.iter().filter(|x| x.role == crate::embed::EmbedRole::Memory) {
        let Ok((v, _, _)) = &x.result else { return None };
        vectors.extend(v.0.iter().map(|v| &v[..]));
    }
    let mut index_of: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for (i, m) in frame.memories.iter().enumerate() {
        let slot = match strategy {
            crate::embed::Strategy::Batched => {
                let next = index_of.len();
                *index_of.entry(&*m.description).or_insert(next)
            }
            crate::embed::Strategy::PerConsumer | crate::embed::Strategy::PerConsumerConcurrent => i,
        };
        if m.kind == crate::persona::MemoryKind::Observation {
            out.push((i, *vectors.get(slot)?));
        }
    }
    Some(out)
}

/// The second pass: each stimulus's three most typical and three most
/// unusual reactions: nearest to and farthest from the centroid of its
/// observation memories' vectors when the trace holds them, else from its
/// mean (intent, sentiment).
pub struct Picker {
    means: BTreeMap<String, (f64, f64)>,
    centroids: BTreeMap<String, Vec<f32>>,
    strategy: crate::embed::Strategy,
    picks: BTreeMap<String, Picks>,
}

impl Picker {
    /// A picker against the first pass's means and centroids.
    pub fn new(a: &Analysis, centroids: BTreeMap<String, Vec<f64>>, strategy: crate::embed::Strategy) -> Picker {
        let means = a
            .intent
            .iter()
            .map(|s| (s.stimulus.clone(), (s.all.mean, s.sentiment.0 / s.all.n.max(1) as f64)))
            .collect();
        let centroids = centroids.into_iter().map(|(k, c)| (k, c.into_iter().map(|x| x as f32).collect())).collect();
        Picker { means, centroids, strategy, picks: BTreeMap::new() }
    }

    /// Looks at one tick's reactions.
    pub fn tick(&mut self, frame: &TickFrame) {
        if !self.centroids.is_empty() {
            if let Some(found) = observation_vectors(frame, self.strategy) {
                for (i, v) in found {
                    let m = &frame.memories[i];
                    let Some(o) = frame.outcomes.get(m.position as usize) else { continue };
                    let (Some(r), Some(c)) = (&o.reaction, self.centroids.get(&o.stimulus)) else { continue };
                    let distance = 1.0 - crate::embed::check::cosine(v, c);
                    self.offer(o, r, frame.tick, distance);
                }
                return;
            }
        }
        for o in &frame.outcomes {
            let (Status::Ok, Some(r), Some((mi, ms))) = (&o.status, &o.reaction, self.means.get(&o.stimulus)) else {
                continue;
            };
            // Intent spans 4, sentiment 2: scale both to [0, 1].
            let distance = ((f64::from(r.intent) - mi) / 4.0).hypot((f64::from(r.sentiment) - ms) / 2.0);
            self.offer(o, r, frame.tick, distance);
        }
    }

    fn offer(&mut self, o: &Outcome, r: &crate::persona::reply::Reaction, tick: u32, distance: f64) {
        let pick = Pick {
            persona: crate::persona::profile::label(o.persona),
            tick,
            intent: r.intent,
            sentiment: r.sentiment,
            text: r.text.clone(),
            distance,
        };
        let p = self.picks.entry(o.stimulus.clone()).or_default();
        p.stimulus = o.stimulus.clone();
        keep(&mut p.typical, pick.clone(), |a, b| a.distance < b.distance);
        keep(&mut p.unusual, pick, |a, b| a.distance > b.distance);
    }

    /// The picks, by stimulus.
    pub fn finish(self) -> Vec<Picks> {
        self.picks.into_values().collect()
    }
}

/// Keeps the best three by `better`, the earliest on a tie.
fn keep(list: &mut Vec<Pick>, p: Pick, better: fn(&Pick, &Pick) -> bool) {
    let at = list.iter().position(|q| better(&p, q)).unwrap_or(list.len());
    if at < 3 {
        list.insert(at, p);
        list.truncate(3);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_keep_the_three_closest_and_farthest() {
        let mut typical = Vec::new();
        for (i, d) in [0.5, 0.1, 0.9, 0.1, 0.3].into_iter().enumerate() {
            let p =
                Pick { persona: format!("p{i}"), tick: 1, intent: 3, sentiment: 0.0, text: String::new(), distance: d };
            keep(&mut typical, p, |a, b| a.distance < b.distance);
        }
        let names: Vec<&str> = typical.iter().map(|p| p.persona.as_str()).collect();
        assert_eq!(names, ["p1", "p3", "p4"], "closest first, the earlier of a tie first");
    }
}
