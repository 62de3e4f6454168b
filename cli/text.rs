//! How the commands write numbers, shapes and byte counts.

/// `[2, 3]`, `[]` for a 0-dim tensor.
pub fn shape(sizes: &[i64]) -> String {
    let parts: Vec<String> = sizes.iter().map(i64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// A byte count for people: `512 B`, `1.5 KiB`, `1.0 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// A measured value: six significant digits at most, trailing zeros
/// dropped (`0.5`, `1.953125e-3` as `0.00195312`), exponent form outside
/// 1e-3..1e6.
pub fn number(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let mag = x.abs().log10().floor() as i32;
    if !(-3..6).contains(&mag) {
        return format!("{x:.4e}");
    }
    let s = format!("{x:.*}", (5 - mag).max(0) as usize);
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// `n thing` or `n things`.
pub fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// The bytes of a tensor's elements (numel x itemsize).
pub fn tensor_bytes(t: &tessera::Tensor) -> u64 {
    (t.numel().max(0) as u64).saturating_mul(t.itemsize() as u64)
}

#[cfg(test)]
mod tests {
    #[test]
    fn byte_counts_read_as_people_write_them() {
        assert_eq!(super::bytes(0), "0 B");
        assert_eq!(super::bytes(1023), "1023 B");
        assert_eq!(super::bytes(1536), "1.5 KiB");
        assert_eq!(super::bytes(1 << 30), "1.0 GiB");
        assert_eq!(super::shape(&[]), "[]");
        assert_eq!(super::shape(&[2, 3]), "[2, 3]");
        assert_eq!(super::number(0.5), "0.5");
        assert_eq!(super::number(2.0), "2");
        assert_eq!(super::number(1.953125e-3), "0.00195312");
        assert_eq!(super::number(123456789.0), "1.2346e8");
        assert_eq!(super::number(f64::INFINITY), "inf");
    }
}
