//! Switches that `foresight controller --bmv2` starts die with it, even
//! when the controller is SIGKILLed (no destructor runs): they are forked
//! with `PR_SET_PDEATHSIG` from a thread that lives as long as the process.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::TOPOLOGY;

/// Whether `pid` is a live process (a zombie is dead: it only awaits reaping).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            // pid (comm) STATE ...; comm may contain spaces, so split after ')'.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next())
                .unwrap_or("");
            state != "Z" && state != "X"
        }
        Err(_) => false,
    }
}

#[test]
fn switches_started_by_the_controller_die_when_it_is_sigkilled() {
    if testkit::skip::bmv2("orphaned switches test").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ready = dir.path().join("ready.json");
    let log = dir.path().join("controller.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_foresight"))
        .args(["controller", "--topology", TOPOLOGY, "--bmv2"])
        .args(["--state-file", "none"])
        .arg("--ready-file")
        .arg(&ready)
        .args(["--ndsp", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .env("FORESIGHT_LOG", "info")
        // The switches' log directories: a SIGKILLed controller cannot
        // remove them, so they go with this test's directory.
        .env("TMPDIR", dir.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("foresight binary runs");
    let started = Instant::now();
    let pids: Vec<u32> = loop {
        if let Ok(text) = std::fs::read_to_string(&ready) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                break v["switch_pids"]
                    .as_object()
                    .expect("switch_pids in the ready file")
                    .values()
                    .map(|p| p.as_u64().unwrap() as u32)
                    .collect();
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "controller exited with {status}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "controller not ready:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pids.len(), 4, "one BMv2 per switch of the fabric");
    for &pid in &pids {
        assert!(alive(pid), "switch {pid} runs while the controller does");
    }

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let orphans: Vec<u32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    for &p in &orphans {
        // Do not leave them behind even when the assertion fails.
        // SAFETY: kill(2) on PIDs this test saw the controller start.
        unsafe {
            libc::kill(p as libc::pid_t, libc::SIGKILL);
        }
    }
    assert!(
        orphans.is_empty(),
        "switches {orphans:?} outlived the SIGKILLed controller"
    );
}
