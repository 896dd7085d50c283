// Tests for the .npy reader and writer: round trips of random data for every
// dtype, numpy's exact header layout, and every way a file is refused,
// including hostile headers that must be refused without a large allocation.
#define BOOST_TEST_MODULE npy
#include <boost/test/unit_test.hpp>

#include "test_support.h"

#include "support/error.h"
#include "support/host_tensor.h"
#include "support/npy.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <new>
#include <random>

using namespace mlpipe;
using mlpipe::testing::rng;
namespace fs = std::filesystem;

// Every allocation in this executable goes through here, so a test can ask
// how large the largest one was while the parser ran.
namespace {
std::atomic<size_t> largestAllocation{0};
}

void *operator new(std::size_t size) {
  size_t seen = largestAllocation.load();
  while (size > seen && !largestAllocation.compare_exchange_weak(seen, size)) {
  }
  if (void *memory = std::malloc(size ? size : 1))
    return memory;
  throw std::bad_alloc();
}
void operator delete(void *memory) noexcept { std::free(memory); }
void operator delete(void *memory, std::size_t) noexcept { std::free(memory); }

namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::i32, DType::i64, DType::f16, DType::i1,
                             DType::i8,  DType::i16, DType::u8,  DType::u16, DType::u32, DType::u64};

// A fresh seed every run, logged so that a failure can be replayed.

// Random, never-zero values across the dtype's range, so that a reader that
// drops or misplaces bytes cannot pass by reading zeros.
HostTensor randomTensor(DType dtype, Shape shape) {
  HostTensor tensor(dtype, std::move(shape));
  for (int64_t i = 0; i < tensor.numel(); ++i) {
    switch (dtype) {
    case DType::f32:
      do
        tensor.as<float>()[i] = std::uniform_real_distribution<float>(-1e6f, 1e6f)(rng());
      while (tensor.as<float>()[i] == 0);
      break;
    case DType::f64:
      do
        tensor.as<double>()[i] = std::uniform_real_distribution<double>(-1e6, 1e6)(rng());
      while (tensor.as<double>()[i] == 0);
      break;
    case DType::i32:
      do
        tensor.as<int32_t>()[i] = std::uniform_int_distribution<int32_t>(INT32_MIN, INT32_MAX)(rng());
      while (tensor.as<int32_t>()[i] == 0);
      break;
    case DType::i64:
      do
        tensor.as<int64_t>()[i] = std::uniform_int_distribution<int64_t>(INT64_MIN, INT64_MAX)(rng());
      while (tensor.as<int64_t>()[i] == 0);
      break;
    case DType::f16:
    case DType::bf16: // any bit pattern but zeros, NaNs included: the bytes must survive
      do
        tensor.as<uint16_t>()[i] = static_cast<uint16_t>(std::uniform_int_distribution<int>(1, 0xffff)(rng()));
      while (tensor.as<uint16_t>()[i] == 0x8000);
      break;
    case DType::i1:
      tensor.as<uint8_t>()[i] = static_cast<uint8_t>(std::uniform_int_distribution<int>(0, 1)(rng()));
      break;
    case DType::i8:
    case DType::i16:
    case DType::u8:
    case DType::u16:
    case DType::u32:
    case DType::u64: { // any bits but zeros
      uint64_t bits = 0;
      while (bits == 0)
        bits = std::uniform_int_distribution<uint64_t>(1, UINT64_MAX)(rng()) >> (64 - bitWidth(dtype));
      std::memcpy(static_cast<char *>(tensor.data()) + i * dtypeSize(dtype), &bits, dtypeSize(dtype));
      break;
    }
    }
  }
  return tensor;
}

bool sameTensor(const HostTensor &a, const HostTensor &b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.byteSize() == b.byteSize() &&
         (a.byteSize() == 0 || std::memcmp(a.data(), b.data(), a.byteSize()) == 0);
}

// A .npy file with the given header dict text, written by hand so that tests
// can build any malformed header. No alignment padding: readers must not
// depend on it.
std::string npyFile(std::string_view dict, std::string_view data = {}, int major = 1) {
  std::string header = std::string(dict) + "\n";
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + std::string(data);
}

std::string dictFor(std::string_view descr, std::string_view shape, std::string_view fortran = "False") {
  return "{'descr': '" + std::string(descr) + "', 'fortran_order': " + std::string(fortran) +
         ", 'shape': " + std::string(shape) + ", }";
}

