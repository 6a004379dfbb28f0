//! How a switch that does not run Foresight's program hashes a RoCEv2
//! packet onto an ECMP member, as its operator describes it: the hash
//! function, its seed and how the seed enters, the fields in the order the
//! switch feeds them, and which bits of the result pick the member.
//!
//! [`crate::ecmp`] models one such switch exactly (Foresight's own
//! program); [`FabricHash::foresight`] is that model written in these
//! terms, and the tests hold the two to the same member on every key. A
//! fixed-function ASIC's description comes from a file
//! ([`FabricHash::from_yaml`], documented in `docs/entropy-steering.md`).
//!
//! Everything here is a CRC over a fixed-length input, so the hash is
//! affine over GF(2) in the input bits whatever the polynomial, initial
//! value, seed or final XOR: [`crate::entropy`] relies on that to search
//! source ports with two table lookups per candidate.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::Deserialize;

use crate::ecmp::{walk_avoiding, HashMode, SeedPolicy};
use crate::flow::Flow;
use crate::paths::Path;
use crate::topology::{EdgeId, Role, Topology};

/// A CRC in the catalogue's terms (width, polynomial, initial register,
/// reflection, final XOR). Input and output are reflected together, as in
/// every CRC a switch hash uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Crc {
    /// Bits, 8..=32.
    pub width: u32,
    /// Generator polynomial, without its top bit.
    pub poly: u32,
    /// Register before the first byte (replaced by the seed under [`SeedUse::Init`]).
    pub init: u32,
    /// Bytes enter least significant bit first, and the result is reflected.
    pub reflect: bool,
    /// XORed into the result.
    pub xor_out: u32,
    table: Vec<u32>,
}

/// Catalogue CRCs a switch's hash configuration names. The SAI names
/// (`SAI_HASH_ALGORITHM_CRC`, `_CRC_CCITT`, `_CRC_32LO`, `_CRC_32HI`) say
/// which family, not which variant: `docs/entropy-steering.md` says how to
/// check a choice against the switch.
pub const CRC_PRESETS: [(&str, u32, u32, u32, bool, u32); 6] = [
    // name, width, poly, init, reflect, xor_out
    ("crc32", 32, 0x04C1_1DB7, 0xFFFF_FFFF, true, 0xFFFF_FFFF),
    ("crc32c", 32, 0x1EDC_6F41, 0xFFFF_FFFF, true, 0xFFFF_FFFF),
    (
        "crc32-bzip2",
        32,
        0x04C1_1DB7,
        0xFFFF_FFFF,
        false,
        0xFFFF_FFFF,
    ),
    ("crc16-ccitt-false", 16, 0x1021, 0xFFFF, false, 0),
    ("crc16-xmodem", 16, 0x1021, 0, false, 0),
    ("crc16-arc", 16, 0x8005, 0, true, 0),
];

impl Crc {
    /// A CRC with these parameters, or why they are not one.
    pub fn new(
        width: u32,
        poly: u32,
        init: u32,
        reflect: bool,
        xor_out: u32,
    ) -> Result<Crc, String> {
        if !(8..=32).contains(&width) {
            return Err(format!("CRC width {width}: want 8 to 32 bits"));
        }
        let mask = mask(width);
        for (what, v) in [("polynomial", poly), ("init", init), ("xor_out", xor_out)] {
            if v & !mask != 0 {
                return Err(format!("CRC {what} {v:#x} is wider than {width} bits"));
            }
        }
        if poly & 1 == 0 {
            return Err(format!(
                "CRC polynomial {poly:#x}: its constant term (bit 0) must be 1"
            ));
        }
        let top = 1u64 << (width - 1);
        let table = (0..256u64)
            .map(|i| {
                let mut r = i << (width - 8);
                for _ in 0..8 {
                    r = if r & top != 0 {
                        (r << 1) ^ u64::from(poly)
                    } else {
                        r << 1
                    };
                }
                (r & u64::from(mask)) as u32
            })
            .collect();
        Ok(Crc {
            width,
            poly,
            init,
            reflect,
            xor_out,
            table,
        })
    }

