//! The command line end to end: a short run as JSON, the SVG files, a bad flag.

use std::process::Command;

fn sim() -> Command {
    Command::new(env!("CARGO_BIN_EXE_herdless-sim"))
}

#[test]
fn json_rows_and_svg_plots() {
    let dir = std::env::temp_dir().join(format!("herdless-sim-cli-{}", std::process::id()));
    let out = sim()
        .args([
            "hot-key",
            "--rate",
            "100",
            "--duration",
            "12s",
            "--json",
            "--svg",
        ])
        .arg(&dir)
        .args(["--strategies", "naive,single-flight"])
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let rows = rows.as_array().expect("an array of rows");
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0]["strategy"], "naive");
    assert_eq!(rows[1]["strategy"], "single-flight");
    // One expiry at 10 s: one call with single-flight, a herd of ~20 with naive.
    assert_eq!(rows[1]["origin_calls"], 1);
    assert!(rows[0]["origin_calls"].as_u64().expect("a count") > 5);
    for name in ["sim-hot-key-origin.svg", "sim-hot-key-latency.svg"] {
        let svg = std::fs::read_to_string(dir.join(name)).expect("the plot was written");
        assert!(
            svg.starts_with("<svg") && svg.contains("single-flight"),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_internet_archive_table_names_their_figures() {
    let out = sim()
        .args(["internet-archive", "--duration", "30s"])
        .output()
        .expect("the binary runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Internet Archive") && text.contains("xlocked"),
        "{text}"
    );
    assert!(
        text.contains("27179"),
        "their fetch tally is printed beside ours"
    );
}

#[test]
fn a_bad_duration_is_a_usage_error() {
    let out = sim()
        .args(["hot-key", "--ttl", "ten seconds"])
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("duration"));
}

#[test]
fn the_refresh_ahead_study_compares_with_xfetch_and_a_bad_share_is_refused() {
    let out = sim()
        .args([
            "refresh-ahead-study",
            "--duration",
            "20s",
            "--rate",
            "200",
            "--keys",
            "1",
            "--shares",
            "0.5,0.8",
        ])
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for cell in [
        "1 key, beta 1",
        "1 key, share 0.5",
        "1 key, share 0.8",
        "per TTL",
    ] {
        assert!(text.contains(cell), "{cell} missing from\n{text}");
    }
    let out = sim()
        .args(["hot-key", "--strategies", "refresh-ahead", "--ahead", "1.5"])
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("refresh_ahead"));
}