// The message of the mlpipe::Error that `action` throws; fails the test if
// it throws nothing.
std::string messageOf(const std::function<void()> &action) {
  try {
    action();
  } catch (const Error &error) {
    return error.what();
  }
  BOOST_FAIL("expected an mlpipe::Error");
  return {};
}

std::string refusal(std::string_view bytes) {
  return messageOf([&] { parseNpy(bytes, "x.npy"); });
}

bool contains(const std::string &text, std::string_view part) {
  bool found = text.find(part) != std::string::npos;
  if (!found)
    BOOST_TEST_MESSAGE("'" << part << "' not in: " << text);
  return found;
}

// A fresh directory, removed with its contents at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "npy_test.XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
  std::vector<std::string> names() const {
    std::vector<std::string> found;
    for (const auto &entry : fs::directory_iterator(path))
      found.push_back(entry.path().filename().string());
    return found;
  }
};

std::string fileContents(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

} // namespace

BOOST_AUTO_TEST_CASE(round_trips_random_data_of_every_dtype) {
  for (DType dtype : kDTypes)
    for (Shape shape : {Shape{1}, Shape{17}, Shape{3, 5}, Shape{2, 3, 4}, Shape{2, 1, 3, 2}}) {
      BOOST_TEST_CONTEXT(dtypeName(dtype) << " " << formatShape(shape)) {
        HostTensor original = randomTensor(dtype, shape);
        HostTensor back = parseNpy(serializeNpy(original), "memory");
        BOOST_TEST(sameTensor(original, back));
      }
    }
}

BOOST_AUTO_TEST_CASE(round_trips_through_files) {
  TempDir dir;
  for (DType dtype : kDTypes) {
    std::string path = (dir.path / (std::string(dtypeName(dtype)) + ".npy")).string();
    HostTensor original = randomTensor(dtype, {4, 6});
    writeNpy(path, original);
    BOOST_TEST(sameTensor(original, readNpy(path)));
  }
}

BOOST_AUTO_TEST_CASE(round_trips_scalars_and_zero_size_dimensions) {
  for (DType dtype : kDTypes)
    for (Shape shape : {Shape{}, Shape{0}, Shape{0, 3}, Shape{4, 0, 2}}) {
      BOOST_TEST_CONTEXT(dtypeName(dtype) << " " << formatShape(shape)) {
        HostTensor original = randomTensor(dtype, shape);
        HostTensor back = parseNpy(serializeNpy(original), "memory");
        BOOST_TEST(sameTensor(original, back));
        BOOST_TEST(back.rank() == static_cast<int64_t>(shape.size()));
      }
    }
}

BOOST_AUTO_TEST_CASE(writes_the_header_numpy_writes) {
  // Bytes as np.save writes them (numpy 1.24): keys sorted, room for the
  // first dimension to grow to 21 digits, then padding to 64 bytes.
  std::string bytes = serializeNpy(HostTensor(DType::f32, {3, 4}));
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  std::string expected =
      std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(128 - 10 - dict.size() - 1, ' ') + "\n";
  BOOST_TEST(bytes.substr(0, 128) == expected);
  BOOST_TEST(bytes.size() == 128u + 48u);

  std::string vector = serializeNpy(HostTensor(DType::i64, {7}));
  BOOST_TEST(vector.find("{'descr': '<i8', 'fortran_order': False, 'shape': (7,), }") == 10u);
  BOOST_TEST(vector.size() == 128u + 56u);

  std::string scalar = serializeNpy(HostTensor(DType::f64, {}));
  BOOST_TEST(scalar.find("'shape': (), }") != std::string::npos);
  BOOST_TEST(scalar.size() == 128u + 8u);

  for (DType dtype : kDTypes)
    for (Shape shape : {Shape{}, Shape{1}, Shape{123456789, 0}, Shape{1, 2, 3, 4, 5, 6, 7, 8}}) {
      std::string header = serializeNpy(HostTensor(dtype, shape));
      size_t headerLength = static_cast<unsigned char>(header[8]) | static_cast<unsigned char>(header[9]) << 8;
      BOOST_TEST(header[6] == '\x01');
      BOOST_TEST((10 + headerLength) % 64 == 0u);
      BOOST_TEST(header[10 + headerLength - 1] == '\n');
    }
}

