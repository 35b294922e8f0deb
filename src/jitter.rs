//! The draws of jittered intervals: a seed per interval, and a uniform draw below a
//! bound.
//!
//! Intervals started in the same tick stay in the same tick on a wheel, period after
//! period; a random delay drawn afresh for each of their ticks spreads them. The draws need
//! no cryptographic quality, only to differ from interval to interval, from process to
//! process and from tick to tick, at no cost in size: the generator is SplitMix64
//! (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014), whose
//! whole state is one `u64` that advances by a constant, so that the draw of a state
//! can be computed again from the state alone.
//!
//! # Seeds
//!
//! [`seed`] hashes a process-wide counter with std's `RandomState`, whose keys come from
//! the operating system's randomness once per thread: the counter makes every seed of a
//! process distinct (nothing depends on an address), the keys make two processes'
//! sequences unrelated, so that hosts restarted together, which open their connections
//! in the same order, do not jitter in step either. A seed read from the clock would not
//! ensure that: on a paused clock, or two hosts whose clocks agree to the tick, it
//! repeats.

use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64's increment, the odd integer nearest 2^64 / φ.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// A fresh state for one interval's generator; see [Seeds](self#seeds).
pub(crate) fn seed() -> u64 {
    static SEEDS: AtomicU64 = AtomicU64::new(0);
    RandomState::new().hash_one(SEEDS.fetch_add(1, Ordering::Relaxed))
}

/// The state after `state`.
pub(crate) fn next(state: u64) -> u64 {
    state.wrapping_add(GAMMA)
}

/// What `state` draws below `max`, in `[0, max)`: uniform to within 2^-64 of each
/// value's probability, and zero when `max` is.
pub(crate) fn draw(state: u64, max: u64) -> u64 {
    // The high half of a 64×64-bit product: `mix(state) / 2^64` scaled to `max`, which
    // stays below `max` since `mix(state) < 2^64`.
    ((u128::from(mix(state)) * u128::from(max)) >> 64) as u64
}

/// SplitMix64's output function: a bijection that spreads every bit of `z` over all.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Successive states from `seed`, as an interval draws them.
    fn states(seed: u64, n: usize) -> impl Iterator<Item = u64> {
        std::iter::successors(Some(seed), |&s| Some(next(s))).take(n)
    }

    #[test]
    fn draws_stay_below_the_bound() {
        for max in [1, 2, 3, 1000, 1 << 40, u64::MAX - 1, u64::MAX] {
            for state in states(seed(), 10_000).chain([0, u64::MAX]) {
                assert!(draw(state, max) < max, "state {state:#x}, max {max}");
            }
        }
        // At the widest bound the draw is the mixed state less one (or zero): the
        // product's high half never reaches the bound.
        for state in states(seed(), 1_000) {
            assert_eq!(draw(state, u64::MAX), mix(state).saturating_sub(1));
        }
        assert_eq!(draw(12_345, 0), 0);
    }

    #[test]
    fn draws_are_uniform() {
        const BUCKETS: usize = 16;
        const DRAWS: usize = 160_000;
        let max = 1_000_003; // not a power of two
        let mut counts = [0usize; BUCKETS];
        for state in states(seed(), DRAWS) {
            counts[(draw(state, max) as usize) * BUCKETS / max as usize] += 1;
        }
        // 10 000 expected per bucket, standard deviation about 97: 6 of them either way.
        for (i, &c) in counts.iter().enumerate() {
            assert!((9_400..10_600).contains(&c), "bucket {i}: {c} of {DRAWS}");
        }
    }

    #[test]
    fn seeds_differ() {
        let seeds: std::collections::BTreeSet<u64> = (0..10_000).map(|_| seed()).collect();
        assert_eq!(seeds.len(), 10_000);
        // From other threads too (their own `RandomState` keys).
        let other: Vec<u64> = std::thread::spawn(|| (0..100).map(|_| seed()).collect())
            .join()
            .unwrap();
        assert!(other.iter().all(|s| !seeds.contains(s)));
    }

    #[test]
    fn successive_states_draw_unrelated_values() {
        // Neighbouring states (a seed and its successors) must not draw neighbouring
        // values: the output function spreads them.
        let max = 1_000;
        let draws: Vec<u64> = states(0, 1_000).map(|s| draw(s, max)).collect();
        let steps_up = draws.windows(2).filter(|w| w[1] > w[0]).count();
        assert!((400..600).contains(&steps_up), "{steps_up} of 999 rise");
        let distinct: std::collections::BTreeSet<_> = draws.iter().collect();
        assert!(distinct.len() > 550, "{} distinct of 1000", distinct.len());
    }
}
