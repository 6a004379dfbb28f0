//! P4Runtime bytestring encoding: big-endian, canonical (no leading zero
//! bytes, zero is a single 0x00), checked against the field's bit width.

use crate::error::ValueError;

/// Encode `value` for a field of `bitwidth` bits in canonical form.
pub fn encode_u128(value: u128, bitwidth: u32, field: &str) -> Result<Vec<u8>, ValueError> {
    if bitwidth < 128 && value >> bitwidth != 0 {
        return Err(ValueError {
            field: field.into(),
            reason: format!("value {value} does not fit in {bitwidth} bits"),
        });
    }
    Ok(canonical(&value.to_be_bytes()).to_vec())
}

/// Re-encode raw big-endian bytes canonically, checking the width.
pub fn encode_bytes(bytes: &[u8], bitwidth: u32, field: &str) -> Result<Vec<u8>, ValueError> {
    let value = canonical(bytes);
    let significant_bits = match value.first() {
        None | Some(0) => 0,
        Some(first) => (value.len() as u32 - 1) * 8 + (8 - first.leading_zeros()),
    };
    if significant_bits > bitwidth {
        return Err(ValueError {
            field: field.into(),
            reason: format!("value 0x{} does not fit in {bitwidth} bits", hex(bytes)),
        });
    }
    Ok(value.to_vec())
}

/// Decode a bytestring (canonical or padded) as an unsigned integer.
pub fn decode_u128(bytes: &[u8]) -> Option<u128> {
    let value = canonical(bytes);
    if value.len() > 16 {
        return None;
    }
    Some(
        value
            .iter()
            .fold(0u128, |acc, b| (acc << 8) | u128::from(*b)),
    )
}

/// Strip leading zero bytes, keeping one byte for zero.
fn canonical(bytes: &[u8]) -> &[u8] {
    let first = bytes.iter().position(|b| *b != 0);
    match first {
        Some(i) => &bytes[i..],
        None if bytes.is_empty() => bytes,
        None => &bytes[bytes.len() - 1..],
    }
}

/// Lower-case hex, for messages.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A mask of `prefix_len` leading ones in a `bitwidth`-bit field.
pub fn prefix_mask(prefix_len: u32, bitwidth: u32) -> u128 {
    if prefix_len == 0 {
        0
    } else {
        let ones = if prefix_len >= 128 {
            u128::MAX
        } else {
            (1u128 << prefix_len) - 1
        };
        ones << (bitwidth - prefix_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_is_one_byte() {
        assert_eq!(encode_u128(0, 32, "f").unwrap(), vec![0]);
        assert_eq!(encode_bytes(&[0, 0, 0], 24, "f").unwrap(), vec![0]);
    }

    #[test]
    fn leading_zeros_are_stripped() {
        assert_eq!(
            encode_u128(0x0a00_0001, 32, "f").unwrap(),
            vec![0x0a, 0, 0, 1]
        );
        assert_eq!(encode_u128(1, 9, "f").unwrap(), vec![1]);
        assert_eq!(encode_bytes(&[0, 0, 1, 2], 32, "f").unwrap(), vec![1, 2]);
    }

    #[test]
    fn too_wide_values_name_the_field() {
        let err = encode_u128(512, 9, "table t, param port").unwrap_err();
        assert_eq!(err.field, "table t, param port");
        assert!(err.reason.contains("9 bits"), "{}", err.reason);
        assert!(encode_u128(511, 9, "f").is_ok());
        assert!(encode_bytes(&[0x02, 0x00], 9, "f").is_err());
        assert!(encode_bytes(&[0x01, 0xff], 9, "f").is_ok());
    }

    #[test]
    fn full_width_128() {
        assert_eq!(encode_u128(u128::MAX, 128, "f").unwrap().len(), 16);
    }

    #[test]
    fn decode_round_trip() {
        for v in [0u128, 1, 255, 256, 0xdead_beef, u64::MAX as u128] {
            assert_eq!(decode_u128(&encode_u128(v, 128, "f").unwrap()), Some(v));
        }
        assert_eq!(decode_u128(&[0, 0, 5]), Some(5));
    }

    #[test]
    fn prefix_masks() {
        assert_eq!(prefix_mask(24, 32), 0xffff_ff00);
        assert_eq!(prefix_mask(32, 32), 0xffff_ffff);
        assert_eq!(prefix_mask(0, 32), 0);
        assert_eq!(prefix_mask(1, 9), 0x100);
    }
}
