//! Idle sockets cut by `io::TimeoutStream` (the long-poll server of seed 003, on real
//! TCP): an echo server on 127.0.0.1 whose connections are closed after a read idle
//! timeout, however long they live while the peer keeps talking.
//!
//! ```text
//! cargo run --example idle_sockets
//! ```
//!
//! Every connection's socket is wrapped once; each wait for data arms (moves in
//! place) one wheel entry, so busy connections cost no timer per read. Half the
//! clients talk every 100 ms for a second and leave; the other half go silent and are
//! cut. Stops by itself.

use std::io::ErrorKind;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_wheel::io::TimeoutStream;
use tokio_wheel::Timer;

const CLIENTS: usize = 20;
const IDLE: Duration = Duration::from_millis(300);

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let timer = Timer::builder()
        .tick(Duration::from_millis(10))
        .build()
        .expect("valid settings");
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;

    let server = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        for _ in 0..CLIENTS {
            let (socket, _) = listener.accept().await?;
            let mut socket = TimeoutStream::with_timer(socket, &timer);
            socket.set_read_timeout(Some(IDLE));
            socket.set_write_timeout(Some(IDLE));
            connections.spawn(async move {
                let mut buf = [0; 64];
                loop {
                    match socket.read(&mut buf).await {
                        Ok(0) => return "closed by the client",
                        Ok(n) => {
                            if socket.write_all(&buf[..n]).await.is_err() {
                                return "write failed";
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::TimedOut => return "cut when idle",
                        Err(_) => return "read failed",
                    }
                }
            });
        }
        let mut outcomes = Vec::new();
        while let Some(outcome) = connections.join_next().await {
            outcomes.push(outcome.expect("connection task"));
        }
        Ok::<_, std::io::Error>(outcomes)
    });

    let mut clients = tokio::task::JoinSet::new();
    for id in 0..CLIENTS {
        clients.spawn(async move {
            let mut stream = TcpStream::connect(addr).await?;
            if id % 2 == 0 {
                // Talkative: more often than the idle timeout, then leaves.
                for _ in 0..10 {
                    stream.write_all(b"ping").await?;
                    let mut echo = [0; 4];
                    stream.read_exact(&mut echo).await?;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                stream.shutdown().await?;
            } else {
                // Silent: the server cuts it (read returns 0 then).
                let n = stream.read(&mut [0; 8]).await?;
                assert_eq!(n, 0);
            }
            Ok::<_, std::io::Error>(())
        });
    }
    while let Some(client) = clients.join_next().await {
        client.expect("client task")?;
    }
    let outcomes = server.await.expect("server task")?;
    let cut = outcomes.iter().filter(|o| **o == "cut when idle").count();
    let closed = outcomes
        .iter()
        .filter(|o| **o == "closed by the client")
        .count();
    println!("connections:          {CLIENTS}");
    println!("cut when idle:        {cut} (read idle timeout {IDLE:?})");
    println!("closed by the client: {closed}");
    assert_eq!((cut, closed), (CLIENTS / 2, CLIENTS / 2));
    Ok(())
}