    /// The catalogue CRC called `name` ([`CRC_PRESETS`]).
    pub fn preset(name: &str) -> Result<Crc, String> {
        let (_, w, p, i, r, x) = CRC_PRESETS.iter().find(|c| c.0 == name).ok_or_else(|| {
            let names: Vec<&str> = CRC_PRESETS.iter().map(|c| c.0).collect();
            format!(
                "unknown hash function '{name}' (known: {})",
                names.join(", ")
            )
        })?;
        Crc::new(*w, *p, *i, *r, *x)
    }

    /// Whether this is zlib's CRC-32 (`crc32`).
    fn is_zlib(&self) -> bool {
        (self.width, self.poly, self.init, self.reflect, self.xor_out)
            == (32, 0x04C1_1DB7, 0xFFFF_FFFF, true, 0xFFFF_FFFF)
    }

    /// The CRC of `bytes` with the register starting at `init`.
    pub fn compute(&self, init: u32, bytes: &[u8]) -> u32 {
        let w = self.width;
        let mask = mask(w);
        let mut reg = init & mask;
        for &b in bytes {
            let b = if self.reflect { b.reverse_bits() } else { b };
            let idx = ((reg >> (w - 8)) ^ u32::from(b)) & 0xff;
            reg = ((reg << 8) ^ self.table[idx as usize]) & mask;
        }
        if self.reflect {
            reg = reg.reverse_bits() >> (32 - w);
        }
        (reg ^ self.xor_out) & mask
    }
}

/// zlib's CRC-32, its table built once.
fn zlib_crc32() -> Crc {
    static ZLIB: std::sync::OnceLock<Crc> = std::sync::OnceLock::new();
    ZLIB.get_or_init(|| Crc::preset("crc32").expect("a preset"))
        .clone()
}

fn mask(width: u32) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    }
}

/// The longest input: a prepended seed and every field once.
const MAX_INPUT: usize = 4 + 4 + 4 + 1 + 2 + 2 + 3 + 2;

/// A field a switch hashes, as its bytes enter the hash (big-endian).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Field {
    /// IPv4 source (4 bytes).
    SrcIp,
    /// IPv4 destination (4).
    DstIp,
    /// IP protocol (1): 17 for RoCEv2.
    IpProto,
    /// UDP source port (2): the entropy RoCEv2 leaves to the sender.
    L4SrcPort,
    /// UDP destination port (2): 4791 for RoCEv2.
    L4DstPort,
    /// BTH destination QP (3).
    DstQp,
    /// The port the packet came in on (2): differs hop by hop.
    IngressPort,
}

impl Field {
    /// Writes the field's bytes at the start of `out`; their count.
    fn write(self, flow: &Flow, in_port: u16, out: &mut [u8]) -> usize {
        let (bytes, n): ([u8; 4], usize) = match self {
            Field::SrcIp => (flow.src_ip.octets(), 4),
            Field::DstIp => (flow.dst_ip.octets(), 4),
            Field::IpProto => ([crate::conventions::IP_PROTO_UDP, 0, 0, 0], 1),
            Field::L4SrcPort => (u32::from(flow.udp_src_port).to_be_bytes(), 2),
            Field::L4DstPort => (
                u32::from(crate::conventions::ROCEV2_UDP_PORT).to_be_bytes(),
                2,
            ),
            Field::DstQp => ((flow.dest_qp & 0xFF_FFFF).to_be_bytes(), 3),
            Field::IngressPort => (u32::from(in_port).to_be_bytes(), 2),
        };
        // Numbers are right-aligned in their 4 big-endian bytes; addresses
        // and the protocol byte fill from the left.
        let from = match self {
            Field::SrcIp | Field::DstIp | Field::IpProto => 0,
            _ => 4 - n,
        };
        out[..n].copy_from_slice(&bytes[from..from + n]);
        n
    }
}

