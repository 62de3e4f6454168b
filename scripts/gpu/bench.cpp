// GPU allocator / copy benchmark: tessera vs torch vs the CUDA runtime.
//
// Built by scripts/gpu/build_bench.sh (g++, host code only: no kernels).
// One run prints one line per case with both sides, the tessera/other
// ratio (median over R rounds, min..max), then one SUMMARY line per target
// with PASS / FAIL. Exit status: 0 when every call succeeded (whatever the
// targets say), nonzero when a call failed.
//
// Cases:
//   a. alloc+free cache hit: tessera's CUDA caching allocator
//      (tsr_allocator_raw_allocate / raw_deallocate) vs torch's
//      c10::cuda::CUDACachingAllocator::raw_alloc / raw_delete.
//      512 B .. 256 MiB. Target tessera/torch <= 1.0.
//   b. tessera hit vs cudaMalloc + cudaFree, 1 MiB .. 256 MiB. Target <= 0.05.
//   c. tessera hit vs cudaMallocAsync + cudaFreeAsync on the legacy default
//      stream, default pool with release threshold UINT64_MAX (its best
//      case), cudaStreamSynchronize inside the timing. Target <= 0.05.
//   d. H2D bandwidth, 256 MiB, cudaMemcpyAsync + sync timed with events:
//      from tessera pinned memory vs torch pinned memory. Target >= 0.95.
//      Report-only: tsr_allocator_copy_data(cuda allocator, dev, host, n).

#include <tessera.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime.h>

#if __has_include(<torch/headeronly/version.h>)
#include <torch/headeronly/version.h>
#define BENCH_HAVE_TORCH_VERSION 1
#elif __has_include(<torch/version.h>)
#include <torch/version.h>
#define BENCH_HAVE_TORCH_VERSION 1
#endif

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <string>
#include <vector>

