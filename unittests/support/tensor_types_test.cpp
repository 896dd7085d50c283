#define BOOST_TEST_MODULE tensor_types
#include <boost/test/unit_test.hpp>

#include "support/error.h"
#include "support/host_tensor.h"
#include "support/tensor_types.h"

using namespace mlpipe;

BOOST_AUTO_TEST_CASE(parses_shapes) {
  BOOST_TEST(parseShape("64x256") == (Shape{64, 256}));
  BOOST_TEST(parseShape("7") == (Shape{7}));
  BOOST_TEST(formatShape({2, 3, 4}) == "2x3x4");
}

BOOST_AUTO_TEST_CASE(refuses_bad_shapes) {
  for (const char *text : {"", "x", "64x", "0x3", "-1x2", "64xq", "3.5", "99999999999x99999999999"})
    BOOST_CHECK_THROW(parseShape(text), Error);
}

BOOST_AUTO_TEST_CASE(refuses_overflowing_element_counts) {
  BOOST_CHECK_THROW(numElements({int64_t(1) << 40, int64_t(1) << 40}), Error);
  BOOST_CHECK_THROW(byteSize({int64_t(1) << 31, int64_t(1) << 31}, DType::f64), Error);
}

BOOST_AUTO_TEST_CASE(host_tensor_round_trips_doubles) {
  HostTensor t = HostTensor::fromDoubles(DType::i32, {2, 2}, {1, -2, 3, 4});
  BOOST_TEST(t.as<int32_t>()[1] == -2);
  BOOST_TEST(t.describe() == "2x2xi32");
}
