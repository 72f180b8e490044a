//! What the frontal could not tell the broker while it was away: job output and
//! process ends, kept in order and sent first when it is back. Output is bounded
//! ([`MAX_HELD_BYTES`], oldest dropped first, counted); process ends are never
//! dropped (without them a job would never end).

use qcg_proto::Request;
use std::collections::VecDeque;

/// Bytes of output text kept while the broker is away.
pub const MAX_HELD_BYTES: usize = 16 << 20;
/// Process ends kept while the broker is away; past it the oldest go (the broker,
/// when back, learns from the running lists which processes are gone).
pub const MAX_HELD_ENDS: usize = 65_536;

/// The held requests, oldest first.
#[derive(Default, Debug)]
pub struct Held {
    reqs: VecDeque<Request>,
    bytes: usize,
    ends: usize,
    dropped_lines: usize,
}

fn text_bytes(r: &Request) -> usize {
    match r {
        Request::Output { lines, .. } => lines.iter().map(|l| l.text.len() + 1).sum(),
        _ => 0,
    }
}

impl Held {
    /// Keeps `r`, dropping the oldest output past the bound (and the oldest end past
    /// [`MAX_HELD_ENDS`]).
    pub fn push(&mut self, r: Request) {
        self.bytes += text_bytes(&r);
        if matches!(r, Request::ProcessExited { .. }) {
            self.ends += 1;
            if self.ends > MAX_HELD_ENDS {
                if let Some(i) = self
                    .reqs
                    .iter()
                    .position(|r| matches!(r, Request::ProcessExited { .. }))
                {
                    self.reqs.remove(i);
                    self.ends -= 1;
                }
            }
        }
        self.reqs.push_back(r);
        while self.bytes > MAX_HELD_BYTES {
            let Some(i) = self
                .reqs
                .iter()
                .position(|r| matches!(r, Request::Output { .. }))
            else {
                break;
            };
            if let Some(old) = self.reqs.remove(i) {
                self.bytes -= text_bytes(&old);
                if let Request::Output { lines, .. } = old {
                    self.dropped_lines += lines.len();
                }
            }
        }
    }

    /// Everything held, oldest first, and how many output lines were dropped.
    pub fn take(&mut self) -> (Vec<Request>, usize) {
        self.bytes = 0;
        self.ends = 0;
        (
            self.reqs.drain(..).collect(),
            std::mem::take(&mut self.dropped_lines),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qcg_proto::{ExitReport, OutputLine, Stream};

    fn output(n: usize, len: usize) -> Request {
        Request::Output {
            job: "j".into(),
            rank: 0,
            lines: (0..n)
                .map(|_| OutputLine {
                    stream: Stream::Stdout,
                    text: "x".repeat(len),
                })
                .collect(),
        }
    }

    #[test]
    fn ends_are_kept_in_order_and_output_is_bounded_oldest_first() {
        let mut h = Held::default();
        h.push(output(1, 10));
        let end = Request::ProcessExited {
            job: "j".into(),
            rank: 0,
            exit: ExitReport::default(),
        };
        h.push(end.clone());
        // 40 MiB of output more: the oldest goes, the end stays.
        for _ in 0..40 {
            h.push(output(1024, 1023));
        }
        let (reqs, dropped) = h.take();
        assert_eq!(reqs[0], end);
        assert_eq!(dropped, 1 + 24 * 1024);
        let kept: usize = reqs.iter().map(text_bytes).sum();
        assert!(kept <= MAX_HELD_BYTES, "{kept}");
        assert_eq!(reqs.len(), 1 + 16);
        assert_eq!(h.take().0.len(), 0);
        // Ends are bounded too, oldest first.
        for rank in 0..MAX_HELD_ENDS as u32 + 10 {
            h.push(Request::ProcessExited {
                job: "j".into(),
                rank,
                exit: ExitReport::default(),
            });
        }
        let (reqs, _) = h.take();
        assert_eq!(reqs.len(), MAX_HELD_ENDS);
        assert!(matches!(&reqs[0], Request::ProcessExited { rank: 10, .. }));
    }
}
