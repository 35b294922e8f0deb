//! The hashed wheel itself: a pure data structure with no clock, no locks and no async.
//!
//! Keeping it pure means a model test can drive it tick by tick against a `BTreeMap`
//! (see `tests/wheel_model.rs` and the in-file tests), and every question of time,
//! locking and waking lives in [`driver`](crate::driver) instead.
//!
//! # Implementation
//!
//! Entries live in one [`slab::Slab`]; each slot of the wheel is the head of an
//! intrusive doubly linked list threaded through the slab by index (as tokio-util's
//! `DelayQueue` does), so insert and remove are O(1) and a removed entry's memory is
//! reused at once. An entry records the *absolute* tick it is due at, and sits in slot
//! `tick & mask`; a slot therefore holds entries of several revolutions, and a visit
//! takes out only those whose tick has come (Netty keeps a `remainingRounds` counter
//! instead; an absolute tick needs no decrementing and cannot be wrong after a missed
//! revolution).
//!
//! # Stale keys
//!
//! A [`Key`] pairs the slab index with a generation stamped on the entry at insert.
//! The generation alone does not make a stale key inert: it is 20 bits (packed with
//! the 44-bit tick into one word, so that an entry is 32 bytes) and wraps after a
//! million inserts. So every operation on an entry names it by its key *and* the tick
//! it is due at, and acts only if both match. The holder of a key whose entry was
//! handed out by [`Wheel::advance`] has a tick that is processed, and no live entry
//! has a processed tick (inserts at a tick [`Wheel::advance`] has started on are
//! refused), so such a key matches nothing, however often its index and generation
//! come round. A holder that removes its entry itself forgets the key, as the driver
//! does; the wheel cannot tell that key from a new one.
//!
//! A bitmap with one bit per slot says which slots are non-empty, so the driver finds
//! the next slot worth waking for with a few `trailing_zeros`, and a catch-up after a
//! late wakeup visits only occupied slots.

use std::num::NonZeroU64;

use slab::Slab;

/// End of an intrusive list.
const NIL: u32 = u32::MAX;

/// Bits of an entry's packed word that hold its generation; the rest hold its tick.
/// Packing both in one non-zero `u64` makes an entry 32 bytes, slab's own tag
/// included (the zero the word can never hold tells a vacant slab slot from an
/// occupied one), instead of 48.
const GENERATION_BITS: u32 = 20;
const GENERATION_MASK: u32 = (1 << GENERATION_BITS) - 1;

/// The largest generation handed out before wrapping to 1. Tests and the fuzz target
/// wrap after three inserts, so that stale keys whose index and generation both
/// match a live entry are common there, not one in a million.
const GENERATION_MAX: u32 = if cfg!(any(test, fuzzing)) {
    3
} else {
    GENERATION_MASK
};

/// The largest tick an entry may have (2^44 - 1: 557 years of 1 ms ticks). Deadlines
/// beyond it saturate to it, so `tick + slots` arithmetic can never overflow.
pub(crate) const MAX_TICK: u64 = (1 << (64 - GENERATION_BITS)) - 1;

/// How many entries the wheel can hold: indices are stored as `u32` to keep entries
/// small, with [`NIL`] reserved. At 32 bytes an entry that is 128 GiB, so it is a
/// limit in name only, but it is checked rather than assumed.
pub(crate) const MAX_ENTRIES: usize = NIL as usize;

/// Names one entry of the wheel. Stale keys are harmless: see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    index: u32,
    /// Never 0, below 2^20.
    generation: u32,
}

impl Key {
    /// The key as 52 bits: index, then generation. For handles that pack it.
    pub(crate) fn to_bits(self) -> u64 {
        (u64::from(self.index) << GENERATION_BITS) | u64::from(self.generation)
    }

    /// The inverse of [`to_bits`](Key::to_bits) (for bits it produced).
    pub(crate) fn from_bits(bits: u64) -> Key {
        Key {
            index: (bits >> GENERATION_BITS) as u32,
            generation: bits as u32 & GENERATION_MASK,
        }
    }
}

/// The bits [`Key::to_bits`] uses.
pub(crate) const KEY_BITS: u32 = 32 + GENERATION_BITS;

/// Why [`Wheel::insert`] refused an entry; the value comes back with it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum InsertError {
    /// The tick has already been processed: the entry is due now.
    Elapsed,
    /// [`MAX_ENTRIES`] entries are already present.
    Full,
}

