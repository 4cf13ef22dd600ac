//! Writes `BENCHMARKS.md` from the last `cargo bench -p benches` run: reads
//! criterion's `new/benchmark.json` + `new/estimates.json` under
//! `target/criterion/` and the check findings under
//! `target/criterion/recycler-checks/`, and lays them out as the suite's
//! [`FAMILIES`] say.
//!
//! Usage: `cargo run --release -p benches --bin report [-- --out PATH]`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use benches::check::{checks_dir, criterion_dir};
use benches::suite::{Family, FAMILIES};
use clap::Parser;
use serde_json::Value;

/// Regenerates BENCHMARKS.md from criterion's output of the last run.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Where to write the report.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../BENCHMARKS.md"))]
    out: PathBuf,
    /// Criterion's output directory (default: the workspace's target/criterion).
    #[arg(long)]
    criterion_dir: Option<PathBuf>,
    /// A remark on the conditions of the run, printed with the machine (e.g.
    /// "other builds were running on the same cores").
    #[arg(long)]
    note: Option<String>,
}

/// One measured benchmark.
#[derive(Debug, Clone)]
struct Measured {
    mean_ns: f64,
}

/// One check finding.
#[derive(Debug, Clone)]
struct Finding {
    status: String,
    alive: Option<i64>,
    expected_alive: Option<i64>,
    reason: Option<String>,
    notes: Vec<String>,
}

/// (group, value_str or "") → column → data.
type Key = (String, String);

fn main() -> ExitCode {
    let args = Args::parse();
    let dir = args.criterion_dir.clone().unwrap_or_else(criterion_dir);
    let measured = match read_estimates(&dir) {
        Ok(m) => m,
        Err(e) => {
            eprintln!(
                "error: cannot read criterion output under {}: {e}",
                dir.display()
            );
            eprintln!("run `cargo bench -p benches` first");
            return ExitCode::FAILURE;
        }
    };
    let checks_dir = args
        .criterion_dir
        .as_ref()
        .map(|d| d.join("recycler-checks"))
        .unwrap_or_else(checks_dir);
    let findings = read_findings(&checks_dir);
    if measured.is_empty() {
        eprintln!(
            "error: no criterion estimates under {}; run `cargo bench -p benches` first",
            dir.display()
        );
        return ExitCode::FAILURE;
    }
    let text = render(&measured, &findings, args.note.as_deref());
    if let Err(e) = std::fs::write(&args.out, text) {
        eprintln!("error: cannot write {}: {e}", args.out.display());
        return ExitCode::FAILURE;
    }
    println!("wrote {}", args.out.display());
    ExitCode::SUCCESS
}

fn read_json(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Walks `dir` for `new/benchmark.json` and reads the mean next to it.
fn read_estimates(dir: &Path) -> std::io::Result<BTreeMap<Key, BTreeMap<String, Measured>>> {
    let mut out: BTreeMap<Key, BTreeMap<String, Measured>> = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let path = entry?.path();
            if !path.is_dir() {
                continue;
            }
            if path.file_name().is_some_and(|n| n == "new") {
                let (Some(bench), Some(est)) = (
                    read_json(&path.join("benchmark.json")),
                    read_json(&path.join("estimates.json")),
                ) else {
                    continue;
                };
                let group = bench["group_id"].as_str().unwrap_or_default().to_string();
                let function = bench["function_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let value = bench["value_str"].as_str().unwrap_or_default().to_string();
                if let Some(mean) = est["mean"]["point_estimate"].as_f64() {
                    out.entry((group, value))
                        .or_default()
                        .insert(function, Measured { mean_ns: mean });
                }
            } else {
                stack.push(path);
            }
        }
    }
    Ok(out)
}

