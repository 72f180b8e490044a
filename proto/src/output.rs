//! A job process's output on its way up: read line by line from its pipes
//! ([`read_lines`]; a line longer than [`MAX_LINE`] is cut and marked) and sent in
//! `Output` requests of [`batch`]es that always fit in a frame. The helpers read
//! their processes' pipes this way, and so does a frontal reading `srun`'s.

use crate::{OutputLine, Stream};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

/// Longest line forwarded; longer ones are cut (and marked ` [line cut]`).
pub const MAX_LINE: usize = 16 * 1024;
/// Most bytes of one batch of lines once encoded ([`batch`]).
pub const MAX_BATCH: usize = 256 * 1024;

/// Sends the lines of `r` on `tx` until its end (or until `tx` is closed), without
/// their line ends, invalid UTF-8 replaced, cut at [`MAX_LINE`]; lines starting
/// with `skip` are not sent (a wrapper's own messages: `srun`'s), only logged at
/// debug.
pub async fn read_lines<R: AsyncRead + Unpin>(
    r: R,
    stream: Stream,
    skip: Option<String>,
    tx: mpsc::UnboundedSender<OutputLine>,
) {
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match r.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        while matches!(buf.last(), Some(b'\n' | b'\r')) {
            buf.pop();
        }
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        if skip.as_deref().is_some_and(|p| text.starts_with(p)) {
            tracing::debug!(line = %text, "skipped");
            continue;
        }
        if text.len() > MAX_LINE {
            let mut cut = MAX_LINE;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
            text.push_str(" [line cut]");
        }
        if tx.send(OutputLine { stream, text }).is_err() {
            return;
        }
    }
}

/// What a line costs in a frame: its text as JSON escapes it (a control character
/// takes six bytes) and the fields around it.
fn encoded_cost(l: &OutputLine) -> usize {
    let escapes: usize = l
        .text
        .bytes()
        .map(|b| match b {
            0..=0x1f => 5,
            b'"' | b'\\' => 1,
            _ => 0,
        })
        .sum();
    40 + l.text.len() + escapes
}

/// `first` and the lines that wait behind it, up to [`MAX_BATCH`] bytes once encoded:
/// a batch always fits in a frame, whatever the lines (a flood of empty lines, or of
/// control characters, counted as text bytes, once made batches past the frame limit
/// that were refused whole).
pub fn batch(first: OutputLine, rx: &mut mpsc::UnboundedReceiver<OutputLine>) -> Vec<OutputLine> {
    let mut size = encoded_cost(&first);
    let mut lines = vec![first];
    while size < MAX_BATCH {
        match rx.try_recv() {
            Ok(l) => {
                size += encoded_cost(&l);
                lines.push(l);
            }
            Err(_) => break,
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Request;

    #[test]
    fn output_batches_fit_in_a_frame_whatever_the_lines() {
        for (text, n) in [
            (String::new(), 100_000),
            ("\u{1}".repeat(MAX_LINE), 100),
            ("x".repeat(MAX_LINE), 100),
        ] {
            let (tx, mut rx) = mpsc::unbounded_channel();
            for _ in 0..n {
                tx.send(OutputLine {
                    stream: Stream::Stdout,
                    text: text.clone(),
                })
                .unwrap();
            }
            drop(tx);
            let mut total = 0;
            while let Ok(first) = rx.try_recv() {
                let lines = batch(first, &mut rx);
                total += lines.len();
                let req = Request::Output {
                    job: "j".repeat(256),
                    rank: u32::MAX,
                    lines,
                };
                let len = crate::frame::encode(&req).unwrap().len();
                assert!(len <= crate::frame::MAX_FRAME, "{len}");
            }
            assert_eq!(total, n);
        }
    }

    #[tokio::test]
    async fn lines_are_cut_cleaned_and_skipped() {
        // Two bytes a character after the first: MAX_LINE falls inside one, and the
        // cut goes back to the character's start.
        let long = format!("x{}", "é".repeat(MAX_LINE));
        let input = format!(
            "one\r\nsrun: error: a1: task 0: Exited with exit code 7\n{long}\nlast, no newline"
        );
        let mut bytes = input.into_bytes();
        bytes.extend_from_slice(b"\n\xff\n");
        let (tx, mut rx) = mpsc::unbounded_channel();
        read_lines(
            &bytes[..],
            Stream::Stderr,
            Some("srun: error: a1: task 0: ".into()),
            tx,
        )
        .await;
        let mut got = Vec::new();
        while let Ok(l) = rx.try_recv() {
            assert_eq!(l.stream, Stream::Stderr);
            got.push(l.text);
        }
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got[0], "one");
        assert!(got[1].ends_with(" [line cut]"));
        assert_eq!(got[1].len(), MAX_LINE - 1 + " [line cut]".len());
        assert_eq!(got[2], "last, no newline");
        assert_eq!(got[3], "\u{fffd}");
    }
}
