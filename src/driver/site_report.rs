//! What a timer that tracks call sites reports: its pending timers by the line that
//! made them, from the tags beside its own entries and from the delay queues on it,
//! which register as sources (`sites.rs`'s `SiteSource`, so that the driver depends
//! on no queue).

use std::sync::{Arc, Weak};

use super::shared::Shared;
use crate::sites::{PendingSite, ShardTags, SiteSource, Tally};
use crate::sync::lock;

impl Shared {
    /// The pending timers by the line that made them, most first (see
    /// [`Tally::into_sites`]): every entry present, each shard read under its lock
    /// (so a timer pending throughout is counted once, exactly). Empty if the timer
    /// does not track call sites, whose entries carry no tags.
    pub(crate) fn pending_by_site(&self) -> Vec<PendingSite> {
        if !self.track_call_sites {
            return Vec::new();
        }
        let mut tally = Tally::default();
        for shard in self.shards.iter() {
            let wheels = lock(&shard.wheels);
            let none = ShardTags::default();
            let tags = wheels.tags.as_deref().unwrap_or(&none);
            let futures = wheels.futures.indices().map(|i| tags.futures.get(i));
            let callbacks = wheels.callbacks.indices().map(|i| tags.callbacks.get(i));
            for tag in futures.chain(callbacks) {
                debug_assert!(tag.is_some(), "every entry of a tracking timer has its tag");
                if let Some(tag) = tag {
                    tally.add(tag);
                }
            }
        }
        // Taken out of the list's lock before any queue's is taken; a queue this
        // holds the last reference to is dropped here, after every lock.
        let sources: Vec<Arc<dyn SiteSource>> = {
            let mut sources = lock(&self.site_sources);
            sources.retain(|source| source.strong_count() > 0);
            sources.iter().filter_map(Weak::upgrade).collect()
        };
        for source in &sources {
            source.tally(&mut tally);
        }
        drop(sources);
        tally.into_sites(|offset| self.reported(self.clock.instant_at(offset)))
    }

    /// Counts `source`'s values in `pending_by_site` for as long as it lives: for a
    /// delay queue on a tracking timer. The dead are pruned when the list is full, so
    /// it stays within twice the most queues alive at once.
    pub(crate) fn register_sites(&self, source: Weak<dyn SiteSource>) {
        debug_assert!(
            self.track_call_sites,
            "only a tracking timer counts sources"
        );
        let mut sources = lock(&self.site_sources);
        if sources.len() == sources.capacity() {
            sources.retain(|source| source.strong_count() > 0);
        }
        sources.push(source);
    }

    /// How many sources are registered, alive or not yet pruned.
    #[cfg(all(test, feature = "test-util"))]
    pub(crate) fn site_sources(&self) -> usize {
        lock(&self.site_sources).len()
    }
}
