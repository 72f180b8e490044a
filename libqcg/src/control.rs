//! The process's line to its node's helper (unix socket, control-plane frames).

use crate::error::{Error, Result};
use qcg_wire::frame;
use qcg_wire::{Request, Response};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// A connection to the helper; requests are answered in order.
pub struct Control {
    socket: PathBuf,
    stream: Mutex<UnixStream>,
}

impl Control {
    /// Connects to the helper's socket.
    pub fn connect(socket: &Path) -> Result<Control> {
        let stream = UnixStream::connect(socket).map_err(|e| Error::Helper {
            socket: socket.to_path_buf(),
            message: format!("cannot connect: {e} (is qcg-helper running on this node?)"),
        })?;
        // The helper may wait on the frontal and the broker (10 s connect each).
        let _ = stream.set_read_timeout(Some(Duration::from_secs(60)));
        Ok(Control {
            socket: socket.to_path_buf(),
            stream: Mutex::new(stream),
        })
    }

    fn err(&self, message: String) -> Error {
        Error::Helper {
            socket: self.socket.clone(),
            message,
        }
    }

    /// Sends a request and returns the answer; an error answer becomes
    /// [`Error::Refused`].
    pub fn request(&self, req: &Request) -> Result<Response> {
        let mut s = self.stream.lock().unwrap_or_else(|p| p.into_inner());
        frame::write_frame_sync(&mut *s, req).map_err(|e| self.err(e.to_string()))?;
        match frame::read_frame_sync::<Response, _>(&mut *s) {
            Ok(Some(Response::Error(reply))) => Err(Error::Refused {
                request: req.kind(),
                reply,
            }),
            Ok(Some(r)) => Ok(r),
            Ok(None) => Err(self.err("the helper closed the connection".into())),
            Err(e) => Err(self.err(e.to_string())),
        }
    }

    /// As [`Control::request`], asking again while the answer is `unavailable` (the
    /// frontal or the broker is restarting) with a growing pause (100 ms doubling to
    /// 2 s), for `patience` at most; then the last answer.
    pub fn request_patiently(&self, req: &Request, patience: Duration) -> Result<Response> {
        let until = std::time::Instant::now() + patience;
        let mut pause = Duration::from_millis(100);
        let mut told = false;
        loop {
            match self.request(req) {
                Err(Error::Refused { reply, .. })
                    if reply.kind == qcg_wire::ErrorKind::Unavailable
                        && std::time::Instant::now() + pause < until =>
                {
                    if !told {
                        tracing::info!(request = req.kind(), error = %reply, "the grid is not there yet; asking again");
                        told = true;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_secs(2));
                }
                other => return other,
            }
        }
    }
}
