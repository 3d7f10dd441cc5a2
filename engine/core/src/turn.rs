//! The stages of one turn batch, as plain functions.
//!
//! [`crate::tick::run_tick`] sequences these over a tick's jobs (see
//! `docs/ARCHITECTURE.md`, "One tick through the code"), and the
//! coordinator actor only dispatches them; every decision is in the engine
//! so that it can be tested without a runtime:
//!
//! 1. [`stage::retrieval_need`]: the retrieval text of a job, or nothing
//!    under the skip rules.
//! 2. the retrieval-embedding stage ([`crate::embed::embed_stage`]).
//! 3. [`stage::prepare`]: rank the persona's own memories, build the prompt,
//!    refuse over the context budget.
//! 4. [`converse::converse`]: the reaction with guardrail retries, then a
//!    reflection and probes where due.
//! 5. [`stage::drafts`]: the job's new memories, without vectors.
//! 6. the memory-embedding stage.
//! 7. commit: [`crate::persona::PersonaState::apply`], then
//!    [`outcome::TickDigests`] over the outcomes in job order.

pub mod converse;
pub mod outcome;
pub mod stage;

pub use converse::{converse, ChatCallRecord, ChatFailure, Conversation};
pub use outcome::{ContentChain, FullChain, JobSpend, Outcome, OutcomePart, ProbeAnswer, Stage, Status, TickDigests};
pub use stage::{
    drafts, prepare, retrieval_need, retrieval_text, Conversed, Prepared, ProbePrompt, ReflectPlan, ReflectionResult,
    Refusal, TickContext,
};
