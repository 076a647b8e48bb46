//! The `front` option: how many answers the JS front (`lib/front.js`) keeps.

use napi::Result;

use super::read::{bad, count};
use crate::js::{ErrorKind, Js, Type, Value};

/// The `front` option: how many answers the JS front keeps (`None`: off).
pub(crate) struct FrontSize(pub(crate) Option<usize>);

/// The front's capacity unless told otherwise: the hot keys of most services fit, and a
/// miss of the front costs one call into the engine, as without it.
pub(super) const FRONT_DEFAULT: usize = 1024;
/// Its largest capacity (a bound on what one cache holds beside the engine).
pub(super) const FRONT_MAX: u64 = 65_536;

impl Default for FrontSize {
    fn default() -> Self {
        FrontSize(Some(FRONT_DEFAULT))
    }
}

/// The `front` option.
pub(super) fn front(js: Js, obj: Value) -> Result<FrontSize> {
    let v = js.get(obj, "front")?;
    match js.type_of(v)? {
        Type::Undefined => Ok(FrontSize::default()),
        Type::Boolean if js.get_bool(v)? => Ok(FrontSize::default()),
        Type::Boolean => Ok(FrontSize(None)),
        Type::Object if !js.is_array(v)? => {
            for key in js.keys(v)? {
                if key != "capacity" {
                    return Err(bad(
                        js,
                        ErrorKind::Type,
                        &format!("unknown front option `{key}` (known: capacity)"),
                    ));
                }
            }
            let field = js.object()?;
            js.set(field, "front.capacity", js.get(v, "capacity")?)?;
            match count(js, field, "front.capacity")? {
                None => Ok(FrontSize::default()),
                Some(n) if n <= FRONT_MAX => Ok(FrontSize(Some(n as usize))),
                Some(n) => Err(bad(
                    js,
                    ErrorKind::Range,
                    &format!("option `front.capacity` must be at most {FRONT_MAX}, got {n}"),
                )),
            }
        }
        t => Err(bad(
            js,
            ErrorKind::Type,
            &format!(
                "option `front` must be a boolean or {{ capacity }}, got {}",
                t.name()
            ),
        )),
    }
}
