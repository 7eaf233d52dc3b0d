//! The ADB transport's packets: a 24-byte little-endian header (command, arg0, arg1, payload
//! length, payload checksum, magic = command ^ 0xffffffff) followed by the payload.
//!
//! The checksum field is the byte sum of the payload (what every adb since 1.0 computes; the
//! protocol notes call it "crc32" but it never was one). A peer that negotiated version
//! 0x01000001 or later skips checking it, but the first CNXN is checked, so it is always
//! filled in.

use tokio::io::{AsyncRead, AsyncReadExt};

/// `CNXN`: connect.
pub const A_CNXN: u32 = 0x4e58_4e43;
/// `AUTH`: authentication.
pub const A_AUTH: u32 = 0x4854_5541;
/// `OPEN`: open a stream.
pub const A_OPEN: u32 = 0x4e45_504f;
/// `OKAY`: stream ready / write acknowledged.
pub const A_OKAY: u32 = 0x5941_4b4f;
/// `WRTE`: stream data.
pub const A_WRTE: u32 = 0x4554_5257;
/// `CLSE`: close a stream.
pub const A_CLSE: u32 = 0x4553_4c43;
/// `SYNC`: obsolete, ignored.
pub const A_SYNC: u32 = 0x434e_5953;
/// `STLS`: TLS upgrade (not offered).
pub const A_STLS: u32 = 0x534c_5453;

/// The protocol version answered (skip-checksum era).
pub const VERSION: u32 = 0x0100_0001;
/// The largest payload this device sends or accepts.
pub const MAX_PAYLOAD: u32 = 256 * 1024;
/// What a peer may send at most before we call it broken (adb's own 1 MiB cap).
const PEER_MAX_PAYLOAD: u32 = 1024 * 1024;

/// `AUTH` type: a token to sign.
pub const AUTH_TOKEN: u32 = 1;
/// `AUTH` type: a signature of the token.
pub const AUTH_SIGNATURE: u32 = 2;
/// `AUTH` type: a public key offered for the user to accept.
pub const AUTH_RSAPUBLICKEY: u32 = 3;

/// One packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The command word (`A_CNXN`, …).
    pub command: u32,
    /// First argument.
    pub arg0: u32,
    /// Second argument.
    pub arg1: u32,
    /// The payload.
    pub data: Vec<u8>,
}

/// Why a packet could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// The peer closed the connection (cleanly, between packets).
    Closed,
    /// An I/O error.
    Io(std::io::Error),
    /// The header is not a valid ADB header.
    Bad(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed => write!(f, "the peer closed the connection"),
            Self::Io(e) => write!(f, "read failed: {e}"),
            Self::Bad(why) => write!(f, "malformed packet: {why}"),
        }
    }
}

/// The byte sum adb puts in the checksum field.
pub fn checksum(data: &[u8]) -> u32 {
    data.iter()
        .fold(0u32, |sum, b| sum.wrapping_add(u32::from(*b)))
}

/// The four letters of a command word, for messages.
pub fn name(command: u32) -> String {
    command
        .to_le_bytes()
        .iter()
        .map(|b| {
            if b.is_ascii_graphic() {
                char::from(*b)
            } else {
                '?'
            }
        })
        .collect()
}

impl Packet {
    /// A packet with a payload.
    pub fn new(command: u32, arg0: u32, arg1: u32, data: Vec<u8>) -> Self {
        Self {
            command,
            arg0,
            arg1,
            data,
        }
    }

    /// The packet as bytes on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.data.len());
        let len = u32::try_from(self.data.len()).unwrap_or(u32::MAX);
        for word in [
            self.command,
            self.arg0,
            self.arg1,
            len,
            checksum(&self.data),
            self.command ^ 0xffff_ffff,
        ] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.data);
        out
    }

    /// Reads one packet.
    pub async fn read(reader: &mut (impl AsyncRead + Unpin)) -> Result<Self, ReadError> {
        let mut header = [0u8; 24];
        match reader.read_exact(&mut header).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(ReadError::Closed);
            }
            Err(e) => return Err(ReadError::Io(e)),
        }
        let word = |i: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&header[i * 4..i * 4 + 4]);
            u32::from_le_bytes(b)
        };
        let (command, arg0, arg1, len, magic) = (word(0), word(1), word(2), word(3), word(5));
        if magic != command ^ 0xffff_ffff {
            return Err(ReadError::Bad(format!(
                "magic {magic:#010x} does not match command {command:#010x}"
            )));
        }
        if len > PEER_MAX_PAYLOAD {
            return Err(ReadError::Bad(format!(
                "{} payload of {len} bytes exceeds {PEER_MAX_PAYLOAD}",
                name(command)
            )));
        }
        let mut data = vec![0u8; len as usize];
        reader.read_exact(&mut data).await.map_err(ReadError::Io)?;
        Ok(Self {
            command,
            arg0,
            arg1,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_packet_survives_encode_and_read() {
        let packet = Packet::new(A_WRTE, 7, 9, b"hello".to_vec());
        let bytes = packet.encode();
        assert_eq!(bytes.len(), 29);
        assert_eq!(
            &bytes[16..20],
            &(104u32 + 101 + 108 + 108 + 111).to_le_bytes()
        );
        let back = Packet::read(&mut bytes.as_slice()).await.expect("reads");
        assert_eq!(back, packet);
    }

    #[tokio::test]
    async fn a_bad_magic_is_refused() {
        let mut bytes = Packet::new(A_OKAY, 1, 2, Vec::new()).encode();
        bytes[20] ^= 1;
        assert!(matches!(
            Packet::read(&mut bytes.as_slice()).await,
            Err(ReadError::Bad(_))
        ));
    }
}
