// SafetensorsFile on files built in memory: every dtype read back, every malformed header refused.
#define BOOST_TEST_MODULE safetensors
#include <boost/test/unit_test.hpp>

#include "test_support.h"

#include "models/safetensors.h"
#include "support/error.h"
#include "support/output_file.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <unistd.h>

using namespace mlpipe;
using mlpipe::testing::messageOf;
using mlpipe::testing::rng;
namespace fs = std::filesystem;

namespace {

// ---- A tiny writer: just enough of the format to build test files ----------

struct TensorSpec {
  std::string name, dtype;
  Shape shape;
  std::string data; // raw little-endian bytes
};

std::string lengthPrefix(uint64_t length) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((length >> (8 * i)) & 0xFF);
  return bytes;
}

// A file with the given header text (padded with spaces to a multiple of 8,
// as the format allows) followed by `data`.
std::string fileWithHeader(std::string header, const std::string &data) {
  while (header.size() % 8)
    header += ' ';
  return lengthPrefix(header.size()) + header + data;
}

std::string jsonShape(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string writeSafetensors(const std::vector<TensorSpec> &tensors, const std::string &metadata = "") {
  std::string header = "{", data;
  for (const TensorSpec &tensor : tensors) {
    uint64_t begin = data.size();
    data += tensor.data;
    header += (header.size() > 1 ? ", " : "") +
              ("\"" + tensor.name + "\": {\"dtype\": \"" + tensor.dtype + "\", \"shape\": " + jsonShape(tensor.shape) +
               ", \"data_offsets\": [" + std::to_string(begin) + ", " + std::to_string(data.size()) + "]}");
  }
  if (!metadata.empty())
    header += (header.size() > 1 ? ", " : "") + ("\"__metadata__\": " + metadata);
  return fileWithHeader(header + "}", data);
}

template <typename T> std::string bytesOf(const std::vector<T> &values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty())
    std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// IEEE half to double, straight from the definition (independent of the
// library's bit manipulation).
double halfValue(uint16_t half) {
  int sign = half & 0x8000 ? -1 : 1;
  int exponent = (half >> 10) & 0x1F;
  int mantissa = half & 0x3FF;
  if (exponent == 0)
    return sign * std::ldexp(mantissa, -24);
  if (exponent == 31)
    return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

void refusedWith(const std::string &bytes, const std::string &needle) {
  std::string message = messageOf([&] { SafetensorsFile::fromBytes(bytes, "model.safetensors"); });
  BOOST_TEST_CONTEXT("message: " << message) { BOOST_TEST(message.find(needle) != std::string::npos); }
}

// A file whose header is the one entry `entry` for tensor "t", with `dataSize` zero bytes of data.
std::string oneEntry(const std::string &entry, size_t dataSize = 16) {
  return fileWithHeader("{\"t\": " + entry + "}", std::string(dataSize, '\0'));
}

} // namespace

BOOST_AUTO_TEST_CASE(reads_every_supported_dtype) {
  std::uniform_real_distribution<float> uniform(-10, 10);
  std::vector<float> f32(24);
  for (float &v : f32)
    v = uniform(rng());
  std::vector<double> f64(6);
  for (double &v : f64)
    v = uniform(rng()) * 1e10;
  std::vector<uint16_t> f16(64), bf16(64);
  for (uint16_t &v : f16)
    v = static_cast<uint16_t>(rng()());
  for (uint16_t &v : bf16)
    v = static_cast<uint16_t>(rng()());
  f16[0] = 0x3C00, f16[1] = 0xC000, f16[2] = 0x0001, f16[3] = 0x7BFF, f16[4] = 0x7C00, f16[5] = 0x8000;
  std::vector<int32_t> i32 = {1, -2, 2147483647, -2147483647 - 1};
  std::vector<int64_t> i64 = {int64_t(1) << 40, -7};

  SafetensorsFile file = SafetensorsFile::fromBytes(writeSafetensors({{"weight", "F32", {4, 6}, bytesOf(f32)},
                                                                      {"half", "F16", {8, 8}, bytesOf(f16)},
                                                                      {"brain", "BF16", {64}, bytesOf(bf16)},
                                                                      {"double", "F64", {2, 3}, bytesOf(f64)},
                                                                      {"ints", "I32", {4}, bytesOf(i32)},
                                                                      {"longs", "I64", {2}, bytesOf(i64)}},
                                                                     "{\"format\": \"pt\"}"),
                                                    "model.safetensors");

  HostTensor weight = file.read("weight");
  BOOST_TEST(weight.describe() == "4x6xf32");
  BOOST_TEST(std::memcmp(weight.data(), f32.data(), f32.size() * 4) == 0);

  HostTensor half = file.read("half");
  BOOST_TEST(half.describe() == "8x8xf32");
  BOOST_TEST(half.as<float>()[0] == 1.0f);
  BOOST_TEST(half.as<float>()[1] == -2.0f);
  BOOST_TEST(half.as<float>()[2] == std::ldexp(1.0f, -24));
  BOOST_TEST(half.as<float>()[3] == 65504.0f);
  BOOST_TEST(std::isinf(half.as<float>()[4]));
  BOOST_TEST(std::signbit(half.as<float>()[5]));
  for (size_t i = 0; i < f16.size(); ++i) {
    double expected = halfValue(f16[i]);
    float got = half.as<float>()[i];
    BOOST_TEST_CONTEXT("F16 bits " << f16[i]) {
      if (std::isnan(expected))
        BOOST_TEST(std::isnan(got));
      else
        BOOST_TEST(static_cast<double>(got) == expected);
    }
  }

  HostTensor brain = file.read("brain");
  BOOST_TEST(brain.describe() == "64xf32");
  for (size_t i = 0; i < bf16.size(); ++i) {
    uint32_t bits = static_cast<uint32_t>(bf16[i]) << 16;
    uint32_t got;
    std::memcpy(&got, &brain.as<float>()[i], 4);
    BOOST_TEST(got == bits);
  }

  HostTensor doubles = file.read("double");
  BOOST_TEST(doubles.describe() == "2x3xf64");
  BOOST_TEST(std::memcmp(doubles.data(), f64.data(), f64.size() * 8) == 0);
  BOOST_TEST(file.read("ints").as<int32_t>()[3] == i32[3]);
  BOOST_TEST(file.read("longs").describe() == "2xi64");
  BOOST_TEST(file.read("longs").as<int64_t>()[0] == i64[0]);
}

BOOST_AUTO_TEST_CASE(lists_tensors_and_metadata) {
  SafetensorsFile file =
      SafetensorsFile::fromBytes(writeSafetensors({{"wte.weight", "F32", {2, 2}, std::string(16, '\0')},
                                                   {"ln_f.bias", "F32", {2}, std::string(8, '\0')},
                                                   {"scalar", "F32", {}, bytesOf(std::vector<float>{2.5f})},
                                                   {"empty", "F32", {0, 5}, ""}},
                                                  "{\"format\": \"pt\"}"),
                                 "model.safetensors");
  BOOST_TEST(file.names() == (std::vector<std::string>{"empty", "ln_f.bias", "scalar", "wte.weight"}),
             boost::test_tools::per_element());
  BOOST_TEST(file.contains("ln_f.bias"));
  BOOST_TEST(!file.contains("__metadata__"));
  BOOST_TEST(file.metadata().at("format") == "pt");
  const SafetensorsFile::TensorInfo &info = file.info("ln_f.bias");
  BOOST_TEST(info.dtype == "F32");
  BOOST_TEST(info.shape == (Shape{2}), boost::test_tools::per_element());
  BOOST_TEST(info.begin == 16u);
  BOOST_TEST(info.end == 24u);
  BOOST_TEST(file.read("scalar").describe() == "f32");
  BOOST_TEST(file.read("scalar").at(0) == 2.5);
  BOOST_TEST(file.read("empty").numel() == 0);
  BOOST_TEST(file.readExpecting("wte.weight", {2, 2}).describe() == "2x2xf32");
}

BOOST_AUTO_TEST_CASE(opens_files_on_disk) {
  fs::path path =
      fs::temp_directory_path() / ("mlpipe-safetensors-test-" + std::to_string(::getpid()) + ".safetensors");
  std::vector<float> values = {1, 2, 3, 4, 5, 6};
  writeOutput(path.string(), writeSafetensors({{"w", "F32", {2, 3}, bytesOf(values)}}));
  {
    SafetensorsFile file = SafetensorsFile::open(path.string());
    BOOST_TEST(file.read("w").toDoubles() == (std::vector<double>{1, 2, 3, 4, 5, 6}), boost::test_tools::per_element());
  }
  fs::remove(path);
  std::string message = messageOf([&] { SafetensorsFile::open(path.string()); });
  BOOST_TEST(message.find(path.string()) != std::string::npos);
}

BOOST_AUTO_TEST_CASE(refuses_missing_tensors_and_wrong_shapes) {
  SafetensorsFile file = SafetensorsFile::fromBytes(
      writeSafetensors({{"wpe.weight", "F32", {1024, 768}, std::string(1024 * 768 * 4, '\0')},
                        {"bytes", "I8", {4}, std::string(4, '\0')}}),
      "model.safetensors");
  BOOST_TEST(messageOf([&] { file.read("h.0.attn.c_attn.weight"); }) ==
             "model.safetensors has no tensor 'h.0.attn.c_attn.weight'");
  BOOST_TEST(messageOf([&] { file.info("h.0.attn.c_attn.weight"); }) ==
             "model.safetensors has no tensor 'h.0.attn.c_attn.weight'");
  BOOST_TEST(messageOf([&] {
               file.readExpecting("wpe.weight", {2048, 768});
             }) == "model.safetensors: tensor 'wpe.weight' has shape 1024x768, expected 2048x768");
  BOOST_TEST(file.readExpecting("wpe.weight", {1024, 768}).describe() == "1024x768xf32");
  // A dtype the format knows but mlpipe does not read: listed, refused by name.
  BOOST_TEST(file.info("bytes").dtype == "I8");
  BOOST_TEST(messageOf([&] { file.read("bytes"); }).find("has dtype I8, which mlpipe cannot read") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(refuses_malformed_files) {
  refusedWith("abc", "model.safetensors: file holds 3 bytes, too few for the 8-byte header length");
  refusedWith(lengthPrefix(1000000) + std::string(5000, ' '),
              "model.safetensors: header claims 1000000 bytes but the file holds 5000 after the length");
  refusedWith(lengthPrefix(~uint64_t(0)) + "{}", "header claims 18446744073709551615 bytes");
  refusedWith(fileWithHeader("{\"t\": {\"dtype\": ", ""), "model.safetensors header is not valid JSON");
  refusedWith(fileWithHeader("{\"t\": \xFF}", ""), "model.safetensors header is not valid JSON");
  refusedWith(fileWithHeader(std::string(1000, '[') + std::string(1000, ']'), ""), "deeper than");
  refusedWith(fileWithHeader("[1, 2]", ""), "model.safetensors: header is an array, not a JSON object");
  refusedWith(oneEntry("[]"), "entry 't' is an array, not an object");
  refusedWith(oneEntry("{\"shape\": [4], \"data_offsets\": [0, 16]}"), "tensor 't' has no dtype");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"data_offsets\": [0, 16]}"), "tensor 't' has no shape");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"shape\": [4]}"), "tensor 't' has no data_offsets");
  refusedWith(oneEntry("{\"dtype\": 32, \"shape\": [4], \"data_offsets\": [0, 16]}"),
              "tensor 't' has a dtype that is a number, not a string");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"shape\": 4, \"data_offsets\": [0, 16]}"),
              "tensor 't' has a shape that is a number, not an array");
  for (const char *shape : {"[-4]", "[4.5]", "[\"4\"]", "[9223372036854775808]", "[1e300]"})
    refusedWith(oneEntry(std::string("{\"dtype\": \"F32\", \"shape\": ") + shape + ", \"data_offsets\": [0, 16]}"),
                "tensor 't' has a shape dimension that is not a non-negative 64-bit integer");
  for (const char *offsets : {"[0]", "[0, 16, 32]", "[-1, 16]", "[0, \"16\"]", "{}", "[0, 1.5]"})
    refusedWith(oneEntry(std::string("{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": ") + offsets + "}"),
                "tensor 't' has data_offsets that are not two non-negative integers");
  refusedWith(oneEntry("{\"dtype\": \"F33\", \"shape\": [4], \"data_offsets\": [0, 16]}"),
              "tensor 't' has unknown dtype 'F33'");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"shape\": [1099511627776, 1099511627776], \"data_offsets\": [0, 16]}"),
              "tensor 't' has shape 1099511627776x1099511627776, with more elements than fit in 64 bits");
  refusedWith(oneEntry("{\"dtype\": \"F64\", \"shape\": [4611686018427387904], \"data_offsets\": [0, 16]}"),
              "needs more than 2^64 bytes");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [16, 0]}"),
              "tensor 't' has data_offsets [16, 0], which end before they begin");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}"),
              "tensor 't' has data_offsets [8, 24] beyond the data section of 16 bytes");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 18446744073709551615]}"),
              "beyond the data section of 16 bytes");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 16]}"),
              "tensor 't' of shape 3 and dtype F32 needs 12 bytes, but its data_offsets [0, 16] hold 16");
  refusedWith(fileWithHeader("{\"__metadata__\": {\"format\": 1}}", ""),
              "__metadata__ entry 'format' is a number, not a string");
  refusedWith(fileWithHeader("{\"__metadata__\": []}", ""), "__metadata__ is an array, not an object");
}

