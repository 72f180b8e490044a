//! The frames of a link, after the handshake: a fixed 24-byte header, then the
//! payload for the kinds that carry one.
//!
//! ```text
//! kind u8 | 0 u8 ×3 | tag u32 | context u32 | id u32 | len u64      (big-endian)
//! ```
//! | kind | meaning | payload |
//! |---|---|---|
//! | `Eager` | a whole message (`len` bytes, up to the sender's eager limit) | `len` bytes |
//! | `Rts` | ready to send: a message of `len` bytes, request `id` of the sender | none |
//! | `Cts` | clear to send: the receiver posted a buffer for the sender's `id` | none |
//! | `Data` | the message announced by `Rts` `id` | `len` bytes |
//! | `Heartbeat` | nothing to say: proves the peer is alive on an idle link | none |
//! | `Moved` | the sender's messages go on another link from now on: this one carries nothing more of them | none |
//! | `Resume` | first frame on the link a sender moved to: `len` is how many messages (`Eager`, `Rts`) it sent before, on other links | none |
//! | `Shell` | for the engine's shell (a shared-memory offer, `id` 1; its acceptance, 2; a refusal, 3) | `len` bytes (at most 4096) |
//! | `Addr` | on a link that reads the peer's memory: the `Rts` `id` that follows (`len` bytes) can be copied from address `tag << 32 \| context` | none |
//! | `Fin` | the receiver copied the data of the sender's `id` itself: that send is complete | none |
//! | `Lend` | after an `Addr`: the message is in two parts, its first `len >> 30` bytes at the `Addr`'s address, the rest at `tag << 32 \| context`, lent under number `len % 2³⁰` (a copy counts only if the lend still stands after it) | none |
//! | `Withdrawn` | the sender took back the lent message `id` the receiver asked for with `Cts` (its call failed) | none |
//! | `Share` | the receiver is copying the sender's message `id` (`len` bytes) into its buffer at `tag << 32 \| context`: the sender may write chunks of it there too (see `shm`'s "Sharing a large copy") | none |
//!
//! A link moves when a direct one comes up beside a relayed one (relay first, then
//! upgrade): the receiver holds the new link's messages until it has handled the
//! `len` that came before (see `Core::add_conn`), so nothing is reordered.
//!
//! A header that does not decode (unknown kind, reserved bytes set, a length above
//! [`MAX_MESSAGE`], a payload on a kind that has none) is a protocol error: the link
//! is closed naming it, and the other links go on.

/// Bytes in a header.
pub const HEADER: usize = 24;
/// Largest message a peer may announce (64 GiB).
pub const MAX_MESSAGE: u64 = 1 << 36;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A whole small message.
    Eager = 1,
    /// Ready to send: a large message is waiting for a posted receive.
    Rts = 2,
    /// Clear to send: the receiver posted a buffer.
    Cts = 3,
    /// The data of a large message.
    Data = 4,
    /// Keeps an idle link alive.
    Heartbeat = 5,
    /// Nothing more of the sender's messages comes on this link.
    Moved = 6,
    /// The sender's messages go on here, after `len` of them sent on other links.
    Resume = 7,
    /// For the engine's shell, not for matching.
    Shell = 8,
    /// Where the data of the next `Rts` can be copied from.
    Addr = 9,
    /// The receiver copied a message's data itself.
    Fin = 10,
    /// The message whose address came last is in two parts, lent.
    Lend = 11,
    /// The sender took a lent message back.
    Withdrawn = 12,
    /// The receiver shares the copy of a large message with its sender.
    Share = 13,
}

impl Kind {
    /// Frames whose order the receiver must keep (they are matched in order).
    pub fn ordered(self) -> bool {
        matches!(self, Kind::Eager | Kind::Rts)
    }
}

/// A decoded header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Frame kind.
    pub kind: Kind,
    /// Message tag (`Eager`, `Rts`).
    pub tag: u32,
    /// Communicator context (`Eager`, `Rts`).
    pub context: u32,
    /// The sender's request id (`Rts`, `Cts`, `Data`).
    pub id: u32,
    /// Message length (`Eager`, `Rts`, `Data`; `Cts` echoes it).
    pub len: u64,
}

