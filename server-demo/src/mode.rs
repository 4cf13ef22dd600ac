//! The `--mm` modes: which pointer family the request path uses and which
//! collection policy each worker thread sets.

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// A memory-management mode, named after the Nim `--mm` it reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `recycler::Rc`: reference counting only; every request's cycles leak
    /// (Nim's ARC).
    Arc,
    /// `recycler::Gc` with `Policy::Nim16`: Nim 1.6.12's ORC trigger, no
    /// generations.
    OrcNim16,
    /// `recycler::Gc` with the default generational policy.
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
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
