//! Integration tests of the agents crate: the field actor and the experiment's missions.

// The field actor: phases independent of thread count, logs that replay, typed errors.
mod field;
// The agent experiment: failures name their mission, pairing, telemetry.
mod experiment;
