//! Integration tests of the actors crate.
