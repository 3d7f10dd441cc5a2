//! Persistence, and nothing else: the one framed container every binary
//! file uses ([`frame`]: magic, format version, `len | crc32 | payload`
//! frames with decode limits), the one codec that encodes payloads
//! ([`codec`]: bincode 2 with a size limit), and the files built on them
//! ([`trace`]: the run's trace with its writer, reader, cassette and audit,
//! and the chat write-ahead log). Only this tree touches those bytes; the
//! rest of the engine hands it values.

pub mod codec;
pub mod frame;
pub mod trace;
