//! One name set, two architectures: everything the installer writes exists
//! in the committed P4Info of the v1model program and in that of the TNA
//! program, with compatible widths (no compiler needed).
//!
//! Checked for every object the installer produces (see `common`): each
//! table with its match fields (names, kinds, widths), the actions it uses
//! and their parameters, its action profile and direct counters; each
//! action profile; the clone (Tofino: mirror) session id. Widths must be
//! equal except where [`ALLOWED`] names a difference Tofino forces and the
//! target module handles. Every port-wide field must be one the target
//! module translates to device ports. Finally every object must resolve
//! against the TNA P4Info as a Tofino switch receives it.
//!
//! The exceptions are `names::V1MODEL_ONLY`, what the TNA program does not
//! have yet (the hash offset, flowlets, spraying): objects that use them
//! are left out, and the TNA P4Info must still lack every one of them.
//!
//! The TNA P4Info is `p4src/build/tna/foresight.p4info.binpb`; while it
//! has not been compiled the test says SKIPPED (the TNA freshness check
//! fails instead once the Tofino compiler is present). `FORESIGHT_TNA_P4INFO=<file>`
//! checks another file in its place (e.g. the v1model P4Info, to try the
//! test itself).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use installer::device::{Devices, Target, PORT_BITS, PORT_MATCHES, PORT_PARAMS};
use installer::names;
use installer::{Intent, Object};
use p4rt::p4info::{match_type, name_of};
use p4rt::proto::p4::config::v1 as cfg;
use p4rt::P4Info;

/// Widths Tofino may change: (action or table, parameter or match field,
/// width allowed in the TNA P4Info, why).
const ALLOWED: [(&str, &str, u32, &str); 1] = [(
    names::SET_PRIORITY,
    "priority",
    Target::Tofino.queue_id_bits(),
    "the TNA program may take the queue as QueueId_t (5 bits); classes 0-7 fit either",
)];

/// Mirror session ids on Tofino are `MirrorId_t`, 10 bits.
const TNA_MIRROR_ID_BITS: u32 = 10;

fn repo(path: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(path)
}

/// Load `binpb`, and check the text form next to it says the same.
fn load_both_forms(binpb: &PathBuf) -> P4Info {
    let info = P4Info::load(binpb).unwrap_or_else(|e| panic!("{}: {e}", binpb.display()));
    let txtpb = binpb.with_extension("txtpb");
    if txtpb.exists() {
        let text = P4Info::load(&txtpb).unwrap_or_else(|e| panic!("{}: {e}", txtpb.display()));
        assert!(
            text.raw() == info.raw(),
            "{} and {} differ: recompile and commit both",
            binpb.display(),
            txtpb.display()
        );
    }
    info
}

fn v1model() -> P4Info {
    let path = repo(Target::Bmv2.p4info_file());
    assert!(
        path.with_extension("txtpb").exists(),
        "{} is committed with its text form",
        path.display()
    );
    load_both_forms(&path)
}

/// The TNA P4Info, or `None` (with a SKIPPED line) while it has not been
/// compiled: it needs the Tofino-enabled p4c, which `p4src/compile.sh
/// --check --tna` requires the committed file from as soon as it is present.
fn tna() -> Option<P4Info> {
    if let Ok(path) = std::env::var("FORESIGHT_TNA_P4INFO") {
        return Some(load_both_forms(&PathBuf::from(path)));
    }
    let path = repo(Target::Tofino.p4info_file());
    if !path.exists() {
        testkit::skip::skipped(
            "tna_names",
            format!(
                "the TNA P4Info {} is not compiled yet (p4src/compile.sh --tna \
                 with the Tofino p4c); FORESIGHT_TNA_P4INFO=<file> checks another P4Info",
                Target::Tofino.p4info_file()
            ),
        );
        return None;
    }
    Some(load_both_forms(&path))
}

/// What the installer writes, by name.
#[derive(Default)]
struct Used {
    /// Table -> actions written to it.
    tables: BTreeMap<String, BTreeSet<String>>,
    /// Action profile -> actions of its members.
    profiles: BTreeMap<String, BTreeSet<String>>,
    clone_sessions: BTreeSet<u32>,
    /// (table, match field) and (action, parameter) given a value.
    written: BTreeSet<(String, String)>,
}