BOOST_AUTO_TEST_CASE(reads_versions_2_and_3) {
  HostTensor original = randomTensor(DType::f64, {2, 3});
  std::string data(static_cast<const char *>(original.data()), original.byteSize());
  for (int major : {2, 3})
    BOOST_TEST(sameTensor(parseNpy(npyFile(dictFor("<f8", "(2, 3)"), data, major), "x.npy"), original));
}

BOOST_AUTO_TEST_CASE(accepts_what_python_accepts_in_the_dict) {
  HostTensor original = randomTensor(DType::i32, {3});
  std::string data(static_cast<const char *>(original.data()), original.byteSize());
  for (std::string dict : {
           "{'shape': (3,), 'fortran_order': False, 'descr': '<i4'}",
           "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (3,)}",
           "  {  'descr'  :  '=i4' ,\n 'fortran_order':False,'shape':( 3 , ) ,  }   ",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (3L,), }", // Python 2 numpy
       })
    BOOST_TEST_CONTEXT(dict) { BOOST_TEST(sameTensor(parseNpy(npyFile(dict, data), "x.npy"), original)); }
}

BOOST_AUTO_TEST_CASE(refuses_files_that_are_not_npy) {
  BOOST_TEST(refusal("") == "x.npy is empty; expected a .npy file");
  for (std::string bytes : {std::string("hello world, not an array"), std::string("\x93NUMPZ\x01\x00", 8),
                            std::string("PK\x03\x04", 4), std::string("\x93", 1) + "X"})
    BOOST_TEST(refusal(bytes) == "x.npy is not a .npy file: it does not start with the magic bytes \\x93NUMPY");
}

BOOST_AUTO_TEST_CASE(refuses_unknown_versions) {
  std::string file = npyFile(dictFor("<f4", "()"), std::string(4, 'a'));
  for (auto [major, minor] : {std::pair{0, 0}, {1, 1}, {4, 0}, {255, 255}}) {
    file[6] = static_cast<char>(major);
    file[7] = static_cast<char>(minor);
    BOOST_TEST(refusal(file) == fmt::format("x.npy has .npy format version {}.{}; mlpipe reads versions 1.0, 2.0 "
                                            "and 3.0",
                                            major, minor));
  }
}

BOOST_AUTO_TEST_CASE(refuses_truncated_preambles_and_headers) {
  std::string file = npyFile(dictFor("<f4", "(2,)"), std::string(8, 'a'));
  for (size_t cut : {1, 5, 6, 7, 9})
    BOOST_TEST(contains(refusal(file.substr(0, cut)), "x.npy is truncated: it ends after"));
  // Version 2.0 needs two more length bytes than 1.0.
  BOOST_TEST(contains(refusal(npyFile("", "", 2).substr(0, 11)), "inside the .npy preamble of 12 bytes"));
  for (size_t cut : {10, 20, 50})
    BOOST_TEST(contains(refusal(file.substr(0, cut)), "x.npy is truncated: its preamble announces a"));
  BOOST_TEST(refusal(file.substr(0, 20)) ==
             "x.npy is truncated: its preamble announces a 58-byte header but only 10 bytes follow");
}

BOOST_AUTO_TEST_CASE(refuses_malformed_header_dicts) {
  for (std::string dict : std::initializer_list<std::string>{
           "",
           "descr",
           "{",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ",
           "['descr', '<f4']",
           "{'descr' '<f4', 'fortran_order': False, 'shape': (2,)}",
           "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
           "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
           "{'descr': \"<f4', 'fortran_order': False, 'shape': (2,)}",
           "{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2,)}",
           "{descr: '<f4', 'fortran_order': False, 'shape': (2,)}",
           "{'descr': <f4, 'fortran_order': False, 'shape': (2,)}",
           "{'descr': '<f4', 'fortran_order': false, 'shape': (2,)}",
           "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
           "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': 2}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (1_0,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (0x2,)}",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",
           "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}}",
           "{'descr': '<f4',, 'fortran_order': False, 'shape': (2,)}",
           std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)}") + '\0',
       })
    BOOST_TEST_CONTEXT(dict) {
      std::string message = refusal(npyFile(dict, std::string(8, 'a')));
      BOOST_TEST(contains(message, "x.npy: header is not a valid .npy header dict: expected "));
      BOOST_TEST(message.find('\n') == std::string::npos);
    }
  BOOST_TEST(refusal(npyFile("{'descr' '<f4'}")) ==
             "x.npy: header is not a valid .npy header dict: expected ':' after the key at byte 9 of the header but "
             "found \"'<f4'}\\x0a\"");
}

