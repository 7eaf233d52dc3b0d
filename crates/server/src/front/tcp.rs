//! The accepted TCP socket: small answers leave at once, and an answer given before the
//! request's body was read is not lost to a reset.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// An accepted TCP connection: `TCP_NODELAY` (an answer's last segment never waits for the peer's
/// ACK of the one before) and, where the OS has it, `TCP_QUICKACK` re-armed once `ACK_PUSH_DELAY`
/// (5 ms) has passed since the first wait for more after a read that consumed data, with nothing
/// written meanwhile (a later read does not restart the delay: the push may come sooner after it,
/// never later). Linux otherwise delays the ACK of a request's first segment by up to 40 ms in the
/// hope of sending it with the answer; a client that sent its headers alone without `TCP_NODELAY`
/// cannot send its body until that ACK arrives, so every such request would stall for the
/// delayed-ACK timer. The push waits a little first because the usual request is whole in one
/// segment and answered within a millisecond or two: its answer carries the ACK, and pushing it at
/// once cost a segment each way (4–9 µs of a call's CPU here, issue 34). Clients that send headers
/// and body apart without `TCP_NODELAY` are rare (curl, Go and Python's anyio, which the `mcp`
/// client uses, set it).
#[derive(Debug)]
pub struct Tcp {
    /// `None` only while [`Drop`] hands it to the lingering close.
    stream: Option<TcpStream>,
    /// Data was read since the last acknowledgement was pushed out or an answer carried it.
    unacknowledged: bool,
    /// Armed by a wait for more after a read: when it fires before anything is written, the
    /// ACK is pushed out.
    ack_timer: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Set once the peer has sent anything (its ticket's: an idle connection is evicted first).
    heard: Option<Arc<AtomicBool>>,
    /// Set when the connection was answered before its request body was read (413, 408): the
    /// close lingers ([`linger`]).
    linger: Option<Arc<AtomicBool>>,
}

impl Tcp {
    /// Wraps an accepted stream and turns `TCP_NODELAY` on.
    pub fn new(stream: TcpStream) -> Tcp {
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY could not be set on a connection");
        }
        Tcp {
            stream: Some(stream),
            unacknowledged: false,
            ack_timer: None,
            heard: None,
            linger: None,
        }
    }

    /// Lingers at close when `linger` is set.
    pub(super) fn lingering_if(mut self, linger: Arc<AtomicBool>) -> Tcp {
        self.linger = Some(linger);
        self
    }

    fn io(&mut self) -> std::io::Result<&mut TcpStream> {
        self.stream
            .as_mut()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotConnected))
    }

    /// Sets `heard` once the peer has sent anything.
    pub(super) fn heard_by(mut self, heard: Arc<AtomicBool>) -> Tcp {
        self.heard = Some(heard);
        self
    }

    /// Sends the ACK of everything read so far now instead of at the delayed-ACK timer.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    fn acknowledge(&self) {
        if let Some(stream) = &self.stream
            && let Err(e) = rustix::net::sockopt::set_tcp_quickack(stream, true)
        {
            tracing::debug!(error = %e, "TCP_QUICKACK could not be set on a connection");
        }
    }

    /// Other systems: nothing to push (the delayed ACK stays as the OS has it).
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    fn acknowledge(&self) {}
}

impl AsyncRead for Tcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = match this.io() {
            Ok(stream) => Pin::new(stream).poll_read(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        };
        match &poll {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                this.unacknowledged = true;
                if let Some(heard) = &this.heard {
                    heard.store(true, Ordering::Relaxed);
                }
            }
            Poll::Pending if this.unacknowledged => {
                // Polled with this task's waker: the timer wakes the task, which reads again.
                let timer = this
                    .ack_timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(ACK_PUSH_DELAY)));
                if timer.as_mut().poll(cx).is_ready() {
                    this.acknowledged();
                    this.acknowledge();
                }
            }
            _ => {}
        }
        poll
    }
}

/// How long a wait for more after a read may last, with nothing written, before the ACK of
/// what was read is pushed out ([`Tcp`]): a client stalled on our delayed ACK waits this
/// instead of ~40 ms. Longer than nearly every answer takes under load (p99 ~1.5 ms in
/// `bench/run.sh`), so the timer rarely fires: at 1 ms it fired for the slower tenth of the
/// calls, and the wake-ups cost what the push had.
pub const ACK_PUSH_DELAY: Duration = Duration::from_millis(5);

impl Tcp {
    /// What was read is acknowledged (pushed out, or carried by an answer): no push is due.
    fn acknowledged(&mut self) {
        self.unacknowledged = false;
        self.ack_timer = None;
    }

    /// Bytes were written: the segment carries the ACK of everything read so far.
    fn wrote(&mut self, poll: &Poll<std::io::Result<usize>>) {
        if self.unacknowledged && matches!(poll, Poll::Ready(Ok(n)) if *n > 0) {
            self.acknowledged();
        }
    }
}