fn used(intents: &BTreeMap<String, Intent>) -> Used {
    let mut used = Used::default();
    for table in names::OWNED_TABLES {
        used.tables.entry(table.to_string()).or_default();
    }
    for object in intents.values().flat_map(|i| &i.objects) {
        match object {
            Object::Entry(e) | Object::Default(e) => {
                let actions = used.tables.entry(e.table.clone()).or_default();
                actions.extend(e.action.clone());
                for field in e.matches.keys() {
                    used.written.insert((e.table.clone(), field.clone()));
                }
                for (action, param) in e
                    .action
                    .iter()
                    .flat_map(|a| e.params.keys().map(move |p| (a, p)))
                {
                    used.written.insert((action.clone(), param.clone()));
                }
            }
            Object::Member {
                profile,
                action,
                params,
                ..
            } => {
                let actions = used.profiles.entry(profile.clone()).or_default();
                actions.insert(action.clone());
                for (param, _) in params {
                    used.written.insert((action.clone(), param.clone()));
                }
            }
            Object::Group { profile, .. } => {
                used.profiles.entry(profile.clone()).or_default();
            }
            Object::CloneSession { id, .. } => {
                used.clone_sessions.insert(*id);
            }
        }
    }
    used
}

/// Differences between the two P4Infos, as sentences.
struct Check<'a> {
    v1: &'a P4Info,
    tna: &'a P4Info,
    problems: Vec<String>,
    /// (object, field) -> (v1model width, TNA width) of every field written.
    widths: BTreeMap<(String, String), (u32, u32)>,
}

