//! A received message, as the blocking calls return it.

/// A received message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Sender's rank.
    pub source: u32,
    /// The tag it was sent with.
    pub tag: u32,
    /// Its bytes.
    pub data: Vec<u8>,
}
