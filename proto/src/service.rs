//! What every service binary does the same way: its logging and how it stops on an
//! error it cannot serve past.

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
