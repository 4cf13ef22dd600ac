//! Check runs and their findings.
//!
//! Before a benchmark is timed, its workload runs once untimed inside
//! [`live::begin`](crate::live::begin) … [`live::end`](crate::live::end), under
//! `catch_unwind`, followed by the pointer's full collection. The outcome —
//! nodes still alive (a leak), a panic (the benchmark is then skipped and
//! reported "n/a"), or an unsupported workload — is written as one small JSON
//! file per benchmark under `target/criterion/recycler-checks/`, where the
//! report binary finds it next to criterion's estimates.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use serde_json::json;

use crate::live;

/// Directory holding criterion's output (`$CARGO_TARGET_DIR/criterion`, or
/// the workspace's `target/criterion`).
pub fn criterion_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")));
    target.join("criterion")
}

/// Directory of the check findings.
pub fn checks_dir() -> PathBuf {
    criterion_dir().join("recycler-checks")
}

/// What the check run of one benchmark found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Ran to completion; `alive` nodes survived the final collection.
    Ran {
        /// Nodes alive after the final collection (0 = no leak).
        alive: i64,
    },
    /// Panicked with this message; not timed.
    Panicked(String),
    /// Cannot run this workload, for this reason; not timed.
    Unsupported(String),
}

impl Outcome {
    /// Whether the benchmark should be timed.
    pub fn runnable(&self) -> bool {
        matches!(self, Outcome::Ran { .. })
    }
}

/// Runs `check` as a check run: counts nodes, catches a panic, calls
/// `collect` afterwards. `note` receives extra observations the check wants
/// reported (e.g. garbage awaiting collection).
pub fn check_run(
    check: impl FnOnce(&mut Vec<String>),
    collect: fn(),
    note: &mut Vec<String>,
) -> Outcome {
    live::begin();
    let result = catch_unwind(AssertUnwindSafe(|| {
        check(note);
        collect();
    }));
    let alive = live::end();
    match result {
        Ok(()) => Outcome::Ran { alive },
        Err(payload) => Outcome::Panicked(panic_message(payload.as_ref())),
    }
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Writes the finding of benchmark `group`/`id` (`expected_alive` is what a
/// correct run leaves: 0, or the designed leak of a plain counter).
pub fn record(
    group: &str,
    id: &str,
    outcome: &Outcome,
    expected_alive: Option<i64>,
    notes: &[String],
) {
    let (status, alive, reason) = match outcome {
        Outcome::Ran { alive } => ("ran", Some(*alive), None),
        Outcome::Panicked(m) => ("panicked", None, Some(m.clone())),
        Outcome::Unsupported(r) => ("unsupported", None, Some(r.clone())),
    };
    let value = json!({
        "group": group,
        "id": id,
        "status": status,
        "alive": alive,
        "expected_alive": expected_alive,
        "reason": reason,
        "notes": notes,
    });
    let dir = checks_dir();
    let file = dir.join(format!("{}.json", sanitize(&format!("{group}__{id}"))));
    let written = std::fs::create_dir_all(&dir).and_then(|()| {
        std::fs::write(
            &file,
            serde_json::to_string_pretty(&value).unwrap_or_default(),
        )
    });
    if let Err(e) = written {
        eprintln!("warning: cannot write {}: {e}", file.display());
    }
    match outcome {
        Outcome::Ran { alive } if *alive != expected_alive.unwrap_or(0) => {
            eprintln!("check {group}/{id}: {alive} nodes alive after the final collection")
        }
        Outcome::Ran { .. } => {}
        other => eprintln!("check {group}/{id}: {other:?}"),
    }
}

/// A file-name-safe form of an id.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
