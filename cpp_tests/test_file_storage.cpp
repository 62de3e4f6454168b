// tessera::Storage over files and read-only memory: from_file, filename,
// flush, is_read_only / make_read_only and the refusals (exceptions or
// Results, by mode), set_data_ptr handing the old memory back.
#include "tessera.hpp"

#include "check.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

using tessera::DataPtr;
using tessera::Device;
using tessera::Storage;
using tessera::Tensor;

namespace {

// Unique per process: CTest runs the four builds of this test at once
// (an unseeded std::rand() gave them all the same path).
std::string temp_path(const char* name) {
    return std::string("/tmp/tessera-cpp-") + std::to_string(static_cast<long>(getpid())) + "-" +
           name;
}

int frees = 0;
void count_free(void* ctx) {
    frees++;
    std::free(ctx);
}

}  // namespace

TEST(file_storage_modes_and_read_only) {
    std::string path = temp_path("weights.bin");
    {
        Storage shared = OK(Storage::from_file(path.c_str(), TSR_FILE_SHARED, 16));
        CHECK(shared.filename() != nullptr);
        CHECK_EQ(std::string(shared.filename()), path);
        CHECK(!shared.is_read_only());
        OK(shared.fill(3));
        OK(shared.flush());
    }
    Storage ro = OK(Storage::from_file(path.c_str(), TSR_FILE_READ_ONLY));
    CHECK_EQ(ro.nbytes(), 16u);
    CHECK(ro.is_read_only());
    CHECK(ro.filename() == nullptr);
    CHECK_EQ(static_cast<const unsigned char*>(ro.data())[15], 3);
    CHECK_FAILS(ro.fill(0), TSR_ERR_READ_ONLY, "tsr_storage_fill");
    Tensor t = OK(Tensor::from_storage(ro, {4}, TSR_FLOAT));
    CHECK(t.is_read_only());
    CHECK_FAILS(t.fill(tessera::Scalar(1.0)), TSR_ERR_READ_ONLY, "read-only");
    CHECK_FAILS(Storage::from_file(path.c_str(), TSR_FILE_PRIVATE, 17), TSR_ERR_INVALID_ARGUMENT,
                "nbytes 17");
    std::remove(path.c_str());
}

TEST(make_read_only_and_set_data_ptr) {
    Storage s = OK(Storage::create(8, Device::cpu(), /*resizable=*/true));
    void* first = s.data();
    TsrDataPtr view = OK(s.data_ptr_view());
    CHECK(view.data == first);
    void* mem = std::malloc(8);
    frees = 0;
    DataPtr old = OK(s.set_data_ptr(DataPtr(mem, mem, count_free, Device::cpu()), 8));
    CHECK(old.data() == first);
    CHECK(s.data() == mem);
    OK(s.make_read_only());
    CHECK(s.is_read_only());
    void* other = std::malloc(8);
    DataPtr again(other, other, count_free, Device::cpu());
    CHECK_FAILS(s.set_data_ptr(std::move(again), 8), TSR_ERR_READ_ONLY, "read-only");
    CHECK_EQ(frees, 0);
}
