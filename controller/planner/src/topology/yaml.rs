//! Load and save a [`TopologySpec`] as YAML.

use std::path::Path;

use super::{Topology, TopologyError, TopologySpec};

/// Parses YAML into a spec (shape only; see [`Topology::from_spec`] for validation).
pub fn parse(text: &str) -> Result<TopologySpec, TopologyError> {
    parse_named(text, "topology YAML")
}

fn parse_named(text: &str, name: &str) -> Result<TopologySpec, TopologyError> {
    from_str_located(text, name).map_err(TopologyError::Parse)
}

/// Any YAML document into `T`, with an error that says where: its line and
/// column, or that it concerns the document as a whole. `name` (a file
/// name) starts the message.
pub fn from_str_located<T: serde::de::DeserializeOwned>(
    text: &str,
    name: &str,
) -> Result<T, String> {
    no_control_characters(text, name)?;
    serde_yaml::from_str(text).map_err(|e| {
        let text = e.to_string();
        match e.location() {
            Some(_) if text.contains(" line ") => format!("{name}: {text}"),
            Some(l) => format!("{name}: line {} column {}: {text}", l.line(), l.column()),
            None => format!("{name}: the document as a whole: {text}"),
        }
    })
}

/// YAML forbids control characters; the parser names only their byte
/// offset, so find the first one here and say its line and column.
fn no_control_characters(text: &str, name: &str) -> Result<(), String> {
    for (i, line) in text.split('\n').enumerate() {
        let bad = line
            .char_indices()
            .find(|&(_, c)| c.is_control() && c != '\t' && c != '\r');
        if let Some((at, c)) = bad {
            let column = line[..at].chars().count() + 1;
            return Err(format!(
                "{name}: control character U+{:04X} at line {} column {column} is not allowed",
                c as u32,
                i + 1
            ));
        }
    }
    Ok(())
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
    Topology::from_spec(parse_named(&text, &path.display().to_string())?)
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
