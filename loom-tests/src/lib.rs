//! Loom models of recycler::sync (filled by the sync issue).
