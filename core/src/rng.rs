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

/// The engine's shared source of randomness. Only writes (jitter) and hits close to expiry
/// (XFetch) draw from it, so one lock is cheap enough.
pub(crate) struct SharedRng(Mutex<Box<dyn DynRng>>);

impl SharedRng {
    pub(crate) fn new<R: rand_core::Rng + Send + 'static>(rng: R) -> Self {
        Self(Mutex::new(Box::new(rng)))
    }

    /// Uniform in [0, 1), 53 bits.
    pub(crate) fn unit(&self) -> f64 {
        let bits = self.0.lock().next_u64() >> 11;
        bits as f64 * (1.0 / (1u64 << 53) as f64)
    }
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