/// How a switch's seed enters its hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeedUse {
    /// Four bytes (big-endian) before the fields: Foresight's program.
    Prepend,
    /// The CRC register's initial value.
    Init,
    /// XORed into the result.
    Xor,
}

/// How one switch hashes a RoCEv2 packet and picks a member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashProfile {
    /// The hash function.
    pub crc: Crc,
    /// The switch's seed.
    pub seed: u32,
    /// How the seed enters.
    pub seed_use: SeedUse,
    /// The fields, in the order they enter.
    pub fields: Vec<Field>,
    /// Right rotation of the hash within its width before the member is
    /// taken (an ASIC's hash offset).
    pub offset: u32,
    /// Low bits of the rotated hash the member is taken from (`% group size`).
    pub bits: u32,
}

impl HashProfile {
    /// Foresight's program with this seed and offset, hashing `mode`'s
    /// fields (`p4src/v1model/routing.p4`, [`crate::ecmp`]).
    pub fn foresight(seed: u32, offset: u32, mode: HashMode) -> HashProfile {
        let fields = match mode {
            HashMode::QpAware => vec![Field::SrcIp, Field::DstIp, Field::L4SrcPort, Field::DstQp],
            HashMode::FiveTuple => vec![
                Field::SrcIp,
                Field::DstIp,
                Field::IpProto,
                Field::L4SrcPort,
                Field::L4DstPort,
            ],
        };
        HashProfile {
            crc: zlib_crc32(),
            seed,
            seed_use: SeedUse::Prepend,
            fields,
            offset,
            bits: 32,
        }
    }

    /// Writes the bytes the hash reads for `flow` arriving on `in_port`
    /// (the seed if prepended, then the fields) into `buf`; their count.
    fn fill(&self, flow: &Flow, in_port: u16, buf: &mut [u8; MAX_INPUT]) -> usize {
        let mut at = 0;
        if self.seed_use == SeedUse::Prepend {
            buf[..4].copy_from_slice(&self.seed.to_be_bytes());
            at = 4;
        }
        for f in &self.fields {
            at += f.write(flow, in_port, &mut buf[at..]);
        }
        at
    }

    /// The hash of `flow` arriving on `in_port`.
    pub fn hash(&self, flow: &Flow, in_port: u16) -> u32 {
        let mut buf = [0u8; MAX_INPUT];
        let n = self.fill(flow, in_port, &mut buf);
        let input = &buf[..n];
        let h = match self.seed_use {
            SeedUse::Init => self.crc.compute(self.seed, input),
            // zlib's CRC-32, the common case (Foresight's program), at its
            // library's speed.
            _ if self.crc.is_zlib() => crc32fast::hash(input),
            _ => self.crc.compute(self.crc.init, input),
        };
        match self.seed_use {
            SeedUse::Xor => (h ^ self.seed) & mask(self.crc.width),
            _ => h,
        }
    }

    /// What the member is taken from: the hash rotated right by the
    /// offset within its width, its low `bits` kept.
    pub fn select(&self, hash: u32) -> u32 {
        self.window().apply(hash)
    }

    /// [`HashProfile::select`] as a small value, for loops that apply it
    /// many times.
    pub fn window(&self) -> Window {
        let w = self.crc.width;
        Window {
            rot: self.offset % w,
            width: w,
            wmask: mask(w),
            keep: mask(self.bits),
        }
    }

    /// The member of a group of `group` this switch picks for `flow`
    /// arriving on `in_port`.
    pub fn member(&self, flow: &Flow, in_port: u16, group: usize) -> usize {
        self.select(self.hash(flow, in_port)) as usize % group
    }
}

/// Which bits of a hash pick the member: rotate right by `rot` within
/// `width` bits, keep the bits of `keep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    rot: u32,
    width: u32,
    wmask: u32,
    keep: u32,
}