BOOST_AUTO_TEST_CASE(refuses_tensors_that_do_not_tile_the_data) {
  // The published format: data_offsets tile the data section, no byte shared,
  // none left over, each name once. The reference loader refuses the rest.
  auto twoEntries = [](const std::string &a, const std::string &b, size_t dataSize) {
    return fileWithHeader("{\"a\": " + a + ", \"b\": " + b + "}", std::string(dataSize, '\0'));
  };
  refusedWith(twoEntries("{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}",
                         "{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}", 16),
              "model.safetensors: tensors 'a' and 'b' overlap: their data_offsets are [0, 16] and [0, 16]");
  refusedWith(twoEntries("{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}",
                         "{\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [8, 24]}", 24),
              "tensors 'a' and 'b' overlap: their data_offsets are [0, 16] and [8, 24]");
  refusedWith(twoEntries("{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}",
                         "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [16, 24]}", 24),
              "bytes 8 to 16 of the data section belong to no tensor (after 'a')");
  refusedWith(twoEntries("{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}",
                         "{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [16, 24]}", 24),
              "bytes 0 to 8 of the data section belong to no tensor (before 'a')");
  refusedWith(oneEntry("{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}"),
              "the data section holds 16 bytes, but its tensors cover 8");
  refusedWith(fileWithHeader("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                             "\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
                             std::string(16, '\0')),
              "model.safetensors: the header names tensor 'a' twice");
  // A name written with an escape is the same name.
  refusedWith(fileWithHeader("{\"ab\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}, "
                             "\"a\\u0062\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]}}",
                             std::string(16, '\0')),
              "the header names tensor 'ab' twice");
  // A zero-size tensor takes no bytes; the header may list tensors in any
  // order.
  BOOST_CHECK_NO_THROW(
      SafetensorsFile::fromBytes(twoEntries("{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}",
                                            "{\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}", 12),
                                 "x"));
  BOOST_CHECK_NO_THROW(
      SafetensorsFile::fromBytes(twoEntries("{\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}",
                                            "{\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]}", 8),
                                 "x"));
}

