//! One ADB transport connection from an adb server: the CNXN (or AUTH) handshake, then
//! streams. Each OPEN becomes a task that answers the service; its output goes out in WRTE
//! packets of at most the negotiated payload size, one in flight at a time (the next waits
//! for the peer's OKAY), then CLSE.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::shell::{Reply, Shell};
use crate::wire::{
    A_AUTH, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_STLS, A_SYNC, A_WRTE, AUTH_SIGNATURE, AUTH_TOKEN,
    MAX_PAYLOAD, Packet, ReadError, VERSION, name,
};

/// The banner this device answers CNXN with (no features: the shell is v1).
pub const BANNER: &str = "device::ro.product.name=openphone_fake;ro.product.model=OpenPhone Fake;ro.product.device=fake;features=";

/// The open streams of one connection, by our local id; the value is the peer's id and the
/// channel that carries the peer's OKAYs to the stream's task.
type Streams = Arc<Mutex<HashMap<u32, (u32, mpsc::UnboundedSender<()>)>>>;

fn lock(
    streams: &Streams,
) -> std::sync::MutexGuard<'_, HashMap<u32, (u32, mpsc::UnboundedSender<()>)>> {
    streams
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A fresh 20-byte AUTH token (it is never verified: the device never accepts).
fn token() -> Vec<u8> {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut out = Vec::with_capacity(24);
    for i in 0..3u64 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(i);
        out.extend_from_slice(&h.finish().to_le_bytes());
    }
    out.truncate(20);
    out
}

/// Serves one connection until the peer closes it.
pub async fn run(socket: TcpStream, shell: Arc<Shell>) {
    let peer = socket
        .peer_addr()
        .map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let (mut reader, mut writer) = socket.into_split();
    let (out, mut outbox) = mpsc::unbounded_channel::<Packet>();
    let writer_task = tokio::spawn(async move {
        while let Some(packet) = outbox.recv().await {
            if writer.write_all(&packet.encode()).await.is_err() {
                break;
            }
        }
    });
    let streams: Streams = Arc::default();
    let mut online = false;
    let mut max_payload = MAX_PAYLOAD;
    let mut next_id: u32 = 1;
    let mut tasks = tokio::task::JoinSet::new();
    loop {
        let packet = match Packet::read(&mut reader).await {
            Ok(packet) => packet,
            Err(ReadError::Closed) => break,
            Err(e) => {
                eprintln!("openphone-fake-adbd: connection from {peer}: {e}; closing it");
                break;
            }
        };
        match packet.command {
            A_CNXN => {
                max_payload = packet.arg1.clamp(1, MAX_PAYLOAD);
                lock(&streams).clear();
                if shell.options().unauthorized {
                    let _ = out.send(Packet::new(A_AUTH, AUTH_TOKEN, 0, token()));
                } else {
                    online = true;
                    let _ = out.send(Packet::new(
                        A_CNXN,
                        VERSION,
                        MAX_PAYLOAD,
                        BANNER.as_bytes().to_vec(),
                    ));
                }
            }
            A_AUTH => {
                // Only in --unauthorized mode is a token outstanding: every signature is
                // refused with a new token, and an offered public key is left waiting for a
                // user who never taps "Allow".
                if shell.options().unauthorized && packet.arg0 == AUTH_SIGNATURE {
                    let _ = out.send(Packet::new(A_AUTH, AUTH_TOKEN, 0, token()));
                }
            }
            A_OPEN => {
                let remote = packet.arg0;
                let service = String::from_utf8_lossy(&packet.data)
                    .trim_end_matches('\0')
                    .to_owned();
                let offered = service.starts_with("shell:") || service.starts_with("exec:");
                if !online || !offered || remote == 0 {
                    let _ = out.send(Packet::new(A_CLSE, 0, remote, Vec::new()));
                    continue;
                }
                let local = next_id;
                next_id = next_id.wrapping_add(1).max(1);
                let (okays, okay_rx) = mpsc::unbounded_channel();
                lock(&streams).insert(local, (remote, okays));
                let _ = out.send(Packet::new(A_OKAY, local, remote, Vec::new()));
                tasks.spawn(stream(
                    Arc::clone(&shell),
                    service,
                    (local, remote),
                    out.clone(),
                    okay_rx,
                    Arc::clone(&streams),
                    max_payload as usize,
                ));
            }
            A_OKAY => {
                if let Some((_, okays)) = lock(&streams).get(&packet.arg1) {
                    let _ = okays.send(());
                }
            }
            A_WRTE => {
                // Input to a stream (stdin of a v1 shell): acknowledged and discarded — no
                // command of this device reads stdin.
                if let Some((remote, _)) = lock(&streams).get(&packet.arg1) {
                    let _ = out.send(Packet::new(A_OKAY, packet.arg1, *remote, Vec::new()));
                }
            }
            A_CLSE => {
                // Dropping the channel ends the stream's task (a hung command included).
                lock(&streams).remove(&packet.arg1);
            }
            A_SYNC | A_STLS => {}
            other => {
                eprintln!(
                    "openphone-fake-adbd: connection from {peer}: ignoring unknown packet {} ({other:#010x})",
                    name(other)
                );
            }
        }
        while tasks.try_join_next().is_some() {}
    }
    tasks.abort_all();
    drop(out);
    let _ = writer_task.await;
}

async fn stream(
    shell: Arc<Shell>,
    service: String,
    (local, remote): (u32, u32),
    out: mpsc::UnboundedSender<Packet>,
    mut okays: mpsc::UnboundedReceiver<()>,
    streams: Streams,
    max_payload: usize,
) {
    let reply = tokio::select! {
        reply = shell.service(&service) => reply,
        () = closed(&mut okays) => return,
    };
    let bytes = match reply {
        Some(Reply::Output(bytes)) => bytes,
        Some(Reply::Hang) => {
            closed(&mut okays).await;
            return;
        }
        None => Vec::new(),
    };
    for chunk in bytes.chunks(max_payload.max(1)) {
        if out
            .send(Packet::new(A_WRTE, local, remote, chunk.to_vec()))
            .is_err()
        {
            return;
        }
        // One write in flight: wait for the peer's OKAY (or its CLSE).
        if okays.recv().await.is_none() {
            return;
        }
    }
    if lock(&streams).remove(&local).is_some() {
        let _ = out.send(Packet::new(A_CLSE, local, remote, Vec::new()));
    }
}

/// Resolves when the peer closed the stream (its channel was dropped); OKAYs are skipped.
async fn closed(okays: &mut mpsc::UnboundedReceiver<()>) {
    while okays.recv().await.is_some() {}
}
