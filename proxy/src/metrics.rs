//! The proxy's metrics, in Prometheus's text format (names in the README's
//! metrics table): its door's connections, the relays and the bytes they moved,
//! and its errors.

use crate::gate::GateStats;
use crate::relay::Tokens;
use qcg_proto::metrics::{Errors, Exposition};
use std::sync::atomic::Ordering::Relaxed;

/// The kinds of `qcg_proxy_errors_total`.
pub const ERRORS: &[(&str, &str)] = &[
    (
        "broker_unreachable",
        "a registration did not reach the broker",
    ),
    (
        "broker_refused",
        "the broker answered a registration with an error",
    ),
    (
        "relay_broken",
        "a relay ended on a reset or a failed splice",
    ),
    ("relay_thread", "a pair got no relay thread"),
];

/// One scrape.
pub fn render(tokens: &Tokens, gate: &GateStats, errors: &Errors) -> String {
    let mut e = Exposition::default();
    e.counter(
        "qcg_proxy_connections_accepted_total",
        "Connections the relay port accepted (relay requests, NAT checks and strangers).",
    )
    .value(gate.accepted.load(Relaxed));
    e.counter(
        "qcg_proxy_connections_refused_total",
        "Connections closed without a relay, by reason (pending_cap: dropped, oldest first, \
         over the cap of waiting handshakes; timed_out: no header in time; not_relay: not a \
         relay request; bad_token: unknown, expired or used token).",
    )
    .sample(&[("reason", "pending_cap")], gate.dropped.load(Relaxed))
    .sample(&[("reason", "timed_out")], gate.timed_out.load(Relaxed))
    .sample(&[("reason", "not_relay")], gate.malformed.load(Relaxed))
    .sample(&[("reason", "bad_token")], tokens.refused.load(Relaxed));
    e.gauge(
        "qcg_proxy_handshakes_pending",
        "Connections waiting to send their header now.",
    )
    .value(gate.pending.load(Relaxed));
    e.gauge(
        "qcg_proxy_tokens_waiting",
        "Relay tokens the broker announced and nobody used yet.",
    )
    .value(tokens.waiting());
    e.counter(
        "qcg_proxy_relays_total",
        "Relays made (two connections paired by one token).",
    )
    .value(tokens.paired.load(Relaxed));
    e.gauge("qcg_proxy_relays_open", "Relays in progress.")
        .value(tokens.stats.open.load(Relaxed));
    e.counter(
        "qcg_proxy_relayed_bytes_total",
        "Bytes relayed, both directions summed.",
    )
    .value(tokens.stats.bytes.load(Relaxed));
    let all = Errors::new(ERRORS);
    // The relay's own counts join the errors the proxy noted.
    for (k, _) in ERRORS {
        let n = match *k {
            "relay_broken" => tokens.stats.broken.load(Relaxed),
            "relay_thread" => gate.thread_failed.load(Relaxed),
            k => errors.get(k),
        };
        all.add(k, n);
    }
    all.write(&mut e, "qcg_proxy");
    e.finish()
}