/// One timer in the wheel. Public to the crate only so that storage released by
/// [`Wheel::release_if_empty`] can be dropped outside the caller's lock.
#[derive(Debug)]
pub(crate) struct Entry<T> {
    value: T,
    /// `tick << GENERATION_BITS | generation`: the absolute tick the entry is due at
    /// (it sits in slot `tick & mask`) and its generation, which is never 0.
    packed: NonZeroU64,
    prev: u32,
    next: u32,
}

impl<T> Entry<T> {
    fn tick(&self) -> u64 {
        self.packed.get() >> GENERATION_BITS
    }

    fn generation(&self) -> u32 {
        self.packed.get() as u32 & GENERATION_MASK
    }

    fn set_tick(&mut self, tick: u64) {
        self.packed = pack(tick, self.generation());
    }
}

/// `tick` (at most [`MAX_TICK`]) and a non-zero `generation` in one word.
fn pack(tick: u64, generation: u32) -> NonZeroU64 {
    debug_assert!(tick <= MAX_TICK && generation != 0 && generation <= GENERATION_MASK);
    NonZeroU64::new((tick << GENERATION_BITS) | u64::from(generation))
        .expect("the generation is never 0")
}

/// A hashed timing wheel of entries of type `T`.
#[derive(Debug)]
pub(crate) struct Wheel<T> {
    entries: Slab<Entry<T>>,
    /// Head of each slot's list, or `NIL`.
    heads: Box<[u32]>,
    /// Bit `s` is set iff `heads[s] != NIL`.
    occupied: Box<[u64]>,
    /// `heads.len() - 1`; `heads.len()` is a power of two.
    mask: u64,
    /// Every tick `<= elapsed` has been processed: no entry has `tick <= elapsed`.
    elapsed: u64,
    /// Whether [`advance`](Wheel::advance) stopped partway through tick `elapsed + 1`
    /// (its budget ran out): that tick takes no new entries, so that no new entry can
    /// share a tick with one already handed out (see the module docs).
    in_progress: bool,
    /// Stamped on the next inserted entry: `1..=GENERATION_MAX`, wrapping.
    generation: u32,
}

impl<T> Wheel<T> {
    /// A wheel of `slots` slots (a power of two, at least 1) with tick 0 processed.
    pub(crate) fn new(slots: usize) -> Self {
        assert!(slots.is_power_of_two(), "wheel size must be a power of two");
        Wheel {
            entries: Slab::new(),
            heads: vec![NIL; slots].into_boxed_slice(),
            occupied: vec![0; slots.div_ceil(64)].into_boxed_slice(),
            mask: slots as u64 - 1,
            elapsed: 0,
            in_progress: false,
            generation: 1,
        }
    }

    /// The last processed tick.
    pub(crate) fn elapsed(&self) -> u64 {
        self.elapsed
    }

    /// The first tick [`insert`](Wheel::insert) accepts: `elapsed() + 1`, or the tick
    /// after that while `elapsed() + 1` is partly handed out.
    pub(crate) fn first_open_tick(&self) -> u64 {
        self.elapsed + 1 + u64::from(self.in_progress)
    }

    /// Number of entries present.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Number of slots.
    pub(crate) fn slots(&self) -> usize {
        self.heads.len()
    }

    /// Adds `value`, due at `tick` (saturated to [`MAX_TICK`]).
    ///
    /// # Errors
    ///
    /// [`InsertError::Elapsed`] if `tick < self.first_open_tick()`: the caller fires it
    /// itself. [`InsertError::Full`] if the wheel holds [`MAX_ENTRIES`] entries.
    pub(crate) fn insert(&mut self, tick: u64, value: T) -> Result<Key, (T, InsertError)> {
        if tick < self.first_open_tick() {
            return Err((value, InsertError::Elapsed));
        }
        if self.entries.len() >= MAX_ENTRIES {
            return Err((value, InsertError::Full));
        }
        let tick = tick.min(MAX_TICK);
        let generation = self.generation;
        self.generation = if generation == GENERATION_MAX {
            1
        } else {
            generation + 1
        };
        let index = self.entries.insert(Entry {
            value,
            packed: pack(tick, generation),
            prev: NIL,
            next: NIL,
        }) as u32;
        self.link(index);
        Ok(Key { index, generation })
    }

