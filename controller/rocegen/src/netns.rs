//! Named network namespaces joined by veth pairs, for tests and benches.
//! Everything created is deleted by name on drop (deleting a namespace
//! deletes the veth ends inside it).

use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// Runs `ip ARGS`, failing with its stderr.
pub fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .context("running ip (iproute2)")?;
    if !out.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// True when we are root and `ip netns` works (so namespace tests can run).
pub fn available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("ip")
        .args(["netns", "list"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Owns the namespaces it created.
#[derive(Default)]
pub struct Lab {
    namespaces: Vec<String>,
}

impl Lab {
    pub fn new() -> Lab {
        Lab::default()
    }

    pub fn add_ns(&mut self, name: &str) -> Result<()> {
        // A leftover from a killed run with the same name would make add fail.
        let _ = ip(&["netns", "del", name]);
        ip(&["netns", "add", name])?;
        self.namespaces.push(name.to_string());
        ip(&["-n", name, "link", "set", "lo", "up"])
    }

    /// veth pair created directly inside the two namespaces, both up.
    pub fn veth(&self, ns_a: &str, if_a: &str, ns_b: &str, if_b: &str) -> Result<()> {
        ip(&[
            "link", "add", if_a, "netns", ns_a, "type", "veth", "peer", "name", if_b, "netns", ns_b,
        ])?;
        ip(&["-n", ns_a, "link", "set", if_a, "up"])?;
        ip(&["-n", ns_b, "link", "set", if_b, "up"])
    }

    pub fn addr(&self, ns: &str, ifname: &str, cidr: &str) -> Result<()> {
        ip(&["-n", ns, "addr", "add", cidr, "dev", ifname])
    }

    /// `ip netns exec NS PROGRAM ARGS...`
    pub fn command(&self, ns: &str, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, program]);
        c
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for n in self.namespaces.iter().rev() {
            if let Err(e) = ip(&["netns", "del", n]) {
                eprintln!("warning: could not delete namespace {n}: {e:#}");
            }
        }
    }
}
