//! One switch's port numbering: topology port → device port.
//!
//! The topology numbers a switch's ports 1, 2, 3, ... as they are cabled;
//! the data plane sees device ports. On BMv2 they are the same (the lab
//! attaches interface N as port N); a Tofino device port (`D_P`) encodes
//! the pipe and MAC channel and follows no cabling order, so an operator
//! lists the map per switch (the switches file, see docs/tofino.md).

use std::collections::{BTreeMap, BTreeSet};

use super::PORT_BITS;

/// A validated map of every topology port of one switch to its device port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMap {
    to_device: BTreeMap<u16, u16>,
}

/// Why a port map was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortMapError {
    #[error(
        "{switch}: port {port} is not a port of {switch} in the topology (its ports: {known})"
    )]
    UnknownPort {
        switch: String,
        port: u16,
        known: String,
    },
    #[error("{switch}: no device port for topology port(s) {missing}; a port map lists every port of the switch")]
    Missing { switch: String, missing: String },
    #[error("{switch}: device port {device} (for port {port}) does not fit the data plane's {bits}-bit ports (0-{max})", bits = PORT_BITS, max = (1u32 << PORT_BITS) - 1)]
    TooWide {
        switch: String,
        port: u16,
        device: u16,
    },
    #[error("{switch}: ports {first} and {second} both map to device port {device}")]
    Duplicate {
        switch: String,
        device: u16,
        first: u16,
        second: u16,
    },
}

fn list(ports: impl IntoIterator<Item = u16>) -> String {
    ports
        .into_iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl PortMap {
    /// The map `to_device` of `switch`, whose topology ports are
    /// `topology_ports`: it must name each of them exactly once, and no two
    /// may share a device port.
    pub fn new(
        switch: &str,
        to_device: BTreeMap<u16, u16>,
        topology_ports: &[u16],
    ) -> Result<PortMap, PortMapError> {
        let known: BTreeSet<u16> = topology_ports.iter().copied().collect();
        let mut seen: BTreeMap<u16, u16> = BTreeMap::new();
        for (&port, &device) in &to_device {
            if !known.contains(&port) {
                return Err(PortMapError::UnknownPort {
                    switch: switch.into(),
                    port,
                    known: list(known.iter().copied()),
                });
            }
            if u32::from(device) >= 1 << PORT_BITS {
                return Err(PortMapError::TooWide {
                    switch: switch.into(),
                    port,
                    device,
                });
            }
            if let Some(first) = seen.insert(device, port) {
                return Err(PortMapError::Duplicate {
                    switch: switch.into(),
                    device,
                    first,
                    second: port,
                });
            }
        }
        let missing: Vec<u16> = known
            .iter()
            .copied()
            .filter(|p| !to_device.contains_key(p))
            .collect();
        if !missing.is_empty() {
            return Err(PortMapError::Missing {
                switch: switch.into(),
                missing: list(missing),
            });
        }
        Ok(PortMap { to_device })
    }

    /// The device port of topology port `port` (unmapped ports, which a
    /// validated map has none of among the switch's own, pass unchanged).
    pub fn device_port(&self, port: u16) -> u16 {
        self.to_device.get(&port).copied().unwrap_or(port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_complete_map_gives_every_port_its_device_port() {
        let map = PortMap::new("leaf1", [(1, 128), (2, 136), (3, 0)].into(), &[3, 1, 2]).unwrap();
        assert_eq!(map.device_port(1), 128);
        assert_eq!(map.device_port(3), 0);
        assert_eq!(map.device_port(2), 136);
    }

    #[test]
    fn every_mistake_is_refused_with_the_switch_and_port() {
        let err = PortMap::new("leaf1", [(1, 128), (9, 136)].into(), &[1, 2]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "leaf1: port 9 is not a port of leaf1 in the topology (its ports: 1, 2)"
        );
        let err = PortMap::new("leaf1", [(1, 128)].into(), &[1, 2, 3]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "leaf1: no device port for topology port(s) 2, 3; a port map lists every port of the switch"
        );
        let err = PortMap::new("leaf1", [(1, 512)].into(), &[1]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "leaf1: device port 512 (for port 1) does not fit the data plane's 9-bit ports (0-511)"
        );
        let err = PortMap::new("leaf1", [(1, 128), (2, 128)].into(), &[1, 2]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "leaf1: ports 1 and 2 both map to device port 128"
        );
        assert!(PortMap::new("leaf1", [(1, 511)].into(), &[1]).is_ok());
    }
}
