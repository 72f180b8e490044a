//! What every service binary does the same way: its logging, how it stops on an
//! error it cannot serve past, and how it waits for SIGINT or SIGTERM to shut down
//! cleanly.

/// Installs the log subscriber: `RUST_LOG`-style filter, `info` by default; colours
/// only on a terminal (a log file or the journal gets plain text); JSON lines, one
/// object per event, with `QCG_LOG_FORMAT=json`.
pub fn init_logging() {
    use std::io::IsTerminal;
    let filter =
        tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let b = tracing_subscriber::fmt().with_env_filter(filter);
    if std::env::var("QCG_LOG_FORMAT").is_ok_and(|f| f == "json") {
        b.json().with_ansi(false).init();
    } else {
        b.with_ansi(std::io::stdout().is_terminal()).init();
    }
}

/// Prints `NAME: ERROR` on stderr and exits with `code` (2 for a bad config or
/// certificate, 1 for a failure to start).
pub fn fail(name: &str, code: i32, e: impl std::fmt::Display) -> ! {
    eprintln!("{name}: {e}");
    std::process::exit(code)
}

/// The SIGINT and SIGTERM handlers of a service. Install them with
/// [`Shutdown::install`] before the service says it is up: a signal sent as soon as
/// the "serving" line appears then always gets the clean shutdown, never the
/// default action (which would leave socket files behind).
pub struct Shutdown {
    handlers: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Shutdown {
    /// Installs the handlers (inside a tokio runtime).
    pub fn install() -> Shutdown {
        use tokio::signal::unix::{signal, SignalKind};
        let handlers = match (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) {
            (Ok(int), Ok(term)) => Some((int, term)),
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(
                    "cannot handle SIGINT/SIGTERM ({e}): they will end the service at once"
                );
                None
            }
        };
        Shutdown { handlers }
    }

    /// Resolves on the first SIGINT or SIGTERM since [`Shutdown::install`]: the
    /// service then shuts down cleanly (stops its tasks, removes its socket files).
    /// Logs which signal came.
    pub async fn wait(self) {
        match self.handlers {
            Some((mut int, mut term)) => {
                let which = tokio::select! {
                    _ = int.recv() => "SIGINT",
                    _ = term.recv() => "SIGTERM",
                };
                tracing::info!(signal = which, "shutting down");
            }
            // Without handlers, the signals keep their default action (exit).
            None => std::future::pending::<()>().await,
        }
    }
}
