//! The timing wheel itself: a pure data structure with no clock, no locks and no async.
//!
//! Time here is a count of *steps* (the driver makes a step a quarter of the
//! configured tick; the wheel does not care). Keeping the wheel pure means a model
//! test can drive it step by step against a `BTreeMap` (`src/tests/wheel_model.rs`,
//! and the in-file tests), and every question of time, locking and waking lives in
//! [`driver`](crate::driver) instead.
//!
//! # Implementation
//!
//! Entries live in one [`slab::Slab`]; each slot is the head of an intrusive doubly
//! linked list threaded through the slab by index (as tokio-util's `DelayQueue`
//! does), so insert and remove are O(1) and a removed entry's memory is reused at
//! once. An entry records the *absolute* step it is due at.
//!
//! The slots form levels, as in Varghese and Lauck's hierarchical wheel (scheme 7) and
//! Kafka's overflow wheels. Level 0 has `slots` slots of one step; each level above
//! has 64 slots, each as long as the whole level below. Steps are cut into aligned
//! blocks: an entry sits at the lowest level whose current block, the one holding the
//! next step to process (the *cursor*), holds the entry too. So level 0 holds only
//! steps of the cursor's own block of `slots` steps, one step per slot, and its first
//! occupied slot is exactly the earliest step pending; higher levels hold later
//! blocks. When the cursor reaches the start of an occupied slot of a higher level,
//! [`Wheel::advance`] moves that slot's entries down (each to the level its step now
//! belongs to), before anything in it can be due. An entry moves at most once per
//! level in its life, and [`Wheel::next_expiration`] is the earliest step pending or
//! the start of the slot whose entries move down next: however far away a deadline
//! is, the driver wakes once per level on its way (about six), not once per
//! revolution of level 0 (as with Netty's rounds).
//!
//! Which level and slot an entry is in follows from its step and the cursor, so
//! entries store neither: removing one recomputes them. That holds because the
//! cursor only moves forward through [`Wheel::advance`], which moves the entries of a
//! slot down exactly when the cursor enters the slot.
//!
//! # Stale keys
//!
//! A [`Key`] pairs the slab index with a generation stamped on the entry at insert.
//! The generation alone does not make a stale key inert: it is 20 bits (packed with
//! the 44-bit step into one word, so that an entry is 32 bytes) and wraps after a
//! million inserts. So every operation on an entry names it by its key *and* the step
//! it is due at, and acts only if both match. The holder of a key whose entry was
//! handed out by [`Wheel::advance`] has a step that is processed, and no live entry
//! has a processed step (inserts at a step [`Wheel::advance`] has started on are
//! refused), so such a key matches nothing, however often its index and generation
//! come round. A holder that removes its entry itself forgets the key, as the driver
//! does; the wheel cannot tell that key from a new one.
//!
//! Each level has a bitmap with one bit per slot that says which slots are non-empty,
//! so the next slot worth waking for is a few `trailing_zeros` away, and a catch-up
//! after a late wakeup visits only occupied slots.

use std::num::NonZeroU64;

use slab::Slab;

/// End of an intrusive list.
const NIL: u32 = u32::MAX;

/// Bits of an entry's packed word that hold its generation; the rest hold its step.
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

/// The largest step an entry may have (2^44 - 1: 557 years of 1 ms steps). Deadlines
/// beyond it saturate to it, so `step + slots` arithmetic can never overflow.
pub(crate) const MAX_STEP: u64 = (1 << (64 - GENERATION_BITS)) - 1;

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
    /// The entry's index in the wheel's storage (for [`Wheel::at`], and tables kept
    /// beside the wheel by index, see [`Wheel::indices`]): unique among the entries
    /// present.
    #[inline]
    pub(crate) fn index(self) -> usize {
        self.index as usize
    }

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
    /// The step has already been processed: the entry is due now.
    Processed,
    /// [`MAX_ENTRIES`] entries are already present.
    Full,
}

/// One timer in the wheel. Public to the crate only so that storage released by
/// [`Wheel::release_if_empty`] can be dropped outside the caller's lock.
#[derive(Debug, Clone)]
pub(crate) struct Entry<T> {
    value: T,
    /// `step << GENERATION_BITS | generation`: the absolute step the entry is due at
    /// (it sits in slot `step & mask`) and its generation, which is never 0.
    packed: NonZeroU64,
    prev: u32,
    next: u32,
}

impl<T> Entry<T> {
    fn step(&self) -> u64 {
        self.packed.get() >> GENERATION_BITS
    }

    fn generation(&self) -> u32 {
        self.packed.get() as u32 & GENERATION_MASK
    }

    fn set_step(&mut self, step: u64) {
        self.packed = pack(step, self.generation());
    }
}

/// `step` (at most [`MAX_STEP`]) and a non-zero `generation` in one word.
#[inline]
fn pack(step: u64, generation: u32) -> NonZeroU64 {
    debug_assert!(step <= MAX_STEP && generation != 0 && generation <= GENERATION_MASK);
    NonZeroU64::new((step << GENERATION_BITS) | u64::from(generation))
        .expect("the generation is never 0")
}

/// Slots in each level above level 0 (as in tokio's wheel): one bitmap word a level.
const UPPER_SLOTS_BITS: u32 = 6;

