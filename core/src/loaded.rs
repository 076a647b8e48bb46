//! A context-aware loader's answer ([`Loaded`]): the value or its absence, or "not
//! modified", or "do not cache", with the lifetimes and the metadata the loader chose for
//! this entry ([`Extras`], kept in the entry only when set, so the common entry stays small).

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use core::time::Duration;

/// The longest [`Loaded::meta`] kept with an entry, in bytes: an ETag or a version string,
/// not a second value. A longer one fails the load with
/// [`Error::MetaTooLong`](crate::Error::MetaTooLong).
pub const MAX_META_BYTES: usize = 256;

/// What a context-aware loader answers (see
/// [`Cache::get_or_load_with`](crate::Cache::get_or_load_with)).
///
/// ```
/// use core::time::Duration;
/// use herdless::Loaded;
/// let draft = Loaded::value("draft text").ttl(Duration::from_secs(5)).meta("\"v7\"");
/// let gone: Loaded<&str> = Loaded::absent().negative_ttl(Duration::from_secs(1));
/// let same: Loaded<&str> = Loaded::not_modified(); // keep the previous value, restart its life
/// let once = Loaded::value("one-off").no_cache(); // answer the callers, store nothing
/// # let _ = (draft, gone, same, once);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Loaded<V> {
    pub(crate) answer: Answer<V>,
    pub(crate) extras: Extras,
    pub(crate) store: bool,
}

/// What the loader found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Answer<V> {
    /// A value, or `None` for "absent".
    Value(Option<V>),
    /// The previous value still holds.
    NotModified,
}

/// The lifetimes and metadata a loader chose for one entry; `None`: the cache's own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Extras {
    pub(crate) ttl: Option<Duration>,
    pub(crate) grace: Option<Duration>,
    pub(crate) negative_ttl: Option<Duration>,
    /// The entry's time-to-idle instead of the cache's.
    pub(crate) tti: Option<Duration>,
    pub(crate) meta: Option<Box<str>>,
    /// Tag names; `Some(empty)`: explicitly none. An entry keeps its tags' records instead
    /// (see [`Rare`](crate::entry::Rare)), never these.
    pub(crate) tags: Option<Box<[Box<str>]>>,
}

impl Extras {
    /// Whether the loader chose nothing: the cache's own lifetimes, no metadata, no tags.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ttl.is_none()
            && self.grace.is_none()
            && self.negative_ttl.is_none()
            && self.tti.is_none()
            && self.meta.is_none()
            && self.tags.is_none()
    }

    /// These, with what they leave unset taken from `older` (a not-modified answer keeps
    /// the previous entry's choices unless it makes new ones).
    pub(crate) fn or(self, older: Option<&Extras>) -> Extras {
        let Some(o) = older else { return self };
        Extras {
            ttl: self.ttl.or(o.ttl),
            grace: self.grace.or(o.grace),
            negative_ttl: self.negative_ttl.or(o.negative_ttl),
            tti: self.tti.or(o.tti),
            meta: self.meta.or_else(|| o.meta.clone()),
            tags: self.tags.or_else(|| o.tags.clone()),
        }
    }
}

impl<V> Loaded<V> {
    /// The value was found.
    pub fn value(value: V) -> Self {
        Self::new(Answer::Value(Some(value)))
    }

    /// Nothing exists under the key: cached as an absence for the negative ttl.
    pub fn absent() -> Self {
        Self::new(Answer::Value(None))
    }

    /// The previous value ([`LoadContext::previous`](crate::LoadContext::previous)) still
    /// holds (an HTTP 304): it is kept, its lifetime restarts, and the load counts as a load
    /// (`loads`) and as `not_modified`. The entry keeps its metadata and lifetimes unless
    /// this answer sets new ones. Without a previous value the load fails with
    /// [`Error::NoPrevious`](crate::Error::NoPrevious).
    pub fn not_modified() -> Self {
        Self::new(Answer::NotModified)
    }

    fn new(answer: Answer<V>) -> Self {
        Self {
            answer,
            extras: Extras::default(),
            store: true,
        }
    }

