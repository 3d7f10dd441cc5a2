use engine::chat::ChatPurpose;
use engine::clock::Clock;
use engine::config::{Config, RawConfig};
use engine::persona::{generate, PersonaState, Traits};
use engine::scenario::Scenario;
use engine::testing::{block_on_ready, FixedChat};
use engine::turn::{converse, drafts, prepare, ChatFailure, Conversation, TickContext};

const GOOD: &str = "REACTION: Looks useful.\nSENTIMENT: 0.5\nINTENT: 4\nIMPORTANCE: 9\n";
const BAD: &str = "Sure, sounds great!";

fn run(chat: &FixedChat, cfg: &Config, scenario: &Scenario, tick: u32, importance_so_far: u32) -> Conversation {
    let mut state = PersonaState::new(generate(&Traits::builtin(), 1, 0));
    state.importance_since_reflection = importance_so_far;
    let jobs = scenario.jobs(1, tick, 1, |_| &[]);
    let ctx = TickContext { cfg, scenario, tick, now: Clock::with_hours_per_tick(24).at(tick) };
    let prepared = prepare(&state, &jobs[0], None, &ctx).expect("within budget");
    block_on_ready(converse(chat, &prepared, cfg, scenario, tick))
}

fn default_scenario() -> Scenario {
    Scenario::builtin("default").expect("built in")
}

#[test]
fn an_unparseable_reply_is_retried_then_accepted() {
    let chat = FixedChat::default().with(ChatPurpose::Reaction, &[BAD, GOOD]);
    let c = run(&chat, &Config::defaults(), &default_scenario(), 1, 0);
    let ok = c.result.expect("second attempt parses");
    assert_eq!(ok.reaction.intent, 4);
    assert_eq!(c.calls.iter().map(|c| c.attempt).collect::<Vec<_>>(), vec![0, 1]);
    assert_ne!(c.calls[0].request, c.calls[1].request, "attempts are distinct requests");
}

#[test]
fn retries_are_bounded_and_the_failure_keeps_its_calls() {
    let cfg =
        RawConfig::from_toml("[chat]\nmax_guardrail_retries = 1\n", "t").and_then(|r| r.resolve("t")).expect("valid");
    let chat = FixedChat::default().with(ChatPurpose::Reaction, &[BAD, BAD, GOOD]);
    let c = run(&chat, &cfg, &default_scenario(), 1, 0);
    assert!(matches!(c.result, Err(ChatFailure::NoValidReply { attempts: 2, .. })), "{:?}", c.result);
    assert_eq!(c.calls.len(), 2);
    assert_eq!(c.calls.iter().map(|c| c.spend.nano_usd).sum::<u64>(), 4);
}

#[test]
fn crossing_the_threshold_reflects_and_a_bad_reflection_falls_back() {
    let chat = FixedChat::default()
        .with(ChatPurpose::Reaction, &[GOOD])
        .with(ChatPurpose::Reflection, &["I reflect deeply but in prose."]);
    let cfg = Config::defaults();
    let scenario = default_scenario();
    let c = run(&chat, &cfg, &scenario, 1, 15);
    let ok = c.result.expect("reaction parses");
    let reflection = ok.reflection.as_ref().expect("9 + 15 crosses 20");
    assert!(reflection.fallback && reflection.insights.is_empty());
    let jobs = scenario.jobs(1, 1, 1, |_| &[]);
    let ctx = TickContext { cfg: &cfg, scenario: &scenario, tick: 1, now: Clock::with_hours_per_tick(24).at(1) };
    let memories = drafts(&jobs[0], &ctx, &ok);
    assert_eq!(memories.len(), 2);
    assert!(memories[1].description.contains("without reaching a clear conclusion"));
}

#[test]
fn a_parsed_reflection_becomes_one_memory_per_insight() {
    let chat = FixedChat::default().with(ChatPurpose::Reaction, &[GOOD]).with(
        ChatPurpose::Reflection,
        &["INSIGHT: I like gadgets (importance 7)\nINSIGHT: Price matters (importance 6)\n"],
    );
    let c = run(&chat, &Config::defaults(), &default_scenario(), 1, 12);
    let ok = c.result.expect("parses");
    assert_eq!(ok.reflection.map(|r| r.insights.len()), Some(2));
}

#[test]
fn below_the_threshold_no_reflection_is_asked() {
    let chat = FixedChat::default().with(ChatPurpose::Reaction, &[GOOD]);
    let c = run(&chat, &Config::defaults(), &default_scenario(), 1, 0);
    assert!(c.result.expect("parses").reflection.is_none());
    assert_eq!(chat.seen.lock().len(), 1);
}

#[test]
fn probes_are_asked_at_their_tick_with_retries() {
    let chat = FixedChat::default()
        .with(ChatPurpose::Reaction, &[GOOD])
        .with(ChatPurpose::Probe, &["no idea", "ANSWER: 5\nWHY: it fits my life."]);
    let c = run(&chat, &Config::defaults(), &default_scenario(), 3, 0);
    let ok = c.result.expect("parses");
    assert_eq!(ok.probes.len(), 1);
    assert_eq!(ok.probes[0].0, "recommend");
    assert_eq!(ok.probes[0].1.as_ref().map(|p| p.answer), Some(5));
    let none_at_tick_1 = FixedChat::default().with(ChatPurpose::Reaction, &[GOOD]);
    assert!(run(&none_at_tick_1, &Config::defaults(), &default_scenario(), 1, 0).result.expect("ok").probes.is_empty());
}
