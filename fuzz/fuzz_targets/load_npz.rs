//! Fuzzes loading NumPy's NPZ format (a zip of .npy entries, stored or
//! deflated) from arbitrary bytes through the C API
//! (tsr_load_from_storage, with the format named and detected); the
//! checks are tessera_fuzz::fuzz_load's.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tessera_fuzz::fuzz_load(data, tessera::ffi::TSR_FORMAT_NPZ));
