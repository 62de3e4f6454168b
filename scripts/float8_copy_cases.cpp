// Writes tests/data/float8_copy_cases.txt: c10's copy kernel (`Tensor.to()`,
// libtorch 2.15) between the five one-byte float types and every dtype
// tessera converts (bool, integers, half, bfloat16, float, double, complex,
// the other float8 types). Elements are written as little-endian hex.
//   F <float8> <dst> <256 dst elements>    every byte of the float8 type
//   T <src> <float8> <src elements> <float8 bytes>   values of src converted
// Build and run as scripts/float8_cases.cpp.
#include <ATen/ATen.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

static void hex(const at::Tensor& t) {
    auto c = t.contiguous();
    auto p = (const uint8_t*)c.data_ptr();
    for (int64_t i = 0; i < c.numel() * c.element_size(); i++) std::printf("%02x", p[i]);
}

int main() {
    using namespace at;
    const ScalarType f8[] = {kFloat8_e5m2, kFloat8_e4m3fn, kFloat8_e5m2fnuz, kFloat8_e4m3fnuz,
                             kFloat8_e8m0fnu};
    const ScalarType others[] = {kBool, kByte, kChar, kShort, kInt, kLong, kUInt16, kUInt32, kUInt64,
                                 kHalf, kBFloat16, kFloat, kDouble, kComplexHalf, kComplexFloat,
                                 kComplexDouble};
    std::vector<ScalarType> all(std::begin(others), std::end(others));
    all.insert(all.end(), std::begin(f8), std::end(f8));
    std::printf("# c10 copies through Tensor.to() (libtorch 2.15); scripts/float8_copy_cases.cpp\n");
    for (auto t : f8) {
        auto bytes = arange(256, kInt).to(kByte).view(t);
        for (auto d : all) {
            if (d == t) continue;
            std::printf("F %s %s ", toString(t), toString(d));
            hex(bytes.to(d));
            std::printf("\n");
        }
    }
    const double inf = std::numeric_limits<double>::infinity();
    std::vector<double> fv = {0.0, -0.0, 0.5, 1.0, -1.0, 1.0625 + std::ldexp(1.0, -40), 1.5, -2.5,
                              3.0, 17.0, 100.0, 240.0, 247.0, 250.0, 300.0, 448.0, 464.0, 500.0,
                              1000.0, 57344.0, 61440.0, 65536.0, 1e5, -1e6, std::ldexp(1.0, -9),
                              std::ldexp(1.0, -10), std::ldexp(1.0, -16), std::ldexp(1.0, -17),
                              1e-30, std::ldexp(1.0, 127), 1e39, inf, -inf, std::nan("")};
    std::vector<int64_t> iv = {0, 1, -1, 2, 3, 7, 17, 100, 127, -128, 255, 240, 300, 448, 464, 500,
                               1000, 57344, 61440, 65536, 100000, 2147483647, -2147483648LL,
                               (1LL << 53) + 1, 1LL << 62, std::numeric_limits<int64_t>::min()};
    auto fsrc = tensor(fv, kDouble);
    auto isrc = tensor(iv, kLong);
    for (auto s : all) {
        Tensor src;
        if (s == kBool) src = tensor(std::vector<int64_t>{0, 1, 1, 0}, kLong).to(kBool);
        else if (isIntegralType(s, false)) src = isrc.to(s);
        else if (isComplexType(s)) src = at::complex(fsrc, at::full_like(fsrc, 0.5)).to(s);
        else src = fsrc.to(s);
        for (auto t : f8) {
            if (s == t) continue;
            std::printf("T %s %s ", toString(s), toString(t));
            hex(src);
            std::printf(" ");
            hex(src.to(t));
            std::printf("\n");
        }
    }
}