BOOST_AUTO_TEST_CASE(refuses_missing_repeated_and_unexpected_keys) {
  BOOST_TEST(refusal(npyFile("{'descr': '<f4', 'fortran_order': False}")) ==
             "x.npy: header has no 'shape' key; a .npy header holds 'descr', 'fortran_order' and 'shape'");
  BOOST_TEST(contains(refusal(npyFile("{'shape': (), 'fortran_order': False}")), "has no 'descr' key"));
  BOOST_TEST(contains(refusal(npyFile("{'shape': (), 'descr': '<f4'}")), "has no 'fortran_order' key"));
  BOOST_TEST(contains(refusal(npyFile("{}")), "has no 'descr' key"));
  BOOST_TEST(refusal(npyFile("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': ()}")) ==
             "x.npy: header has the key 'descr' twice");
  BOOST_TEST(refusal(npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (), 'align': True}")) ==
             "x.npy: header has an unexpected key 'align'; a .npy header holds only 'descr', 'fortran_order' and "
             "'shape'");
}

BOOST_AUTO_TEST_CASE(refuses_fortran_order) {
  BOOST_TEST(refusal(npyFile(dictFor("<f4", "(2, 3)", "True"), std::string(24, 'a'))) ==
             "x.npy is in Fortran order; mlpipe reads C-order arrays only: save it with np.ascontiguousarray");
}

BOOST_AUTO_TEST_CASE(refuses_big_endian) {
  for (std::string_view descr : {">f4", ">f8", ">i4", ">i8", ">f2", ">i2", ">u4", ">u8"})
    BOOST_TEST(refusal(npyFile(dictFor(descr, "()"), std::string(8, 'a'))) ==
               fmt::format("x.npy is big-endian ('{}'); mlpipe reads little-endian floats and integers", descr));
}

BOOST_AUTO_TEST_CASE(refuses_unsupported_dtypes) {
  for (std::string_view descr : {"<e2", "<c8", "|O", "|f4", "|i4", "|u2", "|f2", "<U3", "<M8[ns]", "f4", "<u16", ""})
    BOOST_TEST(refusal(npyFile(dictFor(descr, "()"), std::string(4, 'a'))) ==
               fmt::format("x.npy has dtype '{}', which mlpipe does not read; it reads '<f4' (f32), '<f8' (f64), "
                           "'<f2' (f16), '|i1' '<i2' '<i4' '<i8' (signed integers), '|u1' '<u2' '<u4' '<u8' "
                           "(unsigned integers) and '|b1' (bool)",
                           descr));
  // A dtype string full of junk is quoted short and printable.
  std::string junk = refusal(npyFile(dictFor(std::string(100, 'z') + "\x01", "()")));
  BOOST_TEST(contains(junk, "'" + std::string(40, 'z') + "...'"));
  BOOST_TEST(refusal(npyFile("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}")) ==
             "x.npy holds a structured array (its 'descr' is a list of fields); mlpipe reads plain f32, f64, i32, i64, "
             "f16 and bool arrays only");
}

BOOST_AUTO_TEST_CASE(refuses_truncated_and_trailing_data) {
  BOOST_TEST(refusal(npyFile(dictFor("<f4", "(4, 4)"), std::string(12, 'a'))) ==
             "x.npy: header's shape 4x4 of f32 needs 64 bytes of data but the file holds 12");
  BOOST_TEST(refusal(npyFile(dictFor("<i8", "(2,)"), std::string(17, 'a'))) ==
             "x.npy: header's shape 2 of i64 needs 16 bytes of data but the file holds 17");
  BOOST_TEST(refusal(npyFile(dictFor("<f8", "()"))) ==
             "x.npy: header's scalar f64 needs 8 bytes of data but the file holds 0");
  BOOST_TEST(refusal(npyFile(dictFor("<i4", "(0, 5)"), "x")) ==
             "x.npy: header's shape 0x5 of i32 needs 0 bytes of data but the file holds 1");
  // Cutting a valid file anywhere inside its data is refused.
  std::string whole = serializeNpy(randomTensor(DType::f64, {3, 3}));
  for (size_t cut = 128; cut < whole.size(); cut += 7)
    BOOST_TEST(contains(refusal(whole.substr(0, cut)), "needs 72 bytes of data but the file holds"));
}

