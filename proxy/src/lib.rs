//! The qcg relay proxy. Relaying arrives with the lab issue; this crate is a placeholder in the workspace layout.
