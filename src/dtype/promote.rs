//! Type promotion (c10's promoteTypes), casting rules (canCast) and
//! result_type's three buckets.

use super::DType;
use crate::error::Result;

/// The promotion categories, ordered: a higher category wins over a lower
/// one whatever the widths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Category {
    /// Bool.
    Bool,
    /// Integer types.
    Integral,
    /// Real floating types.
    Floating,
    /// Complex types.
    Complex,
}

impl Category {
    /// The category of `dtype` (quantized types count as integral).
    pub fn of(dtype: DType) -> Category {
        if dtype == DType::Bool {
            Category::Bool
        } else if dtype.is_complex() {
            Category::Complex
        } else if dtype.is_floating() {
            Category::Floating
        } else {
            Category::Integral
        }
    }
}

/// Row/column order of the promotion table: the 14 dtypes with full
/// promotion rules (c10's 13 and BComplex32).
const TABLE_ORDER: [DType; 14] = [
    DType::Byte,
    DType::Char,
    DType::Short,
    DType::Int,
    DType::Long,
    DType::Half,
    DType::Float,
    DType::Double,
    DType::ComplexHalf,
    DType::ComplexFloat,
    DType::ComplexDouble,
    DType::Bool,
    DType::BFloat16,
    DType::BComplex32,
];

/// c10's promotion table over [`TABLE_ORDER`] (facts: the same entries as
/// PyTorch's promoteTypes), with the BComplex32 row and column of
/// PyTorch 2.15: BComplex32 is to BFloat16 what ComplexHalf is to Half, so
/// integers and bool give BComplex32 and Half / ComplexHalf meet it in
/// ComplexFloat.
const TABLE: [[DType; 14]; 14] = {
    use DType::{
        BComplex32 as cb, BFloat16 as bf, Bool as b1, Byte as u1, Char as i1, ComplexDouble as c8,
        ComplexFloat as c4, ComplexHalf as c2, Double as f8, Float as f4, Half as f2, Int as i4,
        Long as i8, Short as i2,
    };
    [
        //u1  i1  i2  i4  i8  f2  f4  f8  c2  c4  c8  b1  bf  cb
        [u1, i2, i2, i4, i8, f2, f4, f8, c2, c4, c8, u1, bf, cb], // u1
        [i2, i1, i2, i4, i8, f2, f4, f8, c2, c4, c8, i1, bf, cb], // i1
        [i2, i2, i2, i4, i8, f2, f4, f8, c2, c4, c8, i2, bf, cb], // i2
        [i4, i4, i4, i4, i8, f2, f4, f8, c2, c4, c8, i4, bf, cb], // i4
        [i8, i8, i8, i8, i8, f2, f4, f8, c2, c4, c8, i8, bf, cb], // i8
        [f2, f2, f2, f2, f2, f2, f4, f8, c2, c4, c8, f2, f4, c4], // f2
        [f4, f4, f4, f4, f4, f4, f4, f8, c4, c4, c8, f4, f4, c4], // f4
        [f8, f8, f8, f8, f8, f8, f8, f8, c8, c8, c8, f8, f8, c8], // f8
        [c2, c2, c2, c2, c2, c2, c4, c8, c2, c4, c8, c2, c4, c4], // c2
        [c4, c4, c4, c4, c4, c4, c4, c8, c4, c4, c8, c4, c4, c4], // c4
        [c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8], // c8
        [u1, i1, i2, i4, i8, f2, f4, f8, c2, c4, c8, b1, bf, cb], // b1
        [bf, bf, bf, bf, bf, f4, f4, f8, c4, c4, c8, bf, bf, cb], // bf
        [cb, cb, cb, cb, cb, c4, c4, c8, c4, c4, c8, cb, cb, cb], // cb
    ]
};

fn table_index(d: DType) -> Option<usize> {
    TABLE_ORDER.iter().position(|t| *t == d)
}

