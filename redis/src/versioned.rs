//! [`Versioned`]: what the L1 of a two-tier cache holds.

/// What the L1 of a two-tier cache holds: the value and its version. A refresh tells the
/// fleet which version it replaces, so only a newer entry ends it without a load.
///
/// The version of a shared entry is the tier's commit time in microseconds (PROTOCOL.md,
/// section 3). A value kept in this process alone (loaded while the tier was down, or one
/// the codec could not share) gets the wall-clock time of its load in microseconds: an
/// entry the fleet wrote before it is older and never replaces it, so this process's reads
/// do not go back in time when the tier returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned<V> {
    /// The value.
    pub value: V,
    /// The shared entry's version, or the time of this process's own load.
    pub version: u64,
    local: bool,
}

impl<V> Versioned<V> {
    /// A value of this process alone, versioned by the time it was loaded (now).
    pub fn local(value: V) -> Self {
        Self {
            value,
            version: crate::wall::now_us(),
            local: true,
        }
    }

    /// The value of the shared entry of `version`.
    pub fn shared(value: V, version: u64) -> Self {
        Self {
            value,
            version,
            local: false,
        }
    }

    /// Whether the value never reached the shared tier: it is this process's alone.
    pub fn is_local(&self) -> bool {
        self.local
    }
}
