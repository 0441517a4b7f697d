//! Test only (cargo feature `test-panics`, which this package's tests turn on; no build of the
//! binaries has it): panics forced by a request, so the e2e tests can check that a panic is
//! contained. The layer that answers a handler's panic is `bindings::panic`; this hook lives
//! apart from it because the service calls it, and the service must not depend on the bindings.

/// A message whose metadata has `"a2a-test-panic": "<place>"` panics at `place` (`request`: in
/// the send's handler; `turn`: in the task runner, at a write after the task exists).
pub(crate) fn test_panic(message: &a2a_types::v1::Message, place: &str) {
    use a2a_types::wkt::value::Kind;
    let asked = message
        .metadata
        .as_ref()
        .and_then(|m| m.fields.get("a2a-test-panic"))
        .is_some_and(|v| matches!(&v.kind, Some(Kind::StringValue(s)) if s == place));
    if asked {
        panic!("test panic at {place}");
    }
}