/// Bits a step has: steps are at most [`MAX_STEP`].
const STEP_BITS: u32 = 64 - GENERATION_BITS;

/// One level of the wheel: a list head per slot and a bit per occupied slot.
#[derive(Debug, Clone)]
struct Level {
    /// Head of each slot's list, or `NIL`. Empty until an entry is first linked here,
    /// so that a timer's idle shards and unused levels hold no slots.
    heads: Box<[u32]>,
    /// Bit `s` is set iff `heads[s] != NIL`; empty while `heads` is.
    occupied: Box<[u64]>,
    /// Slots in this level, allocated or not.
    slots: usize,
    /// Entries in this level's lists.
    len: usize,
}

impl Level {
    fn new(slots: usize) -> Self {
        Level {
            heads: Box::default(),
            occupied: Box::default(),
            slots,
            len: 0,
        }
    }

    /// Gives the level its slots, on the first entry linked into it.
    #[cold]
    fn allocate(&mut self) {
        self.heads = vec![NIL; self.slots].into_boxed_slice();
        self.occupied = vec![0; self.slots.div_ceil(64)].into_boxed_slice();
    }

    /// The first occupied slot at or after `from`, if any (no wrapping: see the
    /// module docs for why nothing before the cursor's slot is occupied).
    fn first_occupied_from(&self, from: usize) -> Option<usize> {
        let mut word = from / 64;
        let mut bits = *self.occupied.get(word)? & (!0 << (from % 64));
        loop {
            if bits != 0 {
                return Some(word * 64 + bits.trailing_zeros() as usize);
            }
            word += 1;
            bits = *self.occupied.get(word)?;
        }
    }
}

/// What [`Wheel::advance`] does next: the earliest occupied slot.
#[derive(Debug, Clone, Copy)]
struct Event {
    level: usize,
    slot: usize,
    /// Level 0: the step every entry of the slot is due at. Above: when the slot's
    /// entries move down (its start, or the cursor if that is later).
    step: u64,
}

/// A hierarchical timing wheel of entries of type `T`. (`Clone` for the model test,
/// which probes what advancing would do.)
#[derive(Debug, Clone)]
pub(crate) struct Wheel<T> {
    entries: Slab<Entry<T>>,
    /// Level 0 (`slots` slots of one step), then levels of [`UPPER_SLOTS_BITS`]-bit
    /// slots up to the [`STEP_BITS`] a step has.
    levels: Box<[Level]>,
    /// log2 of level 0's slots (at most 20). A `u8`, so that the due list's ends fit
    /// in the padding the wheel had: a timer's idle shards stay as small.
    level0_bits: u8,
    /// Level 0's slots - 1: a step's slot there is `step & level0_mask`.
    level0_mask: u64,
    /// Every step `<= processed` has been processed: no entry has `step <= processed`.
    /// `processed + 1` is the cursor, which fixes each entry's level and slot.
    processed: u64,
    /// Whether [`advance`](Wheel::advance) stopped partway through step `processed + 1`
    /// (its budget ran out): that step takes no new entries, so that no new entry can
    /// share a step with one already handed out (see the module docs).
    in_progress: bool,
    /// Stamped on the next inserted entry: `1..=GENERATION_MAX`, wrapping.
    generation: u32,
    /// Entries whose steps are processed but which their holder keeps here until it
    /// takes them (see [`advance_due`](Wheel::advance_due)), by step. An entry is in
    /// this list iff its step is at most `processed`; the driver's wheels never hold one.
    due: Due,
}

/// The ends of the list of due entries, linked through the entries' own `prev` and
/// `next`.
#[derive(Debug, Clone, Copy)]
struct Due {
    head: u32,
    tail: u32,
}

impl Due {
    const EMPTY: Due = Due {
        head: NIL,
        tail: NIL,
    };
}

impl<T> Wheel<T> {
    /// A wheel with `slots` slots at level 0 (a power of two, at least 1) and step 0
    /// processed.
    pub(crate) fn new(slots: usize) -> Self {
        assert!(slots.is_power_of_two(), "wheel size must be a power of two");
        let level0_bits = slots.trailing_zeros();
        let upper = STEP_BITS
            .saturating_sub(level0_bits)
            .div_ceil(UPPER_SLOTS_BITS);
        let levels = std::iter::once(Level::new(slots))
            .chain((0..upper).map(|_| Level::new(1 << UPPER_SLOTS_BITS)))
            .collect();
        Wheel {
            entries: Slab::new(),
            levels,
            level0_bits: level0_bits as u8,
            level0_mask: slots as u64 - 1,
            processed: 0,
            in_progress: false,
            generation: 1,
            due: Due::EMPTY,
        }
    }

    /// The last processed step.
    pub(crate) fn processed(&self) -> u64 {
        self.processed
    }

    /// The first step [`insert`](Wheel::insert) accepts: `processed() + 1`, or the step
    /// after that while `processed() + 1` is partly handed out.
    pub(crate) fn first_open_step(&self) -> u64 {
        self.processed + 1 + u64::from(self.in_progress)
    }

    /// Number of levels: at most one move down each, and so one driver wakeup each,
    /// stands between a far entry and its step.
    #[cfg(any(test, fuzzing))]
    pub(crate) fn levels(&self) -> usize {
        self.levels.len()
    }

