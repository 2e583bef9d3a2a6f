//! The one namespace-aware sysctl wrapper: a write inside a namespace lands there and only there,
//! the key is checked before any namespace is entered, and a missing namespace is named.

use tcptune_kernel::sys::NetnsSysctls;
use tcptune_os::sysctl::{Access, Scope};
use tcptune_testkit::{privileged, Netns};

#[test]
fn reads_and_writes_inside_the_named_namespace_only() {
    if !privileged("reads_and_writes_inside_the_named_namespace_only") {
        return;
    }
    let ns = Netns::new("h5sysctl");
    let key = "net.ipv4.tcp_notsent_lowat";
    let here_before = NetnsSysctls(None).read(key).unwrap();
    let mut inside = NetnsSysctls(Some(ns.name()));
    let old = inside.read(key).unwrap();
    let new = if old.trim() == "131072" {
        "65536"
    } else {
        "131072"
    };
    inside.write(key, new).unwrap();
    assert_eq!(inside.read(key).unwrap().trim(), new);
    assert_eq!(NetnsSysctls(None).read(key).unwrap(), here_before);
    assert_eq!(inside.scope(key).unwrap(), Scope::Writable);
    // A global (one value for the kernel) is read-only from inside a namespace.
    assert_eq!(inside.scope("net.core.rmem_max").unwrap(), Scope::ReadOnly);
}

#[test]
fn a_bad_key_or_a_missing_namespace_is_an_error_naming_it() {
    let err = NetnsSysctls(Some("tt-h5-no-such-namespace"))
        .read("net/../../etc/passwd")
        .unwrap_err();
    assert!(err.to_string().contains("bad sysctl key"), "{err}");
    let err = NetnsSysctls(Some("tt-h5-no-such-namespace"))
        .read("net.ipv4.tcp_rmem")
        .unwrap_err();
    assert!(err.to_string().contains("tt-h5-no-such-namespace"), "{err}");
}