impl Check<'_> {
    fn problem(&mut self, p: String) {
        self.problems.push(p);
    }

    /// Compare one field's width; `ALLOWED` lists the only exceptions.
    fn width(&mut self, object: &str, field: &str, v1: i32, tna: i32) {
        let (v1, tna) = (v1 as u32, tna as u32);
        self.widths
            .insert((object.to_string(), field.to_string()), (v1, tna));
        if v1 == tna {
            return;
        }
        let allowed = ALLOWED
            .iter()
            .any(|&(o, f, w, _)| o == object && f == field && w == tna);
        if !allowed {
            self.problem(format!(
                "{object} `{field}`: {v1} bits in v1model, {tna} in TNA"
            ));
        }
    }

    fn table(&mut self, name: &str, actions: &BTreeSet<String>) {
        let (Ok(v1), Ok(tna)) = (self.v1.table(name), self.tna.table(name)) else {
            if self.v1.table(name).is_err() {
                self.problem(format!("table {name} is not in the v1model P4Info"));
            } else {
                self.problem(format!("table {name} is not in the TNA P4Info"));
            }
            return;
        };
        if name_of(&tna.preamble) != name {
            self.problem(format!(
                "table {name} is only an alias in the TNA P4Info (of {})",
                name_of(&tna.preamble)
            ));
        }
        let fields = |t: &cfg::Table| -> BTreeMap<String, (i32, i32)> {
            t.match_fields
                .iter()
                .map(|f| (f.name.clone(), (match_type(f) as i32, f.bitwidth)))
                .collect()
        };
        let (v1_fields, tna_fields) = (fields(v1), fields(tna));
        for (field, (kind, bits)) in &v1_fields {
            match tna_fields.get(field) {
                None => self.problem(format!(
                    "table {name}: match field `{field}` missing in TNA"
                )),
                Some((tna_kind, tna_bits)) => {
                    if kind != tna_kind {
                        self.problem(format!(
                            "table {name}: match field `{field}` is {:?} in v1model, {:?} in TNA",
                            cfg::match_field::MatchType::try_from(*kind),
                            cfg::match_field::MatchType::try_from(*tna_kind)
                        ));
                    }
                    self.width(name, field, *bits, *tna_bits);
                }
            }
        }
        for field in tna_fields.keys().filter(|f| !v1_fields.contains_key(*f)) {
            self.problem(format!(
                "table {name}: TNA has match field `{field}` the installer never sets"
            ));
        }
        let tna_actions: BTreeSet<String> = tna
            .action_refs
            .iter()
            .filter_map(|r| self.tna.action_by_id(r.id).ok())
            .map(|a| name_of(&a.preamble).to_string())
            .collect();
        for action in actions {
            if !tna_actions.contains(action) {
                self.problem(format!(
                    "table {name}: action {action} is not one of its TNA actions"
                ));
            }
            self.action(action);
        }
        let profile = |info: &P4Info, t: &cfg::Table| {
            (t.implementation_id != 0).then(|| {
                info.action_profile_by_id(t.implementation_id)
                    .map(|p| name_of(&p.preamble).to_string())
                    .unwrap_or_default()
            })
        };
        let (v1_profile, tna_profile) = (profile(self.v1, v1), profile(self.tna, tna));
        if v1_profile != tna_profile {
            self.problem(format!(
                "table {name}: implemented by {v1_profile:?} in v1model, {tna_profile:?} in TNA"
            ));
        }
        let counters = |info: &P4Info, t: &cfg::Table| -> BTreeMap<String, i32> {
            t.direct_resource_ids
                .iter()
                .filter_map(|id| info.direct_counter_by_id(*id).ok())
                .map(|c| {
                    let unit = c.spec.as_ref().map_or(0, |s| s.unit);
                    (name_of(&c.preamble).to_string(), unit)
                })
                .collect()
        };
        let (v1_counters, tna_counters) = (counters(self.v1, v1), counters(self.tna, tna));
        for (counter, unit) in &v1_counters {
            match tna_counters.get(counter) {
                None => self.problem(format!(
                    "table {name}: direct counter {counter} missing in TNA"
                )),
                Some(u) if u != unit => self.problem(format!(
                    "table {name}: direct counter {counter} counts unit {unit} in v1model, {u} in TNA"
                )),
                Some(_) => {}
            }
        }
    }

    fn action(&mut self, name: &str) {
        let (Ok(v1), Ok(tna)) = (self.v1.action(name), self.tna.action(name)) else {
            let side = if self.v1.action(name).is_err() {
                "v1model"
            } else {
                "TNA"
            };
            self.problem(format!("action {name} is not in the {side} P4Info"));
            return;
        };
        let params = |a: &cfg::Action| -> BTreeMap<String, i32> {
            a.params
                .iter()
                .map(|p| (p.name.clone(), p.bitwidth))
                .collect()
        };
        let (v1_params, tna_params) = (params(v1), params(tna));
        for (param, bits) in &v1_params {
            match tna_params.get(param) {
                None => self.problem(format!("action {name}: parameter `{param}` missing in TNA")),
                Some(tna_bits) => self.width(name, param, *bits, *tna_bits),
            }
        }
        for param in tna_params.keys().filter(|p| !v1_params.contains_key(*p)) {
            self.problem(format!(
                "action {name}: TNA has parameter `{param}` the installer never sets"
            ));
        }
    }

    fn profile(&mut self, name: &str, actions: &BTreeSet<String>, tables: &[&str]) {
        let (Ok(v1), Ok(tna)) = (self.v1.action_profile(name), self.tna.action_profile(name))
        else {
            let side = if self.v1.action_profile(name).is_err() {
                "v1model"
            } else {
                "TNA"
            };
            self.problem(format!("action profile {name} is not in the {side} P4Info"));
            return;
        };
        if v1.with_selector != tna.with_selector {
            self.problem(format!(
                "action profile {name}: selector in v1model {}, in TNA {}",
                v1.with_selector, tna.with_selector
            ));
        }
        for table in tables {
            let id = self
                .tna
                .table(table)
                .ok()
                .and_then(|t| t.preamble.as_ref())
                .map(|p| p.id);
            if !id.is_some_and(|id| tna.table_ids.contains(&id)) {
                self.problem(format!(
                    "action profile {name} does not implement {table} in TNA"
                ));
            }
        }
        for action in actions {
            self.action(action);
        }
    }
}

/// Does the object use a name only the v1model program has?
fn v1model_only(object: &Object) -> bool {
    let only = |name: &str| names::V1MODEL_ONLY.contains(&name);
    match object {
        Object::Entry(e) | Object::Default(e) => {
            only(&e.table) || e.action.as_deref().is_some_and(only)
        }
        Object::Member { action, .. } => only(action),
        Object::Group { .. } | Object::CloneSession { .. } => false,
    }
}

