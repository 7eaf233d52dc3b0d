//! The wire, from a hand-written host (no adb server): the handshake, one WRTE in flight per
//! stream until the host's OKAY, a refused service, and a stream the host closes first.

use std::time::Duration;

use openphone_fake_adbd::wire::{
    A_AUTH, A_CLSE, A_CNXN, A_OKAY, A_OPEN, A_WRTE, AUTH_TOKEN, Packet, VERSION,
};
use openphone_fake_adbd::{FakeAdbd, Options};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;

async fn send(socket: &mut TcpStream, packet: Packet) {
    socket.write_all(&packet.encode()).await.expect("write");
}

async fn recv(socket: &mut TcpStream) -> Packet {
    tokio::time::timeout(Duration::from_secs(10), Packet::read(socket))
        .await
        .expect("a packet within 10 s")
        .expect("a well-formed packet")
}

/// Whether the device sends anything within a short grace period (a read that must stay
/// pending: the assertion is on *what* arrives, the grace only bounds the wait).
async fn silent(socket: &mut TcpStream) -> bool {
    tokio::time::timeout(Duration::from_millis(300), Packet::read(socket))
        .await
        .is_err()
}

async fn connected(options: Options, max_payload: u32) -> (FakeAdbd, TcpStream, Packet) {
    let device = FakeAdbd::start("127.0.0.1:0".parse().expect("addr"), options)
        .await
        .expect("starts");
    let mut socket = TcpStream::connect(device.addr()).await.expect("connects");
    send(
        &mut socket,
        Packet::new(A_CNXN, VERSION, max_payload, b"host::features=\0".to_vec()),
    )
    .await;
    let answer = recv(&mut socket).await;
    (device, socket, answer)
}

#[tokio::test]
async fn the_device_answers_cnxn_with_its_banner() {
    let (_device, _socket, answer) = connected(Options::default(), 4096).await;
    assert_eq!(answer.command, A_CNXN);
    assert_eq!(answer.arg0, VERSION);
    let banner = String::from_utf8(answer.data).expect("utf-8");
    assert_eq!(
        banner,
        "device::ro.product.name=openphone_fake;ro.product.model=OpenPhone Fake;ro.product.device=fake;features="
    );
}

#[tokio::test]
async fn one_write_is_in_flight_until_the_host_acknowledges_it() {
    // A 1 KiB payload limit splits the screenshot into many WRTE packets.
    let (_device, mut socket, _) = connected(Options::default(), 1024).await;
    send(
        &mut socket,
        Packet::new(A_OPEN, 7, 0, b"exec:screencap -p\0".to_vec()),
    )
    .await;
    let okay = recv(&mut socket).await;
    assert_eq!((okay.command, okay.arg1), (A_OKAY, 7));
    let local = okay.arg0;
    let mut png = Vec::new();
    let mut writes = 0;
    loop {
        let packet = recv(&mut socket).await;
        if packet.command == A_CLSE {
            assert_eq!((packet.arg0, packet.arg1), (local, 7));
            break;
        }
        assert_eq!(
            (packet.command, packet.arg0, packet.arg1),
            (A_WRTE, local, 7)
        );
        assert!(packet.data.len() <= 1024, "{} bytes", packet.data.len());
        png.extend_from_slice(&packet.data);
        writes += 1;
        if writes == 2 {
            assert!(
                silent(&mut socket).await,
                "a second WRTE came before the OKAY"
            );
        }
        send(&mut socket, Packet::new(A_OKAY, 7, local, Vec::new())).await;
    }
    assert!(writes > 2, "{writes} writes");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
}

#[tokio::test]
async fn an_unknown_service_is_refused_with_clse() {
    let (_device, mut socket, _) = connected(Options::default(), 4096).await;
    send(&mut socket, Packet::new(A_OPEN, 9, 0, b"sync:\0".to_vec())).await;
    let refused = recv(&mut socket).await;
    assert_eq!(
        (refused.command, refused.arg0, refused.arg1),
        (A_CLSE, 0, 9)
    );
}

#[tokio::test]
async fn a_hung_command_ends_when_the_host_closes_its_stream() {
    let options = Options {
        hang_on: Some("input".into()),
        ..Options::default()
    };
    let (_device, mut socket, _) = connected(options, 4096).await;
    send(
        &mut socket,
        Packet::new(A_OPEN, 3, 0, b"shell:input tap 1 2\0".to_vec()),
    )
    .await;
    let okay = recv(&mut socket).await;
    assert_eq!(okay.command, A_OKAY);
    assert!(silent(&mut socket).await, "the hung command answered");
    send(&mut socket, Packet::new(A_CLSE, 3, okay.arg0, Vec::new())).await;
    // The connection still serves other streams.
    send(
        &mut socket,
        Packet::new(A_OPEN, 4, 0, b"shell:echo ok\0".to_vec()),
    )
    .await;
    let okay = recv(&mut socket).await;
    assert_eq!((okay.command, okay.arg1), (A_OKAY, 4));
    let write = recv(&mut socket).await;
    assert_eq!(
        (write.command, write.data.as_slice()),
        (A_WRTE, b"ok\n".as_slice())
    );
}

#[tokio::test]
async fn an_unauthorized_device_asks_for_a_signature_and_never_accepts() {
    let options = Options {
        unauthorized: true,
        ..Options::default()
    };
    let (_device, mut socket, answer) = connected(options, 4096).await;
    assert_eq!((answer.command, answer.arg0), (A_AUTH, AUTH_TOKEN));
    assert_eq!(answer.data.len(), 20);
    // A signature is refused with a fresh token; a shell is never opened.
    send(&mut socket, Packet::new(A_AUTH, 2, 0, vec![0; 256])).await;
    let again = recv(&mut socket).await;
    assert_eq!((again.command, again.arg0), (A_AUTH, AUTH_TOKEN));
    send(
        &mut socket,
        Packet::new(A_OPEN, 5, 0, b"shell:getprop\0".to_vec()),
    )
    .await;
    let refused = recv(&mut socket).await;
    assert_eq!((refused.command, refused.arg1), (A_CLSE, 5));
}

#[tokio::test]
async fn a_stopped_device_frees_its_port_for_the_next_one() {
    let (device, mut socket, _) = connected(Options::default(), 4096).await;
    let addr = device.addr();
    device.stop().await;
    // The old connection is closed (the phone was unplugged) …
    let read = tokio::time::timeout(Duration::from_secs(10), Packet::read(&mut socket))
        .await
        .expect("the close arrives");
    assert!(read.is_err(), "{read:?}");
    // … and a new device listens on the same address.
    let again = FakeAdbd::start(addr, Options::default())
        .await
        .expect("rebinds");
    assert_eq!(again.addr(), addr);
    TcpStream::connect(addr).await.expect("connects again");
}
