//! Messages that arrived but were not received yet, matched by (context, source, tag).

use std::collections::{HashMap, VecDeque};

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

/// Pending messages in arrival order (with their communicator context), plus the
/// peers whose links ended.
#[derive(Default)]
pub struct Mailbox {
    queue: VecDeque<(u32, Message)>,
    /// Peers that are gone, with why.
    pub lost: HashMap<u32, String>,
}

impl Mailbox {
    /// Adds an arrived message.
    pub fn push(&mut self, context: u32, m: Message) {
        self.queue.push_back((context, m));
    }

    /// Takes the oldest message of `context` matching `source` and `tag` (`None`
    /// matches any). Messages from one source arrive in the order they were sent, so
    /// this keeps order per (source, tag).
    pub fn take(&mut self, context: u32, source: Option<u32>, tag: Option<u32>) -> Option<Message> {
        let i = self.queue.iter().position(|(c, m)| {
            *c == context && source.is_none_or(|s| s == m.source) && tag.is_none_or(|t| t == m.tag)
        })?;
        self.queue.remove(i).map(|(_, m)| m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(source: u32, tag: u32, b: u8) -> Message {
        Message {
            source,
            tag,
            data: vec![b],
        }
    }

    #[test]
    fn matching_keeps_order_per_source_and_tag_within_a_context() {
        let mut mb = Mailbox::default();
        mb.push(7, m(1, 5, 9));
        for msg in [m(1, 5, 0), m(2, 5, 1), m(1, 6, 2), m(1, 5, 3)] {
            mb.push(0, msg);
        }
        assert_eq!(mb.take(0, Some(1), Some(5)).unwrap().data, [0]);
        assert_eq!(mb.take(0, None, Some(6)).unwrap().data, [2]);
        assert_eq!(mb.take(0, Some(1), None).unwrap().data, [3]);
        assert_eq!(mb.take(0, None, None).unwrap().data, [1]);
        assert!(mb.take(0, None, None).is_none());
        assert_eq!(mb.take(7, None, None).unwrap().data, [9]);
    }
}
