//! Call sites: [`PendingSite`], what [`Timer::pending_by_site`](crate::Timer::pending_by_site)
//! reports, and the tables it is counted from, kept beside the wheel's entries when a
//! timer tracks call sites ([`Builder::track_call_sites`](crate::Builder::track_call_sites)).
//!
//! A timer leak (deadlines made on some code path and never dropped) shows as a
//! `pending()` that only grows; the line that made the timers is what a fix needs.
//! Each public entry point that makes a timer is `#[track_caller]`, so the caller's
//! [`Location`] comes with it for free, and a tracking timer keeps it beside the
//! timer's wheel entry.
//!
//! # Implementation
//!
//! A [`Tags`] table holds, by the slab index of a wheel entry, the site and deadline
//! of the timer there. It is written when an entry is inserted (and its deadline when
//! one is moved), under the shard's lock, and never cleared: an entry leaves the wheel
//! (fired, cancelled, drained) without touching it, and the tag of an index no entry
//! holds is simply not read. So tracking costs an insert one store and nothing else;
//! counting is a walk over the entries present, each shard under its lock, in
//! [`Tally`]. The counts are therefore exact for each shard at the moment it is read.
//!
//! A [`DelayQueue`](crate::DelayQueue)'s values are not the timer's entries: they
//! live in a wheel of the queue's own, under its lock. A queue on a tracking timer
//! keeps [`Tags`] beside that wheel, the same way, and registers with the timer as a
//! [`SiteSource`], held weakly: `pending_by_site` adds the values of the queues still
//! alive, each under its lock, to the timer's own. A queue on a timer that does not
//! track keeps no table (`None`) and registers nowhere.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::Location;

use tokio::time::Instant;

/// A line of code that made a timer.
pub(crate) type Site = &'static Location<'static>;

/// What a tracking timer keeps of one pending timer: the line that made it, and its
/// deadline as an offset from the timer's origin (`Clock::offset_of`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tag {
    pub(crate) site: Site,
    pub(crate) deadline: i64,
}

/// The [`Tag`]s of one wheel's entries, by the entries' slab indices.
///
/// *Invariant:* in a tracking timer, the tag at the index of every entry present is
/// that entry's (written at its insert, moved with it). At an index no entry holds,
/// it is stale and never read.
#[derive(Debug, Default)]
pub(crate) struct Tags {
    by_index: Vec<Option<Tag>>,
}

impl Tags {
    /// Records the tag of the entry just inserted at `index`.
    pub(crate) fn set(&mut self, index: usize, tag: Tag) {
        if index >= self.by_index.len() {
            self.by_index.resize(index + 1, None);
        }
        self.by_index[index] = Some(tag);
    }

    /// The entry at `index` moved to `deadline` (same index, same site).
    pub(crate) fn moved(&mut self, index: usize, deadline: i64) {
        if let Some(Some(tag)) = self.by_index.get_mut(index) {
            tag.deadline = deadline;
        }
    }

    /// The tag at `index`: the present entry's, for an index an entry holds.
    pub(crate) fn get(&self, index: usize) -> Option<Tag> {
        self.by_index.get(index).copied().flatten()
    }

    /// Swaps the table for an empty one if it has room for more than `retain` entries,
    /// and returns the old: for when the wheel it is beside has emptied (every tag is
    /// stale then), to drop after the lock, as the wheel's storage is.
    pub(crate) fn release(&mut self, retain: usize) -> Option<Vec<Option<Tag>>> {
        (self.by_index.capacity() > retain).then(|| std::mem::take(&mut self.by_index))
    }

    /// Bytes of heap the table holds.
    #[cfg(test)]
    pub(crate) fn heap_bytes(&self) -> usize {
        self.by_index.capacity() * size_of::<Option<Tag>>()
    }
}

/// The tags of a shard's two wheels (futures, callbacks), made on the first tag: a
/// timer that does not track call sites holds a `None` per shard, one word.
#[derive(Debug, Default)]
pub(crate) struct ShardTags {
    pub(crate) futures: Tags,
    pub(crate) callbacks: Tags,
}

