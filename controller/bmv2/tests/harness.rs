//! The harness against the real `simple_switch_grpc`: switches start on
//! distinct free ports, answer, and are gone (by PID) after drop — also when
//! the owning thread panics, in which case the log is kept.
//!
//! Skipped (with a line saying so) when BMv2 is not installed.

use std::net::TcpStream;
use std::path::Path;

fn alive(pid: u32) -> bool {
    // A zombie would still have /proc/<pid>; the harness reaps, so no entry
    // means gone.
    Path::new(&format!("/proc/{pid}")).exists()
}

fn tools() -> Option<bmv2::Toolchain> {
    bmv2::Toolchain::find()
        .map_err(|e| testkit::skip::skipped("bmv2 harness tests", e))
        .ok()
}

#[test]
fn starts_many_on_distinct_ports_and_stops_them_on_drop() {
    let Some(tools) = tools() else { return };
    let mut switches = bmv2::start_switches(&tools, 3).unwrap();
    let mut addrs: Vec<String> = switches.iter().map(|s| s.grpc_addr()).collect();
    addrs.sort();
    addrs.dedup();
    assert_eq!(addrs.len(), 3, "distinct gRPC ports");
    let pids: Vec<u32> = switches.iter().map(|s| s.pid()).collect();
    for s in &mut switches {
        assert!(s.is_running());
        TcpStream::connect(s.grpc_addr()).expect("gRPC port answers");
    }
    assert_eq!(
        switches.iter().map(|s| s.device_id()).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    drop(switches);
    for pid in pids {
        assert!(!alive(pid), "switch {pid} still running after drop");
    }
}

#[test]
fn a_panicking_test_still_stops_the_switch_and_keeps_its_log() {
    let Some(tools) = tools() else { return };
    let (tx, rx) = std::sync::mpsc::channel();
    let result = std::thread::spawn(move || {
        let switch = bmv2::Bmv2Switch::start(&tools, bmv2::SwitchSpec::new("panicker", 0)).unwrap();
        tx.send((switch.pid(), switch.log_path())).unwrap();
        panic!("simulated test failure");
    })
    .join();
    assert!(result.is_err());
    let (pid, log) = rx.recv().unwrap();
    assert!(!alive(pid), "switch {pid} survived the panic");
    assert!(log.exists(), "log kept at {}", log.display());
    std::fs::remove_dir_all(log.parent().unwrap()).unwrap();
}

#[test]
fn restart_keeps_the_ports() {
    let Some(tools) = tools() else { return };
    let mut switch =
        bmv2::Bmv2Switch::start(&tools, bmv2::SwitchSpec::new("restarter", 0)).unwrap();
    let (addr, old_pid) = (switch.grpc_addr(), switch.pid());
    switch.restart().unwrap();
    assert_eq!(switch.grpc_addr(), addr);
    assert_ne!(switch.pid(), old_pid);
    assert!(!alive(old_pid));
    TcpStream::connect(&addr).expect("answers after restart");
}

#[test]
fn a_bad_argument_fails_with_the_log_tail() {
    let Some(tools) = tools() else { return };
    let spec = bmv2::SwitchSpec::new("broken", 0).arg("--no-such-option");
    let err = bmv2::Bmv2Switch::start(&tools, spec)
        .err()
        .expect("start fails");
    let message = err.to_string();
    // A failed start keeps its log for whoever reads the error; this test
    // read it, so the directory goes.
    let bmv2::StartError::Exited { log, .. } = err else {
        panic!("expected an early exit: {message}");
    };
    let dir = Path::new(&log)
        .parent()
        .expect("the log is in its directory");
    assert!(dir.join("switch.log").is_file(), "{message}");
    std::fs::remove_dir_all(dir).unwrap();
    assert!(message.contains("exited during start-up"), "{message}");
}

#[test]
fn a_switch_runs_with_the_toolchains_allocator() {
    let Some(tools) = tools() else { return };
    let Some(lib) = tools.preload.clone() else {
        testkit::skip::skipped(
            "switch allocator test",
            "no allocator to preload (libtcmalloc-minimal4 not installed, or FORESIGHT_BMV2_PRELOAD empty)",
        );
        return;
    };
    let switch = bmv2::Bmv2Switch::start(&tools, bmv2::SwitchSpec::new("allocator", 0)).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", switch.pid())).unwrap();
    let name = lib.file_name().unwrap().to_string_lossy();
    assert!(
        maps.contains(name.as_ref()),
        "{name} not mapped by the switch"
    );
}
