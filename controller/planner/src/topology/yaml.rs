//! Load and save a [`TopologySpec`] as YAML.

use std::path::Path;

use super::{Topology, TopologyError, TopologySpec};

/// Parses YAML into a spec (shape only; see [`Topology::from_spec`] for validation).
pub fn parse(text: &str) -> Result<TopologySpec, TopologyError> {
    serde_yaml::from_str(text).map_err(|e| TopologyError::Parse(format!("topology YAML: {e}")))
}

/// Parses and validates YAML.
pub fn load_str(text: &str) -> Result<Topology, TopologyError> {
    Topology::from_spec(parse(text)?)
}

/// Reads, parses and validates a topology file.
pub fn load_file(path: impl AsRef<Path>) -> Result<Topology, TopologyError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|io| TopologyError::Io {
        path: path.display().to_string(),
        io,
    })?;
    let spec = serde_yaml::from_str(&text)
        .map_err(|e| TopologyError::Parse(format!("{}: {e}", path.display())))?;
    Topology::from_spec(spec)
}

/// Serializes a spec to YAML (with a header comment naming the schema).
pub fn to_string(spec: &TopologySpec) -> String {
    let body = serde_yaml::to_string(spec).expect("a TopologySpec always serializes");
    format!(
        "# Foresight fabric topology (schema v{}; see controller/planner/README.md).\n\
         # Capacities in Gbit/s; switch ports numbered from 1; hosts attach via (leaf, port).\n{body}",
        spec.version
    )
}

/// Writes a spec to a file.
pub fn save_file(spec: &TopologySpec, path: impl AsRef<Path>) -> Result<(), TopologyError> {
    let path = path.as_ref();
    std::fs::write(path, to_string(spec)).map_err(|io| TopologyError::Io {
        path: path.display().to_string(),
        io,
    })
}
