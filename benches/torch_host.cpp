// libtorch with tessera's CPU allocator vs c10's DefaultCPUAllocator, in
// one process (issue 40). Each round times the same loop with each
// allocator installed (c10::SetAllocator with a rising priority, the order
// rotating from round to round): c10's; tessera's registry CPU allocator
// (the built-in one, blocks handed over as they are); a caching allocator
// over the built-in one (blocks through the c10 allocator's address map).
// It reports the ratio to c10 per loop: median, min and max over the
// rounds. MAX_MEDIAN_RATIO gates the registry allocator's medians.
//
//   ops:   at::empty({n}).fill_(1), at::add(a, a), .sum() for n in
//          1, 4, 16, ..., 4096 floats (3 tensors a step: 4 B to 16 KiB)
//   alloc: c10::Allocator::allocate(n) and the DataPtr's free, n bytes as
//          above (the allocator alone, no tensor around it)
//
// Build and run: .ci/torch-host.sh (it prints this bench's lines), or
//   g++ -std=c++20 -O2 -isystem $TORCH/include -I include benches/torch_host.cpp
//       -Ltarget/release -ltessera -L$TORCH/lib -ltorch_cpu -lc10 -o torch_host
//   (one line; $TORCH is the unpacked wheel's torch directory, see
//   .ci/get-libtorch.sh, and the run needs both lib directories on
//   LD_LIBRARY_PATH or as rpaths)
//   ./torch_host [ROUNDS=15] [MAX_MEDIAN_RATIO]
// With MAX_MEDIAN_RATIO it exits 1 when a median ratio exceeds it.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>

