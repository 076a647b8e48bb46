//! Building a canonical key from a logical request.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::error::KeyError;
use super::escape::{check_namespace, escape};
use super::param::Param;
use super::parse::ParsedKey;

/// Builds canonical keys (see the [key format](crate::key)).
///
/// Setters can be chained in any order. Calling `version`, `entity` or `id` again replaces the
/// earlier value. Errors (a bad float, a duplicate parameter, ...) are reported by
/// [`build`](Self::build).
///
/// ```
/// use herdless::{KeyBuilder, Param};
///
/// let key = KeyBuilder::new("users")
///     .version(2)
///     .entity("profile")
///     .id(42)
///     .param("lang", "en")
///     .param("fields", ["name", "email"])
///     .param("team", Param::Null)
///     .build()
///     .unwrap();
/// assert_eq!(key, "users:v2:profile:#42?fields=#[email,name]&lang=en&team=#null");
/// assert_eq!(herdless::key::namespace_of(&key), "users");
/// ```
#[derive(Clone, Debug)]
pub struct KeyBuilder {
    namespace: String,
    version: u32,
    entity: String,
    /// Canonical text of the id.
    id: Option<String>,
    /// Raw name and canonical text of the value.
    params: Vec<(String, String)>,
    /// The first error met by a setter.
    error: Option<KeyError>,
}

impl KeyBuilder {
    /// Starts a key in `namespace`, with schema version 1. The namespace must be non-empty and
    /// must contain no reserved character. Otherwise [`build`](Self::build) fails.
    pub fn new(namespace: &str) -> Self {
        KeyBuilder {
            namespace: namespace.to_string(),
            version: 1,
            entity: String::new(),
            id: None,
            params: Vec::new(),
            error: None,
        }
    }

    /// Sets the schema version of the cached representation. Bump it when the cached format
    /// changes, so that old entries are never read.
    pub fn version(mut self, v: u32) -> Self {
        self.version = v;
        self
    }

    /// Sets the entity (required, non-empty), e.g. `"user"`.
    pub fn entity(mut self, entity: &str) -> Self {
        self.entity = entity.to_string();
        self
    }

    /// Sets the id (optional). A key with no id is different from every key with an id.
    pub fn id<'a>(mut self, id: impl Into<Param<'a>>) -> Self {
        match id.into().to_canonical() {
            Ok(text) => self.id = Some(text),
            Err(e) => self.fail(e),
        }
        self
    }

    /// Adds the parameter `name` (non-empty, unique). The order of calls does not matter.
    pub fn param<'a>(mut self, name: &str, value: impl Into<Param<'a>>) -> Self {
        if name.is_empty() {
            self.fail(KeyError::EmptyParamName);
        }
        match value.into().to_canonical() {
            Ok(text) => self.params.push((name.to_string(), text)),
            Err(e) => self.fail(e),
        }
        self
    }

    fn fail(&mut self, e: KeyError) {
        self.error.get_or_insert(e);
    }

    /// The canonical key, or the first problem found.
    pub fn build(&self) -> Result<String, KeyError> {
        check_namespace(&self.namespace)?;
        if self.entity.is_empty() {
            return Err(KeyError::EmptyEntity);
        }
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        let mut params = self.params.clone();
        params.sort_by_cached_key(|(name, _)| escape(name));
        if let Some(w) = params.windows(2).find(|w| w[0].0 == w[1].0) {
            let name = w[0].0.clone();
            return Err(KeyError::DuplicateParam { name });
        }
        let (namespace, entity) = (self.namespace.clone(), self.entity.clone());
        let (version, id) = (self.version, self.id.clone());
        Ok(ParsedKey {
            namespace,
            version,
            entity,
            id,
            params,
        }
        .to_key())
    }
}
