//! The SDK's `#[repr(C)]` types match `schemas/memscope_plugin.h`: a C program compiled against
//! the header prints `sizeof`/`offsetof` of every field and every constant, and each value must
//! equal the Rust side's.

use memscope_adapter_sdk::sys;
use std::mem::{offset_of, size_of};
use std::path::Path;
use std::process::Command;

const PROBE_C: &str = r#"
#include <stdio.h>
#include <stddef.h>
#include "memscope_plugin.h"
#define S(t) printf(#t " %zu\n", sizeof(t))
#define O(t, f) printf(#t "." #f " %zu\n", offsetof(t, f))
#define C(c) printf(#c " %llu\n", (unsigned long long)(c))
int main(void) {
    S(memscope_plugin_event); O(memscope_plugin_event, struct_size); O(memscope_plugin_event, kind);
    O(memscope_plugin_event, device); O(memscope_plugin_event, reserved); O(memscope_plugin_event, ptr);
    O(memscope_plugin_event, size); O(memscope_plugin_event, event_type); O(memscope_plugin_event, name);
    O(memscope_plugin_event, attrs); O(memscope_plugin_event, flags); O(memscope_plugin_event, reserved2);
    S(memscope_host); O(memscope_host, size); O(memscope_host, abi_major); O(memscope_host, abi_minor);
    O(memscope_host, emit); O(memscope_host, now_ns); O(memscope_host, enabled); O(memscope_host, log);
    O(memscope_host, register_type); O(memscope_host, emit_compact);
    S(memscope_event_type); O(memscope_event_type, struct_size); O(memscope_event_type, device);
    O(memscope_event_type, flags); O(memscope_event_type, reserved); O(memscope_event_type, event_type);
    O(memscope_event_type, name); O(memscope_event_type, attrs); O(memscope_event_type, value_names);
    C(MEMSCOPE_TYPE_ACCOUNT); C(MEMSCOPE_MAX_VALUES);
    S(memscope_plugin_header); O(memscope_plugin_header, magic); O(memscope_plugin_header, abi_major);
    O(memscope_plugin_header, abi_minor); O(memscope_plugin_header, size); O(memscope_plugin_header, reserved);
    O(memscope_plugin_header, name); O(memscope_plugin_header, init);
    C(MEMSCOPE_PLUGIN_MAGIC); C(MEMSCOPE_PLUGIN_ABI_MAJOR); C(MEMSCOPE_PLUGIN_ABI_MINOR);
    C(MEMSCOPE_KIND_MALLOC); C(MEMSCOPE_KIND_FREE); C(MEMSCOPE_KIND_MARK); C(MEMSCOPE_KIND_OP_START);
    C(MEMSCOPE_KIND_OP_END); C(MEMSCOPE_KIND_KERNEL_START); C(MEMSCOPE_KIND_KERNEL_END);
    C(MEMSCOPE_KIND_ACCESS); C(MEMSCOPE_KIND_DIAGNOSTIC); C(MEMSCOPE_DEVICE_NONE); C(MEMSCOPE_DEVICE_CPU);
    C(MEMSCOPE_EVENT_C_STACK); C(MEMSCOPE_LOG_ERROR); C(MEMSCOPE_LOG_WARN); C(MEMSCOPE_LOG_INFO);
    C(MEMSCOPE_LOG_DEBUG);
    return 0;
}
"#;

