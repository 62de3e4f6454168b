//! c10's `roundup_power2_divisions`: how a caching allocator rounds a
//! request up before it looks for a block. Without it (or with 1 division)
//! a request is rounded up to 512 bytes; with N divisions, the range
//! between two powers of two is cut into N equal steps and a request is
//! rounded up to the next step (a power of two stays as it is), so that
//! requests of slightly different sizes share blocks.
//!
//! The number of divisions may differ per size range: 16 ranges, one per
//! power of two from 1 MiB (everything below 1 MiB uses the first, from
//! 32 GiB on the last), as c10's `kRoundUpPowerOfTwoIntervals`. The text
//! form is c10's: `N` (every range) or `[256:1,512:2,>:8]` (a range key
//! in MiB, a power of two, names the range that starts there; the first
//! key's value also applies to every range below it; `>` applies its
//! value from the previous key's range on, that range included (c10
//! fills from the last key's index: in `[256:1,512:2,>:8]` the 512 MiB
//! range gets 8); a value may be 0 (no rounding); a range named by no key
//! keeps 0, no rounding beyond 512 bytes, as in c10). A leaf: it uses
//! nothing else of the crate.

/// The number of size ranges (c10's kRoundUpPowerOfTwoIntervals).
pub const INTERVALS: usize = 16;
/// The first range starts at 1 MiB (2^20).
const FIRST_LOG2: u32 = 20;
/// Every block size is a multiple of this (the caching allocator's
/// granularity).
const MIN_BLOCK: usize = 512;

/// Divisions per power of two, for each size range; all 0 (or 1): no
/// rounding beyond 512 bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundupDivisions {
    by_range: [u32; INTERVALS],
}

impl RoundupDivisions {
    /// The same number of divisions for every size: 0 (none) or a power
    /// of two.
    pub fn uniform(n: u32) -> Result<RoundupDivisions, String> {
        if n != 0 && !n.is_power_of_two() {
            return Err(format!(
                "roundup_power2_divisions {n} is not a power of two: expected 0 (off) or a \
                 power of two (1, 2, 4, 8, ...)"
            ));
        }
        Ok(RoundupDivisions {
            by_range: [n; INTERVALS],
        })
    }

    /// Parses c10's text form: `N`, or `[MiB:N,...,>:N]`.
    pub fn parse(text: &str) -> Result<RoundupDivisions, String> {
        let text = text.trim();
        let Some(list) = text.strip_prefix('[') else {
            let n = text.parse::<u32>().map_err(|_| {
                format!(
                    "roundup_power2_divisions '{text}' is not a number: expected a power of \
                     two or a list such as [256:1,512:2,>:8]"
                )
            })?;
            if n == 0 {
                return Err(
                    "roundup_power2_divisions 0 is not a power of two: expected 1, 2, 4, ..."
                        .into(),
                );
            }
            return RoundupDivisions::uniform(n);
        };
        let Some(list) = list.strip_suffix(']') else {
            return Err(format!(
                "roundup_power2_divisions '{text}' has no closing ']': expected a list such as \
                 [256:1,512:2,>:8]"
            ));
        };
        let mut by_range = [0u32; INTERVALS];
        let mut last: Option<usize> = None;
        for entry in list.split(',').map(str::trim) {
            let Some((key, value)) = entry.split_once(':') else {
                return Err(format!(
                    "roundup_power2_divisions entry '{entry}' has no ':': expected \
                     SIZE_MIB:DIVISIONS or >:DIVISIONS"
                ));
            };
            let (key, value) = (key.trim(), value.trim());
            let n = match value.parse::<u32>() {
                Ok(n) if n == 0 || n.is_power_of_two() => n,
                _ => {
                    return Err(format!(
                        "roundup_power2_divisions entry '{entry}': divisions '{value}' is not \
                         0 or a power of two (1, 2, 4, ...)"
                    ))
                }
            };
            if key == ">" {
                by_range[last.unwrap_or(0)..].fill(n);
                continue;
            }
            let mib = match key.parse::<u64>() {
                Ok(m) if m.is_power_of_two() => m,
                _ => {
                    return Err(format!(
                        "roundup_power2_divisions entry '{entry}': size '{key}' is not a power \
                         of two in MiB (1, 2, 4, ..., or >)"
                    ))
                }
            };
            let index = (mib.trailing_zeros() as usize).min(INTERVALS - 1);
            if last.is_none() {
                by_range[..index].fill(n);
            }
            by_range[index] = n;
            last = Some(index);
        }
        Ok(RoundupDivisions { by_range })
    }

    /// Whether no size is rounded beyond 512 bytes.
    pub fn is_off(&self) -> bool {
        self.by_range.iter().all(|&n| n <= 1)
    }