impl Window {
    /// The selected value of `hash`.
    pub fn apply(self, hash: u32) -> u32 {
        let rotated = if self.rot == 0 {
            hash
        } else {
            ((hash >> self.rot) | (hash << (self.width - self.rot))) & self.wmask
        };
        rotated & self.keep
    }
}

/// How every switch of a fabric hashes, by switch index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FabricHash {
    /// By [`crate::topology::SwitchIdx`].
    pub switches: Vec<HashProfile>,
}

impl FabricHash {
    /// Every switch running Foresight's program, seeded by `policy`,
    /// hashing `mode`'s fields: [`crate::ecmp`]'s model.
    pub fn foresight(topo: &Topology, policy: &SeedPolicy, mode: HashMode) -> FabricHash {
        FabricHash {
            switches: policy
                .seeds(topo)
                .into_iter()
                .map(|h| HashProfile::foresight(h.seed, h.offset, mode))
                .collect(),
        }
    }

    /// Whether some switch hashes `field`.
    pub fn hashes(&self, field: Field) -> bool {
        self.switches.iter().any(|p| p.fields.contains(&field))
    }

    /// The path the switches' ECMP gives `flow`, each hop hashing with its
    /// own profile over its viable next hops (`down` marks the edges out of
    /// service). `None` when the destination cannot be reached.
    pub fn path_avoiding<F: Fn(EdgeId) -> bool + Copy>(
        &self,
        topo: &Topology,
        flow: &Flow,
        down: F,
    ) -> Option<Path> {
        walk_avoiding(topo, flow.src, flow.dst, down, |s, in_port, n| {
            self.switches[s as usize].member(flow, in_port, n)
        })
    }

    /// A fabric's hash as described in YAML (`name` names the file in
    /// errors): see `docs/entropy-steering.md`.
    pub fn from_yaml(topo: &Topology, text: &str, name: &str) -> Result<FabricHash, String> {
        let doc: Document = crate::topology::yaml::from_str_located(text, name)?;
        if doc.version != 1 {
            return Err(format!(
                "{name}: version {}: this controller reads version 1",
                doc.version
            ));
        }
        for role in doc.roles.keys() {
            if !["leaf", "spine", "superspine"].contains(&role.as_str()) {
                return Err(format!(
                    "{name}: roles: '{role}' is not a tier (leaf, spine or superspine)"
                ));
            }
        }
        for sw in doc.switches.keys() {
            if topo.switch_by_name(sw).is_none() {
                return Err(format!(
                    "{name}: switches: '{sw}' is not a switch of the topology"
                ));
            }
        }
        let switches = topo
            .switches()
            .iter()
            .map(|s| {
                let role = role_name(s.role);
                let parts = [
                    Some(("default".to_string(), &doc.default)),
                    doc.roles.get(role).map(|d| (format!("roles.{role}"), d)),
                    doc.switches
                        .get(&s.name)
                        .map(|d| (format!("switches.{}", s.name), d)),
                ];
                let mut merged = Described::default();
                for (_, d) in parts.iter().flatten() {
                    merged.overlay(d);
                }
                merged
                    .profile(&s.name)
                    .map_err(|e| format!("{name}: switch {} ({role}): {e}", s.name))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(FabricHash { switches })
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Leaf => "leaf",
        Role::Spine => "spine",
        Role::Superspine => "superspine",
    }
}

/// The file: a default, overridden per tier, overridden per switch.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    version: u32,
    #[serde(default)]
    default: Described,
    #[serde(default)]
    roles: BTreeMap<String, Described>,
    #[serde(default)]
    switches: BTreeMap<String, Described>,
}

/// One level of the description: what it says, the rest left to the level above.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Described {
    function: Option<Function>,
    seed: Option<Seed>,
    seed_use: Option<SeedUse>,
    fields: Option<Vec<Field>>,
    offset: Option<u32>,
    bits: Option<u32>,
}