impl AsyncWrite for Tcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let poll = match this.io() {
            Ok(stream) => Pin::new(stream).poll_write(cx, buf),
            Err(e) => Poll::Ready(Err(e)),
        };
        this.wrote(&poll);
        poll
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let poll = match this.io() {
            Ok(stream) => Pin::new(stream).poll_write_vectored(cx, bufs),
            Err(e) => Poll::Ready(Err(e)),
        };
        this.wrote(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| s.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut().io() {
            Ok(stream) => Pin::new(stream).poll_flush(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut().io() {
            Ok(stream) => Pin::new(stream).poll_shutdown(cx),
            Err(e) => Poll::Ready(Err(e)),
        }
    }
}

impl Drop for Tcp {
    fn drop(&mut self) {
        if self
            .linger
            .as_ref()
            .is_some_and(|l| l.load(Ordering::SeqCst))
            && let Some(stream) = self.stream.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            handle.spawn(linger(stream));
        }
    }
}

/// Sockets lingering at once; more are closed at once.
static LINGERING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Most sockets lingering at once.
const MAX_LINGERING: usize = 32;
/// Longest a socket lingers.
const LINGER: Duration = Duration::from_secs(2);

/// The close of a connection answered before its request body was read (413, 408): our side
/// is shut (the answer and a FIN leave), then what the peer still sends is read and dropped
/// until it closes or [`LINGER`] passes. Closing at once with unread bytes would make the
/// kernel send a reset, which can destroy the answer before the client has read it.
async fn linger(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if LINGERING.fetch_add(1, Ordering::SeqCst) >= MAX_LINGERING {
        LINGERING.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    let _ = stream.shutdown().await;
    let _ = tokio::time::timeout(LINGER, async {
        let mut sink = [0u8; 8192];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
    LINGERING.fetch_sub(1, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::net::TcpListener;

    /// One poll of `server`'s read: whether it waits (nothing to read).
    async fn waits(server: &mut Tcp) -> bool {
        let mut buf = [0u8; 64];
        std::future::poll_fn(|cx| {
            let mut rb = ReadBuf::new(&mut buf);
            Poll::Ready(Pin::new(&mut *server).poll_read(cx, &mut rb).is_pending())
        })
        .await
    }

    /// A connection with a read in `server` and the socket in the delayed-ACK mode.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    async fn read_in_pingpong() -> (TcpStream, Tcp) {
        use rustix::net::sockopt::{set_tcp_quickack, tcp_quickack};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (accepted, _) = listener.accept().await.unwrap();
        let mut server = Tcp::new(accepted);
        assert!(server.io().unwrap().nodelay().unwrap());
        // The kernel reports `TCP_QUICKACK` as on unless the socket is in its delayed-ACK
        // ("ping-pong") mode.
        set_tcp_quickack(server.io().unwrap(), false).unwrap();
        assert!(!tcp_quickack(server.io().unwrap()).unwrap());
        client.write_all(b"POST / HTTP/1.1\r\n").await.unwrap();
        let mut buf = [0u8; 64];
        let n = server.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"POST / HTTP/1.1\r\n");
        (client, server)
    }

    /// A read followed by a wait for more that lasts [`ACK_PUSH_DELAY`] takes the socket out
    /// of its delayed-ACK mode (the ACK is pushed out): the timer wakes the reading task,
    /// which reads again and pushes.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test]
    async fn a_read_followed_by_a_wait_pushes_the_ack_out() {
        use rustix::net::sockopt::{set_tcp_quickack, tcp_quickack};
        let (_client, mut server) = read_in_pingpong().await;
        // Reading alone changes nothing, nor does the wait's start.
        assert!(!tcp_quickack(server.io().unwrap()).unwrap());
        assert!(waits(&mut server).await);
        assert!(!tcp_quickack(server.io().unwrap()).unwrap());
        assert!(server.ack_timer.is_some(), "a push is due after the delay");
        // The wait goes on: the timer wakes this task, which reads again and pushes.
        let mut buf = [0u8; 64];
        tokio::time::timeout(
            Duration::from_secs(10),
            std::future::poll_fn(|cx| {
                let mut rb = ReadBuf::new(&mut buf);
                assert!(Pin::new(&mut server).poll_read(cx, &mut rb).is_pending());
                if server.ack_timer.is_none() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }),
        )
        .await
        .expect("the timer woke the reading task, which pushed the ACK out");
        assert!(tcp_quickack(server.io().unwrap()).unwrap());

        // A second wait with nothing read in between does not touch the socket again.
        set_tcp_quickack(server.io().unwrap(), false).unwrap();
        assert!(waits(&mut server).await);
        assert!(server.ack_timer.is_none(), "no push is due");
        assert!(!tcp_quickack(server.io().unwrap()).unwrap());
    }

    /// An answer written before the delay passes carries the ACK: nothing is pushed, however
    /// long the next wait lasts.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[tokio::test]
    async fn an_answer_written_in_time_carries_the_ack() {
        use rustix::net::sockopt::tcp_quickack;
        use tokio::io::AsyncWriteExt;
        let (_client, mut server) = read_in_pingpong().await;
        assert!(waits(&mut server).await);
        assert!(server.ack_timer.is_some(), "a push is due after the delay");
        server.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.unwrap();
        assert!(server.ack_timer.is_none(), "the answer carried the ACK");
        tokio::time::sleep(ACK_PUSH_DELAY * 20).await;
        assert!(waits(&mut server).await);
        assert!(!tcp_quickack(server.io().unwrap()).unwrap());
    }
}
