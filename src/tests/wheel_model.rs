//! The wheel against a `BTreeMap` model: random insert / remove (live and stale keys) /
//! reschedule / advance sequences, huge steps included. Every entry comes out exactly
//! once, never before its step; `len` and `next_expiration` agree with the model.
//!
//! The model holds keys as the driver does: with the step it last placed each at,
//! keeping those whose entries were handed out (they must stay inert, and under
//! `cfg(test)` generations wrap every three inserts, so their index and generation
//! soon name another entry) and forgetting those it removed itself. An advance may
//! stop partway (a small `limit`), and other operations then run on the wheel as the
//! driver's registrations do between its turns.
//!
//! Driven by proptest here (`cargo test --lib wheel_model`) and by cargo-fuzz through
//! [`fuzz`] (`fuzz/fuzz_targets/wheel.rs`, under the `cfg(fuzzing)` cargo-fuzz sets).
//!
//! A second model ([`check_due`], proptest only) holds entries past their step as a
//! `DelayQueue` does: advances move them to the due list, where they wait, in step
//! order, to be popped, removed or moved by the index and mark (here the value) the
//! holder keeps.

use std::collections::{BTreeMap, HashSet};

use crate::wheel::{InsertError, Key, Wheel, MAX_STEP};

#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// Insert at `processed + delta` (0 = already processed).
    Insert(u64),
    /// Insert at an absolute, possibly huge, step.
    InsertAbsolute(u64),
    /// Remove with the n-th key held (live or handed out).
    Remove(usize),
    /// Move the n-th key held to `processed + delta`.
    Reschedule(usize, u64),
    /// One call advancing by `delta` steps, handing out at most `limit`; it may stop
    /// partway, even inside a step.
    Advance(u64, usize),
}

#[cfg(test)]
fn op() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        // Near steps often: the step an advance stopped inside is one ahead.
        // Far ones too, into upper levels, which advances and reschedules then reach.
        4 => prop_oneof![0u64..3, 0u64..80, 1u64 << 10..1u64 << 30].prop_map(Op::Insert),
        1 => prop_oneof![Just(u64::MAX), Just(MAX_STEP), Just(MAX_STEP - 1), 1u64 << 40..1u64 << 50]
            .prop_map(Op::InsertAbsolute),
        2 => any::<usize>().prop_map(Op::Remove),
        2 => (any::<usize>(), prop_oneof![0u64..80, 1u64 << 10..1u64 << 30])
            .prop_map(|(k, d)| Op::Reschedule(k, d)),
        3 => prop_oneof![0u64..4, 0u64..40, 100u64..400, 1u64 << 10..1u64 << 30]
            .prop_flat_map(|d| (Just(d), 1usize..6))
            .prop_map(|(d, l)| Op::Advance(d, l)),
    ]
}

struct Model {
    wheel: Wheel<u32>,
    /// Live entries: value -> (key, step).
    live: BTreeMap<u32, (Key, u64)>,
    /// Keys held, with the step each names its entry at; `None` once removed.
    keys: Vec<Option<(Key, u64)>>,
    fired: HashSet<u32>,
    next_value: u32,
}

impl Model {
    fn new(slots: usize) -> Self {
        Model {
            wheel: Wheel::new(slots),
            live: BTreeMap::new(),
            keys: Vec::new(),
            fired: HashSet::new(),
            next_value: 0,
        }
    }

    fn insert(&mut self, step: u64) {
        let value = self.next_value;
        self.next_value += 1;
        let open = self.wheel.first_open_step();
        match self.wheel.insert(step, value) {
            Ok(key) => {
                assert!(step >= open);
                let step = step.min(MAX_STEP);
                self.live.insert(value, (key, step));
                self.keys.push(Some((key, step)));
            }
            Err((v, InsertError::Processed)) => {
                assert_eq!(v, value);
                assert!(step < open);
            }
            Err((_, InsertError::Full)) => unreachable!("tiny test wheel"),
        }
    }

    /// The live entry the wheel holds under `key` at `step`, if any.
    fn live_value(&self, (key, step): (Key, u64)) -> Option<u32> {
        self.live
            .iter()
            .find(|(_, &held)| held == (key, step))
            .map(|(v, _)| *v)
    }

    /// The n-th key held, if any is.
    fn held(&self, n: usize) -> Option<(usize, (Key, u64))> {
        let n = n % self.keys.len().max(1);
        Some((n, (*self.keys.get(n)?)?))
    }

