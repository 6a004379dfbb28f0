//! Values given to entity builders: integers, addresses or raw bytes.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::bytestring;
use crate::error::ValueError;

/// A field value before it is width-checked and encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Int(u128),
    Bytes(Vec<u8>),
}

impl Value {
    /// Canonical bytestring for a `bitwidth`-bit field called `field`.
    pub fn encode(&self, bitwidth: u32, field: &str) -> Result<Vec<u8>, ValueError> {
        match self {
            Value::Int(v) => bytestring::encode_u128(*v, bitwidth, field),
            Value::Bytes(b) => bytestring::encode_bytes(b, bitwidth, field),
        }
    }

    /// The value as an integer, if it fits in 128 bits.
    pub fn as_u128(&self) -> Option<u128> {
        match self {
            Value::Int(v) => Some(*v),
            Value::Bytes(b) => bytestring::decode_u128(b),
        }
    }
}

macro_rules! from_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(v: $t) -> Self { Value::Int(v as u128) }
        }
    )*};
}
from_int!(u8, u16, u32, u64, u128, usize);

impl From<Ipv4Addr> for Value {
    fn from(v: Ipv4Addr) -> Self {
        Value::Int(u32::from(v).into())
    }
}

impl From<Ipv6Addr> for Value {
    fn from(v: Ipv6Addr) -> Self {
        Value::Int(u128::from(v))
    }
}

/// A MAC address.
impl From<[u8; 6]> for Value {
    fn from(v: [u8; 6]) -> Self {
        Value::Bytes(v.to_vec())
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Bytes(v)
    }
}

impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Bytes(v.to_vec())
    }
}

/// Parse `aa:bb:cc:dd:ee:ff`.
pub fn parse_mac(text: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() != 6 {
        return Err(format!(
            "`{text}` is not a MAC address (want aa:bb:cc:dd:ee:ff)"
        ));
    }
    let mut mac = [0u8; 6];
    for (byte, part) in mac.iter_mut().zip(parts) {
        *byte = u8::from_str_radix(part, 16)
            .map_err(|_| format!("`{text}` is not a MAC address (bad byte `{part}`)"))?;
    }
    Ok(mac)
}

/// Parse a value written by a person: decimal, `0x` hex, IPv4, or MAC.
pub fn parse_value(text: &str) -> Result<Value, String> {
    let text = text.trim();
    if let Some(hex) = text.strip_prefix("0x") {
        return u128::from_str_radix(hex, 16)
            .map(Value::Int)
            .map_err(|e| format!("`{text}`: {e}"));
    }
    if let Ok(v) = text.parse::<u128>() {
        return Ok(Value::Int(v));
    }
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        return Ok(ip.into());
    }
    if text.contains(':') {
        if let Ok(mac) = parse_mac(text) {
            return Ok(mac.into());
        }
        if let Ok(ip) = text.parse::<Ipv6Addr>() {
            return Ok(ip.into());
        }
    }
    Err(format!(
        "`{text}` is not a number, 0x-hex, IPv4, IPv6 or MAC address"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_operators_write() {
        assert_eq!(parse_value("42").unwrap(), Value::Int(42));
        assert_eq!(parse_value("0x2a").unwrap(), Value::Int(42));
        assert_eq!(parse_value("10.0.1.2").unwrap(), Value::Int(0x0a00_0102));
        assert_eq!(
            parse_value("00:00:0a:00:01:02").unwrap(),
            Value::Bytes(vec![0, 0, 0x0a, 0, 1, 2])
        );
        assert!(parse_value("ten").unwrap_err().contains("`ten`"));
        assert!(parse_mac("00:11:22").is_err());
    }

    #[test]
    fn mac_fits_48_bits_and_not_47() {
        let mac = Value::from([0xff, 0, 0, 0, 0, 1]);
        assert!(mac.encode(48, "m").is_ok());
        assert!(mac.encode(47, "m").is_err());
    }
}
