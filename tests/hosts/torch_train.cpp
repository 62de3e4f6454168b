// libtorch host checks (.ci/torch-host.sh, issue 40):
//
//   torch_train c10 OUT
//       trains a small network on the CPU with c10's DefaultCPUAllocator
//       (behind a counting c10::Allocator) and writes the losses, the final
//       parameters and the allocation counts to OUT.
//   torch_train tessera OUT REF SNAPSHOT_BASE
//       the same training with tessera::c10::install_cpu_allocator()
//       (behind the same counting wrapper); checks that the losses and
//       parameters are bit-identical to REF, that every allocation libtorch
//       made reached tessera (tessera's num_allocs, and the bytes its memory
//       reporter saw, equal the wrapper's counts, and the c10 run's), that
//       nothing is live in tessera at the end, and that the memory snapshot
//       (SNAPSHOT_BASE.json, SNAPSHOT_BASE.pickle) taken mid-training lists
//       the parameters' blocks with their sizes.
//   torch_train dlopen LIB
//       loads libtessera_torch.so (LIB) as ctypes.CDLL does in a Python
//       torch process: its static initialiser installs tessera's allocator,
//       and the next tensor comes from tessera.
//   torch_train bad-input
//       installing twice; c10's default put back (and tessera again) while
//       tessera blocks are live; a failing plugin (c10::OutOfMemoryError, no
//       leak); a plugin handing out unaligned blocks; a caching allocator
//       over a plugin; raw allocation and Allocator::clone; tensors made
//       on several threads and freed on another.
//
// Prints one line per check group; exits non-zero on the first failure.
#include <torch/torch.h>

#include <c10/core/CPUAllocator.h>

#include "tessera/c10_allocator.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

