//! Fuzzes loading checkpoints of several files through tsr_load of a
//! path: a torch.distributed.checkpoint directory (`.metadata` and one
//! `.distcp` file) or a Hugging Face shard index and one shard; the
//! checks are tessera_fuzz::fuzz_load_files'.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| tessera_fuzz::fuzz_load_files(data));
