//! What the fleet engine needs from Node: the cache's codec (how a JS value becomes the
//! bytes of a shared entry and back) and a way to warn the user, as a [`Host`] called on the
//! JS thread. Everything else about the shared tier is decided by `herdless_redis::two_tier`.

use herdless_redis::{CodecError, Host, Warning};
use napi::{Result, Status};

use crate::js::{Js, Ref, Type, Value};
use crate::value::{JsFailure, Table, Val};

/// How values are stored in the shared tier (the `codec` option).
pub(crate) enum Codec {
    /// UTF-8 JSON text (`JSON.stringify` / `JSON.parse`), readable by every language.
    Json,
    /// The value is a `Buffer` (or any `Uint8Array`), stored as its bytes; read back as a
    /// `Buffer`.
    Buffer,
    /// The user's `{ encode(value), decode(bytes) }` object.
    User(Ref),
}

/// Why a built-in codec refused a value or bytes (a user codec's own exception travels as a
/// [`JsFailure`] instead).
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

fn refused(why: String) -> CodecError {
    CodecError::new(Refused(why))
}

/// A failed Node-API call inside a codec: the exception it left (kept), or the environment
/// refusing to run JS (a worker terminating), which is no verdict on the value.
fn failed(js: Js, table: &Table, e: napi::Error) -> CodecError {
    if e.status == Status::PendingException {
        if let Ok(thrown) = js.take_exception() {
            if let Ok(f) = JsFailure::caught(js, table, thrown) {
                return CodecError::new(f);
            }
        }
    }
    CodecError::interrupted(Refused(format!("the codec could not run: {}", e.reason)))
}

impl Codec {
    fn encode(
        &self,
        js: Js,
        table: &Table,
        v: Value,
    ) -> Result<std::result::Result<Vec<u8>, CodecError>> {
        let bytes = match self {
            Codec::Json => {
                let json = js.get(js.global()?, "JSON")?;
                match js.call(js.get(json, "stringify")?, json, &[v])? {
                    Ok(text) if js.type_of(text)? == Type::String => {
                        Some(js.get_string(text)?.into_bytes())
                    }
                    Ok(_) => {
                        return Ok(Err(refused(format!(
                            "JSON has no text for {}",
                            js.type_of(v)?.name()
                        ))));
                    }
                    Err(thrown) => {
                        let f = JsFailure::caught(js, table, thrown)?;
                        return Ok(Err(refused(format!("JSON.stringify failed: {f}"))));
                    }
                }
            }
            Codec::Buffer => js.bytes(v)?,
            Codec::User(codec) => {
                let codec = codec.get(js)?;
                match js.call(js.get(codec, "encode")?, codec, &[v])? {
                    Ok(out) => js.bytes(out)?,
                    Err(thrown) => {
                        return Ok(Err(CodecError::new(JsFailure::caught(js, table, thrown)?)));
                    }
                }
            }
        };
        Ok(bytes.ok_or_else(|| match self {
            Codec::User(_) => refused("codec.encode must return a Buffer or Uint8Array".into()),
            _ => refused("the 'buffer' codec stores Buffer or Uint8Array values".into()),
        }))
    }

    fn decode(
        &self,
        js: Js,
        table: &Table,
        bytes: &[u8],
    ) -> Result<std::result::Result<Value, CodecError>> {
        Ok(match self {
            Codec::Json => {
                let Ok(text) = std::str::from_utf8(bytes) else {
                    return Ok(Err(refused("the bytes are not UTF-8 JSON".into())));
                };
                let json = js.get(js.global()?, "JSON")?;
                // JSON.parse without a reviver: bytes from the tier never run code.
                js.call(js.get(json, "parse")?, json, &[js.string(text)?])?
                    .map_err(|_| refused("the bytes are not JSON".into()))
            }
            Codec::Buffer => Ok(js.buffer(bytes)?),
            Codec::User(codec) => {
                let codec = codec.get(js)?;
                match js.call(js.get(codec, "decode")?, codec, &[js.buffer(bytes)?])? {
                    Ok(v) => Ok(v),
                    Err(thrown) => Err(CodecError::new(JsFailure::caught(js, table, thrown)?)),
                }
            }
        })
    }
}

/// The fleet engine's [`Host`] for one call on the JS thread.
pub(crate) struct JsHost<'a> {
    pub(crate) js: Js,
    pub(crate) table: &'a Table,
    pub(crate) codec: &'a Codec,
}

impl Host<Val> for JsHost<'_> {
    fn encode(&self, value: &Val) -> std::result::Result<Vec<u8>, CodecError> {
        let (js, table) = (self.js, self.table);
        let v = table.load(js, value).map_err(|e| failed(js, table, e))?;
        self.codec
            .encode(js, table, v)
            .unwrap_or_else(|e| Err(failed(js, table, e)))
    }

    fn decode(&self, bytes: &[u8]) -> std::result::Result<Val, CodecError> {
        let (js, table) = (self.js, self.table);
        let v = self
            .codec
            .decode(js, table, bytes)
            .unwrap_or_else(|e| Err(failed(js, table, e)))?;
        table.store(js, v).map_err(|e| failed(js, table, e))
    }

    fn warn(&self, warning: &Warning<'_>) {
        // A warning that cannot be shown must not fail the load it is about.
        let _ = warn(self.js, &format!("herdless: {warning}"));
    }
}

/// `process.emitWarning(message, 'HerdlessWarning')`.
pub(crate) fn warn(js: Js, message: &str) -> Result<()> {
    let process = js.get(js.global()?, "process")?;
    let (message, kind) = (js.string(message)?, js.string("HerdlessWarning")?);
    js.call_method(process, "emitWarning", &[message, kind])?;
    Ok(())
}
