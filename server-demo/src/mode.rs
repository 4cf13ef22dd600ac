//! The `--mm` modes (which pointer family the request path uses and which
//! collection policy each worker thread sets), the Nim 1.6.12 defects that
//! `orc-nim16-faithful` adds to `orc-nim16` ([`Defects`]), and the
//! `--runtime`s (how the worker threads are organised, and so whether the
//! single-threaded or the thread-safe pointers are used).

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// A memory-management mode, named after the Nim `--mm` it reproduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Careful ARC: `recycler::Rc` (`sync::Rc`) with every back-edge a
    /// `Weak` and explicit unlinking; nothing leaks, nothing is collected.
    /// The baseline.
    ArcWeak,
    /// `recycler::Rc` (`sync::Rc` on the work-stealing runtime): reference
    /// counting only; every request's cycles leak (Nim's ARC).
    Arc,
    /// `recycler::Gc` (`sync::Gc`) with `Policy::Nim16`: Nim 1.6.12's ORC
    /// trigger, no generations.
    OrcNim16,
    /// `orc-nim16` plus Nim 1.6.12's defects (`--nim16-defects`, all by
    /// default): every type a cycle candidate, one threshold shared by all
    /// threads, one lock around allocation and free.
    OrcNim16Faithful,
    /// `recycler::Gc` (`sync::Gc`) with the default policy (generational for
    /// the single-threaded collector).
    Orc,
}

impl Mode {
    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::ArcWeak => "arc-weak",
            Mode::Arc => "arc",
            Mode::OrcNim16 => "orc-nim16",
            Mode::OrcNim16Faithful => "orc-nim16-faithful",
            Mode::Orc => "orc",
        }
    }

    /// The Nim 1.6.12 defects this mode reproduces, given the
    /// `--nim16-defects` asked for (which only `orc-nim16-faithful` uses).
    pub fn defects(self, asked: Defects) -> Defects {
        match self {
            Mode::OrcNim16Faithful => asked,
            _ => Defects::NONE,
        }
    }

    /// The collector policy a worker thread sets, if the mode collects.
    pub fn policy(self) -> Option<recycler::Policy> {
        match self {
            Mode::ArcWeak | Mode::Arc => None,
            Mode::OrcNim16 | Mode::OrcNim16Faithful => Some(recycler::Policy::Nim16),
            Mode::Orc => Some(recycler::Policy::Adaptive),
        }
    }

    /// Sets this mode's collector policy on the calling thread (and, for
    /// `orc-nim16-faithful` with the `shared-threshold` defect selected with
    /// [`select`], makes its threshold the shared one).
    pub fn apply_policy(self) {
        if let Some(policy) = self.policy() {
            recycler::set_policy(policy);
        }
        recycler::set_nim16_shared_threshold(self.defects(selected()).shared_threshold);
    }

    /// Sets this mode's policy for the thread-safe collector
    /// (`recycler::sync`) on the calling thread.
    pub fn apply_sync_policy(self) {
        if let Some(policy) = self.policy() {
            recycler::sync::set_policy(policy);
        }
        recycler::sync::set_nim16_shared_threshold(self.defects(selected()).shared_threshold);
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
}

/// Nim 1.6.12's defects that `orc-nim16-faithful` reproduces on top of
/// `orc-nim16`'s trigger, each switchable (`--nim16-defects`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Defects {
    /// Every type a cycle candidate (the compiler's `canFormAcycle` bug,
    /// fixed by Nim PR 21815): the leaf payloads of the request graph are
    /// buffered and traced like the cyclic types (`family::CycleCandidate`).
    pub all_cyclic: bool,
    /// One collection threshold for all threads, updated without
    /// synchronisation (fixed by Nim PR 21818):
    /// `recycler::set_nim16_shared_threshold` (and its `recycler::sync`
    /// counterpart on the work-stealing runtime).
    pub shared_threshold: bool,
    /// One lock around every allocation and free (Nim 1.6's shared heap
    /// under `--threads:on`, replaced in 2.0 by PR 20492):
    /// [`crate::locked_alloc`].
    pub locked_alloc: bool,
}