    /// Number of entries present.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// The storage indices ([`Key::index`]) of the entries present, in no particular
    /// order. An entry keeps its index from insert until it leaves (a reschedule or a
    /// move down a level keeps it too).
    pub(crate) fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.entries.iter().map(|(index, _)| index)
    }

    /// Number of slots at level 0: the steps one block of it spans.
    pub(crate) fn slots(&self) -> usize {
        self.levels[0].slots
    }

    /// Bytes of heap the wheel holds: its levels, their slots and its entries' storage.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        let levels: usize = self
            .levels
            .iter()
            .map(|l| size_of_val(&*l.heads) + size_of_val(&*l.occupied))
            .sum();
        size_of_val(&*self.levels)
            + levels
            + self.entries.capacity() * std::mem::size_of::<Entry<T>>()
    }

    /// Adds `value`, due at `step` (saturated to [`MAX_STEP`]).
    ///
    /// # Errors
    ///
    /// [`InsertError::Processed`] if `step < self.first_open_step()`: the caller fires it
    /// itself. [`InsertError::Full`] if the wheel holds [`MAX_ENTRIES`] entries.
    #[inline]
    pub(crate) fn insert(&mut self, step: u64, value: T) -> Result<Key, (T, InsertError)> {
        let step = step.min(MAX_STEP);
        if step < self.first_open_step() {
            return Err((value, InsertError::Processed));
        }
        let key = self.store(step, value)?;
        self.link(key.index);
        Ok(key)
    }

    /// Removes the entry `key` names, due at `step`, and returns its value; `None` if
    /// it is gone (handed out or removed before). Below, "the entry `key` names at
    /// `step`" means one present with that key and that step (see the module docs).
    #[inline]
    pub(crate) fn remove(&mut self, key: Key, step: u64) -> Option<T> {
        self.get(key, step)?;
        self.unlink(key.index);
        self.entries
            .try_remove(key.index as usize)
            .map(|entry| entry.value)
    }

    /// The value of the entry `key` names at `step`, if it is present.
    pub(crate) fn get_mut(&mut self, key: Key, step: u64) -> Option<&mut T> {
        self.get(key, step)?;
        Some(&mut self.entries[key.index as usize].value)
    }

    /// Whether `key` names an entry present at `step`.
    pub(crate) fn contains(&self, key: Key, step: u64) -> bool {
        self.get(key, step).is_some()
    }

    /// Moves the entry `key` names at `step` to `to`, keeping its key and value: the
    /// cheap way to push back an idle deadline. From then on it is named at `to`.
    ///
    /// # Errors
    ///
    /// `Err(None)` if the key names nothing at `step`; `Err(Some(value))` with the
    /// entry removed if `to` is before [`first_open_step`](Wheel::first_open_step)
    /// (the caller fires it).
    pub(crate) fn reschedule(&mut self, key: Key, step: u64, to: u64) -> Result<(), Option<T>> {
        self.get(key, step).ok_or(None)?;
        let to = to.min(MAX_STEP);
        if to < self.first_open_step() {
            return Err(self.remove(key, step));
        }
        let (from, at) = (self.place(step.min(MAX_STEP)), self.place(to));
        if from == at {
            // Same list: no relinking needed.
            self.entries[key.index as usize].set_step(to);
            return Ok(());
        }
        self.unlink_from(key.index, from);
        self.entries[key.index as usize].set_step(to);
        self.link_at(key.index, at);
        Ok(())
    }

    /// A lower bound for the step of the next entry to become due: exactly that step
    /// when it lies in level 0's current block, else the step at which
    /// [`advance`](Wheel::advance) next moves entries down a level. `None` iff the
    /// wheel is empty.
    pub(crate) fn next_expiration(&self) -> Option<u64> {
        Some(self.next_event()?.step)
    }

    /// Processes steps up to and including `to`, handing every entry with
    /// `step <= to` to `expire` with its step, and stops early once `limit` (at least 1) entries were
    /// handed out, even in the middle of a step. Returns `true` when `processed() == to`;
    /// `false` means call again to continue.
    ///
    /// Visits only occupied slots, each at most once per call however far `to` is
    /// ahead. Moving a slot's entries down a level is not counted against `limit`: it
    /// runs no user code, and each entry moves at most once per level in its life.
    pub(crate) fn advance(
        &mut self,
        to: u64,
        limit: usize,
        mut expire: impl FnMut(u64, T),
    ) -> bool {
        self.advance_by(to, limit, |wheel, slot, budget| {
            wheel.expire_slot(slot, budget, &mut expire)
        })
    }

    /// [`advance`](Wheel::advance)'s walk: `take_slot` takes level 0's slot at the
    /// cursor (decrementing the budget by what it took) and says whether the slot is
    /// empty now.
    #[inline]
    fn advance_by(
        &mut self,
        to: u64,
        limit: usize,
        mut take_slot: impl FnMut(&mut Self, usize, &mut usize) -> bool,
    ) -> bool {
        let to = to.min(MAX_STEP);
        if to <= self.processed {
            return true;
        }
        let mut budget = limit.max(1);
        while let Some(event) = self.next_event() {
            if event.level > 0 {
                // The cursor ends at `to + 1`: a slot starting there moves down too, so
                // that every entry is at its level for the new cursor.
                if event.step > to + 1 {
                    break;
                }
                self.processed = event.step - 1;
                self.move_down(event);
                continue;
            }
            if event.step > to {
                break;
            }
            // Nothing is due before `event.step`, and the cursor stays in level 0's
            // block: no entry changes level.
            self.processed = event.step - 1;
            self.in_progress = false;
            if budget == 0 {
                return false;
            }
            if !take_slot(self, event.slot, &mut budget) {
                self.in_progress = true;
                return false;
            }
            // The cursor may now enter a new block; the loop then finds that block's
            // upper slots at or before the cursor and moves them down first.
            self.processed = event.step;
        }
        self.processed = to;
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

    /// Removes the entries whose values `select` picks and returns their values, in
    /// no particular order; the others keep their keys. O(capacity): for events that
    /// happen once in a wheel's life, not per entry. Not on a wheel holding due
    /// entries.
    pub(crate) fn remove_where(&mut self, mut select: impl FnMut(&T) -> bool) -> Vec<T> {
        debug_assert_eq!(
            self.due.head, NIL,
            "the driver's wheels hold no due entries"
        );
        let picked: Vec<u32> = self
            .entries
            .iter()
            .filter(|(_, entry)| select(&entry.value))
            .map(|(index, _)| index as u32)
            .collect();
        picked
            .into_iter()
            .map(|index| {
                self.unlink(index);
                self.entries.remove(index as usize).value
            })
            .collect()
    }

    /// Removes every entry, in no particular order, with the key and step that named
    /// it; resets nothing else.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (Key, u64, T)> {
        self.due = Due::EMPTY;
        for level in self.levels.iter_mut() {
            level.heads.fill(NIL);
            level.occupied.fill(0);
            level.len = 0;
        }
        std::mem::take(&mut self.entries)
            .into_iter()
            .map(|(index, entry)| {
                let key = Key {
                    index: index as u32,
                    generation: entry.generation(),
                };
                (key, entry.step(), entry.value)
            })
    }

    /// The earliest occupied slot: in the lowest level that has any, the first slot at
    /// or after the cursor's. (A lower level's slots all come before a higher one's.)
    fn next_event(&self) -> Option<Event> {
        let cursor = self.processed + 1;
        let (level, entries) = self
            .levels
            .iter()
            .enumerate()
            .find(|(_, level)| level.len > 0)?;
        let shift = self.shift(level);
        let from = self.slot_of(level, cursor);
        let slot = entries.first_occupied_from(from);
        debug_assert!(slot.is_some(), "level {level} has entries but no slot");
        let slot = slot?;
        // The cursor's block at this level, with the slot's bits put in.
        let block = cursor & !((entries.slots as u64) << shift).wrapping_sub(1);
        let start = block | ((slot as u64) << shift);
        Some(Event {
            level,
            slot,
            step: start.max(cursor),
        })
    }

    /// Hands out the entries of level 0's `slot` while `budget` lasts (decrementing
    /// it); returns `false` if it ran out with entries left in the slot.
    fn expire_slot(
        &mut self,
        slot: usize,
        budget: &mut usize,
        expire: &mut impl FnMut(u64, T),
    ) -> bool {
        loop {
            let index = self.levels[0].heads[slot];
            if index == NIL {
                return true;
            }
            if *budget == 0 {
                return false;
            }
            debug_assert_eq!(self.entries[index as usize].step(), self.processed + 1);
            // The slot's head is where `place` puts it: level 0, `slot`.
            debug_assert_eq!(self.place(self.processed + 1), (0, slot));
            self.unlink_from(index, (0, slot));
            expire(
                self.processed + 1,
                self.entries.remove(index as usize).value,
            );
            *budget -= 1;
        }
    }

    /// Moves the entries of an upper level's slot, which the cursor has reached, to
    /// the levels their steps now belong to (all lower).
    fn move_down(&mut self, event: Event) {
        let level = &mut self.levels[event.level];
        let mut index = std::mem::replace(&mut level.heads[event.slot], NIL);
        level.occupied[event.slot / 64] &= !(1 << (event.slot % 64));
        while index != NIL {
            let next = self.entries[index as usize].next;
            self.levels[event.level].len -= 1;
            self.link(index);
            debug_assert!(self.place(self.entries[index as usize].step()).0 < event.level);
            index = next;
        }
    }

    /// The entry `key` names at `step` (saturated as [`insert`](Wheel::insert) does).
    #[inline]
    fn get(&self, key: Key, step: u64) -> Option<&Entry<T>> {
        let packed = pack(step.min(MAX_STEP), key.generation);
        self.entries
            .get(key.index as usize)
            .filter(|entry| entry.packed == packed)
    }

    /// How far right a step is shifted to give its slot at `level`.
    fn shift(&self, level: usize) -> u32 {
        match level {
            0 => 0,
            _ => u32::from(self.level0_bits) + UPPER_SLOTS_BITS * (level as u32 - 1),
        }
    }

    /// The slot `step` maps to at `level`.
    fn slot_of(&self, level: usize, step: u64) -> usize {
        let slots = self.levels[level].slots as u64;
        ((step >> self.shift(level)) & (slots - 1)) as usize
    }

    /// The level and slot of an entry due at `step` (at or after the cursor): the
    /// lowest level whose block holding the cursor holds `step` too.
    #[inline]
    fn place(&self, step: u64) -> (usize, usize) {
        let differ = (self.processed + 1) ^ step;
        if differ >> self.level0_bits == 0 {
            return (0, (step & self.level0_mask) as usize);
        }
        let highest = 63 - differ.leading_zeros();
        let level = 1 + ((highest - u32::from(self.level0_bits)) / UPPER_SLOTS_BITS) as usize;
        // `slot_of` without its loads: every upper level has 2^UPPER_SLOTS_BITS slots.
        let slot = (step >> self.shift(level)) & ((1 << UPPER_SLOTS_BITS) - 1);
        debug_assert_eq!(slot as usize, self.slot_of(level, step));
        (level, slot as usize)
    }

    #[inline]
    fn link(&mut self, index: u32) {
        self.link_at(index, self.place(self.entries[index as usize].step()));
    }

    /// Links entry `index` at `(level, slot)`, which is `place` of its step.
    #[inline]
    fn link_at(&mut self, index: u32, (level, slot): (usize, usize)) {
        let level = &mut self.levels[level];
        // The bounds check doubles as the allocation check: unallocated heads are empty.
        let head = match level.heads.get(slot) {
            Some(&head) => head,
            None => {
                level.allocate();
                level.heads[slot]
            }
        };
        if head != NIL {
            self.entries[head as usize].prev = index;
        } else {
            level.occupied[slot / 64] |= 1 << (slot % 64);
        }
        level.heads[slot] = index;
        level.len += 1;
        let entry = &mut self.entries[index as usize];
        entry.prev = NIL;
        entry.next = head;
    }

    #[inline]
    fn unlink(&mut self, index: u32) {
        self.unlink_from(index, self.place(self.entries[index as usize].step()));
    }

    /// Unlinks entry `index` from `(level, slot)`, which is `place` of its step.
    #[inline]
    fn unlink_from(&mut self, index: u32, (level, slot): (usize, usize)) {
        let entry = &self.entries[index as usize];
        let (prev, next) = (entry.prev, entry.next);
        let level = &mut self.levels[level];
        level.len -= 1;
        if prev != NIL {
            self.entries[prev as usize].next = next;
        } else {
            debug_assert_eq!(level.heads[slot], index);
            level.heads[slot] = next;
            if next == NIL {
                level.occupied[slot / 64] &= !(1 << (slot % 64));
            }
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
    }
}

