#!/usr/bin/env python3
"""Writes tests/data/dtype_pairs.txt: promote_types(a, b) and can_cast(a, b)
for every pair of the 47 ScalarTypes of PyTorch 2.15, as c10 answers.

The rules, read from c10 (c10/core/ScalarType.cpp promoteTypes and
c10/core/ScalarType.h: isQIntType, isBitsType, isFloat8Type,
isBarebonesUnsignedType, isFloatingType, isComplexType, isIntegralType,
canCast), applied in c10's order:

1. equal types promote to themselves (any type, bits included);
2. a quantized type (QInt8, QUInt8, QInt32, QUInt4x2, QUInt2x4) with
   another raises;
3. a bits type (Bits1x8 .. Bits16) with another gives Undefined;
4. a float8 type (the five Float8_*) with another raises;
5. a barebones unsigned type (UInt1..UInt7, UInt16/32/64) with another:
   the other if it is floating (Float4_e2m1fn_x2 counts), else raises;
6. otherwise c10's 13x13 lookup table (Byte, Char, Short, Int, Long, Half,
   Float, Double, ComplexHalf, ComplexFloat, ComplexDouble, Bool,
   BFloat16), extended by PyTorch 2.15 with BComplex32 (complex of
   bfloat16, toComplexType(BFloat16)): BComplex32 is to BFloat16 what
   ComplexHalf is to Half (integers and bool give BComplex32, Half and
   ComplexHalf meet it in ComplexFloat, as Half meets BFloat16 in Float);
   a type outside the table (Int1..Int7, Float4_e2m1fn_x2 with a
   non-barebones type) fails c10's internal assert: an error.

canCast(from, to) is false for complex -> non-complex, floating ->
integral (isIntegralType without bool) and non-bool -> Bool; true
otherwise, for every pair.

Line format: `A B RESULT CAN_CAST` with RESULT a dtype name or one of
!quantized, !undefined, !float8, !unsigned, !no_rule.
"""
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
rows = [json.loads(l) for l in open(os.path.join(ROOT, "tests/data/torch_dtypes.jsonl"))]
rows = [r for r in rows if r["kind"] == "dtype"]
NAMES = [r["name"] for r in sorted(rows, key=lambda r: r["num"])]
assert len(NAMES) == 47

QINT = {"QInt8", "QUInt8", "QInt32", "QUInt4x2", "QUInt2x4"}
BITS = {"Bits1x8", "Bits2x4", "Bits4x2", "Bits8", "Bits16"}
FLOAT8 = {"Float8_e5m2", "Float8_e4m3fn", "Float8_e5m2fnuz", "Float8_e4m3fnuz", "Float8_e8m0fnu"}
BAREBONES = {f"UInt{i}" for i in range(1, 8)} | {"UInt16", "UInt32", "UInt64"}
FLOATING = {"Half", "Float", "Double", "BFloat16", "Float4_e2m1fn_x2"} | FLOAT8
COMPLEX = {"ComplexHalf", "ComplexFloat", "ComplexDouble", "BComplex32"}
INTEGRAL = {"Byte", "Char", "Short", "Int", "Long", "UInt16", "UInt32", "UInt64"}

# c10's table, with BComplex32 (cb) appended as row and column 14.
ORDER = ["u1", "i1", "i2", "i4", "i8", "f2", "f4", "f8", "c2", "c4", "c8", "b1", "bf", "cb"]
ABBR = dict(u1="Byte", i1="Char", i2="Short", i4="Int", i8="Long", f2="Half", f4="Float",
            f8="Double", c2="ComplexHalf", c4="ComplexFloat", c8="ComplexDouble", b1="Bool",
            bf="BFloat16", cb="BComplex32")
TABLE = """
u1 i2 i2 i4 i8 f2 f4 f8 c2 c4 c8 u1 bf cb
i2 i1 i2 i4 i8 f2 f4 f8 c2 c4 c8 i1 bf cb
i2 i2 i2 i4 i8 f2 f4 f8 c2 c4 c8 i2 bf cb
i4 i4 i4 i4 i8 f2 f4 f8 c2 c4 c8 i4 bf cb
i8 i8 i8 i8 i8 f2 f4 f8 c2 c4 c8 i8 bf cb
f2 f2 f2 f2 f2 f2 f4 f8 c2 c4 c8 f2 f4 c4
f4 f4 f4 f4 f4 f4 f4 f8 c4 c4 c8 f4 f4 c4
f8 f8 f8 f8 f8 f8 f8 f8 c8 c8 c8 f8 f8 c8
c2 c2 c2 c2 c2 c2 c4 c8 c2 c4 c8 c2 c4 c4
c4 c4 c4 c4 c4 c4 c4 c8 c4 c4 c8 c4 c4 c4
c8 c8 c8 c8 c8 c8 c8 c8 c8 c8 c8 c8 c8 c8
u1 i1 i2 i4 i8 f2 f4 f8 c2 c4 c8 b1 bf cb
bf bf bf bf bf f4 f4 f8 c4 c4 c8 bf bf cb
cb cb cb cb cb c4 c4 c8 c4 c4 c8 cb cb cb
"""
T = [line.split() for line in TABLE.strip().splitlines()]
IDX = {ABBR[a]: i for i, a in enumerate(ORDER)}
for i in range(14):
    for j in range(14):
        assert T[i][j] == T[j][i], (i, j)


def promote(a, b):
    if a == b:
        return a
    if a in QINT or b in QINT:
        return "!quantized"
    if a in BITS or b in BITS:
        return "!undefined"
    if a in FLOAT8 or b in FLOAT8:
        return "!float8"
    if a in BAREBONES or b in BAREBONES:
        if a in FLOATING:
            return a
        if b in FLOATING:
            return b
        return "!unsigned"
    if a not in IDX or b not in IDX:
        return "!no_rule"
    return ABBR[T[IDX[a]][IDX[b]]]


def can_cast(a, b):
    if a in COMPLEX and b not in COMPLEX:
        return False
    if a in FLOATING and b in INTEGRAL:
        return False
    if a != "Bool" and b == "Bool":
        return False
    return True


with open(os.path.join(ROOT, "tests/data/dtype_pairs.txt"), "w") as f:
    f.write("# promote_types(A, B) and can_cast(A -> B) for every pair of PyTorch 2.15's\n")
    f.write("# 47 ScalarTypes, from c10's rules (see scripts/dtype_pairs.py, which wrote\n")
    f.write("# this file). RESULT: a dtype, or !quantized / !undefined / !float8 /\n")
    f.write("# !unsigned / !no_rule where c10 raises or gives Undefined.\n")
    for a in NAMES:
        for b in NAMES:
            f.write(f"{a} {b} {promote(a, b)} {int(can_cast(a, b))}\n")

# the oracle's 144 promote rows agree
oracle = [json.loads(l) for l in open(os.path.join(ROOT, "tests/data/torch_cases.jsonl"))]
n = 0
for c in oracle:
    if c["kind"] == "promote":
        assert promote(c["a"], c["b"]) == c["out"], c
        assert can_cast(c["a"], c["b"]) == c["can_cast"], c
        n += 1
print(f"wrote tests/data/dtype_pairs.txt: {len(NAMES) ** 2} pairs; {n} oracle rows agree")