namespace {

// TSR_BENCH_QUICK=1 (a smoke run, e.g. under a debugger): 1 round of ~1 ms.
int kRounds = 7;
// Wall time one side of one round should take (the iteration count is
// calibrated to it, within the bounds of each case).
double kRoundSeconds = 0.06;

[[noreturn]] void die(const char* what) {
    std::fprintf(stderr, "bench: ERROR: %s\n", what);
    std::fflush(stdout);
    std::exit(2);
}

void check_tsr(TsrStatus st, const char* call, int line) {
    if (st == TSR_OK) return;
    const char* msg = tsr_last_error_message();
    std::fprintf(stderr, "bench: ERROR: %s failed (line %d): status %d (%s): %s\n", call, line,
                 (int)st, tsr_status_name(st), msg ? msg : "(no message)");
    std::fflush(stdout);
    std::exit(2);
}

void check_cuda(cudaError_t e, const char* call, int line) {
    if (e == cudaSuccess) return;
    std::fprintf(stderr, "bench: ERROR: %s failed (line %d): %s (%s)\n", call, line,
                 cudaGetErrorName(e), cudaGetErrorString(e));
    std::fflush(stdout);
    std::exit(2);
}

#define TSR(call) check_tsr((call), #call, __LINE__)
#define CU(call) check_cuda((call), #call, __LINE__)

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    if (n == 0) return 0.0;
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string size_name(size_t n) {
    char buf[32];
    if (n >= (1u << 20) && n % (1u << 20) == 0)
        std::snprintf(buf, sizeof buf, "%zuMiB", n >> 20);
    else if (n >= 1024 && n % 1024 == 0)
        std::snprintf(buf, sizeof buf, "%zuKiB", n >> 10);
    else
        std::snprintf(buf, sizeof buf, "%zuB", n);
    return buf;
}

// ---------------------------------------------------------------- tessera

// Allocation through tessera: raw_allocate when the allocator supports it,
// else tsr_allocator_allocate + tsr_data_ptr_free (reported in the output).
struct TsrAlloc {
    TsrAllocator* a = nullptr;
    bool raw = true;
    const char* api() const {
        return raw ? "raw_allocate/raw_deallocate" : "allocate/tsr_data_ptr_free";
    }
};

// Decides raw vs DataPtr once: a failed raw_allocate with TSR_ERR_UNSUPPORTED
// switches to the DataPtr API; any other failure is an error.
void probe_raw(TsrAlloc& ta, const char* which) {
    void* p = nullptr;
    TsrStatus st = tsr_allocator_raw_allocate(ta.a, 512, &p);
    if (st == TSR_ERR_UNSUPPORTED) {
        const char* msg = tsr_last_error_message();
        std::printf("note: %s allocator: raw_allocate unsupported (%s); timing "
                    "tsr_allocator_allocate + tsr_data_ptr_free instead\n",
                    which, msg ? msg : "");
        ta.raw = false;
        return;
    }
    TSR(st);
    TSR(tsr_allocator_raw_deallocate(ta.a, p));
}

// One tessera alloc+free hit, `iters` times.
void tsr_loop(const TsrAlloc& ta, size_t n, long iters) {
    if (ta.raw) {
        for (long i = 0; i < iters; ++i) {
            void* p = nullptr;
            TsrStatus st = tsr_allocator_raw_allocate(ta.a, n, &p);
            if (st != TSR_OK) TSR(st);
            st = tsr_allocator_raw_deallocate(ta.a, p);
            if (st != TSR_OK) TSR(st);
        }
    } else {
        for (long i = 0; i < iters; ++i) {
            TsrDataPtr dp;
            TsrStatus st = tsr_allocator_allocate(ta.a, n, &dp);
            if (st != TSR_OK) TSR(st);
            tsr_data_ptr_free(&dp);
        }
    }
}

// A host buffer from tessera (raw or DataPtr), freed by release().
struct TsrBuf {
    const TsrAlloc* ta = nullptr;
    void* p = nullptr;
    TsrDataPtr dp{};
    void get(const TsrAlloc& t, size_t n) {
        ta = &t;
        if (t.raw) {
            TSR(tsr_allocator_raw_allocate(t.a, n, &p));
        } else {
            TSR(tsr_allocator_allocate(t.a, n, &dp));
            p = dp.data;
        }
    }
    void release() {
        if (!ta) return;
        if (ta->raw)
            TSR(tsr_allocator_raw_deallocate(ta->a, p));
        else
            tsr_data_ptr_free(&dp);
        ta = nullptr;
        p = nullptr;
    }
};

// ---------------------------------------------------------------- timing

// Seconds per call of fn(iters) / iters, with iters calibrated so that one
// round takes about kRoundSeconds (within [min_it, max_it]).
struct Side {
    std::function<void(long)> fn;
    long iters = 0;
};

long calibrate(const std::function<void(long)>& fn, long min_it, long max_it) {
    long probe = std::max<long>(1, std::min<long>(min_it, 16));
    auto t0 = Clock::now();
    fn(probe);
    double per = seconds_since(t0) / (double)probe;
    if (per <= 0) return max_it;
    long it = (long)(kRoundSeconds / per);
    return std::clamp(it, min_it, max_it);
}

double time_per_op(const Side& s) {
    auto t0 = Clock::now();
    s.fn(s.iters);
    return seconds_since(t0) / (double)s.iters;
}

struct Result {
    double a_med, b_med;            // per-op seconds (or GB/s), medians
    double r_med, r_min, r_max;     // ratio a/b
};

// R interleaved rounds of two sides; ratio = a/b per round.
Result compare(Side& a, Side& b, long min_it, long max_it) {
    // warm-up (also makes both sides cache hits) and calibration
    a.fn(std::min<long>(min_it, 100));
    b.fn(std::min<long>(min_it, 100));
    a.iters = calibrate(a.fn, min_it, max_it);
    b.iters = calibrate(b.fn, min_it, max_it);
    std::vector<double> ta, tb, r;
    for (int i = 0; i < kRounds; ++i) {
        double x = time_per_op(a);
        double y = time_per_op(b);
        ta.push_back(x);
        tb.push_back(y);
        r.push_back(x / y);
    }
    return {median(ta), median(tb), median(r), *std::min_element(r.begin(), r.end()),
            *std::max_element(r.begin(), r.end())};
}

struct Target {
    std::string name;
    double value;
    double bound;
    bool upper;  // value <= bound passes (else value >= bound)
    std::string spread;
};
std::vector<Target> targets;

void add_target(const std::string& name, const Result& res, double bound, bool upper) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f..%.4f", res.r_min, res.r_max);
    targets.push_back({name, res.r_med, bound, upper, buf});
}

}  // namespace

