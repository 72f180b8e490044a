//! What every service binary does the same way: its logging, how it stops on an
//! error it cannot serve past, and how it waits for SIGINT or SIGTERM to shut down
//! cleanly.

/// Installs the log subscriber: `RUST_LOG`-style filter, `info` by default.
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
}

/// Prints `NAME: ERROR` on stderr and exits with `code` (2 for a bad config or
/// certificate, 1 for a failure to start).
pub fn fail(name: &str, code: i32, e: impl std::fmt::Display) -> ! {
    eprintln!("{name}: {e}");
    std::process::exit(code)
}

/// Resolves on the first SIGINT or SIGTERM: the service then shuts down cleanly
/// (stops its tasks, removes its socket files). Logs which signal came.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            let which = tokio::select! {
                _ = int.recv() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            };
            tracing::info!(signal = which, "shutting down");
        }
        _ => {
            // Without handlers, the signals keep their default action (exit).
            std::future::pending::<()>().await;
        }
    }
}
