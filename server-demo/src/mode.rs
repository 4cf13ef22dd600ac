//! The `--mm` modes (which pointer family the request path uses and which
//! collection policy each worker thread sets) and the `--runtime`s (how the
//! worker threads are organised, and so whether the single-threaded or the
//! thread-safe pointers are used).

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// A memory-management mode, named after the Nim `--mm` it reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `recycler::Rc` (`sync::Rc` on the work-stealing runtime): reference
    /// counting only; every request's cycles leak (Nim's ARC).
    Arc,
    /// `recycler::Gc` (`sync::Gc`) with `Policy::Nim16`: Nim 1.6.12's ORC
    /// trigger, no generations.
    OrcNim16,
    /// `recycler::Gc` (`sync::Gc`) with the default policy (generational for
    /// the single-threaded collector).
    Orc,
}

impl Mode {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Arc => "arc",
            Mode::OrcNim16 => "orc-nim16",
            Mode::Orc => "orc",
        }
    }

    /// The collector policy a worker thread sets, if the mode collects.
    pub fn policy(self) -> Option<recycler::Policy> {
        match self {
            Mode::Arc => None,
            Mode::OrcNim16 => Some(recycler::Policy::Nim16),
            Mode::Orc => Some(recycler::Policy::Adaptive),
        }
    }

    /// Sets this mode's collector policy on the calling thread.
    pub fn apply_policy(self) {
        if let Some(policy) = self.policy() {
            recycler::set_policy(policy);
        }
    }

    /// Sets this mode's policy for the thread-safe collector
    /// (`recycler::sync`) on the calling thread.
    pub fn apply_sync_policy(self) {
        if let Some(policy) = self.policy() {
            recycler::sync::set_policy(policy);
        }
    }
}

/// How `serve` runs its worker threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// N threads, each with its own single-threaded tokio runtime, its own
    /// `SO_REUSEPORT` listener and its own hubs; the request path uses the
    /// single-threaded pointers (`recycler::Rc` / `recycler::Gc`).
    #[default]
    PerThread,
    /// One tokio multi-thread (work-stealing) runtime with N workers, hubs
    /// shared by all of them; the request path uses the thread-safe pointers
    /// (`recycler::sync::Rc` / `recycler::sync::Gc`).
    WorkStealing,
}

impl Runtime {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::PerThread => "per-thread",
            Runtime::WorkStealing => "work-stealing",
        }
    }

    /// The label of `mode` on this runtime in compare's table and chart:
    /// the bare mode name for the per-thread runtime (so the default table
    /// is unchanged), `mode/ws` for the work-stealing one.
    pub fn label(self, mode: Mode) -> String {
        match self {
            Runtime::PerThread => mode.name().to_owned(),
            Runtime::WorkStealing => format!("{}/ws", mode.name()),
        }
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