#define EXPECT(cond)                                                                   \
    do {                                                                              \
        if (!(cond)) {                                                                \
            std::fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond);  \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

#define EXPECT_EQ_U64(a, b)                                                            \
    do {                                                                              \
        uint64_t a_ = (a), b_ = (b);                                                  \
        if (a_ != b_) {                                                               \
            std::fprintf(stderr, "%s:%d: FAILED: %s == %s (%" PRIu64 " vs %" PRIu64 ")\n", \
                         __FILE__, __LINE__, #a, #b, a_, b_);                         \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

// Counts what libtorch asks of the CPU allocator and passes it on: the
// blocks are the inner allocator's own DataPtrs, untouched.
struct Counting final : c10::Allocator {
    explicit Counting(c10::Allocator* inner) : inner(inner) {}
    c10::DataPtr allocate(size_t n) override {
        calls.fetch_add(1, std::memory_order_relaxed);
        if (n > 0) {
            nonzero.fetch_add(1, std::memory_order_relaxed);
            bytes.fetch_add(n, std::memory_order_relaxed);
        }
        return inner->allocate(n);
    }
    c10::DeleterFnPtr raw_deleter() const override { return inner->raw_deleter(); }
    void copy_data(void* d, const void* s, size_t n) const override { inner->copy_data(d, s, n); }
    c10::Allocator* inner;
    std::atomic<uint64_t> calls{0}, nonzero{0}, bytes{0};
};

TsrAllocatorStats stats_of(TsrAllocator* a) {
    TsrAllocatorStats s{};
    EXPECT(tsr_allocator_stats(a, &s) == TSR_OK);
    return s;
}

// tessera's memory reporter: allocations (+) and the bytes they hold.
std::atomic<uint64_t> reported_allocs{0}, reported_bytes{0}, reported_frees{0};
void reporter(void*, const void*, int64_t delta, uint64_t, TsrDevice) {
    if (delta > 0) {
        reported_allocs.fetch_add(1, std::memory_order_relaxed);
        reported_bytes.fetch_add(uint64_t(delta), std::memory_order_relaxed);
    } else if (delta < 0) {
        reported_frees.fetch_add(1, std::memory_order_relaxed);
    }
}

struct Result {
    uint64_t calls = 0, nonzero = 0, bytes = 0;
    std::vector<char> data;  // losses, then every parameter's bytes
};

void append(std::vector<char>& out, const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    out.insert(out.end(), c, c + n);
}

constexpr int kSteps = 60;

// Trains Conv1d(1, 4, 3) + ReLU + Linear(56, 64) + ReLU + Linear(64, 64) +
// ReLU + Linear(64, 1) with Adam on a fixed regression problem; `mid` runs
// after step 30 while the model and optimizer are live.
template <class Mid>
std::vector<char> train(Mid mid) {
    torch::manual_seed(7);
    auto x = torch::randn({256, 16});
    auto y = torch::sin(x.sum(1, true)) + 0.1 * x.select(1, 0).unsqueeze(1);
    // The convolution runs through oneDNN, whose buffers come from c10's
    // raw_allocate (a zero-byte one among them).
    torch::nn::Sequential model(
        torch::nn::Unflatten(torch::nn::UnflattenOptions(1, {1, 16})),
        torch::nn::Conv1d(torch::nn::Conv1dOptions(1, 4, 3)), torch::nn::ReLU(),
        torch::nn::Flatten(), torch::nn::Linear(4 * 14, 64), torch::nn::ReLU(),
        torch::nn::Linear(64, 64), torch::nn::ReLU(), torch::nn::Linear(64, 1));
    torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-2));
    std::vector<char> out;
    for (int step = 0; step < kSteps; ++step) {
        int64_t begin = (step % 8) * 32;
        auto xb = x.slice(0, begin, begin + 32);
        auto yb = y.slice(0, begin, begin + 32);
        opt.zero_grad();
        auto loss = torch::mse_loss(model->forward(xb), yb);
        loss.backward();
        opt.step();
        float l = loss.item<float>();
        append(out, &l, sizeof l);
        if (step == kSteps / 2) {
            mid(model);
        }
    }
    for (const auto& p : model->parameters()) {
        auto c = p.detach().contiguous();
        append(out, c.data_ptr(), size_t(c.numel()) * c.element_size());
    }
    return out;
}

void write_result(const char* path, const Result& r) {
    std::ofstream f(path, std::ios::binary);
    uint64_t head[4] = {r.calls, r.nonzero, r.bytes, r.data.size()};
    f.write(reinterpret_cast<const char*>(head), sizeof head);
    f.write(r.data.data(), std::streamsize(r.data.size()));
    EXPECT(f.good());
}

Result read_result(const char* path) {
    std::ifstream f(path, std::ios::binary);
    EXPECT(f.good());
    uint64_t head[4];
    f.read(reinterpret_cast<char*>(head), sizeof head);
    Result r;
    r.calls = head[0];
    r.nonzero = head[1];
    r.bytes = head[2];
    r.data.resize(head[3]);
    f.read(r.data.data(), std::streamsize(head[3]));
    EXPECT(f.good());
    return r;
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    EXPECT(f.good());
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// The `size` of the snapshot block at `addr` in the JSON text, or -1.
long long snapshot_block_size(const std::string& json, const void* addr) {
    char key[64];
    std::snprintf(key, sizeof key, "\"addr\":\"0x%" PRIxPTR "\"", reinterpret_cast<uintptr_t>(addr));
    size_t at = json.find(key);
    if (at == std::string::npos) {
        return -1;
    }
    size_t end = json.find('}', at);
    size_t size = json.find("\"size\":", at);
    if (size == std::string::npos || size > end) {
        return -1;
    }
    return std::atoll(json.c_str() + size + 7);
}

int run_c10(const char* out_path) {
    Counting counting(c10::GetDefaultCPUAllocator());
    c10::SetAllocator(c10::DeviceType::CPU, &counting, 1);
    at::set_num_threads(1);
    Result r;
    r.data = train([](torch::nn::Sequential&) {});
    r.calls = counting.calls;
    r.nonzero = counting.nonzero;
    r.bytes = counting.bytes;
    write_result(out_path, r);
    std::printf("c10 run: %d steps, %" PRIu64 " allocations (%" PRIu64 " non-empty, %" PRIu64
                " bytes), %zu result bytes\n",
                kSteps, r.calls, r.nonzero, r.bytes, r.data.size());
    return 0;
}

int run_tessera(const char* out_path, const char* ref_path, const std::string& snap) {
    at::set_num_threads(1);
    TsrAllocator* cpu = tsr_get_allocator(TSR_CPU);
    EXPECT(cpu != nullptr);
    c10::Allocator* mine = tessera::c10::install_cpu_allocator();
    EXPECT(c10::GetAllocator(c10::DeviceType::CPU) == mine);
    // The wrapper counts libtorch's requests; it sits above tessera's c10
    // allocator, which is what it forwards to.
    Counting counting(mine);
    c10::SetAllocator(c10::DeviceType::CPU, &counting, 2);
    TsrHistoryOptions hist{};
    hist.struct_size = sizeof hist;
    hist.max_entries = 1 << 20;
    hist.backtraces = true;  // the snapshot names libtorch's allocation sites
    EXPECT(tsr_memory_record_history(&hist) == TSR_OK);
    TsrAllocatorStats before = stats_of(cpu);
    EXPECT(tsr_set_memory_reporter(&reporter, nullptr) == TSR_OK);

    size_t checked_blocks = 0;
    Result r;
    r.data = train([&](torch::nn::Sequential& model) {
        std::string json_path = snap + ".json", pickle_path = snap + ".pickle";
        EXPECT(tsr_memory_snapshot(json_path.c_str(), TSR_SNAPSHOT_JSON) == TSR_OK);
        EXPECT(tsr_memory_snapshot(pickle_path.c_str(), TSR_SNAPSHOT_TORCH) == TSR_OK);
        std::string json = read_file(json_path);
        EXPECT(json.find("\"format\":\"tessera-memory-snapshot\"") != std::string::npos);
        for (const auto& p : model->parameters()) {
            size_t nbytes = size_t(p.numel()) * p.element_size();
            long long size = snapshot_block_size(json, p.storage().data());
            if (size < 0 || size_t(size) < nbytes) {
                std::fprintf(stderr, "parameter of %zu bytes at %p: snapshot size %lld\n", nbytes,
                             p.storage().data(), size);
            }
            EXPECT(size >= 0 && size_t(size) >= nbytes);
            checked_blocks++;
        }
        std::string pickle = read_file(pickle_path);
        EXPECT(pickle.size() > 2 && uint8_t(pickle[0]) == 0x80);  // a pickle
        EXPECT(pickle.find("segments") != std::string::npos);
        EXPECT(pickle.find("device_traces") != std::string::npos);
    });
    EXPECT(tsr_set_memory_reporter(nullptr, nullptr) == TSR_OK);
    TsrAllocatorStats after = stats_of(cpu);
    r.calls = counting.calls;
    r.nonzero = counting.nonzero;
    r.bytes = counting.bytes;
    write_result(out_path, r);

    // Bit-identical to the c10 run.
    Result ref = read_result(ref_path);
    EXPECT_EQ_U64(r.data.size(), ref.data.size());
    EXPECT(std::memcmp(r.data.data(), ref.data.data(), r.data.size()) == 0);
    std::printf("tessera run: losses and parameters bit-identical to the c10 run (%zu bytes: %d "
                "losses, the rest parameters); last loss %g\n",
                r.data.size(), kSteps, double(*reinterpret_cast<const float*>(
                                           r.data.data() + (kSteps - 1) * sizeof(float))));
    // The same requests as the c10 run, and every one reached tessera.
    EXPECT_EQ_U64(r.calls, ref.calls);
    EXPECT_EQ_U64(r.nonzero, ref.nonzero);
    EXPECT_EQ_U64(r.bytes, ref.bytes);
    uint64_t allocs = after.num_allocs - before.num_allocs;
    uint64_t frees = after.num_frees - before.num_frees;
    EXPECT_EQ_U64(allocs, r.nonzero);
    EXPECT_EQ_U64(reported_allocs.load(), r.nonzero);
    EXPECT_EQ_U64(reported_bytes.load(), r.bytes);
    EXPECT_EQ_U64(frees, allocs);
    EXPECT_EQ_U64(reported_frees.load(), allocs);
    EXPECT_EQ_U64(after.num_failed, before.num_failed);
    EXPECT_EQ_U64(after.allocated_bytes, 0);
    std::printf("tessera run: %" PRIu64 " allocations (%" PRIu64 " non-empty, %" PRIu64
                " bytes) = the c10 run's; tessera counted %" PRIu64 " allocs / %" PRIu64
                " frees, its reporter %" PRIu64 " bytes; peak %" PRIu64 " bytes, %" PRIu64
                " live at the end\n",
                r.calls, r.nonzero, r.bytes, allocs, frees, reported_bytes.load(), after.peak_bytes,
                after.allocated_bytes);
    std::printf("snapshot: %s.json lists the %zu parameter blocks with their sizes; %s.pickle "
                "written\n",
                snap.c_str(), checked_blocks, snap.c_str());
    tsr_allocator_decref(cpu);
    return 0;
}

// ---- bad input --------------------------------------------------------------

// A C plugin over malloc: fails requests of `fail_at` bytes or more, and
// can hand out addresses 16 bytes past a 64-byte boundary.
struct Plugin {
    size_t fail_at = SIZE_MAX;
    bool misalign = false;
    std::atomic<int64_t> live{0};
    std::atomic<uint64_t> failures{0};
};

struct PluginBlock {
    Plugin* owner;
    void* base;
};

void plugin_free(void* ctx) {
    PluginBlock* b = static_cast<PluginBlock*>(ctx);
    b->owner->live.fetch_sub(1);
    std::free(b->base);
    delete b;
}

TsrStatus plugin_allocate(void* self, size_t nbytes, TsrDevice device, TsrDataPtr* out) {
    Plugin* p = static_cast<Plugin*>(self);
    if (nbytes >= p->fail_at) {
        p->failures.fetch_add(1);
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "test plugin: over its limit");
    }
    void* base = nullptr;
    if (posix_memalign(&base, 64, nbytes + 64) != 0) {
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "test plugin: malloc failed");
    }
    p->live.fetch_add(1);
    out->data = static_cast<char*>(base) + (p->misalign ? 16 : 0);
    out->ctx = new PluginBlock{p, base};
    out->deleter = &plugin_free;
    out->device = device;
    return TSR_OK;
}

TsrAllocator* make_plugin(Plugin* p, const char* name) {
    TsrAllocatorVTable vt{};
    vt.struct_size = sizeof vt;
    vt.name = name;
    vt.allocate = &plugin_allocate;
    TsrAllocator* a = nullptr;
    EXPECT(tsr_allocator_new(&vt, p, &a) == TSR_OK);
    return a;
}

int run_bad_input() {
    at::set_num_threads(1);
    TsrAllocator* cpu = tsr_get_allocator(TSR_CPU);
    c10::Allocator* dflt = c10::GetDefaultCPUAllocator();
    uint8_t prio = 1;

    // 1. Installing twice: the same c10 allocator, still installed, working.
    c10::Allocator* a1 = tessera::c10::install_cpu_allocator(prio);
    c10::Allocator* a2 = tessera::c10::install_cpu_allocator(prio);
    EXPECT(a1 == a2);
    EXPECT(c10::GetAllocator(c10::DeviceType::CPU) == a1);
    {
        TsrAllocatorStats s0 = stats_of(cpu);
        auto t = torch::ones({1000});
        EXPECT(t.sum().item<float>() == 1000.0f);
        EXPECT(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0);
        EXPECT(stats_of(cpu).num_allocs > s0.num_allocs);
        auto e = torch::empty({0});  // zero bytes
        EXPECT(e.numel() == 0);
        // The built-in allocator's blocks are simple (context == address),
        // so c10's copy-on-write clone works on them.
        auto c = t._lazy_clone();
        c.add_(1);
        EXPECT(t.sum().item<float>() == 1000.0f && c.sum().item<float>() == 2000.0f);
    }
    EXPECT_EQ_U64(stats_of(cpu).allocated_bytes, 0);
    std::printf("bad input: installing twice gives the same allocator and works\n");

    // 2. c10's default back (higher priority) while tessera blocks live,
    //    then tessera again: every block frees through its own allocator.
    {
        auto live = torch::full({1 << 18}, 3.0f);  // 1 MiB from tessera
        TsrAllocatorStats s0 = stats_of(cpu);
        EXPECT(s0.allocated_bytes >= (1u << 20));
        c10::SetAllocator(c10::DeviceType::CPU, dflt, ++prio);
        EXPECT(c10::GetAllocator(c10::DeviceType::CPU) == dflt);
        auto from_c10 = torch::full({1000}, 2.0f);
        auto mixed = live.slice(0, 0, 1000) + from_c10;  // tessera + c10 blocks in one op
        EXPECT(mixed.sum().item<float>() == 5000.0f);
        EXPECT_EQ_U64(stats_of(cpu).num_allocs, s0.num_allocs);  // nothing new from tessera
        live = torch::Tensor();  // a tessera block freed while c10's default is installed
        TsrAllocatorStats s1 = stats_of(cpu);
        EXPECT_EQ_U64(s1.num_frees, s0.num_frees + 1);
        EXPECT_EQ_U64(s1.allocated_bytes, 0);
        EXPECT(tessera::c10::install_cpu_allocator(++prio) == a1);
        EXPECT(c10::GetAllocator(c10::DeviceType::CPU) == a1);
        auto again = torch::ones({4096});
        EXPECT(stats_of(cpu).num_allocs > s1.num_allocs);
        from_c10 = torch::Tensor();  // a c10 block freed while tessera is installed
        mixed = torch::Tensor();
        EXPECT(stats_of(cpu).allocated_bytes > 0);
    }
    EXPECT_EQ_U64(stats_of(cpu).allocated_bytes, 0);
    std::printf("bad input: blocks live across c10's default and back free through their own "
                "allocator\n");

    // 3. A plugin that fails large requests: c10::OutOfMemoryError with
    //    tessera's message, nothing allocated, nothing leaked, and the
    //    process goes on.
    {
        Plugin plugin;
        plugin.fail_at = 1 << 20;
        TsrAllocator* h = make_plugin(&plugin, "failing-plugin");
        c10::Allocator* ca = tessera::c10::install_cpu_allocator(++prio, h);
        EXPECT(ca != a1);
        EXPECT(c10::GetAllocator(c10::DeviceType::CPU) == ca);
        auto small = torch::ones({1000});  // under the limit: fine
        EXPECT(plugin.live.load() == 1);
        bool caught = false;
        try {
            auto big = torch::empty({1 << 20});  // 4 MiB
            (void)big;
        } catch (const c10::OutOfMemoryError& e) {
            caught = true;
            std::string what = e.what();
            EXPECT(what.find("failing-plugin") != std::string::npos);
            EXPECT(what.find("test plugin: over its limit") != std::string::npos);
            EXPECT(what.find("4194304") != std::string::npos);
        }
        EXPECT(caught);
        caught = false;
        try {
            auto sum = torch::ones({1 << 19}) + small.sum();  // fails inside an op
            (void)sum;
        } catch (const c10::OutOfMemoryError&) {
            caught = true;
        }
        EXPECT(caught);
        TsrAllocatorStats ps = stats_of(h);
        EXPECT_EQ_U64(ps.num_failed, 2);
        EXPECT_EQ_U64(plugin.failures.load(), 2);
        EXPECT(small.sum().item<float>() == 1000.0f);  // still usable
        small = torch::Tensor();
        EXPECT(plugin.live.load() == 0);
        EXPECT_EQ_U64(stats_of(h).allocated_bytes, 0);
        // 4. The same handle with unaligned blocks: libtorch still gets 64-byte
        //    aligned memory, freed through the plugin.
        plugin.fail_at = SIZE_MAX;
        plugin.misalign = true;
        {
            auto t = torch::arange(0, 5000, torch::kFloat);
            EXPECT(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64 == 0);
            EXPECT(t.sum().item<double>() == 4999.0 * 5000.0 / 2.0);
            EXPECT(plugin.live.load() >= 1);
            // c10::Allocator::clone goes through copy_data.
            c10::DataPtr copy = ca->clone(t.data_ptr(), 5000 * sizeof(float));
            EXPECT(std::memcmp(copy.get(), t.data_ptr(), 5000 * sizeof(float)) == 0);
            EXPECT(reinterpret_cast<uintptr_t>(copy.get()) % 64 == 0);
        }
        EXPECT(plugin.live.load() == 0);
        EXPECT_EQ_U64(stats_of(h).allocated_bytes, 0);
        // Its contexts are not addresses: blocks go through the address
        // map, and raw allocation works through it too.
        EXPECT(ca->raw_deleter() != nullptr);
        void* raw = ca->raw_allocate(100);
        EXPECT(raw != nullptr && reinterpret_cast<uintptr_t>(raw) % 64 == 0);
        EXPECT(plugin.live.load() == 1);
        ca->raw_deallocate(raw);
        EXPECT(plugin.live.load() == 0);
        ca->raw_deallocate(nullptr);  // c10 frees a zero-byte raw allocation so
        EXPECT(tessera::c10::detail::mapped_blocks().count.load() == 0);
        tsr_allocator_decref(h);  // the c10 allocator keeps its own reference
        auto t = torch::ones({10});
        EXPECT(plugin.live.load() == 1);
    }
    EXPECT_EQ_U64(stats_of(cpu).allocated_bytes, 0);
    std::printf("bad input: a failing plugin gives c10::OutOfMemoryError, no leak; unaligned "
                "blocks are realigned\n");

    // 5. A caching allocator over a plugin.
    {
        static Plugin inner;  // outlives the caching allocator's cached segments
        TsrAllocator* plugin = make_plugin(&inner, "inner-plugin");
        TsrAllocator* caching = nullptr;
        EXPECT(tsr_caching_allocator_new(plugin, nullptr, &caching) == TSR_OK);
        c10::Allocator* ca = tessera::c10::install_cpu_allocator(++prio, caching);
        {
            auto a = torch::randn({100, 100});
            auto b = torch::mm(a, a);
            EXPECT(b.size(0) == 100);
            TsrAllocatorStats s = stats_of(caching);
            EXPECT(s.num_allocs >= 2);
            EXPECT(s.allocated_bytes >= 2 * 100 * 100 * 4);
            EXPECT(inner.live.load() >= 1);  // a segment
            // A caching allocator's blocks have a context of their own; the
            // address map gives libtorch simple ones: c10's copy-on-write
            // clone works, and oneDNN (raw allocation) in a convolution.
            auto c = a._lazy_clone();
            c.mul_(2);
            EXPECT(c.sum().item<float>() == 2 * a.sum().item<float>());
            torch::manual_seed(2);
            torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 8, 3));
            auto x = torch::randn({4, 3, 32, 32}, torch::requires_grad());
            conv->forward(x).square().sum().backward();
            EXPECT(x.grad().defined() && std::isfinite(x.grad().sum().item<float>()));
        }
        EXPECT_EQ_U64(stats_of(caching).allocated_bytes, 0);
        EXPECT(tsr_caching_allocator_empty_cache(caching) == TSR_OK);
        EXPECT(inner.live.load() == 0);
        EXPECT(tessera::c10::detail::mapped_blocks().count.load() == 0);
        EXPECT(ca->raw_deleter() == &tessera::c10::detail::free_mapped);
        tsr_allocator_decref(caching);
        tsr_allocator_decref(plugin);
    }
    std::printf("bad input: a caching allocator over a plugin serves libtorch (convolution, "
                "copy-on-write clone, raw allocation)\n");

    // 6. Raw allocation (oneDNN's path) through the registry's built-in CPU
    //    allocator, whose contexts are their addresses.
    {
        c10::Allocator* reg = tessera::c10::install_cpu_allocator(++prio);
        EXPECT(reg == a1);
        EXPECT(reg->raw_deleter() != nullptr);
        TsrAllocatorStats s0 = stats_of(cpu);
        void* p = reg->raw_allocate(1000);
        EXPECT(p != nullptr && reinterpret_cast<uintptr_t>(p) % 64 == 0);
        std::memset(p, 1, 1000);
        EXPECT(stats_of(cpu).allocated_bytes >= 1000);
        reg->raw_deallocate(p);
        TsrAllocatorStats s1 = stats_of(cpu);
        EXPECT_EQ_U64(s1.allocated_bytes, 0);
        EXPECT_EQ_U64(s1.num_frees, s0.num_frees + 1);
        // Zero bytes: NULL, and c10 frees NULL with raw_deleter().
        void* none = reg->raw_allocate(0);
        EXPECT(none == nullptr);
        reg->raw_deallocate(none);
        EXPECT_EQ_U64(stats_of(cpu).num_frees, s1.num_frees);
        // oneDNN (ideep) takes its buffers through raw_allocate, zero-byte
        // ones too: a convolution forward and backward.
        torch::manual_seed(1);
        torch::nn::Conv2d conv(torch::nn::Conv2dOptions(3, 8, 3));
        auto x = torch::randn({4, 3, 32, 32}, torch::requires_grad());
        auto y = conv->forward(x);
        y.square().sum().backward();
        EXPECT(x.grad().defined() && std::isfinite(x.grad().sum().item<float>()));
    }
    std::printf("bad input: raw allocation frees through tessera\n");

    // 7. Threads: intra-op threads allocate, and tensors made on one thread
    //    die on another (tessera's per-thread caches take foreign blocks).
    {
        at::set_num_threads(4);
        TsrAllocatorStats s0 = stats_of(cpu);
        std::vector<torch::Tensor> made(4);
        std::vector<std::thread> threads;
        for (int i = 0; i < 4; ++i) {
            threads.emplace_back([&made, i] {
                auto a = torch::randn({256, 256});
                auto b = torch::mm(a, a.t()).relu();
                for (int k = 0; k < 50; ++k) {
                    b = (b * 0.5 + torch::ones({256, 256})).contiguous();
                }
                made[size_t(i)] = b;  // freed by the main thread
            });
        }
        for (std::thread& t : threads) {
            t.join();
        }
        for (const auto& m : made) {
            EXPECT(m.size(0) == 256 && std::isfinite(m.sum().item<float>()));
        }
        made.clear();
        TsrAllocatorStats s1 = stats_of(cpu);
        EXPECT(s1.num_allocs - s0.num_allocs >= 4 * 52);
        EXPECT_EQ_U64(s1.num_frees - s0.num_frees, s1.num_allocs - s0.num_allocs);
        EXPECT_EQ_U64(s1.allocated_bytes, 0);
        at::set_num_threads(1);
    }
    std::printf("bad input: tensors made on 4 threads and freed on another free through tessera\n");
    tsr_allocator_decref(cpu);
    return 0;
}

