//! Tags from Python: an iterable of str read into the engine's tags. Their rules (length,
//! count, duplicates) are the engine's; this module only converts, and refuses a bare str,
//! which Python would happily iterate as its characters.

use std::collections::HashSet;

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::{config_type_error, herdless_err};

/// The tags in `v` (any iterable of str), in order. A str, or an item that is not a str,
/// raises `ConfigTypeError` (a `TypeError`). Stops reading once it holds `limit + 1`
/// distinct tags (the engine then refuses them with its `TooManyTags`) and keeps no repeat:
/// a long or endless iterable cannot fill memory, and no distinct tag is silently dropped.
pub(crate) fn tag_list(
    py: Python<'_>,
    name: &str,
    v: &Bound<'_, PyAny>,
    limit: usize,
) -> PyResult<Vec<String>> {
    if v.is_instance_of::<PyString>() {
        return Err(config_type_error(
            py,
            format!("`{name}` is an iterable of tags, not one tag: wrap it in a list"),
        ));
    }
    let items = v.try_iter().map_err(|_| {
        config_type_error(
            py,
            format!("`{name}` must be an iterable of str, got {}", type_name(v)),
        )
    })?;
    let mut tags: Vec<String> = Vec::new();
    // The names kept so far, to drop a repeat in O(1): `invalidate_tags` reads with no
    // limit, and comparing each name with every kept one is O(n^2) on a list from a request.
    let mut seen: HashSet<String> = HashSet::new();
    for item in items {
        let item = item?;
        let s = item.cast::<PyString>().map_err(|_| {
            config_type_error(
                py,
                format!("`{name}` holds a {}: tags are str", type_name(&item)),
            )
        })?;
        // A repeat is not kept (the engine keeps the first of each): what is held stays
        // within `limit + 1` tags, however long the iterable.
        let tag = tag_text(py, name, s)?;
        if !seen.contains(tag) {
            seen.insert(tag.to_owned());
            tags.push(tag.to_owned());
        }
        if tags.len() > limit {
            break;
        }
    }
    Ok(tags)
}

/// The text of one tag. A lone surrogate has no UTF-8 form: `InvalidTag` (Python's own
/// `UnicodeEncodeError` would say nothing of tags).
pub(crate) fn tag_text<'a>(
    py: Python<'_>,
    name: &str,
    s: &'a Bound<'_, PyString>,
) -> PyResult<&'a str> {
    s.to_str().map_err(|_| {
        herdless_err(
            py,
            "InvalidTag",
            format!("a tag of `{name}` is not valid Unicode (a lone surrogate)"),
            &[],
        )
    })
}

fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .qualname()
        .map(|q| q.to_string())
        .unwrap_or_default()
}
