#define BOOST_TEST_MODULE blas
#include <boost/test/unit_test.hpp>

#include "support/blas.h"

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

using namespace mlpipe;

namespace {

// C = A B (+ C) by the definition, in long double, for checking.
std::vector<double> reference(const std::vector<double> &a, bool ta, const std::vector<double> &b, bool tb,
                              const std::vector<double> &c0, int m, int n, int k) {
  std::vector<double> c(c0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      long double sum = c0[i * n + j];
      for (int p = 0; p < k; ++p)
        sum += static_cast<long double>(ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = static_cast<double>(sum);
    }
  return c;
}

void checkAllTranspositions(int m, int n, int k) {
  std::mt19937 generator(std::random_device{}());
  std::uniform_real_distribution<double> uniform(-1, 1);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      std::vector<double> a(m * k), b(k * n), c(m * n);
      for (auto *v : {&a, &b, &c})
        for (double &x : *v)
          x = uniform(generator);
      std::vector<double> expected = reference(a, ta, b, tb, c, m, n, k);
      blas::dgemm()(blas::kRowMajor, ta ? blas::kTrans : blas::kNoTrans, tb ? blas::kTrans : blas::kNoTrans, m, n, k,
                    1.0, a.data(), ta ? m : k, b.data(), tb ? k : n, 1.0, c.data(), n);
      for (int i = 0; i < m * n; ++i)
        BOOST_TEST(std::abs(c[i] - expected[i]) < 1e-11, "element " << i << " with " << blas::implementation());
      std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end()), cf(m * n, 0.0f);
      blas::sgemm()(blas::kRowMajor, ta ? blas::kTrans : blas::kNoTrans, tb ? blas::kTrans : blas::kNoTrans, m, n, k,
                    1.0f, af.data(), ta ? m : k, bf.data(), tb ? k : n, 0.0f, cf.data(), n);
      std::vector<double> zero(m * n, 0.0), expectedF = reference(a, ta, b, tb, zero, m, n, k);
      for (int i = 0; i < m * n; ++i)
        BOOST_TEST(std::abs(cf[i] - expectedF[i]) < 1e-4);
    }
}

} // namespace

BOOST_AUTO_TEST_CASE(gemm_matches_the_definition) {
  checkAllTranspositions(7, 5, 9);
  checkAllTranspositions(200, 100, 500); // large enough for the built-in loops to use threads
}

// MLPIPE_BLAS=builtin is read once per process, so the built-in loops are
// checked in a child run of this same test binary.
BOOST_AUTO_TEST_CASE(builtin_gemm_matches_the_definition) {
  if (std::getenv("MLPIPE_BLAS")) {
    BOOST_TEST(blas::implementation() == "mlpipe's own loops");
    return;
  }
  std::string self = boost::unit_test::framework::master_test_suite().argv[0];
  int status = std::system(("MLPIPE_BLAS=builtin " + self + " > /dev/null").c_str());
  BOOST_TEST(status == 0);
}