fn read_findings(dir: &Path) -> BTreeMap<Key, BTreeMap<String, Finding>> {
    let mut out: BTreeMap<Key, BTreeMap<String, Finding>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(v) = read_json(&entry.path()) else {
            continue;
        };
        let group = v["group"].as_str().unwrap_or_default().to_string();
        let id = v["id"].as_str().unwrap_or_default();
        let (function, value) = id.split_once('/').unwrap_or((id, ""));
        let finding = Finding {
            status: v["status"].as_str().unwrap_or_default().to_string(),
            alive: v["alive"].as_i64(),
            expected_alive: v["expected_alive"].as_i64(),
            reason: v["reason"].as_str().map(str::to_string),
            notes: v["notes"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|n| n.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        };
        out.entry((group, value.to_string()))
            .or_default()
            .insert(function.to_string(), finding);
    }
    out
}

/// `12.3 ms`, `4.56 µs`, `7.89 ns`.
fn fmt_time(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ns", ns)
    }
}

fn row_keys(
    family: &Family,
    measured: &BTreeMap<Key, BTreeMap<String, Measured>>,
    findings: &BTreeMap<Key, BTreeMap<String, Finding>>,
) -> Vec<Key> {
    let mut keys = Vec::new();
    for g in family.groups {
        let mut values: BTreeSet<(u64, String)> = BTreeSet::new();
        for (group, value) in measured.keys().chain(findings.keys()) {
            if group == g {
                values.insert((value.parse().unwrap_or(0), value.clone()));
            }
        }
        keys.extend(values.into_iter().map(|(_, v)| (g.to_string(), v)));
    }
    keys
}

fn row_label(key: &Key) -> String {
    match (key.0.as_str(), key.1.as_str()) {
        (g, "") => g.to_string(),
        ("hub", v) => format!("hub H={v}"),
        ("random ops threaded", v) => format!("{v} thread{}", if v == "1" { "" } else { "s" }),
        (g, v) => format!("{g} {v}"),
    }
}

fn leak_of(f: &Finding) -> Option<i64> {
    match (f.alive, f.expected_alive) {
        (Some(a), Some(e)) if a != e => Some(a),
        (Some(a), None) if a != 0 => Some(a),
        _ => None,
    }
}

fn render(
    measured: &BTreeMap<Key, BTreeMap<String, Measured>>,
    findings: &BTreeMap<Key, BTreeMap<String, Finding>>,
    note: Option<&str>,
) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Generated by `cargo run --release -p benches --bin report` from the criterion run of \
         `cargo bench -p benches` (both from the workspace root; `cargo bench -p benches -- <regex>` \
         runs a subset, e.g. `-- hub`). Criterion's HTML reports with plots are under \
         `target/criterion/report/index.html`. Every cell is criterion's mean; the ratio is to the \
         table's baseline column in the same run (lower is better). Before timing, each benchmark \
         runs once untimed with a counter in every node's `Drop`: \"leaks N\" means N nodes were \
         still alive after the final full collection; a panic there makes the cell \"n/a\".\n"
    );
    machine_section(&mut md, note);
    for family in FAMILIES {
        family_table(&mut md, family, measured, findings);
    }
    goals_section(&mut md, measured);
    findings_section(&mut md, findings);
    md.push_str(METHOD);
    md
}

/// How the suite is built and where it departs from the workloads' sources.
const METHOD: &str = "## Method and departures from the sources

- One source per workload (`benches/src/workloads/`), generic over an adapter trait
  with one file per pointer (`benches/src/ptr/`). All pointers use the same node
  layouts: a *pair* node (two child slots fixed at construction, one mutable back-edge
  slot: trees and lists) and a *graph* node (label, mutable edge list, back-edge slot:
  stress test, random operations, hub). rust-cc-benchmarks uses enums whose leaves
  carry no fields; here every node has the same layout, for every pointer alike.
- Back edges are strong pointers for the collectors and `Weak` for `rc`, `arc` and
  `recycler-rc`, as in rust-cc-benchmarks. Cells are `RefCell` (single-threaded),
  `Mutex` (`arc`, `dumpster-sync`, `gcmodule-threaded`) and `GcCell` (`gc`, which
  requires it).