    fn remove(&mut self, n: usize) {
        let Some((n, (key, step))) = self.held(n) else {
            return;
        };
        let expected = self.live_value((key, step));
        assert_eq!(
            self.wheel.remove(key, step),
            expected,
            "a key removes its own entry or nothing"
        );
        if let Some(v) = expected {
            self.live.remove(&v);
            self.keys[n] = None;
        }
    }

    fn reschedule(&mut self, n: usize, delta: u64) {
        let Some((n, (key, step))) = self.held(n) else {
            return;
        };
        let to = self.wheel.processed() + delta;
        let open = self.wheel.first_open_step();
        match (
            self.live_value((key, step)),
            self.wheel.reschedule(key, step, to),
        ) {
            (Some(v), Ok(())) => {
                assert!(to >= open);
                self.live.get_mut(&v).unwrap().1 = to;
                self.keys[n] = Some((key, to));
            }
            (Some(v), Err(Some(out))) => {
                assert!(to < open, "only an processed step hands the entry back");
                assert_eq!(out, v);
                self.live.remove(&v);
                self.keys[n] = None;
            }
            (None, Err(None)) => {}
            (live, result) => panic!("live {live:?} but reschedule gave {result:?}"),
        }
    }

    /// One call to `advance`; returns whether it got to `processed + delta`.
    fn advance(&mut self, delta: u64, limit: usize) -> bool {
        let to = self.wheel.processed().saturating_add(delta);
        let mut out = Vec::new();
        let done = self.wheel.advance(to, limit, |step, v| out.push((step, v)));
        assert!(out.len() <= limit.max(1), "handed out past the limit");
        for (handed_step, v) in out {
            let (_, step) = self
                .live
                .remove(&v)
                .expect("handed out once, and only live entries");
            assert_eq!(handed_step, step, "handed out with another step");
            assert!(
                step <= to,
                "entry due at {step} handed out advancing to {to}"
            );
            assert!(self.fired.insert(v));
        }
        let processed = self.wheel.processed();
        if done {
            assert_eq!(processed, to.min(MAX_STEP));
        } else {
            assert!(processed < to);
        }
        // Nothing due by a processed step is left behind.
        assert!(
            self.live.values().all(|&(_, step)| step > processed),
            "entry left behind"
        );
        done
    }

    fn check(&self) {
        assert_eq!(self.wheel.len(), self.live.len());
        let min = self.live.values().map(|&(_, t)| t).min();
        match (self.wheel.next_expiration(), min) {
            (None, None) => {}
            (Some(next), Some(min)) => {
                assert!(next > self.wheel.processed());
                assert!(
                    next <= min,
                    "next_expiration {next} after the earliest entry {min}"
                );
                self.check_parking(min);
            }
            (next, min) => panic!("next_expiration {next:?}, model minimum {min:?}"),
        }
    }

    /// A driver that parks until `next_expiration` and advances to it reaches the
    /// earliest entry, `min`, in at most one step per level, handing out nothing on
    /// the way.
    fn check_parking(&self, min: u64) {
        let mut probe = self.wheel.clone();
        for _ in 0..probe.levels() {
            let next = probe.next_expiration().expect("entries pending");
            if next == min {
                return;
            }
            assert!(next < min, "woke at {next}, after the earliest entry {min}");
            assert!(probe.advance(next, usize::MAX, |_, v| {
                panic!("{v} handed out at {next}, before the earliest entry {min}")
            }));
        }
        panic!("the earliest entry {min} not reached in one step per level");
    }
}

/// Runs `ops` on a wheel of `slots` slots against the model, panicking at the first
/// disagreement, then drains it and checks every entry came out exactly once.
pub(crate) fn check(slots: usize, ops: &[Op]) {
    let mut model = Model::new(slots);
    for op in ops {
        match *op {
            Op::Insert(delta) => model.insert(model.wheel.processed() + delta),
            Op::InsertAbsolute(step) => model.insert(step),
            Op::Remove(n) => model.remove(n),
            Op::Reschedule(n, delta) => model.reschedule(n, delta),
            Op::Advance(delta, limit) => {
                model.advance(delta, limit);
            }
        }
        model.check();
    }
    let remaining = model.live.len();
    let before = model.fired.len();
    while !model.advance(MAX_STEP - model.wheel.processed(), usize::MAX) {}
    assert_eq!(model.fired.len(), before + remaining);
    assert_eq!(model.wheel.len(), 0);
}