    /// The divisions for a request of `size` bytes.
    #[inline]
    pub fn for_size(&self, size: usize) -> u32 {
        let log = usize::BITS - 1 - size.max(1).leading_zeros();
        let index = log.saturating_sub(FIRST_LOG2) as usize;
        self.by_range[index.min(INTERVALS - 1)]
    }

    /// c10's round_size: `nbytes` rounded up to 512 bytes, or to the next
    /// of the power-of-two divisions its range has; None when the result
    /// would pass `isize::MAX`.
    #[inline]
    pub fn round(&self, nbytes: usize) -> Option<usize> {
        if nbytes <= isize::MAX as usize - (MIN_BLOCK - 1) {
            let plain = (nbytes.max(1) + MIN_BLOCK - 1) & !(MIN_BLOCK - 1);
            let divisions = self.for_size(nbytes) as usize;
            if divisions <= 1 || nbytes <= MIN_BLOCK * divisions {
                return Some(plain);
            }
            next_division(nbytes, divisions).filter(|&s| s <= isize::MAX as usize)
        } else {
            None
        }
    }
}

/// c10's roundup_power2_next_division: `size` (more than 512 x divisions)
/// rounded up to the next of `divisions` equal steps between its power of
/// two and the next.
fn next_division(size: usize, divisions: usize) -> Option<usize> {
    if size.is_power_of_two() {
        return Some(size);
    }
    let floor = 1usize << (usize::BITS - 1 - size.leading_zeros());
    let step = floor >> divisions.trailing_zeros();
    if step == 0 {
        return floor.checked_mul(2);
    }
    let down = size & !(step - 1);
    if down == size {
        Some(size)
    } else {
        down.checked_add(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    #[test]
    fn uniform_divisions_round_like_c10() {
        let off = RoundupDivisions::default();
        assert!(off.is_off());
        assert_eq!(off.round(1), Some(512));
        assert_eq!(off.round(1000), Some(1024));
        assert_eq!(off.round(5 * MIB + 1), Some(5 * MIB + 512));
        let four = RoundupDivisions::uniform(4).unwrap();
        // 1200: 512 x 4 = 2048 >= 1200, so plain rounding.
        assert_eq!(four.round(1200), Some(1536));
        // 5 MiB + 1 lies in [4, 8) MiB: steps of 1 MiB.
        assert_eq!(four.round(5 * MIB + 1), Some(6 * MIB));
        assert_eq!(four.round(5 * MIB), Some(5 * MIB));
        assert_eq!(four.round(8 * MIB), Some(8 * MIB));
        // 3000 lies in [2048, 4096): steps of 512.
        assert_eq!(four.round(3000), Some(3072));
        let eight = RoundupDivisions::uniform(8).unwrap();
        assert_eq!(eight.round(1100 * MIB), Some(1152 * MIB));
        assert_eq!(four.round(isize::MAX as usize), None);
        assert!(RoundupDivisions::uniform(3)
            .unwrap_err()
            .contains("not a power of two"));
    }

    #[test]
    fn the_list_form_follows_c10() {
        let d = RoundupDivisions::parse("[256:1,512:2,>:8]").unwrap();
        // Below the first key: its value (1).
        assert_eq!(d.for_size(MIB), 1);
        assert_eq!(d.for_size(300 * MIB), 1);
        // `>` fills from the last key's range on, that range included.
        assert_eq!(d.for_size(600 * MIB), 8);
        assert_eq!(d.for_size(1 << 30), 8);
        assert_eq!(d.for_size(1 << 40), 8);
        assert_eq!(d.round(600 * MIB + 1), Some(640 * MIB));
        let d = RoundupDivisions::parse("[256:1,512:2,1024:0,>:4]").unwrap();
        assert_eq!(d.for_size(600 * MIB), 2);
        assert_eq!(d.for_size(1 << 30), 4);
        assert_eq!(
            RoundupDivisions::parse("[>:2]").unwrap(),
            RoundupDivisions::uniform(2).unwrap()
        );
        // A range between two keys keeps 0 (c10's vector starts at 0).
        let gap = RoundupDivisions::parse("[64:8,256:4]").unwrap();
        assert_eq!(gap.for_size(100 * MIB), 8);
        assert_eq!(gap.for_size(130 * MIB), 0);
        assert_eq!(gap.for_size(300 * MIB), 4);
        assert_eq!(gap.for_size(600 * MIB), 0);
        assert_eq!(
            RoundupDivisions::parse(" 2 ").unwrap(),
            RoundupDivisions::uniform(2).unwrap()
        );
        for (bad, says) in [
            ("0", "not a power of two"),
            ("x", "not a number"),
            ("[256:1", "closing"),
            ("[256]", "no ':'"),
            ("[300:1]", "size '300'"),
            ("[256:3]", "divisions '3'"),
        ] {
            let e = RoundupDivisions::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