#include "tessera/c10_allocator.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ops_loop() {
    auto t0 = Clock::now();
    float sink = 0;
    for (int rep = 0; rep < 2000; ++rep) {
        for (int64_t n = 1; n <= 4096; n *= 4) {
            at::Tensor a = at::empty({n});
            a.fill_(1.0f);
            at::Tensor b = at::add(a, a);
            sink += b.sum().item<float>();
        }
    }
    if (sink != 2000.0f * 2 * (1 + 4 + 16 + 64 + 256 + 1024 + 4096)) {
        std::fprintf(stderr, "ops loop: wrong sum %g\n", double(sink));
        std::exit(1);
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double alloc_loop() {
    c10::Allocator* a = c10::GetAllocator(c10::DeviceType::CPU);
    auto t0 = Clock::now();
    for (int rep = 0; rep < 20000; ++rep) {
        for (size_t n = 4; n <= 16384; n *= 4) {
            c10::DataPtr p = a->allocate(n);
            static_cast<volatile char*>(p.get())[0] = 1;
        }
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Summary {
    double median, min, max;
};

Summary summarize(std::vector<double> r) {
    std::sort(r.begin(), r.end());
    size_t n = r.size();
    double median = n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
    return {median, r.front(), r.back()};
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 15;
    double max_ratio = argc > 2 ? std::atof(argv[2]) : 0;
    if (rounds < 1) {
        std::fprintf(stderr, "usage: torch_host [ROUNDS] [MAX_MEDIAN_RATIO]\n");
        return 2;
    }
    at::set_num_threads(1);
    c10::Allocator* c10_alloc = c10::GetDefaultCPUAllocator();
    c10::Allocator* tsr_alloc = tessera::c10::allocator_for(nullptr);
    // A caching allocator over the built-in one: its blocks go through the
    // c10 allocator's address map (context != address).
    TsrAllocator* builtin = tsr_cpu_allocator();
    TsrAllocator* caching = nullptr;
    if (tsr_caching_allocator_new(builtin, nullptr, &caching) != TSR_OK) {
        std::fprintf(stderr, "tsr_caching_allocator_new failed\n");
        return 1;
    }
    c10::Allocator* map_alloc = tessera::c10::allocator_for(caching);
    uint8_t priority = 1;
    auto use = [&](c10::Allocator* a) {
        // A rising priority always wins; 255 rounds' worth is plenty.
        c10::SetAllocator(c10::DeviceType::CPU, a, priority++);
        if (c10::GetAllocator(c10::DeviceType::CPU) != a) {
            std::fprintf(stderr, "SetAllocator did not switch\n");
            std::exit(1);
        }
    };
    if (3 * rounds + 6 > 250) {
        std::fprintf(stderr, "at most 80 rounds (c10 priorities are 8-bit)\n");
        return 2;
    }
    // Warm both (thread caches, lazy initialisation).
    use(c10_alloc);
    ops_loop();
    alloc_loop();
    use(tsr_alloc);
    ops_loop();
    alloc_loop();
    use(map_alloc);
    ops_loop();
    alloc_loop();

    std::vector<double> ops_ratio, alloc_ratio, ops_map_ratio, alloc_map_ratio;
    double ops_c10 = 0, ops_tsr = 0, ops_map = 0, alloc_c10 = 0, alloc_tsr = 0, alloc_map = 0;
    for (int r = 0; r < rounds; ++r) {
        double oc = 0, ot = 0, om = 0, ac = 0, at_ = 0, am = 0;
        // Rotate the order: c10, tessera, mapped; tessera, mapped, c10; ...
        for (int k = 0; k < 3; ++k) {
            switch ((r + k) % 3) {
            case 0:
                use(c10_alloc);
                oc = ops_loop();
                ac = alloc_loop();
                break;
            case 1:
                use(tsr_alloc);
                ot = ops_loop();
                at_ = alloc_loop();
                break;
            default:
                use(map_alloc);
                om = ops_loop();
                am = alloc_loop();
                break;
            }
        }
        ops_ratio.push_back(ot / oc);
        alloc_ratio.push_back(at_ / ac);
        ops_map_ratio.push_back(om / oc);
        alloc_map_ratio.push_back(am / ac);
        ops_c10 += oc;
        ops_tsr += ot;
        ops_map += om;
        alloc_c10 += ac;
        alloc_tsr += at_;
        alloc_map += am;
    }
    Summary o = summarize(ops_ratio), a = summarize(alloc_ratio);
    Summary om = summarize(ops_map_ratio), am = summarize(alloc_map_ratio);
    const double ops_steps = 2000.0 * 7, allocs = 20000.0 * 7;
    std::printf("torch_host bench, %d rounds, 1 thread (ratio = tessera / c10 DefaultCPUAllocator)\n",
                rounds);
    std::printf("  ops   (empty+fill+add+sum, 1..4096 floats): c10 %.0f ns/step, tessera %.0f "
                "ns/step; ratio median %.3f (min %.3f, max %.3f)\n",
                ops_c10 / rounds / ops_steps * 1e9, ops_tsr / rounds / ops_steps * 1e9, o.median,
                o.min, o.max);
    std::printf("  alloc (allocate+free, 4..16384 bytes):       c10 %.1f ns, tessera %.1f ns; "
                "ratio median %.3f (min %.3f, max %.3f)\n",
                alloc_c10 / rounds / allocs * 1e9, alloc_tsr / rounds / allocs * 1e9, a.median,
                a.min, a.max);
    std::printf("  mapped (a caching allocator's blocks, through the address map):\n");
    std::printf("  ops   %.0f ns/step, ratio median %.3f (min %.3f, max %.3f); alloc %.1f ns, "
                "ratio median %.3f (min %.3f, max %.3f)\n",
                ops_map / rounds / ops_steps * 1e9, om.median, om.min, om.max,
                alloc_map / rounds / allocs * 1e9, am.median, am.min, am.max);
    if (max_ratio > 0 && (o.median > max_ratio || a.median > max_ratio)) {
        std::fprintf(stderr, "torch_host bench: a median ratio exceeds %.3f\n", max_ratio);
        return 1;
    }
    return 0;
}
