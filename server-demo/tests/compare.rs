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
        // The server's CPU per request splits into user space and kernel.
        let (cpu, user) = (
            s["server_cpu_us_per_request"].as_f64().unwrap(),
            s["server_user_cpu_us_per_request"].as_f64().unwrap(),
        );
        assert!(user > 0.0 && user < cpu, "{s}");
    }
    // arc-weak is the baseline; arc is still compared with.
    assert_eq!(summary[0]["ratio_to_baseline"].as_f64(), Some(1.0));
    assert_eq!(summary[0]["cpu_ratio_to_baseline"].as_f64(), Some(1.0));
    assert_eq!(summary[0]["user_cpu_ratio_to_baseline"].as_f64(), Some(1.0));
    assert!(summary[2]["user_cpu_ratio_to_baseline"].as_f64().unwrap() > 0.0);
    assert!(table.contains("| of which user |"), "{table}");
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

/// `ab`: both servers up at once, alternating slices, ab.json with every
/// pair and a verdict; arc-weak never collects, orc does.
#[test]
fn ab_alternates_slices_between_two_servers() {
    let out_dir = tempfile::tempdir().unwrap();
    let out = Command::new(common::EXE)
        .args([
            "ab",
            "--a",
            "arc-weak",
            "--b",
            "orc",
            "--runtime",
            "work-stealing",
            "--pairs",
            "3",
            "--restarts",
            "2",
            "--slice",
            "300ms",
            "--warmup",
            "200ms",
            "--connections",
            "8",
            "--out",
        ])
        .arg(out_dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("| A | arc-weak/ws |"), "{stdout}");
    assert!(stdout.contains("| B | orc/ws |"), "{stdout}");
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.path().join("ab.json")).unwrap())
            .unwrap();
    let pairs = results["pair_slices"].as_array().unwrap();
    assert_eq!(pairs.len(), 3);
    // ABBA: the second pair ran B first.
    let b_first: Vec<bool> = pairs.iter().map(|p| p["b_first"] == true).collect();
    assert_eq!(b_first, [false, true, false]);
    // Two rounds of fresh servers: one pair, then two.
    let rounds: Vec<u64> = pairs.iter().map(|p| p["round"].as_u64().unwrap()).collect();
    assert_eq!(rounds, [0, 1, 1]);
    assert_eq!(
        results["verdict"]["round_cpu_ratios"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert!(stdout.contains("each round's median"), "{stdout}");
    for p in pairs {
        for side in ["a", "b"] {
            assert!(p[side]["requests"].as_u64().unwrap() > 0, "{p}");
            assert!(p[side]["cpu_s"].as_f64().unwrap() > 0.0, "{p}");
        }
        assert_eq!(p["a"]["collector_cpu_s"].as_f64(), Some(0.0), "{p}");
        // The vCPUs' placement, timed before and after the pair (on two
        // CPUs or more).
        if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
            let trips = p["round_trip_ns"].as_array().expect("round trips");
            assert_eq!(trips.len(), 2, "{p}");
            assert!(trips.iter().all(|t| t.as_f64().unwrap() > 1.0), "{p}");
        }
    }
    // Consecutive pairs of a round share the measurement between them.
    assert_eq!(pairs[1]["round_trip_ns"][1], pairs[2]["round_trip_ns"][0]);
    assert_eq!(results["verdict"]["pairs"].as_u64(), Some(3));
    assert!(results["verdict"]["cpu_ratio"].as_f64().unwrap() > 0.0);
    for side in ["a", "b"] {
        assert_eq!(results[side]["failures"].as_u64(), Some(0));
        assert!(results[side]["peak_rss_bytes"].as_u64().unwrap() > 0);
    }
}

/// `ab` refuses to compare a server with itself, a missing executable, and
/// more rounds than pairs.
#[test]
fn ab_needs_two_different_servers() {
    for (args, message) in [
        (&["ab", "--a", "orc", "--b", "orc"][..], "the same server"),
        (
            &["ab", "--b-exe", "/nonexistent/server-demo"],
            "is not a file",
        ),
        (
            &["ab", "--pairs", "2", "--restarts", "3"],
            "leaves rounds without pairs",
        ),
    ] {
        let out = Command::new(common::EXE).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

/// `pingpong` times a cache line's round trip between two CPUs, and says
/// why it cannot.
#[test]
fn pingpong_times_a_round_trip_or_says_why_not() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2 {
        let out = Command::new(common::EXE)
            .args(["pingpong", "--trips", "1000"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}");
        let ns: f64 = stdout.split_whitespace().next().unwrap().parse().unwrap();
        assert!(ns > 1.0, "{stdout}");
        assert!(stdout.contains("ns per round trip between CPU 0 and CPU 1"));
    }
    for (args, code, message) in [
        (
            &["pingpong", "--a", "1", "--b", "1"][..],
            1,
            "two different CPUs",
        ),
        (
            &["pingpong", "--b", "99999"],
            1,
            "beyond what a cpu_set_t holds",
        ),
        (&["pingpong", "--trips", "0"], 2, "invalid value"),
    ] {
        let out = Command::new(common::EXE).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}
