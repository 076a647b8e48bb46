//! Codecs: how a `V` becomes the value bytes of an entry and back. Rust users pick [`Json`]
//! (interoperable with the Python and Node bindings' JSON codecs) or [`RawBytes`]; bindings
//! bring their own (pickle, msgpack, ...). A value another codec wrote decodes to an error,
//! which the fleet engine treats as a miss and counts.

use std::error::Error as StdError;
use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// A codec failure: the value cannot be encoded, or the bytes are not this codec's.
///
/// A codec of a binding can also report that its language interrupted the call (Python's
/// `KeyboardInterrupt` raised inside a user codec): the fleet engine then hands the load
/// over instead of treating the bytes as unreadable or the value as unshareable.
#[derive(Debug)]
pub struct CodecError {
    source: Box<dyn StdError + Send + Sync>,
    interrupted: bool,
}

impl CodecError {
    /// A value this codec cannot encode, or bytes it cannot decode.
    pub fn new(source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        Self {
            source: source.into(),
            interrupted: false,
        }
    }

    /// The codec's call was interrupted (not a verdict on the value or the bytes).
    pub fn interrupted(source: impl Into<Box<dyn StdError + Send + Sync>>) -> Self {
        Self {
            source: source.into(),
            interrupted: true,
        }
    }

    /// Whether the call was interrupted rather than refused.
    pub fn is_interrupted(&self) -> bool {
        self.interrupted
    }

    /// The codec's own error.
    pub fn get(&self) -> &(dyn StdError + Send + Sync + 'static) {
        &*self.source
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "codec: {}", self.source)
    }
}

impl StdError for CodecError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

/// Turns values into bytes and back.
pub trait Codec<V> {
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
        serde_json::to_vec(value).map_err(CodecError::new)
    }
    fn decode(&self, bytes: &[u8]) -> Result<V, CodecError> {
        serde_json::from_slice(bytes).map_err(CodecError::new)
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