/// # Holding entries past their step
///
/// The driver hands every entry out as its step is processed. A holder that takes its
/// entries when it chooses (a `DelayQueue`, whose consumers take one value at a time,
/// and whose `remove` still finds a value no consumer took) keeps them instead: an
/// [`advance_due`](Wheel::advance_due) moves the entries of each processed step,
/// in place, to the *due* list, in step order, where their keys still name them.
/// *Invariant:* an entry is in the due list iff its step is at most `processed` (it has
/// no place in the levels then), so the step an entry carries says which list it is
/// in. Such a holder names its entries by index ([`at`](Wheel::at)) and checks that
/// an entry is the one it means by a mark of its own in `T` (the queue's 64-bit
/// serial), since the generation wraps; it then acts on the key and step `at` gives.
/// It uses this block's methods, not `insert`, `remove`, `reschedule` or `advance`,
/// which know nothing of the due list.
impl<T> Wheel<T> {
    /// How many entries the storage holds before it allocates again.
    pub(crate) fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// Makes room for at least `additional` more entries in the storage.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
    }

    /// Gives back the storage past the last entry present (entries never move, so
    /// their keys stay valid).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.entries.shrink_to_fit();
    }

    /// Number of entries in the due list (it walks the list).
    #[cfg(test)]
    pub(crate) fn due_len(&self) -> usize {
        let (mut index, mut len) = (self.due.head, 0);
        while index != NIL {
            index = self.entries[index as usize].next;
            len += 1;
        }
        len
    }

    /// Whether the due list holds any entry.
    pub(crate) fn has_due(&self) -> bool {
        self.due.head != NIL
    }

    /// Adds `value` at `step` (saturated to [`MAX_STEP`]); to the due list if that
    /// step is processed. Returns its key and whether it is due.
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] if the wheel holds [`MAX_ENTRIES`] entries.
    #[inline]
    pub(crate) fn insert_or_due(
        &mut self,
        step: u64,
        value: T,
    ) -> Result<(Key, bool), (T, InsertError)> {
        debug_assert!(
            !self.in_progress,
            "a holder of due entries advances by whole steps"
        );
        let step = step.min(MAX_STEP);
        let key = self.store(step, value)?;
        let due = step <= self.processed;
        if due {
            self.link_due(key.index);
        } else {
            self.link(key.index);
        }
        Ok((key, due))
    }

    /// Stores `value` at `step` under the next generation, not yet linked anywhere.
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`] if the wheel holds [`MAX_ENTRIES`] entries.
    #[inline]
    fn store(&mut self, step: u64, value: T) -> Result<Key, (T, InsertError)> {
        if self.entries.len() >= MAX_ENTRIES {
            return Err((value, InsertError::Full));
        }
        let generation = self.generation;
        self.generation = if generation == GENERATION_MAX {
            1
        } else {
            generation + 1
        };
        let index = self.entries.insert(Entry {
            value,
            packed: pack(step, generation),
            prev: NIL,
            next: NIL,
        }) as u32;
        Ok(Key { index, generation })
    }

    /// Processes steps up to and including `to`, moving the entries of each to the
    /// due list, whole steps at a time, until at least `limit` entries moved. Returns
    /// `true` when `processed() == to`; `false` means call again to continue.
    pub(crate) fn advance_due(&mut self, to: u64, limit: usize) -> bool {
        self.advance_by(to, limit, |wheel, slot, budget| {
            *budget = budget.saturating_sub(wheel.slot_to_due(slot));
            true
        })
    }

    /// Moves to the due list the entries of the step after `processed` (the cursor's,
    /// not processed yet) whose values `pick` picks, as if their step were `processed`:
    /// for a holder that knows, from what it stored in `T`, that their deadlines have
    /// passed though their step has not ended. Returns how many moved.
    pub(crate) fn due_from_cursor(&mut self, mut pick: impl FnMut(&T) -> bool) -> usize {
        debug_assert!(
            !self.in_progress,
            "a holder of due entries advances by whole steps"
        );
        // The cursor's step is in level 0's current block, one step per slot.
        let slot = ((self.processed + 1) & self.level0_mask) as usize;
        let Some(&head) = self.levels[0].heads.get(slot) else {
            return 0;
        };
        let (mut index, mut moved) = (head, 0);
        while index != NIL {
            let entry = &self.entries[index as usize];
            let next = entry.next;
            debug_assert_eq!(entry.step(), self.processed + 1);
            if pick(&entry.value) {
                self.unlink_from(index, (0, slot));
                self.entries[index as usize].set_step(self.processed);
                self.link_due(index);
                moved += 1;
            }
            index = next;
        }
        moved
    }

    /// Takes the first entry of the due list (the earliest step; of one step, the
    /// first moved there).
    pub(crate) fn pop_due(&mut self) -> Option<(Key, T)> {
        let index = self.due.head;
        if index == NIL {
            return None;
        }
        let generation = self.entries[index as usize].generation();
        self.unlink_due(index);
        let value = self.entries.remove(index as usize).value;
        Some((Key { index, generation }, value))
    }

    /// The entry that comes out first: the due list's first, else the pending entry
    /// with the earliest step (of several at that step, the one `advance_due` moves
    /// first). Its key, step and value.
    pub(crate) fn first(&self) -> Option<(Key, u64, &T)> {
        if self.due.head != NIL {
            return self.at(self.due.head as usize);
        }
        let event = self.next_event()?;
        let mut index = self.levels[event.level].heads[event.slot];
        let mut first = index;
        // Above level 0 a slot spans many steps: its earliest is the wheel's.
        while index != NIL {
            let entry = &self.entries[index as usize];
            if entry.step() < self.entries[first as usize].step() {
                first = index;
            }
            index = entry.next;
        }
        self.at(first as usize)
    }

    /// The entry at slab index `index`, if any: its key, its step and its value.
    #[inline]
    pub(crate) fn at(&self, index: usize) -> Option<(Key, u64, &T)> {
        let entry = self.entries.get(index)?;
        let key = Key {
            index: index as u32,
            generation: entry.generation(),
        };
        Some((key, entry.step(), &entry.value))
    }

    /// Removes the entry `key` names at `step`, pending or due, and returns its value.
    #[inline]
    pub(crate) fn remove_any(&mut self, key: Key, step: u64) -> Option<T> {
        self.get(key, step)?;
        if step <= self.processed {
            self.unlink_due(key.index);
        } else {
            self.unlink(key.index);
        }
        Some(self.entries.remove(key.index as usize).value)
    }

    /// Moves the entry `key` names at `step`, pending or due, to step `to`: into the
    /// levels, or into the due list if `to` is processed. Its key stays; from then on
    /// it is named at `to` (saturated). Returns whether it is due, or `None` if the key
    /// names nothing at `step`.
    pub(crate) fn move_any(&mut self, key: Key, step: u64, to: u64) -> Option<bool> {
        self.get(key, step)?;
        if step <= self.processed {
            self.unlink_due(key.index);
        } else {
            self.unlink(key.index);
        }
        let to = to.min(MAX_STEP);
        self.entries[key.index as usize].set_step(to);
        let due = to <= self.processed;
        if due {
            self.link_due(key.index);
        } else {
            self.link(key.index);
        }
        Some(due)
    }

    /// Removes every entry, pending and due, and returns the storage that held them
    /// (for the caller to drop after releasing its lock), leaving as much room.
    pub(crate) fn take_all(&mut self) -> Slab<Entry<T>> {
        self.due = Due::EMPTY;
        for level in self.levels.iter_mut() {
            level.heads.fill(NIL);
            level.occupied.fill(0);
            level.len = 0;
        }
        let capacity = self.entries.capacity();
        std::mem::replace(&mut self.entries, Slab::with_capacity(capacity))
    }

    /// Moves level 0's `slot`, whose step is processed now, to the due list's end
    /// (every step there is earlier). Returns how many entries moved.
    fn slot_to_due(&mut self, slot: usize) -> usize {
        let level = &mut self.levels[0];
        let mut index = std::mem::replace(&mut level.heads[slot], NIL);
        level.occupied[slot / 64] &= !(1 << (slot % 64));
        let mut moved = 0;
        while index != NIL {
            let next = self.entries[index as usize].next;
            self.link_due_last(index);
            moved += 1;
            index = next;
        }
        self.levels[0].len -= moved;
        moved
    }

    /// Links entry `index` into the due list after every entry of an earlier or equal
    /// step. From the end: entries mostly come in step order.
    fn link_due(&mut self, index: u32) {
        let step = self.entries[index as usize].step();
        let mut before = self.due.tail;
        while before != NIL && self.entries[before as usize].step() > step {
            before = self.entries[before as usize].prev;
        }
        if before == self.due.tail {
            return self.link_due_last(index);
        }
        let after = if before == NIL {
            std::mem::replace(&mut self.due.head, index)
        } else {
            std::mem::replace(&mut self.entries[before as usize].next, index)
        };
        self.entries[after as usize].prev = index;
        let entry = &mut self.entries[index as usize];
        entry.prev = before;
        entry.next = after;
    }

    /// Links entry `index`, of a step at least every due entry's, at the due list's end.
    fn link_due_last(&mut self, index: u32) {
        let tail = std::mem::replace(&mut self.due.tail, index);
        if tail == NIL {
            self.due.head = index;
        } else {
            debug_assert!(
                self.entries[tail as usize].step() <= self.entries[index as usize].step()
            );
            self.entries[tail as usize].next = index;
        }
        let entry = &mut self.entries[index as usize];
        entry.prev = tail;
        entry.next = NIL;
    }

    fn unlink_due(&mut self, index: u32) {
        let entry = &self.entries[index as usize];
        let (prev, next) = (entry.prev, entry.next);
        if prev == NIL {
            self.due.head = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next == NIL {
            self.due.tail = prev;
        } else {
            self.entries[next as usize].prev = prev;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(wheel: &mut Wheel<u32>, to: u64) -> Vec<u32> {
        let mut out = Vec::new();
        assert!(wheel.advance(to, usize::MAX, |_, v| out.push(v)));
        out.sort_unstable();
        out
    }

    #[test]
    fn fires_at_its_step_not_before() {
        let mut wheel = Wheel::new(8);
        wheel.insert(3, 30).unwrap();
        assert_eq!(collect(&mut wheel, 2), Vec::<u32>::new());
        assert_eq!(collect(&mut wheel, 3), vec![30]);
        assert_eq!(wheel.len(), 0);
    }

    /// The indices of the entries present are their keys' (what tables kept beside
    /// the wheel by index rely on), through moves down a level and reschedules.
    #[test]
    fn indices_are_those_of_the_present_entries_keys() {
        let mut wheel = Wheel::new(4);
        let keys: Vec<Key> = [2, 6, 10, 3]
            .into_iter()
            .map(|step| wheel.insert(step, step as u32).unwrap())
            .collect();
        let indices = |wheel: &Wheel<u32>| {
            let mut found: Vec<usize> = wheel.indices().collect();
            found.sort_unstable();
            found
        };
        let mut all: Vec<usize> = keys.iter().map(|key| key.index()).collect();
        all.sort_unstable();
        assert_eq!(indices(&wheel), all);
        assert_eq!(wheel.remove(keys[3], 3), Some(3));
        wheel.reschedule(keys[1], 6, 9).unwrap();
        assert_eq!(collect(&mut wheel, 5), vec![2]);
        // 9 and 10 moved down to level 0 on the way: same indices.
        let mut left = vec![keys[1].index(), keys[2].index()];
        left.sort_unstable();
        assert_eq!(indices(&wheel), left);
    }

    #[test]
    fn later_blocks_wait_above_and_move_down_when_reached() {
        let mut wheel = Wheel::new(4);
        wheel.insert(2, 2).unwrap();
        wheel.insert(6, 6).unwrap();
        wheel.insert(10, 10).unwrap();
        assert_eq!(wheel.next_expiration(), Some(2), "in level 0: exact");
        assert_eq!(collect(&mut wheel, 2), vec![2]);
        // 6 is in the next block of four steps, whose slot above starts at 4.
        assert_eq!(wheel.next_expiration(), Some(4));
        assert_eq!(collect(&mut wheel, 3), Vec::<u32>::new());
        assert_eq!(
            wheel.next_expiration(),
            Some(6),
            "the slot starting at 4 moved down as the cursor reached it"
        );
        assert_eq!(collect(&mut wheel, 9), vec![6]);
        assert_eq!(wheel.next_expiration(), Some(10));
        assert_eq!(collect(&mut wheel, 10), vec![10]);
        assert_eq!(wheel.next_expiration(), None);
    }

    /// However far away, an entry is reached in one step per level (a driver wakeup
    /// each), not one per block of level 0, and never handed out early.
    #[test]
    fn a_far_entry_is_reached_in_one_step_per_level() {
        for slots in [1, 4, 4096, 1 << 20] {
            let mut wheel = Wheel::new(slots);
            let levels = wheel.levels();
            let day_of_quarter_ms = 4 * 86_400_000;
            for step in [
                3 * slots as u64 + 1,
                day_of_quarter_ms,
                MAX_STEP / 3,
                MAX_STEP,
            ] {
                wheel.insert(step, 0).unwrap();
                let mut steps = 0;
                loop {
                    let next = wheel.next_expiration().expect("pending");
                    assert!(next <= step, "{slots} slots: woke at {next} for {step}");
                    steps += 1;
                    if !collect(&mut wheel, next).is_empty() {
                        assert_eq!(next, step, "{slots} slots");
                        break;
                    }
                }
                assert!(
                    steps <= levels,
                    "{steps} steps to reach {step} with {slots} slots ({levels} levels)"
                );
            }
            assert!(levels <= 9, "{levels} levels for {slots} slots");
        }
    }

    #[test]
    fn catch_up_over_many_blocks_hands_out_everything_due() {
        let mut wheel = Wheel::new(4);
        for step in 1..=40 {
            wheel.insert(step, step as u32).unwrap();
        }
        assert_eq!(collect(&mut wheel, 37), (1..=37).collect::<Vec<_>>());
        assert_eq!(wheel.processed(), 37);
        assert_eq!(collect(&mut wheel, 100), vec![38, 39, 40]);
    }

    #[test]
    fn elapsed_steps_are_refused() {
        let mut wheel = Wheel::new(4);
        collect(&mut wheel, 5);
        assert_eq!(wheel.insert(5, 1), Err((1, InsertError::Processed)));
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
        assert_eq!(wheel.remove(b, 2), None, "the wrong step names nothing");
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
    fn a_step_partly_handed_out_takes_no_new_entries() {
        let mut wheel = Wheel::new(4);
        for v in 0..3 {
            wheel.insert(2, v).unwrap();
        }
        assert!(!wheel.advance(2, 1, |_, _| {}));
        assert_eq!((wheel.processed(), wheel.first_open_step()), (1, 3));
        assert_eq!(wheel.insert(2, 9), Err((9, InsertError::Processed)));
        let key = wheel.insert(3, 9).unwrap();
        assert_eq!(collect(&mut wheel, 2).len(), 2);
        assert_eq!(wheel.first_open_step(), 3);
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
        for step in 1..=6 {
            wheel.insert(step, step as u32).unwrap();
        }
        let mut out = Vec::new();
        assert!(!wheel.advance(6, 2, |_, v| out.push(v)));
        assert_eq!(out, vec![1, 2]);
        assert!(wheel.advance(6, usize::MAX, |_, v| out.push(v)));
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
        assert!(!wheel.advance(4, 2, |_, v| out.push(v)));
        assert_eq!(out.len(), 2);
        assert_eq!(wheel.processed(), 2, "step 3 is not done");
        assert!(!wheel.advance(4, 2, |_, v| out.push(v)));
        assert!(wheel.advance(4, 2, |_, v| out.push(v)));
        out.sort_unstable();
        assert_eq!(out, vec![0, 1, 2, 3, 4, 9]);
        assert_eq!(wheel.processed(), 4);
    }

    #[test]
    fn remove_where_takes_what_it_picks_and_leaves_the_rest_named_and_due() {
        let mut wheel = Wheel::new(8);
        // Across levels: due in this block, the next, and far above.
        let keys: Vec<(Key, u64)> = (0..40u32)
            .map(|i| {
                let step = 1 + u64::from(i) * 37;
                (wheel.insert(step, i).unwrap(), step)
            })
            .collect();
        let mut odd = wheel.remove_where(|v| v % 2 == 1);
        odd.sort_unstable();
        assert_eq!(odd, (0..40).filter(|v| v % 2 == 1).collect::<Vec<_>>());
        assert_eq!(wheel.len(), 20);
        for (i, &(key, step)) in keys.iter().enumerate() {
            assert_eq!(wheel.contains(key, step), i % 2 == 0, "{i}");
        }
        // What is left fires at its own step, no earlier.
        for &(key, step) in keys.iter().step_by(2) {
            let mut fired = Vec::new();
            assert!(wheel.advance(step - 1, usize::MAX, |_, v| fired.push(v)));
            assert!(fired.is_empty(), "early at {step}: {fired:?}");
            assert!(wheel.contains(key, step));
            assert!(wheel.advance(step, usize::MAX, |_, v| fired.push(v)));
            assert_eq!(fired.len(), 1);
        }
        assert_eq!(wheel.len(), 0);
        assert_eq!(wheel.next_expiration(), None);
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
        assert_eq!(wheel.get(a, u64::MAX).map(Entry::step), Some(MAX_STEP));
        assert_eq!(wheel.remove(b, 3), Some(2));
        assert_eq!(wheel.remove(b, 3), None);
        assert_eq!(wheel.remove(a, MAX_STEP), Some(1));
    }

    #[test]
    fn huge_steps_saturate() {
        let mut wheel = Wheel::new(1024);
        wheel.insert(u64::MAX, 1).unwrap();
        assert!(wheel.next_expiration().is_some());
        assert_eq!(collect(&mut wheel, MAX_STEP - 1), Vec::<u32>::new());
        assert_eq!(collect(&mut wheel, u64::MAX), vec![1]);
    }
}
