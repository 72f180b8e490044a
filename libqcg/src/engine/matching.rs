//! MPI matching, as Open MPI's ob1 does it: receives that were posted and wait for a
//! message, and messages that arrived before any receive wanted them.
//!
//! A message matches the oldest posted receive whose pattern accepts it; a posted
//! receive takes the oldest unexpected message it accepts. Links deliver a source's
//! messages in the order they were sent, so order is kept per (source, tag,
//! context), wildcards included. Pure data: no sockets, no clocks.

use std::collections::VecDeque;

/// Who sent a message, with which tag, in which communicator context, how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// Sender (job rank).
    pub source: u32,
    /// Tag.
    pub tag: u32,
    /// Communicator context.
    pub context: u32,
    /// Length in bytes.
    pub len: u64,
}

/// What a receive accepts; `None` is a wildcard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    /// Communicator context (never a wildcard).
    pub context: u32,
    /// Sender, or any.
    pub source: Option<u32>,
    /// Tag, or any.
    pub tag: Option<u32>,
}

impl Pattern {
    /// Whether `e` is accepted.
    pub fn accepts(&self, e: &Envelope) -> bool {
        self.context == e.context
            && self.source.is_none_or(|s| s == e.source)
            && self.tag.is_none_or(|t| t == e.tag)
    }
}

/// The posted and unexpected queues; `P` identifies a posted receive, `U` an
/// unexpected message.
#[derive(Debug)]
pub struct Queues<P, U> {
    posted: VecDeque<(Pattern, P)>,
    unexpected: VecDeque<(Envelope, U)>,
}

impl<P, U> Default for Queues<P, U> {
    fn default() -> Self {
        Queues {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
        }
    }
}

impl<P: Copy + PartialEq, U> Queues<P, U> {
    /// A message arrived: the oldest posted receive that accepts it, removed from
    /// the posted queue, or `None` (then the caller files it with [`Queues::file`]).
    pub fn arrive(&mut self, e: &Envelope) -> Option<(Pattern, P)> {
        // Most often the oldest takes it (a receive posted for the next message).
        if self.posted.front()?.0.accepts(e) {
            return self.posted.pop_front();
        }
        let i = self.posted.iter().position(|(p, _)| p.accepts(e))?;
        self.posted.remove(i)
    }

    /// Files a message no posted receive wanted.
    pub fn file(&mut self, e: Envelope, u: U) {
        self.unexpected.push_back((e, u));
    }

    /// A receive is posted: the oldest unexpected message it accepts, removed, or
    /// `None`, and then the receive waits in the posted queue.
    pub fn post(&mut self, pattern: Pattern, p: P) -> Option<(Envelope, U)> {
        if let Some(m) = self.take(&pattern) {
            return Some(m);
        }
        self.posted.push_back((pattern, p));
        None
    }

    /// Takes the oldest unexpected message `pattern` accepts, without posting.
    pub fn take(&mut self, pattern: &Pattern) -> Option<(Envelope, U)> {
        if pattern.accepts(&self.unexpected.front()?.0) {
            return self.unexpected.pop_front();
        }
        let i = self
            .unexpected
            .iter()
            .position(|(e, _)| pattern.accepts(e))?;
        self.unexpected.remove(i)
    }

    /// The oldest unexpected message `pattern` accepts, left in place (probe).
    pub fn peek(&self, pattern: &Pattern) -> Option<(&Envelope, &U)> {
        self.unexpected
            .iter()
            .find(|(e, _)| pattern.accepts(e))
            .map(|(e, u)| (e, u))
    }

    /// Keeps only the unexpected messages `keep` selects.
    pub fn retain_unexpected(&mut self, keep: impl Fn(&U) -> bool) {
        self.unexpected.retain(|(_, u)| keep(u));
    }

    /// Removes a posted receive that has not matched yet; false if it is not there.
    pub fn cancel(&mut self, p: P) -> bool {
        match self.posted.iter().position(|(_, q)| *q == p) {
            Some(i) => {
                self.posted.remove(i);
                true
            }
            None => false,
        }
    }

    /// Removes and returns the posted receives `pred` selects (e.g. those waiting for
    /// a peer that is gone).
    pub fn remove_posted(&mut self, pred: impl Fn(&Pattern) -> bool) -> Vec<P> {
        let mut out = Vec::new();
        self.posted.retain(|(pat, p)| {
            if pred(pat) {
                out.push(*p);
                false
            } else {
                true
            }
        });
        out
    }

    /// Posted receives waiting.
    pub fn posted_len(&self) -> usize {
        self.posted.len()
    }

    /// Unexpected messages filed.
    pub fn unexpected_len(&self) -> usize {
        self.unexpected.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(source: u32, tag: u32) -> Envelope {
        Envelope {
            source,
            tag,
            context: 0,
            len: 1,
        }
    }

    fn pat(source: Option<u32>, tag: Option<u32>) -> Pattern {
        Pattern {
            context: 0,
            source,
            tag,
        }
    }

    #[test]
    fn unexpected_messages_match_in_arrival_order_per_source_and_tag() {
        let mut q: Queues<u32, u8> = Queues::default();
        for (i, (s, t)) in [(1, 5), (2, 5), (1, 6), (1, 5)].into_iter().enumerate() {
            assert!(q.arrive(&env(s, t)).is_none());
            q.file(env(s, t), i as u8);
        }
        q.file(
            Envelope {
                context: 7,
                ..env(1, 5)
            },
            9,
        );
        assert_eq!(q.post(pat(Some(1), Some(5)), 0).unwrap().1, 0);
        assert_eq!(q.post(pat(None, Some(6)), 0).unwrap().1, 2);
        assert_eq!(q.post(pat(Some(1), None), 0).unwrap().1, 3);
        assert_eq!(q.post(pat(None, None), 0).unwrap().1, 1);
        assert!(q.post(pat(None, None), 5).is_none());
        assert_eq!(q.posted_len(), 1);
        // The context-7 message stays; the wildcard receive of context 0 takes the next.
        assert_eq!(q.arrive(&env(3, 3)).unwrap().1, 5);
        assert_eq!(q.unexpected_len(), 1);
    }

    #[test]
    fn arrivals_take_the_oldest_posted_receive_that_accepts_them() {
        let mut q: Queues<u32, ()> = Queues::default();
        assert!(q.post(pat(Some(2), None), 1).is_none());
        assert!(q.post(pat(None, Some(4)), 2).is_none());
        assert!(q.post(pat(None, None), 3).is_none());
        assert_eq!(q.arrive(&env(1, 4)).unwrap().1, 2);
        assert_eq!(q.arrive(&env(2, 4)).unwrap().1, 1);
        assert!(q.cancel(3));
        assert!(!q.cancel(3));
        assert!(q.arrive(&env(2, 4)).is_none());
    }

    #[test]
    fn peek_leaves_the_message_and_remove_posted_selects() {
        let mut q: Queues<u32, u8> = Queues::default();
        q.file(env(4, 1), 8);
        assert_eq!(q.peek(&pat(None, None)).unwrap().0.source, 4);
        assert_eq!(q.unexpected_len(), 1);
        q.post(pat(Some(5), None), 1);
        q.post(pat(Some(6), None), 2);
        assert_eq!(q.remove_posted(|p| p.source == Some(5)), vec![1]);
        assert_eq!(q.posted_len(), 1);
    }
}
