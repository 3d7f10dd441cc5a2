//! Integration tests of the engine crate.
