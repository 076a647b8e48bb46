//! Codecs: how a `V` becomes the value bytes of an entry and back. Rust users pick [`Json`]
//! (interoperable with the Python and Node bindings' JSON codecs) or [`RawBytes`]; bindings
//! bring their own (pickle, msgpack, ...). A value another codec wrote decodes to an error,
//! which the tiered cache treats as a miss and counts.

use std::error::Error as StdError;
use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A codec failure.
#[derive(Debug)]
pub struct CodecError(pub Box<dyn StdError + Send + Sync>);

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "codec: {}", self.0)
    }
}

impl StdError for CodecError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.0)
    }
}

/// Turns values into bytes and back.
pub trait Codec<V>: Send + Sync + 'static {
    /// The bytes of `value`.
    fn encode(&self, value: &V) -> Result<Vec<u8>, CodecError>;
    /// The value of `bytes`.
    fn decode(&self, bytes: &[u8]) -> Result<V, CodecError>;
}

/// JSON through serde_json (UTF-8 JSON text, what the other languages' JSON codecs read).
#[derive(Clone, Copy, Debug, Default)]
pub struct Json;

impl<V: Serialize + DeserializeOwned> Codec<V> for Json {
    fn encode(&self, value: &V) -> Result<Vec<u8>, CodecError> {
        serde_json::to_vec(value).map_err(|e| CodecError(e.into()))
    }
    fn decode(&self, bytes: &[u8]) -> Result<V, CodecError> {
        serde_json::from_slice(bytes).map_err(|e| CodecError(e.into()))
    }
}

/// The value is the bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct RawBytes;

impl Codec<Vec<u8>> for RawBytes {
    fn encode(&self, value: &Vec<u8>) -> Result<Vec<u8>, CodecError> {
        Ok(value.clone())
    }
    fn decode(&self, bytes: &[u8]) -> Result<Vec<u8>, CodecError> {
        Ok(bytes.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_and_rejects_foreign_bytes() {
        let v = vec![("a".to_string(), 1u32)];
        let b = Json.encode(&v).unwrap();
        assert_eq!(b, br#"[["a",1]]"#);
        assert_eq!(Codec::<Vec<(String, u32)>>::decode(&Json, &b).unwrap(), v);
        assert!(Codec::<Vec<(String, u32)>>::decode(&Json, b"\x80pickle").is_err());
        assert_eq!(RawBytes.decode(b"\x00\xff").unwrap(), b"\x00\xff");
    }
}
