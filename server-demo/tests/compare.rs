//! `compare` end to end: every mode runs, results.json and the SVG are written,
//! arc-weak is the baseline.

mod common;

use std::process::Command;

const MODES: [&str; 5] = ["arc-weak", "arc", "orc-nim16", "orc-nim16-faithful", "orc"];

#[test]
fn compare_writes_results_and_chart() {
    let out_dir = tempfile::tempdir().unwrap();
    let table = common::run_compare(&[], out_dir.path());
    for mode in MODES {
        assert!(table.contains(&format!("| {mode} |")), "{table}");
    }

    let results: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.path().join("results.json")).unwrap(),
    )
    .unwrap();
    let summary = results["summary"].as_array().unwrap();
    let modes: Vec<&str> = summary
        .iter()
        .map(|s| s["mode"].as_str().unwrap())
        .collect();
    assert_eq!(modes, MODES);
    for s in summary {
        assert!(s["rps"].as_f64().unwrap() > 0.0, "{s}");
        assert!(s["peak_rss_mib"].as_f64().unwrap() > 0.0, "{s}");
        assert_eq!(s["errors"].as_u64(), Some(0), "{s}");
    }
    // arc-weak is the baseline; arc is still compared with.
    assert_eq!(summary[0]["ratio_to_baseline"].as_f64(), Some(1.0));
    assert_eq!(summary[0]["cpu_ratio_to_baseline"].as_f64(), Some(1.0));
    assert_eq!(summary[1]["ratio_to_arc"].as_f64(), Some(1.0));
    // arc-weak and arc never collect; the collecting modes do.
    for (i, s) in summary.iter().enumerate() {
        let freed = s["freed_by_collector"].as_u64().unwrap();
        assert_eq!(freed > 0, i >= 2, "{s}");
    }
    // arc keeps every request's graph; arc-weak only the hubs (two
    // documents of 10,407 nodes and a few objects).
    let live = |i: usize| summary[i]["live_at_end"].as_u64().unwrap();
    assert!(live(0) < 21_000, "{}", live(0));
    assert!(live(1) > live(0) + 10_000, "{} {}", live(1), live(0));
    assert_eq!(results["config"]["nim16_defects"]["locked_alloc"], true);
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), MODES.len());
    assert!(runs.iter().all(|r| r["rss"].as_array().unwrap().len() >= 4));

    let svg = std::fs::read_to_string(out_dir.path().join("chart.svg")).unwrap();
    assert!(
        svg.trim_start().starts_with("<svg"),
        "{}",
        &svg[..svg.len().min(200)]
    );
    assert!(svg.trim_end().ends_with("</svg>"));
    for mode in MODES {
        assert!(svg.contains(mode), "the chart names {mode}");
    }

    // No server child outlives compare. (Children of this binary only:
    // other checkouts on the machine may be running their own compare.)
    let ps = Command::new("ps").args(["-eo", "args"]).output().unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    let child = format!("{} serve --mm", common::EXE);
    assert!(
        !ps.lines()
            .any(|l| l.starts_with(&child) && l.contains("--port 0 --host 127.0.0.1")),
        "{ps}"
    );
}
