//! The one place that knows the payload encoding: bincode 2, standard
//! configuration, with a decode limit so that no payload can make the
//! decoder allocate more than a frame may hold.

use super::record::Record;
use crate::error::{Error, Result};

/// The largest frame payload, in bytes. A tick of 100,000 personas encodes
/// to a few hundred MiB; anything above this is corruption.
pub const MAX_FRAME: u64 = 1 << 30;

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<{ MAX_FRAME as usize }>()
}

/// Encodes a record into `buf` (cleared first), so that one buffer serves
/// every frame of a trace.
pub fn encode_into(record: &Record, buf: &mut Vec<u8>) -> Result<()> {
    buf.clear();
    bincode::serde::encode_into_std_write(record, buf, config())
        .map(|_| ())
        .map_err(|e| Error::TraceFormat { cause: format!("cannot encode a record: {e}") })
}

/// Decodes a record that must fill `bytes` exactly.
pub fn decode(bytes: &[u8]) -> std::result::Result<Record, String> {
    let (record, used) = bincode::serde::decode_from_slice::<Record, _>(bytes, config()).map_err(|e| e.to_string())?;
    if used != bytes.len() {
        return Err(format!("payload has {} trailing bytes", bytes.len() - used));
    }
    Ok(record)
}
