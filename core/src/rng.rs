//! Randomness, injected: any `rand_core::Rng` drives jitter and XFetch, so a test can seed it.

use alloc::boxed::Box;

use crate::sync::Mutex;

/// The object-safe part of `rand_core::Rng` the engine needs.
trait DynRng: Send {
    fn next_u64(&mut self) -> u64;
}

impl<R: rand_core::Rng + Send> DynRng for R {
    fn next_u64(&mut self) -> u64 {
        rand_core::Rng::next_u64(self)
    }
}

/// The engine's shared source of randomness: hits close to expiry (XFetch) draw from it.
/// The default one also seeds each shard's own jitter generator ([`ShardRng`]) once, at
/// build; a generator given to the builder (`rng`, `seed`) serves jitter itself, in the
/// order of the stores, so a seeded cache jitters the same way on every run (which shard a
/// key falls in depends on the process's random hash keys).
pub(crate) struct SharedRng {
    rng: Mutex<Box<dyn DynRng>>,
    given: bool,
}

impl SharedRng {
    /// A generator given to the builder: every draw comes from it.
    pub(crate) fn new<R: rand_core::Rng + Send + 'static>(rng: R) -> Self {
        Self {
            rng: Mutex::new(Box::new(rng)),
            given: true,
        }
    }

    /// The default generator ([`default_rng`]), which seeds the shards' jitter generators.
    pub(crate) fn by_default() -> Self {
        Self {
            rng: Mutex::new(Box::new(default_rng())),
            given: false,
        }
    }

    /// Uniform in [0, 1), 53 bits.
    pub(crate) fn unit(&self) -> f64 {
        unit_of(self.rng.lock().next_u64())
    }

    /// Whether jitter draws from the shards' generators (the default) rather than this one
    /// (a generator given to the builder).
    #[inline]
    pub(crate) fn per_shard(&self) -> bool {
        !self.given
    }

    /// The generator of one shard's jitter, seeded from this one. With a given generator it
    /// is never drawn from (see [`per_shard`](Self::per_shard)), and seeded without a draw
    /// from that one, whose stream stays as it was. Not an `Option`: the shard's size is
    /// its stride in the table's array, which every hit multiplies by (8 bytes more cost
    /// the hit path an instruction).
    pub(crate) fn shard_rng(&self) -> ShardRng {
        let seed = match self.given {
            true => 0,
            false => self.rng.lock().next_u64(),
        };
        ShardRng(seeded_rng(seed))
    }
}

/// One shard's jitter generator, drawn from under the shard's write lock (a store holds it):
/// no lock or dynamic call of its own per miss, as the shared one would take.
pub(crate) struct ShardRng(DefaultRng);

impl ShardRng {
    /// Uniform in [0, 1), 53 bits.
    #[inline]
    pub(crate) fn unit(&mut self) -> f64 {
        unit_of(rand_core::Rng::next_u64(&mut self.0))
    }
}

/// The top 53 bits of `bits` as a float uniform in [0, 1).
#[inline]
fn unit_of(bits: u64) -> f64 {
    (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// The default generator: xoshiro256++, fast with good spread. Not cryptographic: jitter
/// and XFetch need spread, not secrecy.
pub type DefaultRng = rand_xoshiro::Xoshiro256PlusPlus;

/// A [`DefaultRng`] seeded with `seed`.
pub(crate) fn seeded_rng(seed: u64) -> DefaultRng {
    use rand_core::SeedableRng;
    DefaultRng::seed_from_u64(seed)
}

/// A [`DefaultRng`] seeded from the process's random hash keys under `std` (so processes of
/// a fleet do not jitter in lock step), or from a fixed seed without it. For a seed of your
/// own, [`Builder::seed`](crate::Builder::seed).
pub fn default_rng() -> DefaultRng {
    #[cfg(feature = "std")]
    let seed = {
        use core::hash::{BuildHasher, Hasher};
        let mut h = std::hash::RandomState::new().build_hasher();
        h.write_u64(0x9e37_79b9_7f4a_7c15);
        h.finish()
    };
    #[cfg(not(feature = "std"))]
    let seed = 0x9e37_79b9_7f4a_7c15;
    seeded_rng(seed)
}