BOOST_AUTO_TEST_CASE(refuses_negative_and_oversized_dimensions) {
  BOOST_TEST(refusal(npyFile(dictFor("<f4", "(2, -3)"))) == "x.npy: header's shape has a negative dimension, -3");
  BOOST_TEST(refusal(npyFile(dictFor("<f4", "(9223372036854775808,)"))) ==
             "x.npy: header's shape has a dimension that does not fit in 64 bits");
  BOOST_TEST(refusal(npyFile(dictFor("<f4", "(99999999999999999999999999999999,)"))) ==
             "x.npy: header's shape has a dimension that does not fit in 64 bits");
}

BOOST_AUTO_TEST_CASE(refuses_hostile_shapes_quickly_without_allocating) {
  std::string data(64, 'a');
  std::vector<std::pair<std::string, std::string>> cases = {
      {npyFile(dictFor("<f4", "(1099511627776, 1099511627776)"), data), "needs more than 2^63 bytes"},
      {npyFile(dictFor("<f8", "(1048576, 1048576, 1024)"), data), "needs 9007199254740992 bytes of data"},
      {npyFile(dictFor("<i8", "(9223372036854775807,)"), data), "needs more than 2^63 bytes"},
      {npyFile(dictFor("<i4", "(4611686018427387904, 4611686018427387904, 0)"), data), "needs more than 2^63"},
      {npyFile(dictFor("<f4", "(" + std::string(100000, '7') + ",)"), data), "does not fit in 64 bits"},
  };
  // A version 2.0 preamble that announces a 4 GiB header.
  std::string hugeHeader = npyFile(dictFor("<f4", "()"), "abcd", 2);
  std::memset(hugeHeader.data() + 8, 0xff, 4);
  cases.push_back({hugeHeader, "announces a 4294967295-byte header"});

  for (const auto &[file, expected] : cases) {
    largestAllocation = 0;
    auto start = std::chrono::steady_clock::now();
    std::string message = refusal(file);
    std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
    BOOST_TEST(contains(message, expected));
    BOOST_TEST(largestAllocation.load() < 2 * file.size() + 4096);
    BOOST_TEST(elapsed.count() < 200.0);
  }
  // The message stays one short line even for a shape with many dimensions.
  std::string manyDims = "(";
  for (int i = 0; i < 5000; ++i)
    manyDims += "3, ";
  BOOST_TEST(refusal(npyFile(dictFor("<f4", manyDims + ")"))).size() < 300u);

  // A zero dimension before huge ones makes an empty array, which is valid.
  HostTensor empty = parseNpy(npyFile(dictFor("<i4", "(0, 4611686018427387904, 4611686018427387904)")), "x.npy");
  BOOST_TEST(empty.numel() == 0);
}

BOOST_AUTO_TEST_CASE(read_errors_name_the_path) {
  TempDir dir;
  std::string path = (dir.path / "x.npy").string();
  BOOST_TEST(contains(messageOf([&] { readNpy(path); }), path));
  std::ofstream(path, std::ios::binary) << npyFile(dictFor(">f4", "()"), "abcd");
  BOOST_TEST(messageOf([&] { readNpy(path); }) ==
             path + " is big-endian ('>f4'); mlpipe reads little-endian floats and integers");
}

BOOST_AUTO_TEST_CASE(failed_writes_leave_no_file) {
  TempDir dir;
  HostTensor tensor = randomTensor(DType::f32, {8});
  fs::path missing = dir.path / "no-such-dir" / "x.npy";
  BOOST_CHECK_THROW(writeNpy(missing.string(), tensor), Error);
  BOOST_TEST(!fs::exists(missing.parent_path()));
  // The target is a directory: the rename fails and the temporary goes too.
  fs::create_directory(dir.path / "taken.npy");
  BOOST_CHECK_THROW(writeNpy((dir.path / "taken.npy").string(), tensor), Error);
  BOOST_TEST(dir.names() == (std::vector<std::string>{"taken.npy"}));
  BOOST_TEST(fs::is_empty(dir.path / "taken.npy"));
}