/// The smallest dtype both `a` and `b` convert to, by c10's rules in c10's
/// order: equal types give themselves; a quantized type with another is
/// refused; a bits type with another has no promotion (c10: Undefined);
/// float8 types do not promote; UInt1..7 and UInt16/32/64 promote only
/// with floating types (to the floating type); the rest follow c10's
/// table, and a pair outside it (Int1..Int7, Float4_e2m1fn_x2) is
/// refused. Every refusal is a DType error naming both dtypes.
pub fn promote_types(a: DType, b: DType) -> Result<DType> {
    if a == b {
        return Ok(a);
    }
    if a.is_quantized() || b.is_quantized() {
        crate::bail!(
            DType,
            "promotion with quantized types is not supported: got {a} and {b}"
        );
    }
    if a.is_bits() || b.is_bits() {
        crate::bail!(
            DType,
            "bits types do not promote (c10 gives Undefined): got {a} and {b}"
        );
    }
    if a.is_float8() || b.is_float8() {
        crate::bail!(
            DType,
            "promotion for Float8 types is not supported: got {a} and {b}"
        );
    }
    if a.is_barebones_unsigned() || b.is_barebones_unsigned() {
        if a.is_floating() {
            return Ok(a);
        }
        if b.is_floating() {
            return Ok(b);
        }
        crate::bail!(
            DType,
            "promotion for UInt1..UInt7, UInt16, UInt32 and UInt64 is supported only with \
             floating types: got {a} and {b}"
        );
    }
    match (table_index(a), table_index(b)) {
        (Some(i), Some(j)) => Ok(TABLE[i][j]),
        _ => crate::bail!(DType, "c10 has no promotion rule for {a} and {b}"),
    }
}

/// Whether a value of `from` may be written into `to` by an operation that
/// enforces safe casting: refuses complex -> non-complex, floating ->
/// integral (Bool included), and non-bool -> bool (c10's canCast).
pub fn can_cast(from: DType, to: DType) -> bool {
    if from.is_complex() && !to.is_complex() {
        return false;
    }
    if from.is_floating() && to.is_integral(true) {
        return false;
    }
    if from != DType::Bool && to == DType::Bool {
        return false;
    }
    true
}

fn promote_skip_none(a: Option<DType>, b: DType) -> Result<DType> {
    match a {
        None => Ok(b),
        Some(a) => promote_types(a, b),
    }
}

/// The state of c10's result_type over several operands, in three buckets:
/// tensors with dims, 0-dim tensors and wrapped scalars. A lower bucket
/// may raise the category of the result but never the width within a
/// category.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultTypeState {
    dim: Option<DType>,
    zero_dim: Option<DType>,
    wrapped: Option<DType>,
}

impl ResultTypeState {
    /// Adds a tensor operand of `dtype` with `ndim` dims.
    pub fn update_tensor(&mut self, dtype: DType, ndim: usize) -> Result<()> {
        if ndim > 0 {
            self.dim = Some(promote_skip_none(self.dim, dtype)?);
        } else {
            self.zero_dim = Some(promote_skip_none(self.zero_dim, dtype)?);
        }
        Ok(())
    }

    /// Adds a wrapped scalar (a number, not a tensor) of `dtype`: floating
    /// scalars count as Float and complex as ComplexFloat, the defaults.
    pub fn update_wrapped(&mut self, dtype: DType) -> Result<()> {
        let dtype = if dtype.is_complex() {
            DType::ComplexFloat
        } else if dtype.is_floating() {
            DType::Float
        } else {
            dtype
        };
        self.wrapped = Some(promote_skip_none(self.wrapped, dtype)?);
        Ok(())
    }

    /// The result dtype; None when no operand was added.
    pub fn result(&self) -> Result<Option<DType>> {
        let lower = combine_categories(self.zero_dim, self.wrapped)?;
        combine_categories(self.dim, lower)
    }
}

