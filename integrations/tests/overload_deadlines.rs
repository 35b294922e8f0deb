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
    // Work requests of a few steps, answered well within the deadline; upstream
    // answers ten times the deadline late, so every such request times out.
    let config = Config {
        work_clients: 4,
        work_steps: 4,
        upstream_clients: 4,
        upstream_min: Duration::from_secs(1),
        upstream_spread: Duration::from_millis(1),
        window: Duration::from_millis(400),
        rounds: 1,
    };
    let reports = run(config);
    let stacks: Vec<Stack> = reports.iter().map(|r| r.stack).collect();
    assert_eq!(stacks, Stack::ALL);
    for report in &reports {
        assert_eq!(report.rounds.len(), 1, "{:?}", report.stack);
        let round = &report.rounds[0];
        let clients = config.work_clients + config.upstream_clients;
        assert!(round.sent >= clients, "{:?}: {round:?}", report.stack);
        assert_eq!(
            round.ok + round.timed_out,
            round.sent,
            "{:?}: a request unanswered",
            report.stack
        );
        assert!(round.ok > 0, "{:?}: {round:?}", report.stack);
        // Each timeout seen by the server reached its client as a 503; every upstream
        // request timed out while waiting.
        let fired = round.fired.len() + round.fired_at_work.len();
        assert_eq!(fired, round.timed_out, "{:?}", report.stack);
        assert_eq!(
            round.received.len(),
            round.fired.len(),
            "{:?}",
            report.stack
        );
        assert!(
            round.fired.len() >= config.upstream_clients,
            "{:?}",
            report.stack
        );
    }
}
