//! The `overload_deadlines` example (which is not part of the library), run small: it
//! reports every stack, and every request it sends is answered, 200 or 503. Its
//! figures are timings of a loaded machine and are not checked here.

#[allow(dead_code)] // `main` and the table are the example's
#[path = "../examples/overload_deadlines.rs"]
mod overload_deadlines;

use std::time::Duration;

use overload_deadlines::{run, Config, Stack};

#[test]
fn every_stack_is_reported_and_every_request_answered() {
    // Requests of up to 4 000 steps of 50 µs: many outlast the 100 ms deadline on the
    // clock alone, whatever the machine's load; the clients' first draws include some.
    let config = Config {
        clients: 4,
        window: Duration::from_millis(500),
        rounds: 1,
        max_steps: 4_000,
    };
    let reports = run(config);
    let stacks: Vec<Stack> = reports.iter().map(|r| r.stack).collect();
    assert_eq!(stacks, Stack::ALL);
    for report in &reports {
        assert_eq!(report.rounds.len(), 1, "{:?}", report.stack);
        let round = &report.rounds[0];
        assert!(
            round.sent >= config.clients,
            "{:?}: {round:?}",
            report.stack
        );
        assert_eq!(
            round.ok + round.timed_out,
            round.sent,
            "{:?}: a request unanswered",
            report.stack
        );
        assert!(round.timed_out > 0, "{:?}: {round:?}", report.stack);
        // Each timeout seen by the server reached its client as a 503.
        assert_eq!(round.fired.len(), round.timed_out, "{:?}", report.stack);
        assert_eq!(round.received.len(), round.timed_out, "{:?}", report.stack);
    }
}
