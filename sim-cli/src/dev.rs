//! Developer tooling, apart from the user's commands: benchmarks
//! (`bench`, with `bench scale`), the determinism check and the soak
//! campaigns. Each drives the user's commands or the libraries; none is a
//! user's command's helper.

pub mod bench;
pub mod check;
pub mod scale;
pub mod soak;
