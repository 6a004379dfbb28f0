//! Interop with p4runtime-shell on real BMv2: what this client writes,
//! p4runtime-shell reads back with the same names and values; what
//! p4runtime-shell writes, this client reads back the same.
//!
//! Skipped (with a line saying so) without BMv2 or without the Python env.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use p4::set_forwarding_pipeline_config_request::Action as PipelineAction;
use p4rt::proto::p4::v1 as p4;
use p4rt::{bytestring, entity, EntrySpec, P4Info, Switch, SwitchOptions};

/// An entry with every value as a decimal integer, as the script prints it.
type Normal = (
    String,
    BTreeMap<String, String>,
    String,
    BTreeMap<String, String>,
    i32,
);

fn normalize(info: &P4Info, entry: &p4::TableEntry) -> Normal {
    use p4::field_match::FieldMatchType as M;
    let int = |b: &[u8]| bytestring::decode_u128(b).unwrap().to_string();
    let table = info.table_by_id(entry.table_id).unwrap();
    let mut matches = BTreeMap::new();
    for m in &entry.r#match {
        let field = table
            .match_fields
            .iter()
            .find(|f| f.id == m.field_id)
            .unwrap();
        let text = match m.field_match_type.as_ref().unwrap() {
            M::Exact(e) => int(&e.value),
            M::Optional(o) => int(&o.value),
            M::Lpm(l) => format!("{}/{}", int(&l.value), l.prefix_len),
            M::Ternary(t) => format!("{}&&&{}", int(&t.value), int(&t.mask)),
            M::Range(r) => format!("{}..{}", int(&r.low), int(&r.high)),
            other => panic!("unsupported {other:?}"),
        };
        matches.insert(field.name.clone(), text);
    }
    let Some(p4::table_action::Type::Action(call)) =
        entry.action.as_ref().and_then(|a| a.r#type.clone())
    else {
        panic!("direct action expected")
    };
    let action = info.action_by_id(call.action_id).unwrap();
    let params = call
        .params
        .iter()
        .map(|p| {
            let name = action
                .params
                .iter()
                .find(|d| d.id == p.param_id)
                .unwrap()
                .name
                .clone();
            (name, int(&p.value))
        })
        .collect();
    let table_name = table.preamble.as_ref().unwrap().name.clone();
    let action_name = action.preamble.as_ref().unwrap().name.clone();
    (table_name, matches, action_name, params, entry.priority)
}

fn from_script(info: &P4Info, value: &serde_json::Value) -> Normal {
    let map = |v: &serde_json::Value| -> BTreeMap<String, String> {
        v.as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
            .collect()
    };
    // p4runtime-shell names tables/actions by the names the user gave;
    // resolve to full names so both sides compare alike.
    let table = info
        .table(value["table"].as_str().unwrap())
        .unwrap()
        .preamble
        .as_ref()
        .unwrap()
        .name
        .clone();
    let action = info
        .action(value["action"].as_str().unwrap())
        .unwrap()
        .preamble
        .as_ref()
        .unwrap()
        .name
        .clone();
    (
        table,
        map(&value["match"]),
        action,
        map(&value["params"]),
        value["priority"].as_i64().unwrap_or(0) as i32,
    )
}

fn shell(python: &Path, addr: &str, args: &[&str], stdin: Option<String>) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/interop/shell_interop.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg("--addr")
        .arg(addr)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.unwrap_or_default().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "p4runtime-shell failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn specs() -> Vec<EntrySpec> {
    let yaml = r#"
- {table: exact_table, match: {dst_addr: "00:00:00:00:00:2a"}, action: set_port, params: {port: "7"}}
- {table: exact_table, match: {dst_addr: "0x0000aabbccdd"}, action: drop}
- {table: acl, match: {src_addr: "00:00:00:00:00:07&&&ff:ff:ff:ff:ff:ff", ether_type: "2048..2303", ingress_port: "3"}, action: acl_permit, params: {tag: "99"}, priority: 10}
- {table: acl, match: {src_addr: "0x000000000100&&&0x000000000f00"}, action: acl_deny, priority: 20}
"#;
    serde_yaml::from_str(yaml).unwrap()
}

async fn read_all(switch: &Switch, info: &P4Info) -> Vec<p4::TableEntry> {
    let wanted = vec![
        entity::all_table_entries(info, "exact_table").unwrap(),
        entity::all_table_entries(info, "acl").unwrap(),
    ];
    let mut got: Vec<p4::TableEntry> = switch
        .read(wanted)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.entity {
            Some(p4::entity::Entity::TableEntry(t)) => Some(t),
            _ => None,
        })
        .collect();
    got.sort_by_key(|t| format!("{t:?}"));
    got
}

#[tokio::test]
async fn entries_cross_between_this_client_and_p4runtime_shell() {
    let Some(tools) = testkit::skip::bmv2("p4runtime-shell interop") else {
        return;
    };
    let python = std::env::var("FORESIGHT_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("python3"));
    let has_shell = Command::new(&python)
        .args(["-c", "import p4runtime_sh"])
        .status()
        .is_ok_and(|s| s.success());
    if !has_shell {
        return testkit::skip::skipped(
            "p4runtime-shell interop",
            format!(
                "{} cannot import p4runtime_sh (run ci/setup.sh)",
                python.display()
            ),
        );
    }
    let build = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
    let info = P4Info::load(build.join("p4rt_features.p4info.binpb")).unwrap();
    let json = std::fs::read(build.join("p4rt_features.json")).unwrap();
    let bmv2 = bmv2::start_switches(&tools, 1).unwrap();
    let addr = bmv2[0].grpc_addr();
    let connect = || async {
        let s = Switch::connect_with_retry(SwitchOptions::new(&addr, 0), Duration::from_secs(10))
            .await
            .unwrap();
        s.wait_primary(Duration::from_secs(5)).await.unwrap();
        s
    };
    // This client writes; p4runtime-shell reads.
    let switch = connect().await;
    switch
        .set_pipeline(&info, json, PipelineAction::VerifyAndCommit)
        .await
        .unwrap();
    let ours: Vec<p4::TableEntry> = specs().iter().map(|s| s.to_entry(&info).unwrap()).collect();
    switch
        .apply(
            p4::update::Type::Insert,
            ours.iter().cloned().map(Into::into),
            10,
        )
        .await
        .unwrap();
    switch.shutdown().await;
    let printed: Vec<serde_json::Value> = serde_json::from_str(&shell(
        &python,
        &addr,
        &["read", "exact_table", "acl"],
        None,
    ))
    .unwrap();
    let mut theirs: Vec<Normal> = printed.iter().map(|v| from_script(&info, v)).collect();
    let mut expected: Vec<Normal> = ours.iter().map(|e| normalize(&info, e)).collect();
    theirs.sort();
    expected.sort();
    assert_eq!(theirs, expected, "p4runtime-shell reads what we wrote");

    // Clear, then p4runtime-shell writes the same entries; this client reads.
    let switch = connect().await;
    switch
        .apply(
            p4::update::Type::Delete,
            ours.iter().cloned().map(Into::into),
            10,
        )
        .await
        .unwrap();
    switch.shutdown().await;
    let as_json = serde_json::to_string(&specs()).unwrap();
    shell(&python, &addr, &["write"], Some(as_json));
    let switch = connect().await;
    let read = read_all(&switch, &info).await;
    let mut ours_sorted = ours.clone();
    ours_sorted.sort_by_key(|t| format!("{t:?}"));
    assert_eq!(
        read, ours_sorted,
        "we read what p4runtime-shell wrote, byte for byte"
    );
    switch.shutdown().await;
}
