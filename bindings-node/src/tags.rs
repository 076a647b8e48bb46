//! Tags from JS: an array of strings read into the engine's tags, and back. Their rules
//! (length, count, duplicates) are the engine's; this module only converts.

use napi::Result;

use crate::errors::type_error;
use crate::js::{Js, Type, Value};

/// The tags in `v`, an array of strings (`what` names it in errors). Anything else throws
/// a `TypeError` (code `HERDLESS_INVALID_ARGUMENT`); so does a tag with a lone surrogate
/// (Node-API would read it as U+FFFD: two different tags would become one).
pub(crate) fn tag_list(js: Js, v: Value, what: &str) -> Result<Vec<String>> {
    if !js.is_array(v)? {
        let got = js.type_of(v).map_or("an unknown value", Type::name);
        return Err(type_error(
            js,
            &format!("{what} must be an array of strings, got {got}"),
        ));
    }
    let n = js.array_len(v)?;
    let mut tags = Vec::with_capacity(n.min(64) as usize);
    for i in 0..n {
        let t = js.get_element(v, i)?;
        if js.type_of(t)? != Type::String {
            let got = js.type_of(t).map_or("an unknown value", Type::name);
            return Err(type_error(
                js,
                &format!("{what} holds {got}: tags are strings"),
            ));
        }
        let tag = js.get_string(t)?;
        if tag.contains('\u{FFFD}') {
            crate::keys::well_formed(js, t, "tag")?;
        }
        tags.push(tag);
    }
    Ok(tags)
}

/// One tag argument: a string, else a `TypeError` (code `HERDLESS_INVALID_ARGUMENT`).
pub(crate) fn tag_arg(js: Js, v: Value) -> Result<String> {
    if js.type_of(v)? != Type::String {
        let got = js.type_of(v).map_or("an unknown value", Type::name);
        return Err(type_error(
            js,
            &format!("the tag must be a string, got {got}"),
        ));
    }
    let tag = js.get_string(v)?;
    if tag.contains('\u{FFFD}') {
        crate::keys::well_formed(js, v, "tag")?;
    }
    Ok(tag)
}

/// `tags` as a JS array of strings.
pub(crate) fn to_array<S: AsRef<str>>(js: Js, tags: &[S]) -> Result<Value> {
    let array = js.array(tags.len())?;
    for (i, t) in tags.iter().enumerate() {
        js.set_element(array, i as u32, js.string(t.as_ref())?)?;
    }
    Ok(array)
}