    /// Removes the entry `key` names, due at `tick`, and returns its value; `None` if
    /// it is gone (handed out or removed before). Below, "the entry `key` names at
    /// `tick`" means one present with that key and that tick (see the module docs).
    pub(crate) fn remove(&mut self, key: Key, tick: u64) -> Option<T> {
        self.get(key, tick)?;
        self.unlink(key.index);
        Some(self.entries.remove(key.index as usize).value)
    }

    /// The value of the entry `key` names at `tick`, if it is present.
    pub(crate) fn get_mut(&mut self, key: Key, tick: u64) -> Option<&mut T> {
        self.get(key, tick)?;
        Some(&mut self.entries[key.index as usize].value)
    }

    /// Whether `key` names an entry present at `tick`.
    pub(crate) fn contains(&self, key: Key, tick: u64) -> bool {
        self.get(key, tick).is_some()
    }

    /// Moves the entry `key` names at `tick` to `to`, keeping its key and value: the
    /// cheap way to push back an idle deadline. From then on it is named at `to`.
    ///
    /// # Errors
    ///
    /// `Err(None)` if the key names nothing at `tick`; `Err(Some(value))` with the
    /// entry removed if `to` is before [`first_open_tick`](Wheel::first_open_tick)
    /// (the caller fires it).
    pub(crate) fn reschedule(&mut self, key: Key, tick: u64, to: u64) -> Result<(), Option<T>> {
        self.get(key, tick).ok_or(None)?;
        let (current, tick) = (tick.min(MAX_TICK), to);
        if tick < self.first_open_tick() {
            return Err(self.remove(key, current));
        }
        let tick = tick.min(MAX_TICK);
        if (current ^ tick) & self.mask == 0 {
            // Same slot: no relinking needed.
            self.entries[key.index as usize].set_tick(tick);
            return Ok(());
        }
        self.unlink(key.index);
        self.entries[key.index as usize].set_tick(tick);
        self.link(key.index);
        Ok(())
    }

