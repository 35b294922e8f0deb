//! *memory*: bytes per pending, registered sleep at 1 000 000 pending: the future itself
//! (`size_of`, held in a `Vec`) plus what the timer allocates for it (heap growth
//! measured by a counting allocator), for wheel-timer and tokio::time.
//!
//! `cargo bench -p wheel-timer-benches --bench memory`

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::task::Context;
use std::time::Duration;

use futures::task::noop_waker_ref;
use wheel_timer::Timer;
use wheel_timer_benches::current_thread;

struct Counting;
static HEAP: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HEAP.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HEAP.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        HEAP.fetch_add(new as isize - layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const N: usize = 1_000_000;

fn heap() -> isize {
    HEAP.load(Ordering::Relaxed)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let rt = current_thread();
    let _enter = rt.enter();
    let mut cx = Context::from_waker(noop_waker_ref());

    let timer = rt.block_on(async { Timer::new() });
    let mut sleeps = Vec::with_capacity(N);
    let before = heap();
    for _ in 0..N {
        sleeps.push(timer.sleep(Duration::from_secs(3600)));
    }
    let futures_heap = heap() - before;
    for s in &mut sleeps {
        let _ = Pin::new(s).poll(&mut cx);
    }
    let timer_heap = heap() - before - futures_heap;
    assert_eq!(timer.pending(), N);
    let ours_size = std::mem::size_of::<wheel_timer::Sleep>();
    // Held by value in the Vec: the future's own bytes plus whatever was allocated.
    let ours = (ours_size * N) as f64 / N as f64 + (futures_heap + timer_heap) as f64 / N as f64;
    drop(sleeps);

    let mut tokio_sleeps = Vec::with_capacity(N);
    let before = heap();
    for _ in 0..N {
        tokio_sleeps.push(Box::pin(tokio::time::sleep(Duration::from_secs(3600))));
    }
    let tokio_futures = heap() - before;
    for s in &mut tokio_sleeps {
        let _ = s.as_mut().poll(&mut cx);
    }
    let tokio_driver = heap() - before - tokio_futures;
    let tokio_size = std::mem::size_of::<tokio::time::Sleep>();
    // Held as boxes: the Vec's pointer plus the box (the future) plus the driver's heap.
    let theirs = std::mem::size_of::<Pin<Box<tokio::time::Sleep>>>() as f64
        + (tokio_futures + tokio_driver) as f64 / N as f64;

    println!("memory: bytes per pending registered sleep at {N} pending");
    println!("| peer        | size_of future | timer heap per sleep | total per sleep |");
    println!("|-------------|----------------|----------------------|-----------------|");
    println!(
        "| wheel-timer | {ours_size:>14} | {:>20.1} | {ours:>15.1} |",
        timer_heap as f64 / N as f64
    );
    println!(
        "| tokio::time | {tokio_size:>14} | {:>20.1} | {theirs:>15.1} |",
        tokio_driver as f64 / N as f64
    );
    println!(
        "(totals: ours held by value in a Vec, so size_of + heap; tokio's boxed to pin them, \
         so the Vec's pointer + the box + heap)"
    );
}
