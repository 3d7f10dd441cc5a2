use crate::support::run_with;
use actors::run::RunSpec;
use engine::store::trace::{Header, Record, RunEnd};
use engine::turn::Status;

/// The trace writer encodes records through bincode's own `Encode`, derived
/// beside each type's `Serialize`; readers decode through serde. On a run
/// with every kind of record content (failed jobs, a failed
/// embedding invocation, retried chat calls, reflections, probes, SSR
/// ratings, consolidation changes), both encoders write the same bytes.
#[test]
fn the_trace_encoder_writes_the_bytes_the_serde_reader_reads() {
    let mut spec = RunSpec::defaults(7, 16, 5);
    spec.config = crate::support::faulty(2, 0.1, "[intent]\nmethod = \"both\"\n[consolidation]\nenabled = true\n");
    let header = Header::new(&spec.config, 7, 16, 5).with_budget(Some(1 << 40));
    let (result, reports) = run_with(spec, 2);
    let frames: Vec<_> = reports.into_iter().map(|r| r.into_frame()).collect();

    let outcomes = || frames.iter().flat_map(|f| &f.outcomes);
    assert!(outcomes().any(|o| matches!(o.status, Status::Failed { .. })), "a failed job");
    assert!(frames.iter().flat_map(|f| &f.embeddings).any(|e| e.result.is_err()), "a failed embedding call");
    assert!(outcomes().any(|o| o.chat_calls.iter().any(|c| c.attempts.len() > 1)), "a retried chat call");
    assert!(outcomes().any(|o| o.reflection.is_some()) && outcomes().any(|o| !o.probes.is_empty()));
    assert!(outcomes().any(|o| o.ssr.is_some()), "an SSR rating");
    assert!(frames.iter().any(|f| f.consolidation.iter().any(|(_, c)| !c.is_empty())), "consolidation changes");
    assert!(frames.iter().any(|f| !f.memories.is_empty()));

    let end =
        RunEnd { ticks_completed: frames.len() as u32, stopped: None, digests: frames.last().expect("ticks").digests };
    let mut records = vec![Record::Header(Box::new(header))];
    records.extend(frames.into_iter().map(|f| Record::Tick(Box::new(f))));
    records.push(Record::End(end));
    let (mut native, mut serde) = (Vec::new(), Vec::new());
    for r in &records {
        engine::store::codec::encode_native_into(r, &mut native).expect("native encoding");
        engine::store::codec::encode_into(r, &mut serde).expect("serde encoding");
        assert!(native == serde, "the encoders differ on {:?}", std::mem::discriminant(r));
        assert_eq!(&engine::store::codec::decode::<Record>(&native).expect("decodes"), r);
    }
    assert!(result.summary.jobs.failed > 0);
}