/// A preset's name or the CRC's parameters.
#[derive(Clone, Deserialize)]
#[serde(untagged)]
enum Function {
    Named(String),
    Custom(CustomCrc),
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CustomCrc {
    width: u32,
    poly: u32,
    #[serde(default)]
    init: u32,
    #[serde(default)]
    reflect: bool,
    #[serde(default)]
    xor_out: u32,
}

/// A number, or `name`: the CRC-32 of the switch's name (Foresight's default).
#[derive(Clone, Deserialize)]
#[serde(untagged)]
enum Seed {
    Number(u32),
    Word(String),
}

impl Described {
    fn overlay(&mut self, d: &Described) {
        macro_rules! take {
            ($($f:ident),*) => { $( if d.$f.is_some() { self.$f = d.$f.clone(); } )* };
        }
        take!(function, seed, seed_use, fields, offset, bits);
    }

    fn profile(&self, switch: &str) -> Result<HashProfile, String> {
        let crc = match &self.function {
            None => return Err("no hash function (set default.function)".into()),
            Some(Function::Named(n)) => Crc::preset(n)?,
            Some(Function::Custom(c)) => Crc::new(c.width, c.poly, c.init, c.reflect, c.xor_out)?,
        };
        let seed = match &self.seed {
            None => 0,
            Some(Seed::Number(n)) => *n,
            Some(Seed::Word(w)) if w == "name" => crate::ecmp::switch_seed(switch),
            Some(Seed::Word(w)) => {
                return Err(format!(
                    "seed '{w}': want a number or 'name' (CRC-32 of the switch's name)"
                ))
            }
        };
        let fields = self
            .fields
            .clone()
            .ok_or("no fields (set default.fields)")?;
        if fields.is_empty() {
            return Err("fields: the list is empty".into());
        }
        let mut seen = HashSet::new();
        if let Some(f) = fields.iter().find(|f| !seen.insert(**f)) {
            return Err(format!("fields: {f:?} is listed twice"));
        }
        let w = crc.width;
        let offset = self.offset.unwrap_or(0);
        if offset >= w {
            return Err(format!(
                "offset {offset}: the hash has {w} bits (want 0 to {})",
                w - 1
            ));
        }
        let bits = self.bits.unwrap_or(w);
        if bits == 0 || bits > w {
            return Err(format!("bits {bits}: want 1 to {w}, the hash's width"));
        }
        let seed_use = self.seed_use.unwrap_or(SeedUse::Init);
        if seed_use != SeedUse::Prepend && seed & !mask(w) != 0 {
            return Err(format!(
                "seed {seed:#x} is wider than the {w}-bit hash it enters"
            ));
        }
        Ok(HashProfile {
            crc,
            seed,
            seed_use,
            fields,
            offset,
            bits,
        })
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::SrcIp => "src_ip",
            Field::DstIp => "dst_ip",
            Field::IpProto => "ip_proto",
            Field::L4SrcPort => "l4_src_port",
            Field::L4DstPort => "l4_dst_port",
            Field::DstQp => "dst_qp",
            Field::IngressPort => "ingress_port",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecmp::viable_next_hops;
    use crate::ecmp::{ecmp_path_avoiding, HashKey};
    use crate::entropy::tests::fabric;
    use crate::rng::Rng;
    use crate::topology::NodeRef;

    /// The catalogue's check values: each preset's CRC of "123456789".
    #[test]
    fn presets_give_the_catalogue_check_values() {
        for (name, check) in [
            ("crc32", 0xCBF4_3926),
            ("crc32c", 0xE306_9283),
            ("crc32-bzip2", 0xFC89_1918),
            ("crc16-ccitt-false", 0x29B1),
            ("crc16-xmodem", 0x31C3),
            ("crc16-arc", 0xBB3D),
        ] {
            let c = Crc::preset(name).unwrap();
            assert_eq!(c.compute(c.init, b"123456789"), check, "{name}");
        }
    }

    /// Foresight's program written as profiles picks the member
    /// [`crate::ecmp`]'s model picks, and walks the same paths.
    #[test]
    fn foresight_profiles_are_the_ecmp_model() {
        let topo = fabric();
        let policy = SeedPolicy::PerSwitch;
        let seeds = policy.seeds(&topo);
        let mut rng = Rng::new(7);
        let last = topo.hosts().len() as u32 - 1;
        for mode in [HashMode::QpAware, HashMode::FiveTuple] {
            let fabric = FabricHash::foresight(&topo, &policy, mode);
            for _ in 0..500 {
                let (src, dst) = (rng.below(u64::from(last)) as u32, last);
                let mut f = Flow::new(&topo, src, dst, rng.below(1 << 24) as u32, 0, 1, 1);
                f.udp_src_port = rng.below(65536) as u16;
                let key = HashKey::of_flow(&f, mode);
                for (s, h) in seeds.iter().enumerate() {
                    assert_eq!(
                        fabric.switches[s].member(&f, 0, 7),
                        h.member(&key, 7),
                        "{mode:?} switch {s}"
                    );
                }
                assert_eq!(
                    fabric.path_avoiding(&topo, &f, |_| false),
                    ecmp_path_avoiding(&topo, src, dst, &key, &seeds, |_| false)
                );
            }
        }
    }

    /// CRC over a fixed-length input is affine: what makes the port search
    /// cheap holds for every preset and seed use.
    #[test]
    fn hashes_are_affine_in_the_input() {
        let mut rng = Rng::new(3);
        for (name, ..) in CRC_PRESETS {
            let crc = Crc::preset(name).unwrap();
            for _ in 0..50 {
                let init = rng.below(1 << crc.width.min(31)) as u32;
                let (a, b): (Vec<u8>, Vec<u8>) = (0..15)
                    .map(|_| (rng.below(256) as u8, rng.below(256) as u8))
                    .unzip();
                let ab: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
                let zero = crc.compute(init, &[0; 15]);
                assert_eq!(
                    crc.compute(init, &ab),
                    crc.compute(init, &a) ^ crc.compute(init, &b) ^ zero,
                    "{name}"
                );
            }
        }
    }

    const FILE: &str = "\
version: 1
default:
  function: crc16-ccitt-false
  seed: 0x1d
  fields: [src_ip, dst_ip, ip_proto, l4_src_port, l4_dst_port, ingress_port]
roles:
  spine: {offset: 4}
switches:
  ss1-1: {function: {width: 32, poly: 0x04c11db7, init: 0xffffffff, reflect: true, xor_out: 0xffffffff}, seed: name, seed_use: prepend, bits: 16}
";

    #[test]
    fn a_file_overrides_by_tier_then_by_switch() {
        let topo = fabric();
        let f = FabricHash::from_yaml(&topo, FILE, "hash.yaml").unwrap();
        let by = |n: &str| &f.switches[topo.switch_by_name(n).unwrap() as usize];
        let leaf = &topo
            .switches()
            .iter()
            .find(|s| s.role == Role::Leaf)
            .unwrap()
            .name;
        let spine = &topo
            .switches()
            .iter()
            .find(|s| s.role == Role::Spine)
            .unwrap()
            .name;
        assert_eq!(
            (by(leaf).crc.width, by(leaf).offset, by(leaf).seed),
            (16, 0, 0x1d)
        );
        assert_eq!((by(spine).offset, by(spine).seed_use), (4, SeedUse::Init));
        let ss = by("ss1-1");
        assert_eq!(
            (ss.crc.width, ss.bits, ss.seed_use),
            (32, 16, SeedUse::Prepend)
        );
        assert_eq!(ss.seed, crate::ecmp::switch_seed("ss1-1"));
        assert_eq!(ss.fields, by(leaf).fields, "fields from the default");
    }

    #[test]
    fn a_bad_file_says_what_is_wrong() {
        let topo = fabric();
        for (bad, why) in [
            (FILE.replace("version: 1", "version: 2"), "version 2"),
            (
                FILE.replace("crc16-ccitt-false", "crc99"),
                "unknown hash function 'crc99'",
            ),
            (
                FILE.replace("ingress_port]", "ingress_port, src_ip]"),
                "SrcIp is listed twice",
            ),
            (
                FILE.replace("offset: 4", "offset: 16"),
                "offset 16: the hash has 16 bits",
            ),
            (
                FILE.replace("ss1-1", "nowhere"),
                "'nowhere' is not a switch",
            ),
            (FILE.replace("spine:", "core:"), "'core' is not a tier"),
            (
                FILE.replace("seed: 0x1d", "seed: 0x12345"),
                "wider than the 16-bit hash",
            ),
            (FILE.replace("bits: 16", "bits: 33"), "bits 33"),
            (
                FILE.replace("l4_dst_port", "l5_port"),
                "unknown variant `l5_port`",
            ),
            (
                FILE.replace("  seed: 0x1d\n", "  sed: 1\n"),
                "unknown field `sed`",
            ),
        ] {
            let e = FabricHash::from_yaml(&topo, &bad, "hash.yaml").unwrap_err();
            assert!(e.contains(why) && e.starts_with("hash.yaml"), "{why}: {e}");
        }
    }

    /// The ingress port makes a hop's hash depend on where the packet came
    /// in: the walk feeds each switch its own ingress port.
    #[test]
    fn the_ingress_port_reaches_each_hop() {
        let topo = fabric();
        let f = FabricHash::from_yaml(&topo, FILE, "hash.yaml").unwrap();
        let last = topo.hosts().len() as u32 - 1;
        let flow = Flow::new(&topo, 0, last, 5, 0, 1, 1);
        let p = f.path_avoiding(&topo, &flow, |_| false).unwrap();
        // Recompute each hop by hand from the edge that led into it.
        let mut in_port = topo.edge(topo.host_up_edge(0)).to_port;
        let dst_leaf = topo.hosts()[last as usize].leaf;
        for &e in p.edges() {
            let link = topo.edge(e);
            let NodeRef::Switch(s) = link.from else {
                panic!()
            };
            if s != dst_leaf {
                let group: Vec<EdgeId> = viable_next_hops(&topo, s, dst_leaf, |_| false).collect();
                let m = f.switches[s as usize].member(&flow, in_port, group.len());
                assert_eq!(group[m], e);
            }
            in_port = link.to_port;
        }
    }

    /// Foresight's own program written as a file is the model the
    /// controller sets its switches to.
    #[test]
    fn foresight_as_a_file_is_the_model() {
        let topo = fabric();
        let file = "version: 1\n\
                    default: {function: crc32, seed: name, seed_use: prepend, \
                    fields: [src_ip, dst_ip, ip_proto, l4_src_port, l4_dst_port]}\n\
                    roles: {spine: {offset: 10}, superspine: {offset: 20}}\n";
        assert_eq!(
            FabricHash::from_yaml(&topo, file, "foresight.yaml").unwrap(),
            FabricHash::foresight(&topo, &SeedPolicy::PerSwitch, HashMode::FiveTuple)
        );
    }

    /// The example in docs/entropy-steering.md loads against the lab's fabric.
    #[test]
    fn the_documented_example_loads() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let doc = std::fs::read_to_string(format!("{dir}/docs/entropy-steering.md")).unwrap();
        let start = doc.find("```yaml\nversion: 1").expect("the example") + 8;
        let example = &doc[start..start + doc[start..].find("```").unwrap()];
        let topo = crate::topology::yaml::load_file(std::path::Path::new(&format!(
            "{dir}/bmv2-lab/topologies/leaf-spine-lab.yaml"
        )))
        .unwrap();
        let f = FabricHash::from_yaml(&topo, example, "docs example").unwrap();
        let spine2 = &f.switches[topo.switch_by_name("spine2").unwrap() as usize];
        assert_eq!((spine2.crc.width, spine2.bits, spine2.offset), (32, 16, 16));
    }
}
