//! The stages of a tick's jobs, as plain functions.
//!
//! [`crate::tick::run_tick`] sequences these over a tick's jobs (see
//! `docs/ARCHITECTURE.md`, "One tick through the code"), and the
//! coordinator actor only dispatches them; every decision is in the engine
//! so that it can be tested without a runtime:
//!
//! 1. validate: personas gone in an earlier tick are refused
//!    ([`crate::tick::TickWork::refuse_gone`]).
//! 2. retrieval embedding: [`stage::retrieval_need`] gives a job's
//!    retrieval text, or nothing under the skip rules, and
//!    [`crate::embed::embed_stage`] embeds the tick's texts in one
//!    deduplicated port call.
//! 3. retrieve and prompt: [`stage::prepare`] ranks the persona's own
//!    memories, builds the prompt, and refuses over the context budget.
//! 4. chat: [`converse::converse`], the reaction with guardrail retries,
//!    then a reflection and probes where due.
//! 5. draft memories: [`stage::drafts`], the job's new memories, without
//!    vectors.
//! 6. memory embedding, as in stage 2.
//! 7. commit: [`crate::persona::PersonaState::apply`], then
//!    [`outcome::TickDigests`] over the outcomes in job order.
//!
//! The same numbers name the stages in [`crate::tick`] and in
//! `docs/ARCHITECTURE.md`.

pub mod converse;
pub mod outcome;
pub mod stage;

pub use converse::{converse, ChatCallRecord, ChatFailure, Conversation};
pub use outcome::{ContentChain, FullChain, JobSpend, Outcome, OutcomePart, ProbeAnswer, Stage, Status, TickDigests};
pub use stage::{
    drafts, prepare, retrieval_need, retrieval_text, Conversed, Prepared, ProbePrompt, ReflectPlan, ReflectionResult,
    Refusal, TickContext,
};