- dumpster's random operations: 250,000 operations instead of 1,000,000, `SmallRng`
  seeded 12345 instead of `fastrand`; a pointer removed from an edge list is dropped
  after the cell is released (so a collection triggered by that drop never meets a
  borrowed cell). The threaded variant counts the final drop and collection in the
  measured time (dumpster's harness leaves them out).
- The stress test carries its `StdRng` (seed `0xCAFE`) across iterations, as the
  original does. The collectors run with their default automatic-collection settings
  (`bacon_rajan_cc` and `gcmodule` have none); the workloads call each crate's full
  collection where the originals do.
- The system allocator is used (rust-cc-benchmarks has an optional jemalloc feature).
- Criterion: 10 samples, 0.5 s warm-up, 1.5 s measurement per benchmark (overridable
  with criterion's flags); on a busy machine the spread is wide — compare within a
  row, not across runs.
";

fn machine_section(md: &mut String, note: Option<&str>) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let nproc = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    let rustc = command_output("rustc", &["--version"]);
    let date = command_output("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let _ = writeln!(md, "## Machine and versions\n");
    let _ = writeln!(md, "- Date of the report: {date}");
    let _ = writeln!(md, "- CPU: {cpu}, {nproc} logical CPUs (nproc)");
    let _ = writeln!(md, "- {rustc}, `cargo bench` profile (release, debug=1)");
    let lock = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../Cargo.lock"))
        .unwrap_or_default();
    let versions: Vec<String> = [
        "recycler",
        "bacon_rajan_cc",
        "rust-cc",
        "dumpster",
        "gcmodule",
        "gc",
        "criterion",
    ]
    .iter()
    .filter_map(|name| lock_version(&lock, name).map(|v| format!("`{name}` {v}")))
    .collect();
    let _ = writeln!(md, "- Crates (Cargo.lock): {}", versions.join(", "));
    if let Some(note) = note {
        let _ = writeln!(md, "- Conditions: {note}");
    }
    let _ = writeln!(md);
}

fn command_output(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| format!("({cmd} unavailable)"))
}

/// The version of package `name` in a Cargo.lock.
fn lock_version(lock: &str, name: &str) -> Option<String> {
    let mut lines = lock.lines();
    while let Some(l) = lines.next() {
        if l.trim() == format!("name = \"{name}\"") {
            let v = lines
                .next()?
                .trim()
                .strip_prefix("version = \"")?
                .strip_suffix('"')?;
            return Some(v.to_string());
        }
    }
    None
}

fn family_table(
    md: &mut String,
    family: &Family,
    measured: &BTreeMap<Key, BTreeMap<String, Measured>>,
    findings: &BTreeMap<Key, BTreeMap<String, Finding>>,
) {
    let keys = row_keys(family, measured, findings);
    let columns: Vec<&str> = family
        .columns
        .iter()
        .copied()
        .filter(|c| {
            keys.iter().any(|k| {
                measured.get(k).is_some_and(|m| m.contains_key(*c))
                    || findings.get(k).is_some_and(|f| f.contains_key(*c))
            })
        })
        .collect();
    let _ = writeln!(md, "## {}\n\n{}\n", family.title, family.about);
    if keys.is_empty() {
        let _ = writeln!(md, "_Not run._\n");
        return;
    }
    let missing: Vec<&str> = family
        .columns
        .iter()
        .copied()
        .filter(|c| !columns.contains(c))
        .collect();
    let _ = writeln!(md, "| workload | {} |", columns.join(" | "));
    let _ = writeln!(md, "|---|{}", "---|".repeat(columns.len()));
    for key in &keys {
        let base = measured
            .get(key)
            .and_then(|m| m.get(family.baseline))
            .map(|m| m.mean_ns);
        let mut cells = Vec::new();
        for c in &columns {
            let finding = findings.get(key).and_then(|f| f.get(*c));
            let cell = match (measured.get(key).and_then(|m| m.get(*c)), finding) {
                (_, Some(f)) if f.status != "ran" => "n/a".to_string(),
                (Some(m), f) => {
                    let mut s = fmt_time(m.mean_ns);
                    if let Some(b) = base {
                        let _ = write!(s, " ({:.2}×)", m.mean_ns / b);
                    }
                    if let Some(n) = f.and_then(|f| f.alive).filter(|&n| n != 0) {
                        let _ = write!(s, " leaks {n}");
                    }
                    s
                }
                (None, _) => "—".to_string(),
            };
            cells.push(cell);
        }
        let _ = writeln!(md, "| {} | {} |", row_label(key), cells.join(" | "));
    }
    let _ = writeln!(md);
    if !missing.is_empty() {
        let _ = writeln!(md, "Not measured in this run: {}.\n", missing.join(", "));
    }
}

fn mean(
    measured: &BTreeMap<Key, BTreeMap<String, Measured>>,
    group: &str,
    value: &str,
    col: &str,
) -> Option<f64> {
    measured
        .get(&(group.to_string(), value.to_string()))?
        .get(col)
        .map(|m| m.mean_ns)
}

fn goals_section(md: &mut String, measured: &BTreeMap<Key, BTreeMap<String, Measured>>) {
    let gc = "recycler-gc";
    let sync = "recycler-sync-gc";
    let ratio = |group: &str, value: &str, ours: &str, base: &str| {
        (
            mean(measured, group, value, ours),
            mean(measured, group, value, base),
        )
    };
    let _ = writeln!(
        md,
        "## Goals of the open issue against this run
"
    );
    let _ = writeln!(md, "Issue 9 (`recycler::sync` v2); bytes per object are measured by `cargo run --release -p benches --bin bytes_per_object`, not here.\n");
    let _ = writeln!(md, "| goal | measured | verdict |\n|---|---|---|");
    hub_rows(
        md,
        measured,
        "(9) ",
        sync,
        "sync::Gc",
        "arc-leak",
        "`Arc` leaking",
    );
    let (ours, base) = ratio("cycle churn threaded", "", sync, "arc");
    let goal = "(9) 2-thread cycle churn: `sync::Gc` ≤ 1.5× `Arc` leaking";
    verdict_row(md, goal, ours, base, 1.5);
    for t in ["1", "2"] {
        let (ours, base) = ratio("random ops threaded", t, sync, "arc");
        let goal = format!("(9) random ops, {t} thread(s): `sync::Gc` ≤ 1.2× `Arc`");
        verdict_row(md, &goal, ours, base, 1.2);
    }
    let _ = writeln!(md);

    let _ = writeln!(
        md,
        "### Goals of the closed issues (2, 3, 5 and 11), still tracked\n"
    );
    let _ = writeln!(md, "| goal | measured | verdict |\n|---|---|---|");
    let closed: &[(&str, &str, f64)] = &[
        ("(11) acyclic churn: `Gc` ≤ 1.05× `Rc`", "churn", 1.05),
        ("(11) binary trees: `Gc` ≤ 1.05× `Rc`", "binary trees", 1.05),
        (
            "(11) clone+drop `Gc` to a candidate type ≤ 1.15× `Rc`",
            "micro clone+drop candidate",
            1.15,
        ),
        (
            "clone+drop `Gc<u64>` ≤ 1.05× `Rc`",
            "micro clone+drop u64",
            1.05,
        ),
        (
            "clone+drop `Gc<String>` ≤ 1.05× `Rc`",
            "micro clone+drop String",
            1.05,
        ),
        ("new+drop ≤ 1.1× `Rc`", "micro new+drop u64", 1.1),
        (
            "create-and-collect 2-node cycle ≤ 1.2× `Rc::new` ×2 + link",
            "micro 2-node cycle",
            1.2,
        ),
    ];
    for (goal, group, limit) in closed {
        let (ours, base) = ratio(group, "", gc, "rc");
        verdict_row(md, goal, ours, base, *limit);
    }
    for group in ["parent trees", "linked list", "micro 2-node cycle"] {
        best_peer_row(md, measured, group, "(11) ", "at or below the best peer");
    }
    for group in ["stress test", "random ops"] {
        best_peer_row(md, measured, group, "", "ahead of every peer");
    }
    hub_rows(md, measured, "", gc, "Gc", "rc-leak", "`Rc` leaking");
    let _ = writeln!(md);
}

/// The hub goals of `col` (shown as `name`): flat in H (1M vs 10k ≤ 1.3×)
/// and at most 1.5× the leaking `base` at each H.
fn hub_rows(
    md: &mut String,
    measured: &BTreeMap<Key, BTreeMap<String, Measured>>,
    prefix: &str,
    col: &str,
    name: &str,
    base: &str,
    base_name: &str,
) {
    verdict_row(
        md,
        &format!("{prefix}hub: `{name}` flat in H (1M vs 10k ≤ 1.3×)"),
        mean(measured, "hub", "1000000", col),
        mean(measured, "hub", "10000", col),
        1.3,
    );
    for h in ["10000", "100000", "1000000"] {
        verdict_row(
            md,
            &format!("{prefix}hub H={h}: `{name}` ≤ 1.5× {base_name}"),
            mean(measured, "hub", h, col),
            mean(measured, "hub", h, base),
            1.5,
        );
    }
}

/// A row comparing `Gc` with the fastest single-threaded peer of `group`
/// (met when `Gc` is at most as slow).
fn best_peer_row(
    md: &mut String,
    measured: &BTreeMap<Key, BTreeMap<String, Measured>>,
    group: &str,
    prefix: &str,
    what: &str,
) {
    let peers = ["rust-cc", "bacon_rajan_cc", "dumpster", "gcmodule", "gc"];
    let Some(ours) = mean(measured, group, "", "recycler-gc") else {
        return;
    };
    let best = peers
        .iter()
        .filter_map(|c| mean(measured, group, "", c).map(|m| (m, *c)))
        .min_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((m, c)) = best {
        let _ = writeln!(
            md,
            "| {prefix}{group}: `Gc` {what} | {} vs best peer {c} {} ({:.2}×) | {} |",
            fmt_time(ours),
            fmt_time(m),
            ours / m,
            if ours <= m { "met" } else { "missed" }
        );
    }
}

fn verdict_row(md: &mut String, goal: &str, ours: Option<f64>, base: Option<f64>, limit: f64) {
    let (measured, verdict) = match (ours, base) {
        (Some(o), Some(b)) => (
            format!("{} vs {} ({:.2}×)", fmt_time(o), fmt_time(b), o / b),
            if o / b <= limit { "met" } else { "missed" },
        ),
        _ => ("not measured in this run".to_string(), "—"),
    };
    let _ = writeln!(md, "| {goal} | {measured} | {verdict} |");
}

fn findings_section(md: &mut String, findings: &BTreeMap<Key, BTreeMap<String, Finding>>) {
    let _ = writeln!(md, "## Check-run findings\n");
    let mut na = Vec::new();
    let mut leaks = Vec::new();
    let mut notes = Vec::new();
    for (key, by_col) in findings {
        for (col, f) in by_col {
            let label = format!("{} / {col}", row_label(key));
            match f.status.as_str() {
                "ran" => {
                    if let Some(n) = leak_of(f) {
                        let why = if f.expected_alive.is_none() {
                            " (plain reference counting cannot free cycles: expected)"
                        } else {
                            ""
                        };
                        leaks.push(format!("- {label}: leaks {n} nodes{why}"));
                    } else if let (Some(a), Some(e)) = (f.alive, f.expected_alive) {
                        if a == e && e != 0 {
                            leaks.push(format!("- {label}: leaks {a} nodes, by design of the row"));
                        }
                    }
                }
                status => na.push(format!(
                    "- {label}: n/a — {status}: {}",
                    f.reason.as_deref().unwrap_or("no reason recorded")
                )),
            }
            for n in &f.notes {
                notes.push(format!("- {label}: {n}"));
            }
        }
    }
    let mut section = |title: &str, items: Vec<String>, empty: &str| {
        let _ = writeln!(md, "### {title}\n");
        if items.is_empty() {
            let _ = writeln!(md, "{empty}\n");
        } else {
            let _ = writeln!(md, "{}\n", items.join("\n"));
        }
    };
    section("Not applicable", na, "None.");
    section(
        "Leaks (nodes alive after the final collection)",
        leaks,
        "None.",
    );
    section("Notes", notes, "None.");
}