#[test]
fn the_tna_program_lacks_only_what_is_listed_as_v1model_only() {
    let Some(tna) = tna() else { return };
    let v1 = v1model();
    for name in names::V1MODEL_ONLY {
        assert!(
            v1.table(name).is_ok() || v1.action(name).is_ok(),
            "{name} is not in the v1model P4Info"
        );
        assert!(
            tna.table(name).is_err() && tna.action(name).is_err(),
            "{name} is in the TNA P4Info now: take it off names::V1MODEL_ONLY"
        );
    }
    let every = common::every_object(&common::small_topology());
    assert!(
        every.values().flat_map(|i| &i.objects).any(v1model_only),
        "every_object writes the v1model-only names (they are checked against v1model)"
    );
}

#[test]
fn the_tna_p4info_has_every_name_the_installer_writes() {
    let Some(tna) = tna() else { return };
    let v1 = v1model();
    let mut intents = common::every_object(&common::small_topology());
    for intent in intents.values_mut() {
        intent.objects.retain(|o| !v1model_only(o));
    }
    let used = used(&intents);
    let mut check = Check {
        v1: &v1,
        tna: &tna,
        problems: Vec::new(),
        widths: BTreeMap::new(),
    };
    for (table, actions) in &used.tables {
        check.table(table, actions);
    }
    // The tables each profile implements, as the v1model program has them.
    for (profile, actions) in &used.profiles {
        let tables: Vec<&str> = used
            .tables
            .keys()
            .filter(|t| {
                v1.table(t).ok().is_some_and(|t| {
                    v1.action_profile_by_id(t.implementation_id)
                        .is_ok_and(|p| name_of(&p.preamble) == profile)
                })
            })
            .map(String::as_str)
            .collect();
        check.profile(profile, actions, &tables);
    }
    for id in &used.clone_sessions {
        if *id >= 1 << TNA_MIRROR_ID_BITS {
            check.problem(format!(
                "clone session {id} is not a Tofino mirror session id ({TNA_MIRROR_ID_BITS} bits)"
            ));
        }
    }

    // Ports: every port-wide field is one the target module translates,
    // and those are port-wide on both sides.
    let translated: BTreeSet<(String, String)> = PORT_PARAMS
        .iter()
        .chain(PORT_MATCHES.iter())
        .map(|(o, f)| (o.to_string(), f.to_string()))
        .collect();
    let mut problems = std::mem::take(&mut check.problems);
    for ((object, field), (v1_bits, tna_bits)) in &check.widths {
        let is_port = *v1_bits == PORT_BITS || *tna_bits == PORT_BITS;
        let listed = translated.contains(&(object.clone(), field.clone()));
        if is_port && !listed {
            problems.push(format!(
                "{object} `{field}` is {PORT_BITS} bits wide but not a port the target module \
                 translates (installer::device::PORT_PARAMS / PORT_MATCHES)"
            ));
        }
        if listed && (*v1_bits, *tna_bits) != (PORT_BITS, PORT_BITS) {
            problems.push(format!(
                "{object} `{field}` is translated as a port but {v1_bits} bits (v1model) / \
                 {tna_bits} (TNA) wide, not {PORT_BITS}"
            ));
        }
    }
    for (object, field) in &translated {
        if !used.written.contains(&(object.clone(), field.clone())) {
            problems.push(format!(
                "{object} `{field}` is translated as a port but the installer never writes it"
            ));
        }
    }

    // And the values themselves: every object as a Tofino switch gets it.
    let devices = Devices::new(Target::Tofino, BTreeMap::new());
    for (switch, intent) in &intents {
        if let Err(e) = intent.resolve(switch, &tna, &devices) {
            problems.push(format!("TNA P4Info: {e}"));
        }
    }
    assert!(
        problems.is_empty(),
        "the TNA P4Info does not take what the installer writes:\n  {}",
        problems.join("\n  ")
    );
    assert!(check.widths.len() > 40, "the check saw every field");
}