fn combine_categories(higher: Option<DType>, lower: Option<DType>) -> Result<Option<DType>> {
    let (h, l) = match (higher, lower) {
        (None, l) => return Ok(l),
        (h, None) => return Ok(h),
        (Some(h), Some(l)) => (h, l),
    };
    if h.is_complex() {
        return Ok(Some(h));
    }
    if l.is_complex() {
        if h.is_floating() {
            return h.to_complex().map(Some).ok_or_else(|| {
                crate::err!(DType, "there is no complex type with the precision of {h}")
            });
        }
        return Ok(Some(l));
    }
    if h.is_floating() {
        return Ok(Some(h));
    }
    if h == DType::Bool || l.is_floating() {
        return promote_types(h, l).map(Some);
    }
    Ok(Some(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use DType::*;

    #[test]
    fn table_is_symmetric() {
        for a in TABLE_ORDER {
            for b in TABLE_ORDER {
                assert_eq!(promote_types(a, b).unwrap(), promote_types(b, a).unwrap());
            }
        }
    }

    #[test]
    fn special_types() {
        assert_eq!(promote_types(QInt8, QInt8).unwrap(), QInt8);
        assert!(promote_types(QInt8, Float).is_err());
        assert!(promote_types(Float8E5M2, Float).is_err());
        assert!(promote_types(Float8E5M2, Float8E4M3Fn).is_err());
        assert_eq!(promote_types(UInt16, Float).unwrap(), Float);
        assert_eq!(promote_types(BFloat16, UInt64).unwrap(), BFloat16);
        assert_eq!(promote_types(UInt32, UInt32).unwrap(), UInt32);
        let e = promote_types(UInt16, Int).unwrap_err();
        assert!(e.message().contains("UInt16 and Int"), "{e}");
        assert!(promote_types(UInt16, ComplexFloat).is_err());
        assert!(promote_types(UInt16, Bool).is_err());
        assert_eq!(promote_types(ComplexHalf, BFloat16).unwrap(), ComplexFloat);
    }

    #[test]
    fn can_cast_rules() {
        assert!(!can_cast(ComplexFloat, Double));
        assert!(!can_cast(Float, Long));
        assert!(!can_cast(Half, Bool));
        assert!(!can_cast(Int, Bool));
        assert!(can_cast(Bool, Bool));
        assert!(can_cast(Long, Float));
        assert!(can_cast(Double, ComplexHalf));
    }

    fn result(items: &[(DType, Option<usize>)]) -> DType {
        let mut s = ResultTypeState::default();
        for (d, ndim) in items {
            match ndim {
                Some(n) => s.update_tensor(*d, *n).unwrap(),
                None => s.update_wrapped(*d).unwrap(),
            }
        }
        s.result().unwrap().unwrap()
    }

    #[test]
    fn result_type_buckets() {
        // int32 tensor + 2.5 -> Float
        assert_eq!(result(&[(Int, Some(1)), (Double, None)]), Float);
        // uint8 tensor + 1000 -> uint8
        assert_eq!(result(&[(Byte, Some(1)), (Long, None)]), Byte);
        // half tensor + 0-dim double -> half
        assert_eq!(result(&[(Half, Some(2)), (Double, Some(0))]), Half);
        // bool tensor + int scalar -> Long
        assert_eq!(result(&[(Bool, Some(1)), (Long, None)]), Long);
        // int tensor + complex scalar -> ComplexFloat
        assert_eq!(
            result(&[(Int, Some(1)), (ComplexDouble, None)]),
            ComplexFloat
        );
        // double tensor + complex scalar -> ComplexDouble
        assert_eq!(
            result(&[(Double, Some(1)), (ComplexDouble, None)]),
            ComplexDouble
        );
        // 0-dim tensors only: normal promotion among them
        assert_eq!(result(&[(Int, Some(0)), (Long, Some(0))]), Long);
        // a 0-dim float raises an int tensor to that float's width
        assert_eq!(result(&[(Long, Some(1)), (Double, Some(0))]), Double);
        let empty = ResultTypeState::default();
        assert_eq!(empty.result().unwrap(), None);
    }
}