BOOST_AUTO_TEST_CASE(survives_damaged_files) {
  // Random damage to a valid file's header and length: either a clean refusal
  // or a file whose every tensor reads.
  std::vector<float> values(32, 1.0f);
  const std::string valid = writeSafetensors({{"a", "F32", {4, 8}, bytesOf(values)},
                                              {"b", "F16", {8}, std::string(16, '\x3C')},
                                              {"c", "BF16", {2, 2}, std::string(8, 'x')}},
                                             "{\"format\": \"pt\"}");
  const size_t headerEnd = valid.size() - 32 * 4 - 16 - 8;
  for (int i = 0; i < 2000; ++i) {
    std::string damaged = valid;
    for (int n = std::uniform_int_distribution<int>(1, 4)(rng()); n > 0; --n)
      damaged[std::uniform_int_distribution<size_t>(0, headerEnd - 1)(rng())] =
          static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng()));
    if (i % 5 == 0)
      damaged.resize(std::uniform_int_distribution<size_t>(0, damaged.size())(rng()));
    try {
      SafetensorsFile file = SafetensorsFile::fromBytes(damaged, "damaged.safetensors");
      for (const std::string &name : file.names()) {
        try {
          file.read(name);
        } catch (const Error &) {
        }
      }
    } catch (const Error &) {
    }
  }
}