    /// A lower bound for the tick of the next entry to become due: the first tick after
    /// `elapsed` whose slot is occupied. `None` iff the wheel is empty.
    ///
    /// The slot may hold only entries of later revolutions; the driver then wakes, finds
    /// nothing due, and asks again: at most one wasted wakeup per revolution.
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        if self.entries.is_empty() {
            return None;
        }
        let found = self.next_occupied(self.elapsed + 1, self.slots() as u64);
        debug_assert!(found.is_some(), "non-empty wheel with no occupied slot");
        found
    }

    /// Processes ticks up to and including `to`, handing every entry with
    /// `tick <= to` to `expire`, and stops early once `limit` (at least 1) entries were
    /// handed out, even in the middle of a slot. Returns `true` when `elapsed() == to`;
    /// `false` means call again to continue.
    ///
    /// Each occupied slot in `(elapsed, to]` is visited at most once per call, even when
    /// `to` is many revolutions ahead, because a visit takes out everything due by `to`.
    pub(crate) fn advance(&mut self, to: u64, limit: usize, mut expire: impl FnMut(T)) -> bool {
        let to = to.min(MAX_TICK);
        if to <= self.elapsed {
            return true;
        }
        // One revolution from `elapsed` reaches every slot; a slot visit takes out all
        // that is due by `to`, so there is no need to go round again for a late `to`.
        let end = to.min(self.elapsed + self.slots() as u64);
        let mut from = self.elapsed + 1;
        let mut budget = limit.max(1);
        while from <= end {
            let Some(tick) = self.next_occupied(from, end - from + 1) else {
                break;
            };
            let emptied = self.expire_slot(tick, to, &mut budget, &mut expire);
            if !emptied {
                // Stopped inside the slot: what is left of it is due at `tick` (a
                // catch-up within a revolution) or later, and every tick before it
                // mapped to a slot visited above. Whether `tick` itself has handed
                // anything out or not, it takes no new entries until done.
                self.elapsed = tick - 1;
                self.in_progress = true;
                return false;
            }
            from = tick + 1;
            if budget == 0 && tick < end {
                // Every tick in (elapsed, tick] mapped to a slot visited above.
                self.elapsed = tick;
                self.in_progress = false;
                return false;
            }
        }
        self.elapsed = to;
        self.in_progress = false;
        true
    }

    /// If the wheel is empty and its storage has room for more than `retain` entries,
    /// swaps the storage for a fresh one and returns the old (for the caller to drop
    /// after releasing its lock). Keeps a burst of timers from holding its peak memory
    /// for ever; keys handed out before stay inert (their generation matches nothing).
    pub(crate) fn release_if_empty(&mut self, retain: usize) -> Option<Slab<Entry<T>>> {
        (self.entries.is_empty() && self.entries.capacity() > retain)
            .then(|| std::mem::take(&mut self.entries))
    }

    /// Removes every entry, in no particular order, resetting nothing else.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = T> + '_ {
        self.heads.fill(NIL);
        self.occupied.fill(0);
        self.entries.drain().map(|entry| entry.value)
    }

    /// Takes the entries with `tick <= to` out of the slot `tick` maps to, while
    /// `budget` lasts (decrementing it); returns `false` if it ran out with due entries
    /// left in the slot.
    fn expire_slot(
        &mut self,
        tick: u64,
        to: u64,
        budget: &mut usize,
        expire: &mut impl FnMut(T),
    ) -> bool {
        let slot = (tick & self.mask) as usize;
        let mut index = self.heads[slot];
        while index != NIL {
            let entry = &self.entries[index as usize];
            let next = entry.next;
            if entry.tick() <= to {
                if *budget == 0 {
                    return false;
                }
                self.unlink(index);
                expire(self.entries.remove(index as usize).value);
                *budget -= 1;
            }
            index = next;
        }
        true
    }

    /// The entry `key` names at `tick` (saturated as [`insert`](Wheel::insert) does).
    fn get(&self, key: Key, tick: u64) -> Option<&Entry<T>> {
        let packed = pack(tick.min(MAX_TICK), key.generation);
        self.entries
            .get(key.index as usize)
            .filter(|entry| entry.packed == packed)
    }

    fn link(&mut self, index: u32) {
        let slot = (self.entries[index as usize].tick() & self.mask) as usize;
        let head = self.heads[slot];
        if head != NIL {
            self.entries[head as usize].prev = index;
        } else {
            self.occupied[slot / 64] |= 1 << (slot % 64);
        }
        let entry = &mut self.entries[index as usize];
        entry.prev = NIL;
        entry.next = head;
        self.heads[slot] = index;
    }

    fn unlink(&mut self, index: u32) {
        let entry = &self.entries[index as usize];
        let (prev, next) = (entry.prev, entry.next);
        let slot = (entry.tick() & self.mask) as usize;
        if prev != NIL {
            self.entries[prev as usize].next = next;
        } else {
            debug_assert_eq!(self.heads[slot], index);
            self.heads[slot] = next;
            if next == NIL {
                self.occupied[slot / 64] &= !(1 << (slot % 64));
            }
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }

    /// The first tick in `[from, from + window)` whose slot is occupied.
    /// `window` is at most the number of slots.
    fn next_occupied(&self, from: u64, window: u64) -> Option<u64> {
        debug_assert!(window <= self.slots() as u64);
        let slots = self.slots() as u64;
        let start = from & self.mask;
        // Scan the bitmap from `start` to the end, then wrap around to `start`.
        let mut scanned = 0;
        let mut slot = start;
        while scanned < window {
            let word = self.occupied[(slot / 64) as usize] >> (slot % 64);
            if word != 0 {
                let offset = u64::from(word.trailing_zeros());
                let distance = scanned + offset;
                return (distance < window).then_some(from + distance);
            }
            // Skip to the next word boundary (or the wheel's end).
            let step = (64 - slot % 64).min(slots - slot);
            scanned += step;
            slot = (slot + step) & self.mask;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(wheel: &mut Wheel<u32>, to: u64) -> Vec<u32> {
        let mut out = Vec::new();
        assert!(wheel.advance(to, usize::MAX, |v| out.push(v)));
        out.sort_unstable();
        out
    }

    #[test]
    fn fires_at_its_tick_not_before() {
        let mut wheel = Wheel::new(8);
        wheel.insert(3, 30).unwrap();
        assert_eq!(collect(&mut wheel, 2), Vec::<u32>::new());
        assert_eq!(collect(&mut wheel, 3), vec![30]);
        assert_eq!(wheel.len(), 0);
    }

    #[test]
    fn later_revolutions_wait_in_their_slot() {
        let mut wheel = Wheel::new(4);
        wheel.insert(2, 2).unwrap();
        wheel.insert(6, 6).unwrap();
        wheel.insert(10, 10).unwrap();
        assert_eq!(wheel.next_expiration(), Some(2));
        assert_eq!(collect(&mut wheel, 2), vec![2]);
        assert_eq!(wheel.next_expiration(), Some(6));
        assert_eq!(collect(&mut wheel, 9), vec![6]);
        assert_eq!(collect(&mut wheel, 10), vec![10]);
        assert_eq!(wheel.next_expiration(), None);
    }

    #[test]
    fn catch_up_over_many_revolutions_visits_each_slot_once() {
        let mut wheel = Wheel::new(4);
        for tick in 1..=40 {
            wheel.insert(tick, tick as u32).unwrap();
        }
        assert_eq!(collect(&mut wheel, 37), (1..=37).collect::<Vec<_>>());
        assert_eq!(wheel.elapsed(), 37);
        assert_eq!(collect(&mut wheel, 100), vec![38, 39, 40]);
    }

    #[test]
    fn elapsed_ticks_are_refused() {
        let mut wheel = Wheel::new(4);
        collect(&mut wheel, 5);
        assert_eq!(wheel.insert(5, 1), Err((1, InsertError::Elapsed)));
        assert!(wheel.insert(6, 1).is_ok());
    }

    #[test]
    fn stale_keys_touch_nothing() {
        let mut wheel = Wheel::new(4);
        let a = wheel.insert(1, 1).unwrap();
        assert_eq!(wheel.remove(a, 1), Some(1));
        let b = wheel.insert(1, 2).unwrap();
        assert_eq!(a.index, b.index, "slab reuses the index");
        assert_ne!(a, b, "with a new generation");
        assert_eq!(wheel.remove(a, 1), None);
        assert_eq!(wheel.get_mut(a, 1), None);
        assert_eq!(wheel.reschedule(a, 1, 3), Err(None));
        assert_eq!(wheel.remove(b, 2), None, "the wrong tick names nothing");
        assert_eq!(wheel.remove(b, 1), Some(2));
    }

    /// The key of an entry that fired, kept while its index and generation come round
    /// again (every three inserts in tests), never names the entry that gets them.
    #[test]
    fn a_fired_key_never_names_the_entry_that_reuses_its_index_and_generation() {
        let mut wheel = Wheel::new(4);
        let fired = wheel.insert(1, 0).unwrap();
        assert_eq!(collect(&mut wheel, 1), vec![0]);
        let mut matched = 0;
        for value in 1..=3 * GENERATION_MAX {
            let key = wheel.insert(1 + u64::from(value), value).unwrap();
            matched += u32::from(key == fired);
            assert_eq!(wheel.get_mut(fired, 1), None);
            assert!(!wheel.contains(fired, 1));
            assert_eq!(wheel.reschedule(fired, 1, 50), Err(None));
            assert_eq!(wheel.remove(fired, 1), None);
            assert_eq!(wheel.remove(key, 1 + u64::from(value)), Some(value));
        }
        assert_eq!(matched, 3, "the same index and generation came round");
    }

    #[test]
    fn a_tick_partly_handed_out_takes_no_new_entries() {
        let mut wheel = Wheel::new(4);
        for v in 0..3 {
            wheel.insert(2, v).unwrap();
        }
        assert!(!wheel.advance(2, 1, drop));
        assert_eq!((wheel.elapsed(), wheel.first_open_tick()), (1, 3));
        assert_eq!(wheel.insert(2, 9), Err((9, InsertError::Elapsed)));
        let key = wheel.insert(3, 9).unwrap();
        assert_eq!(collect(&mut wheel, 2).len(), 2);
        assert_eq!(wheel.first_open_tick(), 3);
        assert_eq!(wheel.remove(key, 3), Some(9));
    }

    #[test]
    fn reschedule_moves_between_slots_and_fires_elapsed() {
        let mut wheel = Wheel::new(4);
        let a = wheel.insert(1, 1).unwrap();
        wheel.reschedule(a, 1, 3).unwrap();
        assert_eq!(wheel.reschedule(a, 1, 4), Err(None), "now named at 3");
        assert_eq!(collect(&mut wheel, 2), Vec::<u32>::new());
        wheel.reschedule(a, 3, 7).unwrap(); // same slot, later revolution
        assert_eq!(collect(&mut wheel, 3), Vec::<u32>::new());
        assert_eq!(wheel.reschedule(a, 7, 3), Err(Some(1)));
        assert_eq!(wheel.len(), 0);
    }

    #[test]
    fn limit_stops_between_slots_and_resumes() {
        let mut wheel = Wheel::new(8);
        for tick in 1..=6 {
            wheel.insert(tick, tick as u32).unwrap();
        }
        let mut out = Vec::new();
        assert!(!wheel.advance(6, 2, |v| out.push(v)));
        assert_eq!(out, vec![1, 2]);
        assert!(wheel.advance(6, usize::MAX, |v| out.push(v)));
        assert_eq!(out, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn limit_stops_inside_a_slot_and_resumes() {
        let mut wheel = Wheel::new(8);
        for v in 0..5 {
            wheel.insert(3, v).unwrap();
        }
        wheel.insert(4, 9).unwrap();
        let mut out = Vec::new();
        assert!(!wheel.advance(4, 2, |v| out.push(v)));
        assert_eq!(out.len(), 2);
        assert_eq!(wheel.elapsed(), 2, "tick 3 is not done");
        assert!(!wheel.advance(4, 2, |v| out.push(v)));
        assert!(wheel.advance(4, 2, |v| out.push(v)));
        out.sort_unstable();
        assert_eq!(out, vec![0, 1, 2, 3, 4, 9]);
        assert_eq!(wheel.elapsed(), 4);
    }

    #[test]
    fn empty_storage_is_released_and_old_keys_stay_inert() {
        let mut wheel = Wheel::new(8);
        let keys: Vec<Key> = (0..100).map(|v| wheel.insert(5, v).unwrap()).collect();
        assert!(wheel.release_if_empty(10).is_none(), "not empty");
        for &k in &keys[1..] {
            wheel.remove(k, 5);
        }
        collect(&mut wheel, 5);
        assert!(
            wheel.release_if_empty(1000).is_none(),
            "small enough to keep"
        );
        assert!(wheel.release_if_empty(10).is_some());
        let fresh = wheel.insert(6, 7).unwrap();
        assert!(keys.iter().all(|&k| wheel.remove(k, 5).is_none()));
        assert_eq!(wheel.remove(fresh, 6), Some(7));
    }

    #[test]
    fn an_entry_is_32_bytes_in_the_slab() {
        // slab's own `Entry<T>` (private) has this shape: its tag must fit in the
        // niche of `Entry::packed`, or every entry would grow to 40 bytes.
        #[allow(dead_code)]
        enum SlabEntry<T> {
            Vacant(usize),
            Occupied(T),
        }
        type Stored = Entry<std::task::Waker>;
        assert_eq!(std::mem::size_of::<Stored>(), 32);
        assert_eq!(std::mem::size_of::<SlabEntry<Stored>>(), 32);
    }

    #[test]
    fn generations_wrap_past_zero_and_keys_round_trip() {
        let mut wheel = Wheel::new(4);
        wheel.generation = GENERATION_MAX;
        let a = wheel.insert(u64::MAX, 1).unwrap();
        let b = wheel.insert(3, 2).unwrap();
        assert_eq!((a.generation, b.generation), (GENERATION_MAX, 1));
        assert_eq!(Key::from_bits(a.to_bits()), a);
        let widest = Key {
            index: u32::MAX - 1,
            generation: GENERATION_MASK,
        };
        assert_eq!(Key::from_bits(widest.to_bits()), widest);
        assert!(widest.to_bits() < 1 << KEY_BITS);
        assert_eq!(wheel.get(a, u64::MAX).map(Entry::tick), Some(MAX_TICK));
        assert_eq!(wheel.remove(b, 3), Some(2));
        assert_eq!(wheel.remove(b, 3), None);
        assert_eq!(wheel.remove(a, MAX_TICK), Some(1));
    }

    #[test]
    fn huge_ticks_saturate() {
        let mut wheel = Wheel::new(1024);
        wheel.insert(u64::MAX, 1).unwrap();
        assert!(wheel.next_expiration().is_some());
        assert_eq!(collect(&mut wheel, MAX_TICK - 1), Vec::<u32>::new());
        assert_eq!(collect(&mut wheel, u64::MAX), vec![1]);
    }

    #[test]
    fn next_occupied_wraps_and_respects_window() {
        let mut wheel = Wheel::new(128);
        wheel.insert(70, 0).unwrap();
        collect(&mut wheel, 100);
        wheel.insert(130, 1).unwrap(); // slot 2
        assert_eq!(wheel.next_expiration(), Some(130));
        assert_eq!(wheel.next_occupied(101, 29), None);
        assert_eq!(wheel.next_occupied(101, 30), Some(130));
    }
}