/// Decodes fuzzer bytes into a wheel size and operations (9 bytes an operation), and
/// [`check`]s them.
pub(crate) fn fuzz(data: &[u8]) {
    let Some((&size, data)) = data.split_first() else {
        return;
    };
    let slots = 1usize << (size % 8); // 1 ..= 128 slots, so revolutions happen
    let ops: Vec<Op> = data
        .chunks_exact(9)
        .map(|c| {
            let n = u64::from_le_bytes(c[1..9].try_into().expect("8 bytes"));
            match c[0] % 6 {
                0 => Op::Insert(n % 300),
                1 => Op::InsertAbsolute(n),
                2 => Op::Remove(n as usize),
                3 => Op::Reschedule(n as usize, (n >> 32) % 300),
                4 => Op::Advance(n % 600, (n >> 32) as usize % 8 + 1),
                _ => Op::Advance(n % 5, 1),
            }
        })
        .take(2000)
        .collect();
    check(slots, &ops);
}

/// An operation of a holder that keeps due entries (see [`check_due`]).
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) enum DueOp {
    /// Insert at `processed + delta - 3` (saturating): the first three are due at once.
    Insert(u64),
    /// Advance by `delta`, moving at least `limit` entries to the due list if as many
    /// are due (whole steps at a time).
    Advance(u64, usize),
    /// Move the cursor step's entries whose values are odd (or even) to the due list.
    Cursor(bool),
    Pop,
    /// Remove the n-th value held.
    Remove(usize),
    /// Move the n-th value held to `processed + delta - 3` (saturating).
    Move(usize, u64),
}

#[cfg(test)]
fn due_op() -> impl proptest::strategy::Strategy<Value = DueOp> {
    use proptest::prelude::*;
    prop_oneof![
        4 => prop_oneof![0u64..8, 0u64..100, 1u64 << 10..1u64 << 30].prop_map(DueOp::Insert),
        3 => (prop_oneof![0u64..4, 0u64..60, 1u64 << 10..1u64 << 30], 1usize..6)
            .prop_map(|(d, l)| DueOp::Advance(d, l)),
        1 => any::<bool>().prop_map(DueOp::Cursor),
        2 => Just(DueOp::Pop),
        2 => any::<usize>().prop_map(DueOp::Remove),
        2 => (any::<usize>(), prop_oneof![0u64..8, 0u64..100])
            .prop_map(|(n, d)| DueOp::Move(n, d)),
    ]
}

/// The holder's view: value -> its step and whether it is due; the values it holds
/// in insertion order, with their slab index (`None` once taken or removed).
#[cfg(test)]
struct DueModel {
    wheel: Wheel<u32>,
    held: BTreeMap<u32, (u64, bool)>,
    indices: Vec<(u32, Option<usize>)>,
    next_value: u32,
}

#[cfg(test)]
impl DueModel {
    fn step(&self, delta: u64) -> u64 {
        (self.wheel.processed() + delta).saturating_sub(3)
    }

    /// Key and step of the n-th value held, found by index and checked by value.
    fn find(&self, n: usize) -> Option<(usize, u32, Key, u64)> {
        let n = n % self.indices.len().max(1);
        let (value, index) = *self.indices.get(n)?;
        let (key, step, &at) = self.wheel.at(index?)?;
        (at == value).then_some((n, value, key, step))
    }

