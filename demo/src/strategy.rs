//! The strategies compared: naive cache-aside, and herdless in four configurations.

/// A way of caching the hot key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// Read the cache; on a miss call the origin and store the result. No coordination:
    /// every concurrent miss is an origin call.
    Naive,
    /// herdless with single-flight only (grace 0, beta 0): one origin call per expiry,
    /// everybody else waits for it.
    SingleFlight,
    /// herdless with stale-while-revalidate (grace, beta 0): past the TTL the old value is
    /// served at once while one background refresh runs.
    StaleWhileRevalidate,
    /// herdless with XFetch (beta 1, grace 0): one reader refreshes early, before expiry.
    XFetch,
    /// herdless with both (grace and beta 1), as a service would configure it.
    Combined,
}

impl Strategy {
    /// Every strategy, in the order of the table.
    pub const ALL: [Strategy; 5] = [
        Strategy::Naive,
        Strategy::SingleFlight,
        Strategy::StaleWhileRevalidate,
        Strategy::XFetch,
        Strategy::Combined,
    ];

    /// The name in the table and the plot.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Naive => "naive cache-aside",
            Strategy::SingleFlight => "herdless: single-flight",
            Strategy::StaleWhileRevalidate => "herdless: + stale-while-revalidate",
            Strategy::XFetch => "herdless: + XFetch",
            Strategy::Combined => "herdless: SWR + XFetch",
        }
    }

    /// The name given to `--only`.
    pub fn flag(self) -> &'static str {
        match self {
            Strategy::Naive => "naive",
            Strategy::SingleFlight => "single-flight",
            Strategy::StaleWhileRevalidate => "swr",
            Strategy::XFetch => "xfetch",
            Strategy::Combined => "combined",
        }
    }

    /// The strategy named `flag` by `--only`.
    pub fn from_flag(flag: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.flag() == flag)
    }
}