    /// This entry's ttl instead of the cache's (jitter still applies; zero is ignored).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.extras.ttl = Some(ttl).filter(|t| !t.is_zero());
        self
    }

    /// This entry's grace (stale-while-revalidate window) instead of the cache's.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.extras.grace = Some(grace);
        self
    }

    /// This absence's lifetime instead of the cache's `negative_ttl` (zero is ignored).
    pub fn negative_ttl(mut self, ttl: Duration) -> Self {
        self.extras.negative_ttl = Some(ttl).filter(|t| !t.is_zero());
        self
    }

    /// This entry's time-to-idle instead of the cache's
    /// ([`Builder::tti`](crate::Builder::tti); zero is ignored): dropped once not read for
    /// this long, even within its ttl.
    pub fn tti(mut self, tti: Duration) -> Self {
        self.extras.tti = Some(tti).filter(|t| !t.is_zero());
        self
    }

    /// A short string kept with the entry and handed back to the next load of the key in
    /// [`Previous::meta`](crate::Previous::meta): an ETag, a version. At most
    /// [`MAX_META_BYTES`].
    pub fn meta(mut self, meta: impl Into<String>) -> Self {
        self.extras.meta = Some(meta.into().into_boxed_str());
        self
    }

    /// Tags the entry carries, replacing any set before:
    /// [`Cache::invalidate_tag`](crate::Cache::invalidate_tag) of any of them drops it.
    /// Duplicates count once; each is 1 to [`MAX_TAG_BYTES`](crate::MAX_TAG_BYTES) bytes,
    /// at most [`Builder::max_tags_per_entry`](crate::Builder::max_tags_per_entry) of them
    /// (checked when the answer is stored: [`Error::EmptyTag`](crate::Error::EmptyTag),
    /// [`Error::TagTooLong`](crate::Error::TagTooLong),
    /// [`Error::TooManyTags`](crate::Error::TooManyTags)). An empty list means "no tags"
    /// (a not-modified answer otherwise keeps the previous entry's).
    pub fn tags<T: Into<String>>(mut self, tags: impl IntoIterator<Item = T>) -> Self {
        let tags = tags.into_iter().map(|t| t.into().into_boxed_str());
        self.extras.tags = Some(tags.collect());
        self
    }

    /// One more tag (see [`tags`](Self::tags)).
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        let mut tags = self.extras.tags.take().map_or_else(Vec::new, Vec::from);
        tags.push(tag.into().into_boxed_str());
        self.extras.tags = Some(tags.into_boxed_slice());
        self
    }

    /// Answer the callers of this load (its leader and its waiters) and store nothing:
    /// whatever the key held before stays as it was.
    pub fn no_cache(mut self) -> Self {
        self.store = false;
        self
    }

    /// The ttl this answer sets, if any.
    pub fn ttl_set(&self) -> Option<Duration> {
        self.extras.ttl
    }

    /// The grace this answer sets, if any.
    pub fn grace_set(&self) -> Option<Duration> {
        self.extras.grace
    }

    /// The negative ttl this answer sets, if any.
    pub fn negative_ttl_set(&self) -> Option<Duration> {
        self.extras.negative_ttl
    }

    /// The time-to-idle this answer sets, if any.
    pub fn tti_set(&self) -> Option<Duration> {
        self.extras.tti
    }

    /// The metadata this answer sets, if any.
    pub fn meta_set(&self) -> Option<&str> {
        self.extras.meta.as_deref()
    }

    /// The tags this answer sets, if any (as given: duplicates are removed when stored).
    pub fn tags_set(&self) -> Option<&[Box<str>]> {
        self.extras.tags.as_deref()
    }

    /// Whether the answer is stored (not [`no_cache`](Self::no_cache)).
    pub fn is_cached(&self) -> bool {
        self.store
    }

    /// Whether the answer is [`not_modified`](Self::not_modified).
    pub fn is_not_modified(&self) -> bool {
        matches!(self.answer, Answer::NotModified)
    }

    /// The value found (`Some(None)`: absent), or `None` for "not modified".
    pub fn found(&self) -> Option<Option<&V>> {
        match &self.answer {
            Answer::Value(v) => Some(v.as_ref()),
            Answer::NotModified => None,
        }
    }

    /// The same answer over another value type (a driver that keeps values wrapped).
    pub fn map<U>(self, f: impl FnOnce(V) -> U) -> Loaded<U> {
        let answer = match self.answer {
            Answer::Value(v) => Answer::Value(v.map(f)),
            Answer::NotModified => Answer::NotModified,
        };
        Loaded {
            answer,
            extras: self.extras,
            store: self.store,
        }
    }
}

impl<V> From<Option<V>> for Loaded<V> {
    /// `Some(v)`: [`Loaded::value`]; `None`: [`Loaded::absent`].
    fn from(value: Option<V>) -> Self {
        Self::new(Answer::Value(value))
    }
}

/// How a finished load's result is kept: a ttl forced by the driver (a value adopted from a
/// shared tier keeps the time it has left), the loader's own choices, and whether to store
/// it at all.
#[derive(Debug, Default)]
pub(crate) struct Keep {
    pub(crate) ttl: Option<Duration>,
    pub(crate) extras: Extras,
    pub(crate) no_cache: bool,
}