impl ShardTags {
    /// The tables of `tags`, made on the first call. Out of line, and called only by
    /// a timer that tracks call sites (whose every entry has a tag): another pays only
    /// the branch that skips it.
    #[cold]
    #[inline(never)]
    pub(crate) fn of(tags: &mut Option<Box<ShardTags>>) -> &mut ShardTags {
        tags.get_or_insert_with(Box::default)
    }
}

/// Pending values counted by site that are not the timer's own entries (a
/// [`DelayQueue`](crate::DelayQueue)'s): what a tracking timer holds weakly beside its
/// shards, so that nothing below the queue depends on it.
pub(crate) trait SiteSource: Send + Sync {
    /// Counts, into `tally`, the tag of every value held now.
    fn tally(&self, tally: &mut Tally);
}

/// Hashes a [`Location`]'s address: one multiplication, for the maps keyed by call site
/// on paths that run per timer (a site's [`Location`] is a `static`, so its address
/// names it; two addresses of one line are merged where it matters, by value).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    fn write_usize(&mut self, address: usize) {
        self.write_u64(address as u64);
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing; the fold brings the product's high bits, which depend on
        // every bit of the address, down to the low ones that pick a bucket.
        let product = (self.0 ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = product ^ (product >> 32);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by a site's address.
pub(crate) type BySite<V> = HashMap<usize, V, BuildHasherDefault<AddressHasher>>;

/// The address a site is keyed by in a [`BySite`] map.
#[inline]
pub(crate) fn address(site: Site) -> usize {
    site as *const Location<'static> as usize
}

/// Pending timers counted by site: fed the tags of the entries present, shard by
/// shard, then sorted into [`PendingSite`]s.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// Per site address: the site, how many, the earliest deadline (an offset).
    by_site: BySite<(Site, usize, i64)>,
}

impl Tally {
    /// Counts one pending timer.
    pub(crate) fn add(&mut self, tag: Tag) {
        let counted = self
            .by_site
            .entry(address(tag.site))
            .or_insert((tag.site, 0, tag.deadline));
        counted.1 += 1;
        counted.2 = counted.2.min(tag.deadline);
    }

    /// The sites, most pending first (then earliest deadline first, then by file,
    /// line and column, so that the order is the same from call to call). One line
    /// reached through two `Location`s (a generic caller instantiated in two crates, say) is one site.
    /// `instant_at` turns a deadline offset into an instant.
    pub(crate) fn into_sites(self, instant_at: impl Fn(i64) -> Instant) -> Vec<PendingSite> {
        let mut by_line: HashMap<Site, (usize, i64)> = HashMap::new();
        for (site, pending, earliest) in self.by_site.into_values() {
            let merged = by_line.entry(site).or_insert((0, earliest));
            merged.0 += pending;
            merged.1 = merged.1.min(earliest);
        }
        let mut sites: Vec<(Site, usize, i64)> = by_line
            .into_iter()
            .map(|(site, (pending, earliest))| (site, pending, earliest))
            .collect();
        sites.sort_unstable_by(|a, b| {
            b.1.cmp(&a.1)
                .then(a.2.cmp(&b.2))
                .then_with(|| a.0.file().cmp(b.0.file()))
                .then(a.0.line().cmp(&b.0.line()))
                .then(a.0.column().cmp(&b.0.column()))
        });
        sites
            .into_iter()
            .map(|(location, pending, earliest)| PendingSite {
                location,
                pending,
                earliest_deadline: Some(instant_at(earliest)),
            })
            .collect()
    }
}