int run_dlopen(const char* lib) {
    c10::Allocator* before = c10::GetAllocator(c10::DeviceType::CPU);
    EXPECT(before == c10::GetDefaultCPUAllocator());
    void* h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
    if (h == nullptr) {
        std::fprintf(stderr, "dlopen %s: %s\n", lib, dlerror());
        return 1;
    }
    c10::Allocator* after = c10::GetAllocator(c10::DeviceType::CPU);
    EXPECT(after != before);
    auto is_installed = reinterpret_cast<int (*)()>(dlsym(h, "tessera_torch_is_installed"));
    EXPECT(is_installed != nullptr && is_installed() == 1);
    TsrAllocator* cpu = tsr_get_allocator(TSR_CPU);
    TsrAllocatorStats s0 = stats_of(cpu);
    {
        auto t = torch::ones({12345});
        EXPECT(t.sum().item<float>() == 12345.0f);
        TsrAllocatorStats s1 = stats_of(cpu);
        EXPECT(s1.num_allocs > s0.num_allocs);
        EXPECT(s1.allocated_bytes >= 12345 * sizeof(float));
    }
    EXPECT_EQ_U64(stats_of(cpu).allocated_bytes, 0);
    tsr_allocator_decref(cpu);
    std::printf("dlopen: %s installed tessera's allocator at load; tensors come from tessera\n", lib);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "c10" && argc == 3) {
        return run_c10(argv[2]);
    }
    if (mode == "tessera" && argc == 5) {
        return run_tessera(argv[2], argv[3], argv[4]);
    }
    if (mode == "dlopen" && argc == 3) {
        return run_dlopen(argv[2]);
    }
    if (mode == "bad-input" && argc == 2) {
        return run_bad_input();
    }
    std::fprintf(stderr,
                 "usage: torch_train c10 OUT | tessera OUT REF SNAPSHOT_BASE | dlopen LIB | bad-input\n");
    return 2;
}
