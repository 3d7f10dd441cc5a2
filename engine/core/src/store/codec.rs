//! The one place that calls the serialiser: bincode 2, standard
//! configuration, with a decode limit so that no payload can make the
//! decoder allocate more than a frame may hold. Every binary file of the
//! project ([`crate::store::frame`]) carries payloads encoded here. The trace's
//! record types also derive bincode's own `Encode` (the trace writer's
//! faster path, [`encode_native_into`]), so replacing bincode is a change
//! to this file and to those derives.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// The largest payload, in bytes: the frame limit of [`crate::store::frame`].
pub const MAX_PAYLOAD: u64 = crate::store::frame::MAX_FRAME;

/// Why a value could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The value cannot be encoded (a custom serialiser refused it).
    #[error("cannot encode: {0}")]
    Encode(#[source] bincode::error::EncodeError),
    /// The bytes are not an encoding of the expected type.
    #[error("cannot decode: {0}")]
    Decode(#[source] bincode::error::DecodeError),
    /// A complete value was decoded with bytes left over.
    #[error("the payload has {0} trailing bytes")]
    Trailing(usize),
}

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<{ MAX_PAYLOAD as usize }>()
}

/// Encodes `value` into `buf` (cleared first), so that one buffer can serve
/// every frame of a file.
pub fn encode_into<T: Serialize + ?Sized>(value: &T, buf: &mut Vec<u8>) -> Result<(), CodecError> {
    buf.clear();
    bincode::serde::encode_into_std_write(value, buf, config()).map(|_| ()).map_err(CodecError::Encode)
}

/// Encodes `value` into `out`, as it goes: for values too large to buffer.
pub fn encode_to<T: Serialize + ?Sized, W: std::io::Write>(value: &T, out: &mut W) -> Result<(), CodecError> {
    bincode::serde::encode_into_std_write(value, out, config()).map(|_| ()).map_err(CodecError::Encode)
}

/// Encodes `value` into a new buffer.
pub fn encode<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, CodecError> {
    let mut buf = Vec::new();
    encode_into(value, &mut buf)?;
    Ok(buf)
}

/// Encodes `value` into `buf` (cleared first) through bincode's own
/// `Encode`, not serde. For the trace's records, whose `Encode` is derived
/// beside their `Serialize` and writes the same bytes, faster: a digest is
/// one write rather than 32 (the actors' trace tests compare the two on a
/// faulty run). Decoding stays with serde.
pub fn encode_native_into<T: bincode::Encode + ?Sized>(value: &T, buf: &mut Vec<u8>) -> Result<(), CodecError> {
    buf.clear();
    bincode::encode_into_std_write(value, buf, config()).map(|_| ()).map_err(CodecError::Encode)
}

/// [`encode_native_into`], as it goes: for values too large to buffer.
pub fn encode_native_to<T: bincode::Encode + ?Sized, W: std::io::Write>(
    value: &T,
    out: &mut W,
) -> Result<(), CodecError> {
    bincode::encode_into_std_write(value, out, config()).map(|_| ()).map_err(CodecError::Encode)
}

/// Decodes the next value of a stream of encodings laid end to end (as
/// [`encode_native_to`] writes them one after another).
pub fn decode_from<T: DeserializeOwned, R: std::io::Read>(r: &mut R) -> Result<T, CodecError> {
    bincode::serde::decode_from_std_read(r, config()).map_err(CodecError::Decode)
}

/// Decodes a value that must fill `bytes` exactly.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    decode_with(bytes, config())
}

/// Decodes a value that must fill `bytes` exactly, with no limit on its
/// size: for a value reassembled from several checksummed frames (a tick
/// written in parts), whose total may exceed one frame.
pub fn decode_assembled<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    decode_with(bytes, bincode::config::standard())
}

fn decode_with<T: DeserializeOwned>(bytes: &[u8], config: impl bincode::config::Config) -> Result<T, CodecError> {
    let (value, used) = bincode::serde::decode_from_slice::<T, _>(bytes, config).map_err(CodecError::Decode)?;
    if used != bytes.len() {
        return Err(CodecError::Trailing(bytes.len() - used));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_trailing_bytes_and_garbage() {
        let v = (7u64, "seven".to_string(), vec![1.5f32, -2.0]);
        let bytes = encode(&v).expect("encode");
        assert_eq!(decode::<(u64, String, Vec<f32>)>(&bytes).expect("decode"), v);
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(decode::<(u64, String, Vec<f32>)>(&longer), Err(CodecError::Trailing(1))));
        assert!(matches!(decode::<(u64, String, Vec<f32>)>(&bytes[..3]), Err(CodecError::Decode(_))));
    }
}
