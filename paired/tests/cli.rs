//! The `paired` command end to end, with shell commands that print fixed
//! times.

use std::process::Command;

fn paired(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_paired"))
        .args(args)
        .output()
        .expect("run paired")
}

#[test]
fn reports_the_median_ratio_and_writes_every_pair() {
    let dir = std::env::temp_dir().join(format!("paired-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("pairs.json");
    // A prints milliseconds on standard error, B microseconds on standard
    // output: 1.5 ms against 1800 µs is 1.2.
    let run = paired(&[
        "--pairs",
        "6",
        "--a",
        "echo 'took 1.5 ms' >&2",
        "--b",
        "echo 'alive'; echo '1800 us per run'",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{run:?}");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("B/A median of 6 pairs 1.200"), "{stdout}");
    assert!(stdout.contains("95 % interval 1.200–1.200"), "{stdout}");
    assert!(stdout.contains("B lower in 0"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert!(json["machine"]["cpus"].as_u64().unwrap() >= 1);
    assert!(json["finished_unix_s"].as_u64().unwrap() > 1_700_000_000);
    let pairs = json["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 6);
    // Alternating order: A first in even pairs, B first in odd ones.
    let firsts: String = pairs.iter().map(|p| p["first"].as_str().unwrap()).collect();
    assert_eq!(firsts, "ABABAB");
    assert!((pairs[0]["a"].as_f64().unwrap() - 1.5e-3).abs() < 1e-12);
    assert!((json["verdict"]["ratio"].as_f64().unwrap() - 1.2).abs() < 1e-9);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_failing_command_or_one_without_a_time_is_a_clear_error() {
    let failed = paired(&[
        "--pairs",
        "2",
        "--a",
        "echo 1 ms; exit 3",
        "--b",
        "echo 1 ms",
    ]);
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("A (`echo 1 ms; exit 3`) failed"),
        "{stderr}"
    );

    let silent = paired(&["--pairs", "2", "--a", "echo 1 ms", "--b", "echo done"]);
    assert_eq!(silent.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&silent.stderr);
    assert!(
        stderr.contains("no measurement in the output of B"),
        "{stderr}"
    );
}

#[test]
fn bad_flags_get_a_usage_message() {
    for args in [
        &["--a", "true"][..],
        &["--a", "true", "--b", "true", "--pairs", "0"],
        &["--a", "true", "--b", "true", "--confidence", "1.5"],
        &["--a", "true", "--b", "true", "--pattern", r"\d+ ms"],
    ] {
        let run = paired(args);
        assert_eq!(run.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            stderr.starts_with("error:") && stderr.contains("--help"),
            "{args:?}: {stderr}"
        );
    }
}
