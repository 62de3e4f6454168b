//! The typed handles of src/ffi/handle.rs at compile time: a handle
//! borrowed as another handle type's target, a weak handle where a strong
//! one is expected, a boxed handle used as a refcounted one, and a
//! reference handed out as the wrong handle type must not compile (each
//! file under tests/handle_pairing/fail with the compiler's error in its
//! .stderr); the right pairings in tests/handle_pairing/pass compile and
//! run, so the failures come from the pairing and not from the set-up.

/// Ignored under a plain `cargo test`: trybuild compiles the crate and its
/// dependencies a third time (about 75 s on two cores). CI runs it as a
/// stage of its own: `cargo test --test handle_pairing -- --ignored`.
#[test]
#[ignore = "compiles the crate again (~75 s): cargo test --test handle_pairing -- --ignored"]
fn handle_pairings() {
    let t = trybuild::TestCases::new();
    t.pass("tests/handle_pairing/pass/*.rs");
    t.compile_fail("tests/handle_pairing/fail/*.rs");
}
