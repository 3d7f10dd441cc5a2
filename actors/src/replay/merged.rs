//! Re-running a merged run (`sim-cli merge`): each shard is re-run in turn
//! from its part of the merged trace, exactly as its own trace would
//! re-run it (its personas, its embedding invocations, its digests), and
//! the merged digests are recomputed from the frames. No answer is asked
//! of a model: a shard's invocations are the ones its part holds.

use super::{rerun_one, CassetteCounts, Divergence, How, Rerun};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::run::RunResult;
use engine::error::ActorFault;
use engine::scenario::Scenario;
use engine::shard::Shard;
use engine::store::trace::{ReadTrace, RunEnd, Split, TickFrame};
use engine::summary::RunSummary;
use engine::turn::TickDigests;
use std::sync::Arc;

/// Shard `shard`'s part of the merged trace `trace`, as the shard's own
/// trace holds it: its outcomes and memories at their own job positions,
/// its personas' digests, its embedding invocations and its digests.
pub fn shard_view(trace: &ReadTrace, shard: Shard) -> Result<ReadTrace> {
    let range = shard.personas(trace.header.personas);
    let mut ticks = Vec::with_capacity(trace.ticks.len());
    let mut last = None;
    for (t, frame) in trace.ticks.iter().enumerate() {
        let split = trace.tick_splits.get(t).filter(|s| s.len() as u32 == shard.count).ok_or_else(|| {
            Error::from(ActorFault::invalid("trace", format!("merged tick {} has no split by shard", frame.tick)))
        })?;
        let start = frame.outcomes.partition_point(|o| o.persona < range.start);
        let end = frame.outcomes.partition_point(|o| o.persona < range.end);
        let offset = start as u32;
        let outcomes: Vec<_> = frame.outcomes[start..end]
            .iter()
            .cloned()
            .map(|mut o| {
                o.position -= offset;
                o
            })
            .collect();
        let mut stimuli: Vec<String> = Vec::new();
        for o in &outcomes {
            if !stimuli.contains(&o.stimulus) {
                stimuli.push(o.stimulus.clone());
            }
        }
        let before: u32 = split[..shard.index as usize].iter().map(|s| s.embeddings).sum();
        let own = split[shard.index as usize];
        let embeddings = frame.embeddings.iter().skip(before as usize).take(own.embeddings as usize).cloned().collect();
        let memories = frame
            .memories
            .iter()
            .filter(|m| (start..end).contains(&(m.position as usize)))
            .cloned()
            .map(|mut m| {
                m.position -= offset;
                m
            })
            .collect();
        let persona_digests =
            frame.persona_digests.get(range.start as usize..range.end as usize).unwrap_or_default().to_vec();
        let consolidation = frame.consolidation.iter().filter(|(p, _)| range.contains(p)).cloned().collect();
        last = Some(own.digests);
        ticks.push(TickFrame {
            tick: frame.tick,
            stimuli,
            outcomes,
            embeddings,
            memories,
            persona_digests,
            digests: own.digests,
            consolidation,
        });
    }
    let end = trace.end.as_ref().map(|e| RunEnd {
        ticks_completed: e.ticks_completed,
        stopped: e.stopped.clone(),
        digests: last.unwrap_or_default(),
    });
    Ok(ReadTrace {
        header: trace.header.clone(),
        ticks,
        end,
        split: Some(Split::Shard(shard)),
        tick_splits: Vec::new(),
        valid_len: trace.valid_len,
        tail: None,
    })
}

/// Re-runs the merged trace `trace` of `count` shards: every shard from its
/// part, then the merged digests from the frames. The summary is the
/// merged run's; with `keep_states`, the final states are the panel's.
pub(crate) async fn rerun_merged(
    trace: &ReadTrace,
    count: u32,
    keep_states: bool,
    progress: Arc<dyn Progress>,
) -> Result<Rerun> {
    let bad = |cause: String| Error::from(ActorFault::invalid("trace", cause));
    let mut cassette = CassetteCounts::default();
    let mut first_miss = None;
    let mut final_states = Vec::new();
    let mut summaries = Vec::with_capacity(count as usize);
    let mut matched = u32::MAX;
    for index in 0..count {
        let shard = Shard::new(index, count).map_err(|e| bad(e.0))?;
        let view = shard_view(trace, shard)?;
        let how = How { keep_states, ..How::default() };
        let r = rerun_one(&view, how, Arc::clone(&progress), |_, _| Ok(())).await?;
        cassette.hits += r.cassette.hits;
        cassette.misses += r.cassette.misses;
        cassette.provider_calls += r.cassette.provider_calls;
        first_miss = first_miss.or(r.first_miss);
        matched = matched.min(r.ticks_matched);
        if let Some(d) = r.divergence {
            let what = format!("{shard}: {}", d.what);
            let result = RunResult { summary: RunSummary::default(), final_states: Vec::new() };
            let divergence = Some(Divergence { what, ..d });
            return Ok(Rerun { result, ticks_matched: matched, divergence, cassette, first_miss });
        }
        final_states.extend(r.result.final_states);
        summaries.push(r.result.summary);
    }
    let config = trace.header.config("trace")?;
    let scenario = Scenario::from_toml(&trace.header.scenario_source, "trace header scenario")?;
    let h = &trace.header;
    let mut prev = TickDigests::genesis(&config, &h.scenario_hash, h.seed, h.personas);
    let mut summary = RunSummary::merge_base(&summaries[0], h.personas, count, &scenario);
    let mut divergence = None;
    for (frame, split) in trace.ticks.iter().zip(&trace.tick_splits) {
        let shards = split.iter().map(|s| s.digests.full_digest);
        let digests = prev.chain_merged(frame.tick, &frame.outcomes, &frame.persona_digests, shards);
        if digests != frame.digests {
            let what = "the merged digests are not those of the shards' ticks put together".into();
            divergence = Some(Divergence { tick: frame.tick, persona: None, what });
            matched = matched.min(frame.tick - 1);
            break;
        }
        let zero = (&Default::default(), &Default::default());
        summary.add_tick(&frame.outcomes, zero, zero);
        summary.add_consolidation(&frame.consolidation);
        prev = digests;
    }
    summary.finish_merge(trace.ticks.len() as u32, prev, &summaries, h.budget_nano_usd);
    Ok(Rerun { result: RunResult { summary, final_states }, ticks_matched: matched, divergence, cassette, first_miss })
}