impl Defects {
    /// No defect: `orc-nim16-faithful` then is `orc-nim16`.
    pub const NONE: Defects = Defects {
        all_cyclic: false,
        shared_threshold: false,
        locked_alloc: false,
    };
    /// Every defect: Nim 1.6.12 as it shipped.
    pub const ALL: Defects = Defects {
        all_cyclic: true,
        shared_threshold: true,
        locked_alloc: true,
    };
    /// The names, in command-line order.
    pub const NAMES: [&'static str; 3] = ["all-cyclic", "shared-threshold", "locked-alloc"];

    /// Each defect alone, in [`Defects::NAMES`] order.
    pub fn each() -> [Defects; 3] {
        [
            Defects {
                all_cyclic: true,
                ..Defects::NONE
            },
            Defects {
                shared_threshold: true,
                ..Defects::NONE
            },
            Defects {
                locked_alloc: true,
                ..Defects::NONE
            },
        ]
    }

    fn flags(self) -> [bool; 3] {
        [self.all_cyclic, self.shared_threshold, self.locked_alloc]
    }

    fn from_flags([all_cyclic, shared_threshold, locked_alloc]: [bool; 3]) -> Self {
        Defects {
            all_cyclic,
            shared_threshold,
            locked_alloc,
        }
    }

    /// Parses `all`, `none`, or a comma-separated list of
    /// `all-cyclic`, `shared-threshold`, `locked-alloc`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "all" => return Ok(Defects::ALL),
            "none" | "" => return Ok(Defects::NONE),
            _ => {}
        }
        let mut flags = [false; 3];
        for name in s.split(',').map(str::trim) {
            let i = Defects::NAMES
                .iter()
                .position(|&n| n == name)
                .ok_or_else(|| {
                    format!(
                    "unknown defect {name:?} (expected all, none, or a comma-separated list of {})",
                    Defects::NAMES.join(", ")
                )
                })?;
            flags[i] = true;
        }
        Ok(Defects::from_flags(flags))
    }
}

impl std::fmt::Display for Defects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == Defects::NONE {
            return f.write_str("none");
        }
        let names: Vec<&str> = Defects::NAMES
            .iter()
            .zip(self.flags())
            .filter(|&(_, on)| on)
            .map(|(&n, _)| n)
            .collect();
        f.write_str(&names.join(","))
    }
}

/// The defects selected for this process (see [`select`]), as flag bits.
static SELECTED: AtomicU8 = AtomicU8::new(0);

/// Records the mode and defects `serve` runs with, before any worker
/// starts: the worker threads' [`Mode::apply_policy`] reads the defects, and
/// the `locked-alloc` defect switches the global allocator's lock on.
pub fn select(mode: Mode, asked: Defects) {
    let defects = mode.defects(asked);
    let bits = defects
        .flags()
        .iter()
        .enumerate()
        .fold(0u8, |b, (i, &on)| b | (u8::from(on) << i));
    SELECTED.store(bits, Relaxed);
    crate::locked_alloc::set_locked(defects.locked_alloc);
}

/// The defects recorded by [`select`] (none before it is called).
pub fn selected() -> Defects {
    let bits = SELECTED.load(Relaxed);
    Defects::from_flags(std::array::from_fn(|i| bits & (1 << i) != 0))
}

/// What `compare` runs: a mode with its defects, on a runtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Variant {
    /// The server's runtime.
    pub runtime: Runtime,
    /// The `--mm` mode.
    pub mode: Mode,
    /// The defects (none unless `mode` is `orc-nim16-faithful`).
    pub defects: Defects,
}

impl Variant {
    /// `mode` on `runtime`, with `asked` defects if the mode takes any.
    pub fn new(runtime: Runtime, mode: Mode, asked: Defects) -> Self {
        Variant {
            runtime,
            mode,
            defects: mode.defects(asked),
        }
    }

    /// The label in compare's table and chart: the mode's name, or
    /// `orc-nim16+DEFECT,...` for `orc-nim16-faithful` with only some of the
    /// defects, then `/ws` on the work-stealing runtime.
    pub fn label(self) -> String {
        let name = if self.mode == Mode::OrcNim16Faithful && self.defects != Defects::ALL {
            format!("orc-nim16+{}", self.defects)
        } else {
            self.mode.name().to_owned()
        };
        match self.runtime {
            Runtime::PerThread => name,
            Runtime::WorkStealing => format!("{name}/ws"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defects_parse_and_print() {
        assert_eq!(Defects::parse("all"), Ok(Defects::ALL));
        assert_eq!(Defects::parse("none"), Ok(Defects::NONE));
        let two = Defects::parse("locked-alloc, all-cyclic").unwrap();
        assert_eq!(
            two,
            Defects {
                all_cyclic: true,
                locked_alloc: true,
                ..Defects::NONE
            }
        );
        assert_eq!(two.to_string(), "all-cyclic,locked-alloc");
        assert_eq!(Defects::ALL.to_string(), Defects::NAMES.join(","));
        assert_eq!(Defects::parse(&Defects::ALL.to_string()), Ok(Defects::ALL));
        let err = Defects::parse("all-cyclic,fast").unwrap_err();
        assert!(err.contains("unknown defect \"fast\""), "{err}");
    }

    #[test]
    fn labels() {
        let v = |r, m, d| Variant::new(r, m, d).label();
        assert_eq!(
            v(Runtime::PerThread, Mode::OrcNim16Faithful, Defects::ALL),
            "orc-nim16-faithful"
        );
        assert_eq!(
            v(
                Runtime::WorkStealing,
                Mode::OrcNim16Faithful,
                Defects::each()[1]
            ),
            "orc-nim16+shared-threshold/ws"
        );
        // Only the faithful mode takes defects.
        assert_eq!(
            Variant::new(Runtime::PerThread, Mode::Orc, Defects::ALL).defects,
            Defects::NONE
        );
        assert_eq!(
            v(Runtime::PerThread, Mode::ArcWeak, Defects::ALL),
            "arc-weak"
        );
    }
}