fn c_values() -> std::collections::HashMap<String, u64> {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("layout.c");
    std::fs::write(&src, PROBE_C).unwrap();
    let exe = dir.path().join("layout");
    let schemas = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    let o = Command::new("cc")
        .arg("-I")
        .arg(&schemas)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("the layout test needs a C compiler (`cc`): install gcc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = Command::new(&exe).output().unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_owned(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn sdk_types_and_constants_match_the_c_header() {
    let c = c_values();
    let want: Vec<(&str, u64)> = vec![
        (
            "memscope_plugin_event",
            size_of::<sys::PluginEvent>() as u64,
        ),
        (
            "memscope_plugin_event.struct_size",
            offset_of!(sys::PluginEvent, struct_size) as u64,
        ),
        (
            "memscope_plugin_event.kind",
            offset_of!(sys::PluginEvent, kind) as u64,
        ),
        (
            "memscope_plugin_event.device",
            offset_of!(sys::PluginEvent, device) as u64,
        ),
        (
            "memscope_plugin_event.reserved",
            offset_of!(sys::PluginEvent, reserved) as u64,
        ),
        (
            "memscope_plugin_event.ptr",
            offset_of!(sys::PluginEvent, ptr) as u64,
        ),
        (
            "memscope_plugin_event.size",
            offset_of!(sys::PluginEvent, size) as u64,
        ),
        (
            "memscope_plugin_event.event_type",
            offset_of!(sys::PluginEvent, event_type) as u64,
        ),
        (
            "memscope_plugin_event.name",
            offset_of!(sys::PluginEvent, name) as u64,
        ),
        (
            "memscope_plugin_event.attrs",
            offset_of!(sys::PluginEvent, attrs) as u64,
        ),
        (
            "memscope_plugin_event.flags",
            offset_of!(sys::PluginEvent, flags) as u64,
        ),
        (
            "memscope_plugin_event.reserved2",
            offset_of!(sys::PluginEvent, reserved2) as u64,
        ),
        ("memscope_host", size_of::<sys::Host>() as u64),
        ("memscope_host.size", offset_of!(sys::Host, size) as u64),
        (
            "memscope_host.abi_major",
            offset_of!(sys::Host, abi_major) as u64,
        ),
        (
            "memscope_host.abi_minor",
            offset_of!(sys::Host, abi_minor) as u64,
        ),
        ("memscope_host.emit", offset_of!(sys::Host, emit) as u64),
        ("memscope_host.now_ns", offset_of!(sys::Host, now_ns) as u64),
        (
            "memscope_host.enabled",
            offset_of!(sys::Host, enabled) as u64,
        ),
        ("memscope_host.log", offset_of!(sys::Host, log) as u64),
        (
            "memscope_host.register_type",
            offset_of!(sys::Host, register_type) as u64,
        ),
        (
            "memscope_host.emit_compact",
            offset_of!(sys::Host, emit_compact) as u64,
        ),
        ("memscope_event_type", size_of::<sys::EventType>() as u64),
        (
            "memscope_event_type.struct_size",
            offset_of!(sys::EventType, struct_size) as u64,
        ),
        (
            "memscope_event_type.device",
            offset_of!(sys::EventType, device) as u64,
        ),
        (
            "memscope_event_type.flags",
            offset_of!(sys::EventType, flags) as u64,
        ),
        (
            "memscope_event_type.reserved",
            offset_of!(sys::EventType, reserved) as u64,
        ),
        (
            "memscope_event_type.event_type",
            offset_of!(sys::EventType, event_type) as u64,
        ),
        (
            "memscope_event_type.name",
            offset_of!(sys::EventType, name) as u64,
        ),
        (
            "memscope_event_type.attrs",
            offset_of!(sys::EventType, attrs) as u64,
        ),
        (
            "memscope_event_type.value_names",
            offset_of!(sys::EventType, value_names) as u64,
        ),
        ("MEMSCOPE_TYPE_ACCOUNT", sys::TYPE_ACCOUNT as u64),
        ("MEMSCOPE_MAX_VALUES", sys::MAX_VALUES as u64),
        (
            "memscope_plugin_header",
            size_of::<sys::PluginHeader>() as u64,
        ),
        (
            "memscope_plugin_header.magic",
            offset_of!(sys::PluginHeader, magic) as u64,
        ),
        (
            "memscope_plugin_header.abi_major",
            offset_of!(sys::PluginHeader, abi_major) as u64,
        ),
        (
            "memscope_plugin_header.abi_minor",
            offset_of!(sys::PluginHeader, abi_minor) as u64,
        ),
        (
            "memscope_plugin_header.size",
            offset_of!(sys::PluginHeader, size) as u64,
        ),
        (
            "memscope_plugin_header.reserved",
            offset_of!(sys::PluginHeader, reserved) as u64,
        ),
        (
            "memscope_plugin_header.name",
            offset_of!(sys::PluginHeader, name) as u64,
        ),
        (
            "memscope_plugin_header.init",
            offset_of!(sys::PluginHeader, init) as u64,
        ),
        ("MEMSCOPE_PLUGIN_MAGIC", sys::PLUGIN_MAGIC as u64),
        ("MEMSCOPE_PLUGIN_ABI_MAJOR", sys::ABI_MAJOR as u64),
        ("MEMSCOPE_PLUGIN_ABI_MINOR", sys::ABI_MINOR as u64),
        ("MEMSCOPE_KIND_MALLOC", sys::KIND_MALLOC as u64),
        ("MEMSCOPE_KIND_FREE", sys::KIND_FREE as u64),
        ("MEMSCOPE_KIND_MARK", sys::KIND_MARK as u64),
        ("MEMSCOPE_KIND_OP_START", sys::KIND_OP_START as u64),
        ("MEMSCOPE_KIND_OP_END", sys::KIND_OP_END as u64),
        ("MEMSCOPE_KIND_KERNEL_START", sys::KIND_KERNEL_START as u64),
        ("MEMSCOPE_KIND_KERNEL_END", sys::KIND_KERNEL_END as u64),
        ("MEMSCOPE_KIND_ACCESS", sys::KIND_ACCESS as u64),
        ("MEMSCOPE_KIND_DIAGNOSTIC", sys::KIND_DIAGNOSTIC as u64),
        ("MEMSCOPE_DEVICE_NONE", sys::DEVICE_NONE as u64),
        ("MEMSCOPE_DEVICE_CPU", sys::DEVICE_CPU as u64),
        ("MEMSCOPE_EVENT_C_STACK", sys::EVENT_C_STACK as u64),
        ("MEMSCOPE_LOG_ERROR", sys::LOG_ERROR as u64),
        ("MEMSCOPE_LOG_WARN", sys::LOG_WARN as u64),
        ("MEMSCOPE_LOG_INFO", sys::LOG_INFO as u64),
        ("MEMSCOPE_LOG_DEBUG", sys::LOG_DEBUG as u64),
    ];
    for (k, v) in &want {
        assert_eq!(c.get(*k), Some(v), "{k}: C header vs SDK");
    }
    assert_eq!(c.len(), want.len(), "every printed value is compared");
}
