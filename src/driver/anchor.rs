//! The references handles hold a timer by: one [`Anchor`] per shard, each with a
//! reference count of its own; in a timer that tracks call sites, one per shard and
//! call site too ([`SiteAnchors`]), which is how a `Sleep` knows its line.

use std::sync::Arc;

use super::shared::{thread_shard, Shared};
use crate::sites::{address, BySite, Site};
use crate::sync::{lock, Mutex};

/// A strong reference to [`Shared`] with a reference count of its own, one per shard.
///
/// Every `Sleep` and `Scheduled` holds one, taken from the creating thread's shard,
/// instead of a `Timer` clone. Cloning an `Arc` writes its count, and with one count
/// for the whole timer, threads creating and dropping timeouts at once would pass that
/// cache line between them twice per timeout. `Timer` handles own the anchors; each
/// anchor keeps `Shared`, and so the driver, alive, as a `Timer` clone would.
///
/// The line that made a `Sleep`, in a timer that tracks call sites, is kept here, in
/// the room the alignment leaves: the `Sleep` registers (on its first poll, and again
/// after it fired and was reset) long after its maker returned, and its 24 bytes have
/// no room left.
#[repr(align(128))] // the counts (at the start of the Arc) alone in their cache lines
pub(crate) struct Anchor {
    pub(crate) shared: Arc<Shared>,
    /// The line that made the `Sleep`s holding this anchor: `Some` only in the anchors
    /// of [`SiteAnchors`].
    pub(crate) site: Option<Site>,
}

impl Anchor {
    fn new(shared: Arc<Shared>, site: Option<Site>) -> Anchor {
        Anchor { shared, site }
    }

    /// One anchor per shard of `shared`.
    pub(crate) fn all(shared: &Arc<Shared>) -> Arc<[Arc<Anchor>]> {
        (0..shared.shards.len())
            .map(|_| Arc::new(Anchor::new(shared.clone(), None)))
            .collect()
    }

    /// The calling thread's anchor among `anchors` (from [`Anchor::all`]).
    #[inline]
    pub(crate) fn local(anchors: &[Arc<Anchor>]) -> Arc<Anchor> {
        anchors[thread_shard(anchors.len())].clone()
    }
}

/// The anchors of a timer that tracks call sites, per shard and line, made on a
/// line's first use on a shard and kept for the timer's life (by its `Timer`
/// handles, not by [`Shared`], which the anchors hold).
///
/// Per shard, as [`Anchor`]s are: a thread looks its line up under its own shard's
/// lock (uncontended but for threads beyond the shard count) and counts on its own
/// shard's anchor, so threads making timers at one line do not pass a cache line
/// between them.
pub(crate) struct SiteAnchors {
    by_shard: Box<[Mutex<BySite<Arc<Anchor>>>]>,
}

impl std::fmt::Debug for SiteAnchors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SiteAnchors")
            .field("shards", &self.by_shard.len())
            .finish_non_exhaustive()
    }
}

impl SiteAnchors {
    /// No anchors yet, for a timer with `shards` shards.
    pub(crate) fn new(shards: usize) -> SiteAnchors {
        SiteAnchors {
            by_shard: (0..shards).map(|_| Mutex::new(BySite::default())).collect(),
        }
    }

    /// The anchor of `site` on the calling thread's shard; `anchors` are the timer's
    /// (from [`Anchor::all`]), the shared state taken from them on a line's first use.
    pub(crate) fn local(&self, anchors: &[Arc<Anchor>], site: Site) -> Arc<Anchor> {
        let shard = thread_shard(self.by_shard.len());
        let mut by_site = lock(&self.by_shard[shard]);
        by_site
            .entry(address(site))
            .or_insert_with(|| Arc::new(Anchor::new(anchors[shard].shared.clone(), Some(site))))
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_holds_its_own_shards_anchor() {
        let mut config = crate::builder::Builder::default()
            .validate(1)
            .expect("defaults");
        config.shards = 2;
        let shared = Shared::new(config, None);
        let anchors = Anchor::all(&shared);
        assert_eq!(anchors.len(), 2);
        assert_eq!(
            Arc::strong_count(&shared),
            3,
            "the test's and one per anchor"
        );
        let here = Anchor::local(&anchors);
        assert!(
            Arc::ptr_eq(&here, &Anchor::local(&anchors)),
            "same thread, same anchor"
        );
        // Each thread takes the anchor of its own shard number, and threads are
        // numbered in turn, so new threads soon cover both (other tests' threads may
        // take numbers in between, hence the loop).
        let mut others: Vec<Arc<Anchor>> = Vec::new();
        for _ in 0..64 {
            let (number, anchor) = std::thread::scope(|s| {
                s.spawn(|| (thread_shard(2), Anchor::local(&anchors)))
                    .join()
                    .unwrap()
            });
            assert!(Arc::ptr_eq(&anchor, &anchors[number]));
            if !others.iter().any(|seen| Arc::ptr_eq(seen, &anchor)) {
                others.push(anchor);
            }
            if others.len() == 2 {
                break;
            }
        }
        assert_eq!(others.len(), 2, "threads spread over both anchors");
        // Holding an anchor holds the shared state: dropping everything else leaves it.
        let weak = Arc::downgrade(&shared);
        drop((shared, anchors, others));
        assert!(weak.upgrade().is_some(), "`here` keeps it");
        drop(here);
        assert!(weak.upgrade().is_none());
    }
}