int main() try {
    std::setvbuf(stdout, nullptr, _IOLBF, 0);
    if (const char* q = std::getenv("TSR_BENCH_QUICK"); q && *q == '1') {
        kRounds = 1;
        kRoundSeconds = 0.001;
    }

    // ------------------------------------------------------------ versions
    int ndev = 0;
    CU(cudaGetDeviceCount(&ndev));
    if (ndev < 1) die("no CUDA device");
    CU(cudaSetDevice(0));
    CU(cudaFree(nullptr));  // create the primary context
    cudaDeviceProp prop{};
    CU(cudaGetDeviceProperties(&prop, 0));
    int drv = 0, rt = 0;
    CU(cudaDriverGetVersion(&drv));
    CU(cudaRuntimeGetVersion(&rt));
    std::printf("device: %s (cc %d.%d, %.1f GiB)\n", prop.name, prop.major, prop.minor,
                (double)prop.totalGlobalMem / (1024.0 * 1024 * 1024));
    std::printf("cuda driver version: %d.%d (%d), runtime version: %d.%d (%d)\n", drv / 1000,
                (drv % 1000) / 10, drv, rt / 1000, (rt % 1000) / 10, rt);
#ifdef BENCH_HAVE_TORCH_VERSION
    std::printf("torch version (headers): %s\n", TORCH_VERSION);
#else
    std::printf("torch version (headers): unknown\n");
#endif
    std::printf("tessera version: %s\n", tsr_version());
    std::printf("rounds per case: %d, ratios: median (min..max) over rounds\n", kRounds);

    // ------------------------------------------------------------ tessera
    if (!tsr_cuda_is_available()) {
        TsrStatus st = tsr_cuda_init();
        TSR(st);
        die("tsr_cuda_is_available() is false");
    }
    TSR(tsr_cuda_init());
    TsrAlloc dev;
    TSR(tsr_cuda_allocator(&dev.a));
    TsrAlloc pin;
    TSR(tsr_cuda_pinned_allocator(&pin.a));
    probe_raw(dev, "cuda");
    probe_raw(pin, "cuda pinned");
    std::printf("tessera allocators: '%s' (%s), '%s' (%s)\n", tsr_allocator_name(dev.a),
                dev.api(), tsr_allocator_name(pin.a), pin.api());

    // ------------------------------------------------------------ torch
    // A CUDA tensor initializes torch's CUDA state (hooks, caching allocator).
    {
        at::Tensor t = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, 0));
        (void)t;
    }
    CU(cudaDeviceSynchronize());

    const size_t KiB = 1024, MiB = 1024 * 1024;

    // ------------------------------------------------------------ a
    std::printf("\n== a. alloc+free cache hit: tessera %s vs torch CUDACachingAllocator "
                "raw_alloc/raw_delete (per op ns)\n",
                dev.api());
    for (size_t n : {(size_t)512, 4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB}) {
        Side s_tsr{[&, n](long it) { tsr_loop(dev, n, it); }};
        Side s_torch{[n](long it) {
            for (long i = 0; i < it; ++i) {
                void* p = c10::cuda::CUDACachingAllocator::raw_alloc(n);
                c10::cuda::CUDACachingAllocator::raw_delete(p);
            }
        }};
        Result r = compare(s_tsr, s_torch, 1000, 100000);
        std::printf("a %-7s tessera %9.1f ns  torch %9.1f ns  ratio %.4f (%.4f..%.4f)  "
                    "iters %ld/%ld\n",
                    size_name(n).c_str(), r.a_med * 1e9, r.b_med * 1e9, r.r_med, r.r_min,
                    r.r_max, s_tsr.iters, s_torch.iters);
        add_target("a " + size_name(n) + " tessera/torch alloc+free hit", r, 1.0, true);
    }

    // ------------------------------------------------------------ b
    std::printf("\n== b. alloc+free: tessera hit vs cudaMalloc+cudaFree (per op ns)\n");
    for (size_t n : {1 * MiB, 16 * MiB, 256 * MiB}) {
        Side s_tsr{[&, n](long it) { tsr_loop(dev, n, it); }};
        Side s_cuda{[n](long it) {
            for (long i = 0; i < it; ++i) {
                void* p = nullptr;
                CU(cudaMalloc(&p, n));
                CU(cudaFree(p));
            }
        }};
        // the tessera side calibrates to many more iterations than cudaMalloc's
        Result r = compare(s_tsr, s_cuda, 20, 100000);
        std::printf("b %-7s tessera %9.1f ns  cudaMalloc %11.1f ns  ratio %.5f "
                    "(%.5f..%.5f)  iters %ld/%ld\n",
                    size_name(n).c_str(), r.a_med * 1e9, r.b_med * 1e9, r.r_med, r.r_min,
                    r.r_max, s_tsr.iters, s_cuda.iters);
        add_target("b " + size_name(n) + " tessera/cudaMalloc+cudaFree", r, 0.05, true);
    }

    // ------------------------------------------------------------ c
    std::printf("\n== c. alloc+free: tessera hit vs cudaMallocAsync+cudaFreeAsync, legacy "
                "default stream, default pool, release threshold UINT64_MAX (per op ns)\n");
    {
        int pools_ok = 0;
        CU(cudaDeviceGetAttribute(&pools_ok, cudaDevAttrMemoryPoolsSupported, 0));
        if (!pools_ok) die("device does not support memory pools (cudaMallocAsync)");
        cudaMemPool_t pool;
        CU(cudaDeviceGetDefaultMemPool(&pool, 0));
        uint64_t thr = UINT64_MAX;
        CU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &thr));
    }
    for (size_t n : {1 * MiB, 16 * MiB, 256 * MiB}) {
        Side s_tsr{[&, n](long it) { tsr_loop(dev, n, it); }};
        Side s_async{[n](long it) {
            for (long i = 0; i < it; ++i) {
                void* p = nullptr;
                CU(cudaMallocAsync(&p, n, (cudaStream_t)0));
                CU(cudaFreeAsync(p, (cudaStream_t)0));
            }
            CU(cudaStreamSynchronize((cudaStream_t)0));
        }};
        Result r = compare(s_tsr, s_async, 100, 100000);
        std::printf("c %-7s tessera %9.1f ns  cudaMallocAsync %9.1f ns  ratio %.4f "
                    "(%.4f..%.4f)  iters %ld/%ld\n",
                    size_name(n).c_str(), r.a_med * 1e9, r.b_med * 1e9, r.r_med, r.r_min,
                    r.r_max, s_tsr.iters, s_async.iters);
        add_target("c " + size_name(n) + " tessera/cudaMallocAsync+cudaFreeAsync", r, 0.05,
                   true);
    }

    // ------------------------------------------------------------ d
    std::printf("\n== d. H2D bandwidth, 256MiB, cudaMemcpyAsync on a non-blocking stream + "
                "sync, cudaEvent timing, median of 20 copies per round (GB/s = 1e9 B/s)\n");
    {
        const size_t n = 256 * MiB;
        const int kCopies = 20, kWarm = 3;
        void* d = nullptr;
        CU(cudaMalloc(&d, n));
        cudaStream_t stream;
        CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        cudaEvent_t e0, e1;
        CU(cudaEventCreate(&e0));
        CU(cudaEventCreate(&e1));

        TsrBuf th;
        th.get(pin, n);
        std::memset(th.p, 0x5a, n);
        at::Tensor tt = at::empty({(int64_t)n}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
        if (!tt.is_pinned()) die("torch tensor from at::empty(pinned_memory=true) is not pinned");
        void* torch_host = tt.data_ptr();
        std::memset(torch_host, 0x5a, n);
        {
            // both host buffers must be page-locked for a fair comparison
            cudaPointerAttributes at{};
            CU(cudaPointerGetAttributes(&at, th.p));
            std::printf("tessera pinned buffer: cudaPointerAttributes.type = %d (%s)\n",
                        (int)at.type, at.type == cudaMemoryTypeHost ? "host/pinned" : "NOT pinned");
        }

        auto gbps_median = [&](void* host) {
            std::vector<double> g;
            for (int i = 0; i < kWarm + kCopies; ++i) {
                CU(cudaEventRecord(e0, stream));
                CU(cudaMemcpyAsync(d, host, n, cudaMemcpyHostToDevice, stream));
                CU(cudaEventRecord(e1, stream));
                CU(cudaStreamSynchronize(stream));
                float ms = 0;
                CU(cudaEventElapsedTime(&ms, e0, e1));
                if (i >= kWarm) g.push_back((double)n / (ms * 1e-3) / 1e9);
            }
            return median(g);
        };
        auto tsr_copy_median = [&](void* host) {
            std::vector<double> g;
            for (int i = 0; i < kWarm + kCopies; ++i) {
                CU(cudaDeviceSynchronize());
                auto t0 = Clock::now();
                TSR(tsr_allocator_copy_data(dev.a, d, host, n));
                CU(cudaDeviceSynchronize());
                double s = seconds_since(t0);
                if (i >= kWarm) g.push_back((double)n / s / 1e9);
            }
            return median(g);
        };

        std::vector<double> gt, gc, r, gcopy;
        for (int i = 0; i < kRounds; ++i) {
            double x = gbps_median(th.p);
            double y = gbps_median(torch_host);
            gt.push_back(x);
            gc.push_back(y);
            r.push_back(x / y);
            gcopy.push_back(tsr_copy_median(th.p));
        }
        Result res{median(gt), median(gc), median(r), *std::min_element(r.begin(), r.end()),
                   *std::max_element(r.begin(), r.end())};
        std::printf("d 256MiB tessera-pinned %.2f GB/s  torch-pinned %.2f GB/s  ratio %.4f "
                    "(%.4f..%.4f)  [report-only: tsr_allocator_copy_data %.2f GB/s "
                    "(%.2f..%.2f)]\n",
                    res.a_med, res.b_med, res.r_med, res.r_min, res.r_max, median(gcopy),
                    *std::min_element(gcopy.begin(), gcopy.end()),
                    *std::max_element(gcopy.begin(), gcopy.end()));
        add_target("d 256MiB H2D bandwidth tessera-pinned/torch-pinned", res, 0.95, false);

        th.release();
        tt = at::Tensor();
        CU(cudaEventDestroy(e0));
        CU(cudaEventDestroy(e1));
        CU(cudaStreamDestroy(stream));
        CU(cudaFree(d));
    }

    // ------------------------------------------------------------ summary
    std::printf("\n== summary (median ratio over %d rounds, min..max)\n", kRounds);
    int fails = 0;
    for (const auto& t : targets) {
        bool ok = t.upper ? t.value <= t.bound : t.value >= t.bound;
        fails += !ok;
        std::printf("SUMMARY %s %s: %.4f (%s), target %s %.2f\n", ok ? "PASS" : "FAIL",
                    t.name.c_str(), t.value, t.spread.c_str(), t.upper ? "<=" : ">=", t.bound);
    }
    std::printf("SUMMARY %d of %zu targets met\n", (int)targets.size() - fails, targets.size());

    TSR(tsr_allocator_decref(dev.a));
    TSR(tsr_allocator_decref(pin.a));
    std::printf("bench: done\n");
    std::fflush(stdout);
    // Leave without running static destructors: libtorch 2.11's own
    // (torch::detail::TorchLibraryInit, deregistering operators) abort
    // this program at exit with "free(): invalid pointer" inside
    // std::locale::~locale, after every tessera object is gone (backtrace
    // taken with cuda-gdb on an H200, 2026-11-27).
    std::_Exit(0);
} catch (const std::exception& e) {
    std::fprintf(stderr, "bench: ERROR: exception: %s\n", e.what());
    return 3;
}