BOOST_AUTO_TEST_CASE(writes_replace_the_old_file_atomically) {
  TempDir dir;
  fs::path target = dir.path / "x.npy";
  HostTensor first = randomTensor(DType::i64, {5});
  HostTensor second = randomTensor(DType::f32, {2, 2});
  writeNpy(target.string(), first);
  // A hard link to the old file keeps its contents: the new file replaced the
  // name (a rename) instead of rewriting the old bytes in place.
  fs::create_hard_link(target, dir.path / "old.npy");
  writeNpy(target.string(), second);
  BOOST_TEST(sameTensor(readNpy(target.string()), second));
  BOOST_TEST(sameTensor(readNpy((dir.path / "old.npy").string()), first));
  BOOST_TEST(fs::hard_link_count(target) == 1u);
  std::vector<std::string> names = dir.names();
  std::sort(names.begin(), names.end());
  BOOST_TEST(names == (std::vector<std::string>{"old.npy", "x.npy"}));
}

// The committed fuzzing seeds in testdata/npy load or are refused as their
// README says, and every seed there is listed here.
BOOST_AUTO_TEST_CASE(seed_files_load_or_are_refused_as_documented) {
  struct Valid {
    DType dtype;
    Shape shape;
    bool versionOne; // written by np.save, so our writer gives the same bytes
  };
  std::map<std::string, Valid> valid = {
      {"valid_f32.npy", {DType::f32, {3, 4}, true}},     {"valid_f64.npy", {DType::f64, {5}, true}},
      {"valid_i32.npy", {DType::i32, {2, 3}, true}},     {"valid_i64.npy", {DType::i64, {2, 2, 2}, true}},
      {"valid_scalar_f64.npy", {DType::f64, {}, true}},  {"valid_empty_f32.npy", {DType::f32, {0, 3}, true}},
      {"valid_v2_f32.npy", {DType::f32, {2, 2}, false}}, {"valid_v3_i64.npy", {DType::i64, {3}, false}},
      {"valid_f16.npy", {DType::f16, {4}, true}},        {"valid_bool.npy", {DType::i1, {2, 3}, true}},
      {"valid_u32.npy", {DType::u32, {4}, true}},
  };
  std::map<std::string, std::string> refused = {
      {"bad_magic.npy", "is not a .npy file"},
      {"bad_version.npy", "has .npy format version 4.0"},
      {"bad_truncated_header.npy", "is truncated: its preamble announces a 118-byte header but only 30 bytes follow"},
      {"bad_truncated_data.npy", "needs 48 bytes of data but the file holds 43"},
      {"bad_trailing_data.npy", "needs 48 bytes of data but the file holds 52"},
      {"bad_dict.npy", "header is not a valid .npy header dict"},
      {"bad_fortran.npy", "is in Fortran order"},
      {"bad_big_endian.npy", "is big-endian ('>f4')"},
      {"bad_dtype_c8.npy", "has dtype '<c8'"},
      {"bad_huge_shape.npy", "needs more than 2^63 bytes"},
  };
  size_t seen = 0;
  for (const auto &entry : fs::directory_iterator(fs::path(MLPIPE_TESTDATA) / "npy")) {
    std::string name = entry.path().filename().string();
    if (entry.path().extension() != ".npy")
      continue;
    ++seen;
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(fs::file_size(entry.path()) < 1024u);
      std::string path = entry.path().string();
      if (auto it = valid.find(name); it != valid.end()) {
        HostTensor tensor = readNpy(path);
        BOOST_TEST(std::string(dtypeName(tensor.dtype())) == dtypeName(it->second.dtype));
        BOOST_TEST(tensor.shape() == it->second.shape);
        if (it->second.versionOne)
          BOOST_TEST(serializeNpy(tensor) == fileContents(entry.path()));
      } else if (auto bad = refused.find(name); bad != refused.end()) {
        std::string message = messageOf([&] { readNpy(path); });
        BOOST_TEST(contains(message, path));
        BOOST_TEST(contains(message, bad->second));
      } else {
        BOOST_ERROR("seed " << name << " is not listed in this test");
      }
    }
  }
  BOOST_TEST(seen == valid.size() + refused.size());
}

// numpy has no bf16: a bf16 tensor is written as f32, exactly.
BOOST_AUTO_TEST_CASE(writes_bf16_as_f32) {
  HostTensor original = HostTensor::fromDoubles(DType::bf16, {2, 3}, {0.1, -1.5, 3e38, -0.0, 7, 1e-3});
  HostTensor back = parseNpy(serializeNpy(original), "memory");
  BOOST_TEST(std::string(dtypeName(back.dtype())) == "f32");
  BOOST_TEST(back.shape() == original.shape());
  for (int64_t i = 0; i < original.numel(); ++i)
    BOOST_TEST(back.at(i) == original.at(i));
}