/// A line of code holding pending timers, from
/// [`Timer::pending_by_site`](crate::Timer::pending_by_site): where the timers were
/// made, how many are pending, and the earliest of their deadlines.
///
/// The line is the caller of the entry point that made the timer (`sleep`,
/// `sleep_until`, `timeout`, `timeout_at`, `interval`, `interval_at`, `schedule`,
/// `schedule_at`, `schedule_detached`, `schedule_detached_at`, on a
/// [`Timer`](crate::Timer) or the free functions), or that inserted a
/// [`DelayQueue`](crate::DelayQueue)'s value (`insert`, `insert_at`, `try_insert`,
/// `try_insert_at`): a queue's values are counted with its timer's timers, until they
/// are removed, taken or cleared, or the queue is dropped. Timers this crate makes for
/// you show at its own lines: a queue's one wakeup, an
/// [`io::TimeoutStream`](crate::io::TimeoutStream)'s idle timeouts, hyper's sleeps
/// through `hyper::rt::Timer`.
///
/// # Examples
///
/// ```
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// # if cfg!(not(feature = "test-util")) { return; } // the paused clock needs it
/// use std::time::Duration;
/// use tokio_wheel::Timer;
///
/// let timer = Timer::builder().track_call_sites(true).build().unwrap();
/// let line = line!() + 1;
/// let retry = timer.schedule(Duration::from_secs(5), || {}).unwrap();
/// let sites = timer.pending_by_site();
/// assert_eq!(sites.len(), 1);
/// assert_eq!((sites[0].location().line(), sites[0].pending()), (line, 1));
/// assert_eq!(sites[0].earliest_deadline(), Some(retry.deadline()));
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct PendingSite {
    location: Site,
    pending: usize,
    earliest_deadline: Option<Instant>,
}

impl PendingSite {
    /// The line of code: `file()`, `line()` and `column()` of the call that made the
    /// timers.
    pub fn location(&self) -> &'static Location<'static> {
        self.location
    }

    /// How many timers made there are pending: registered, not yet fired, not
    /// cancelled (counted as [`Timer::pending`](crate::Timer::pending) counts them: a
    /// future from its first poll).
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// The earliest deadline among them: how soon, at the latest, one of them leaves
    /// by itself. Always `Some` for a site `pending_by_site` lists.
    pub fn earliest_deadline(&self) -> Option<Instant> {
        self.earliest_deadline
    }
}

impl fmt::Display for PendingSite {
    /// `file:line:column: N pending`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} pending", self.location, self.pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn here() -> Site {
        Location::caller()
    }

    #[test]
    fn a_tag_is_read_back_at_its_index_and_moves_with_its_entry() {
        let site = here();
        let mut tags = Tags::default();
        assert_eq!(tags.heap_bytes(), 0, "nothing allocated until a tag comes");
        assert!(tags.get(3).is_none());
        tags.set(3, Tag { site, deadline: 7 });
        assert_eq!(tags.get(3).map(|t| t.deadline), Some(7));
        assert!(tags.get(2).is_none() && tags.get(4).is_none());
        tags.moved(3, 9);
        assert_eq!(tags.get(3).map(|t| t.deadline), Some(9));
        tags.moved(5, 1); // beyond the table: nothing
        assert!(tags.get(5).is_none());
    }

    /// What tracking costs a pending timer, beside its entry: a line and a deadline.
    #[test]
    fn a_tag_is_16_bytes() {
        assert_eq!(size_of::<Option<Tag>>(), 16);
    }

    #[test]
    fn a_tally_merges_a_line_and_sorts_most_pending_first() {
        // One line at two addresses (as two crates that each instantiate a generic
        // caller have it), and another line.
        let a = here();
        let b: Site = Box::leak(Box::new(*a));
        let c = here();
        assert_ne!(address(a), address(b));
        let mut tally = Tally::default();
        for deadline in [5, 3] {
            tally.add(Tag { site: c, deadline });
        }
        tally.add(Tag {
            site: a,
            deadline: 8,
        });
        tally.add(Tag {
            site: b,
            deadline: 6,
        });
        tally.add(Tag {
            site: b,
            deadline: 9,
        });
        let origin = Instant::now();
        let at = |offset: i64| origin + std::time::Duration::from_nanos(offset as u64);
        let sites = tally.into_sites(at);
        let got: Vec<_> = sites
            .iter()
            .map(|s| (s.location().line(), s.pending(), s.earliest_deadline()))
            .collect();
        assert_eq!(
            got,
            [(a.line(), 3, Some(at(6))), (c.line(), 2, Some(at(3))),]
        );
    }
}
