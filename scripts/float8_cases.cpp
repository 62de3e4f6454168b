// Writes tests/data/float8_c10_cases.txt: what libtorch's c10 does for the
// five one-byte float types, through the tensor copy kernel (`.to(dtype)`):
//   D <dtype> <byte> <f32 bits>   decoding: every byte converted to Float
//   E <dtype> <f32 bits> <byte>   encoding: Float values converted to dtype
// The encoded values are each representable value, the midpoints between
// neighbours (ties) and the floats next to them, the largest values and
// the range past them, f32 subnormals, +-inf, NaNs, and random bit patterns.
// Build (libtorch from an unpacked torch wheel, see benches/README.md):
//   g++ -std=c++20 -O1 -isystem $T/include scripts/float8_cases.cpp -o /tmp/f8cases \
//       -L$T/lib -ltorch_cpu -lc10 -Wl,-rpath,$T/lib -Wl,-rpath-link,$CUDA_LIBS
//   LD_LIBRARY_PATH=$CUDA_LIBS /tmp/f8cases > tests/data/float8_c10_cases.txt
#include <ATen/ATen.h>
#include <torch/headeronly/version.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <vector>

static uint32_t bits_of(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }
static float from_bits(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }

int main() {
    const c10::ScalarType types[] = {at::kFloat8_e5m2, at::kFloat8_e4m3fn, at::kFloat8_e5m2fnuz,
                                     at::kFloat8_e4m3fnuz, at::kFloat8_e8m0fnu};
    std::printf("# c10 (libtorch %s.x) float8 conversions through Tensor.to(); scripts/float8_cases.cpp\n",
                "2.15");
    for (auto t : types) {
        const char* name = c10::toString(t);
        auto bytes = at::arange(256, at::kInt).to(at::kByte).view(t);
        auto dec = bytes.to(at::kFloat).contiguous();
        const float* d = dec.data_ptr<float>();
        for (int b = 0; b < 256; b++) std::printf("D %s %d %08x\n", name, b, bits_of(d[b]));
        std::set<uint32_t> in;
        std::vector<double> vals;
        for (int b = 0; b < 256; b++)
            if (std::isfinite(d[b])) vals.push_back(d[b]);
        std::sort(vals.begin(), vals.end());
        auto add = [&](double x) {
            float f = (float)x;
            in.insert(bits_of(f));
            in.insert(bits_of(std::nextafter(f, INFINITY)));
            in.insert(bits_of(std::nextafter(f, -INFINITY)));
        };
        for (size_t i = 0; i < vals.size(); i++) {
            add(vals[i]);
            if (i + 1 < vals.size()) add((vals[i] + vals[i + 1]) / 2);
            add(vals[i] * 1.5);  // e8m0's ties; past the end for the largest
            add(vals[i] * 2);
        }
        for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e-45f, -1e-45f, 1.1754942e-38f,
                        1.17549435e-38f, 3.4028235e38f, -3.4028235e38f, 1e30f, -1e30f})
            in.insert(bits_of(f));
        uint64_t s = 0x9E3779B97F4A7C15ull;
        for (int i = 0; i < 1000; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            in.insert((uint32_t)(s >> 32));
        }
        std::vector<float> xs;
        for (uint32_t b : in) xs.push_back(from_bits(b));
        auto src = at::from_blob(xs.data(), {(int64_t)xs.size()}, at::kFloat);
        auto enc = src.to(t).view(at::kByte).contiguous();
        const uint8_t* e = enc.data_ptr<uint8_t>();
        for (size_t i = 0; i < xs.size(); i++) std::printf("E %s %08x %d\n", name, bits_of(xs[i]), e[i]);
    }
}