/// Why a header does not decode.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Not a kind this version knows.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// Reserved bytes were not zero.
    #[error("malformed header (reserved bytes {0:02x?})")]
    Reserved([u8; 3]),
    /// A length above the limit.
    #[error("announced a message of {0} bytes, above the {MAX_MESSAGE}-byte limit")]
    TooLong(u64),
    /// A length on a frame that carries none.
    #[error("a {0:?} frame with a length of {1}")]
    UnexpectedLength(Kind, u64),
}

impl Header {
    /// A header of `kind` with every other field zero.
    pub fn new(kind: Kind) -> Header {
        Header {
            kind,
            tag: 0,
            context: 0,
            id: 0,
            len: 0,
        }
    }

    /// Bytes of payload that follow this header on the wire.
    pub fn payload(&self) -> u64 {
        match self.kind {
            Kind::Eager | Kind::Data | Kind::Shell => self.len,
            _ => 0,
        }
    }

    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER] {
        let mut b = [0u8; HEADER];
        b[0] = self.kind as u8;
        b[4..8].copy_from_slice(&self.tag.to_be_bytes());
        b[8..12].copy_from_slice(&self.context.to_be_bytes());
        b[12..16].copy_from_slice(&self.id.to_be_bytes());
        b[16..24].copy_from_slice(&self.len.to_be_bytes());
        b
    }

    /// Decodes and checks a header.
    pub fn decode(b: &[u8; HEADER]) -> Result<Header, WireError> {
        let kind = match b[0] {
            1 => Kind::Eager,
            2 => Kind::Rts,
            3 => Kind::Cts,
            4 => Kind::Data,
            5 => Kind::Heartbeat,
            6 => Kind::Moved,
            7 => Kind::Resume,
            8 => Kind::Shell,
            9 => Kind::Addr,
            10 => Kind::Fin,
            11 => Kind::Lend,
            12 => Kind::Withdrawn,
            13 => Kind::Share,
            k => return Err(WireError::UnknownKind(k)),
        };
        if b[1..4] != [0, 0, 0] {
            return Err(WireError::Reserved([b[1], b[2], b[3]]));
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut l = [0u8; 8];
        l.copy_from_slice(&b[16..24]);
        let h = Header {
            kind,
            tag: u32_at(4),
            context: u32_at(8),
            id: u32_at(12),
            len: u64::from_be_bytes(l),
        };
        if h.len > MAX_MESSAGE {
            return Err(WireError::TooLong(h.len));
        }
        if matches!(kind, Kind::Heartbeat | Kind::Moved) && h.len != 0 {
            return Err(WireError::UnexpectedLength(kind, h.len));
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        for kind in [
            Kind::Eager,
            Kind::Rts,
            Kind::Cts,
            Kind::Data,
            Kind::Heartbeat,
            Kind::Moved,
            Kind::Resume,
            Kind::Shell,
            Kind::Addr,
            Kind::Fin,
            Kind::Lend,
            Kind::Withdrawn,
            Kind::Share,
        ] {
            let h = Header {
                kind,
                tag: 0xdead_beef,
                context: 7,
                id: 42,
                len: if matches!(kind, Kind::Heartbeat | Kind::Moved) {
                    0
                } else {
                    MAX_MESSAGE
                },
            };
            assert_eq!(Header::decode(&h.encode()), Ok(h));
        }
    }

    #[test]
    fn bad_headers_are_named() {
        let mut b = Header::new(Kind::Eager).encode();
        b[0] = 14;
        assert_eq!(Header::decode(&b), Err(WireError::UnknownKind(14)));
        let mut b = Header::new(Kind::Eager).encode();
        b[2] = 1;
        assert!(matches!(Header::decode(&b), Err(WireError::Reserved(_))));
        let mut h = Header::new(Kind::Data);
        h.len = MAX_MESSAGE + 1;
        assert_eq!(
            Header::decode(&h.encode()),
            Err(WireError::TooLong(MAX_MESSAGE + 1))
        );
        let mut h = Header::new(Kind::Heartbeat);
        h.len = 3;
        assert!(Header::decode(&h.encode()).is_err());
    }
}
