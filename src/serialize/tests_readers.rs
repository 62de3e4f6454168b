//! Issue 36 (items 6 and 8): metadata lookups cost O(1) (a file of many
//! metadata keys loads in linear work), and every record's geometry is
//! checked the same way in both formats and both load paths.

use super::name_index::comparisons;
use super::tests::load_bytes;
use super::*;
use crate::dtype::DType;
use crate::tensor::Tensor;

/// A safetensors file of one small tensor and `keys` metadata keys.
fn many_keys(keys: usize) -> Vec<u8> {
    let mut d = TensorDict::new();
    d.set("t", Tensor::empty(&[2], DType::Float, Device::CPU).unwrap())
        .unwrap();
    for i in 0..keys {
        d.set_metadata(&format!("key{i:06}"), "v").unwrap();
    }
    save_to_bytes(&d, Format::Safetensors).unwrap()
}

/// Key comparisons made while loading `bytes` and reading every key back.
fn load_work(bytes: &[u8], keys: usize) -> u64 {
    let before = comparisons();
    let d = load_bytes(bytes).unwrap();
    for i in (0..keys).step_by(97) {
        assert_eq!(d.metadata(&format!("key{i:06}")), Some("v"));
    }
    comparisons() - before
}

#[test]
fn loading_many_metadata_keys_is_linear_work() {
    let (small, large) = (5_000, 40_000);
    let (a, b) = (many_keys(small), many_keys(large));
    let (wa, wb) = (load_work(&a, small), load_work(&b, large));
    // 8x the keys: linear work grows 8x; a linear search per key 64x.
    assert!(
        wb <= 10 * wa.max(1) && wb <= 4 * large as u64,
        "{small} keys: {wa} comparisons, {large} keys: {wb}"
    );
}