    fn apply(&mut self, op: &DueOp) {
        match *op {
            DueOp::Insert(delta) => {
                let step = self.step(delta);
                let value = self.next_value;
                self.next_value += 1;
                let (key, due) = self.wheel.insert_or_due(step, value).expect("room");
                assert_eq!(due, step <= self.wheel.processed());
                self.held.insert(value, (step.min(MAX_STEP), due));
                self.indices.push((value, Some(key.index())));
            }
            DueOp::Advance(delta, limit) => {
                let to = self.wheel.processed().saturating_add(delta).min(MAX_STEP);
                let before = self.wheel.due_len();
                let done = self.wheel.advance_due(to, limit);
                let processed = self.wheel.processed();
                assert_eq!(done, processed == to);
                let mut moved = 0;
                for (step, due) in self.held.values_mut() {
                    if !*due && *step <= processed {
                        *due = true;
                        moved += 1;
                    }
                }
                assert_eq!(self.wheel.due_len(), before + moved);
                assert!(done || moved >= limit, "stopped before its limit");
            }
            DueOp::Cursor(odd) => {
                let cursor = self.wheel.processed() + 1;
                let processed = self.wheel.processed();
                let moved = self.wheel.due_from_cursor(|v| v % 2 == u32::from(odd));
                let mut expected = 0;
                for (value, (step, due)) in self.held.iter_mut() {
                    if !*due && *step == cursor && value % 2 == u32::from(odd) {
                        *due = true;
                        *step = processed;
                        expected += 1;
                    }
                }
                assert_eq!(moved, expected);
            }
            DueOp::Pop => {
                let earliest = self
                    .held
                    .values()
                    .filter(|(_, due)| *due)
                    .map(|(step, _)| *step)
                    .min();
                match (self.wheel.pop_due(), earliest) {
                    (Some((_, value)), Some(min)) => {
                        let (step, due) = self.held.remove(&value).expect("held once");
                        assert!(due && step == min, "{value} at {step}, earliest due {min}");
                    }
                    (None, None) => {}
                    (popped, earliest) => panic!("popped {popped:?}, earliest due {earliest:?}"),
                }
            }
            DueOp::Remove(n) => {
                if let Some((n, value, key, step)) = self.find(n) {
                    assert_eq!(self.wheel.remove_any(key, step), Some(value));
                    self.held.remove(&value).expect("held");
                    self.indices[n].1 = None;
                }
            }
            DueOp::Move(n, delta) => {
                if let Some((_, value, key, step)) = self.find(n) {
                    let to = self.step(delta);
                    let due = self.wheel.move_any(key, step, to).expect("named");
                    assert_eq!(due, to <= self.wheel.processed());
                    self.held.insert(value, (to.min(MAX_STEP), due));
                }
            }
        }
    }

    fn check(&self) {
        assert_eq!(self.wheel.len(), self.held.len());
        let due = self.held.values().filter(|(_, due)| *due).count();
        assert_eq!(self.wheel.due_len(), due);
        // Every value held is where the model says, at its step.
        for &(value, index) in &self.indices {
            let Some(&(step, _)) = self.held.get(&value) else {
                continue;
            };
            let (_, at_step, &at) = self.wheel.at(index.expect("held")).expect("present");
            assert_eq!((at, at_step), (value, step));
        }
        // `first` is the earliest due, else the earliest pending.
        let earliest = |want_due: bool| {
            self.held
                .values()
                .filter(|(_, due)| *due == want_due)
                .map(|(step, _)| *step)
                .min()
        };
        let expected = earliest(true).or_else(|| earliest(false));
        assert_eq!(self.wheel.first().map(|(_, step, _)| step), expected);
    }
}

/// Runs `ops` against the holder's model, then takes everything left: every value
/// comes out exactly once, never before its step is processed.
#[cfg(test)]
pub(crate) fn check_due(slots: usize, ops: &[DueOp]) {
    let mut model = DueModel {
        wheel: Wheel::new(slots),
        held: BTreeMap::new(),
        indices: Vec::new(),
        next_value: 0,
    };
    for op in ops {
        model.apply(op);
        model.check();
    }
    while model.wheel.processed() < MAX_STEP {
        model.apply(&DueOp::Advance(MAX_STEP - model.wheel.processed(), 7));
    }
    while !model.held.is_empty() {
        model.apply(&DueOp::Pop);
    }
    assert_eq!(model.wheel.len(), 0);
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fuzz_decoder_runs() {
        fuzz(&[3, 0, 1, 0, 0, 0, 0, 0, 0, 0, 4, 9, 0, 0, 0, 1, 0, 0, 0]);
        fuzz(&[]);
    }

    proptest! {
        #[test]
        fn wheel_matches_model(slots in prop_oneof![Just(1usize), Just(4), Just(8), Just(64), Just(128)],
                               ops in proptest::collection::vec(op(), 1..200)) {
            check(slots, &ops);
        }

        #[test]
        fn due_list_matches_model(slots in prop_oneof![Just(1usize), Just(4), Just(64)],
                                  ops in proptest::collection::vec(due_op(), 1..200)) {
            check_due(slots, &ops);
        }
    }
}
