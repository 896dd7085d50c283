// The disk cache's key names the build that compiles: a rebuilt mlpipe
// library must give new keys, never an entry an older build lowered.
#define BOOST_TEST_MODULE compile_cache
#include <boost/test/unit_test.hpp>

#include "driver/compile.h"

#include <filesystem>
#include <sstream>
#include <string>

using namespace mlpipe;

namespace {

// The identity's line for the first path containing `fragment`.
std::string lineFor(const std::string &identity, const std::string &fragment) {
  std::istringstream lines(identity);
  for (std::string line; std::getline(lines, line);)
    if (line.find(fragment) != std::string::npos)
      return line;
  return "";
}

} // namespace

BOOST_AUTO_TEST_CASE(the_identity_names_the_mlpipe_library_loaded) {
  std::string identity = compilerBuildIdentity();
  BOOST_TEST(identity.find("/proc/self/exe") == std::string::npos);
  std::string driver = lineFor(identity, "libmlpipe.so");
  BOOST_TEST_REQUIRE(!driver.empty());
  // Path, size on disk and modification time: the size is the file's.
  std::istringstream fields(driver);
  std::string path, time;
  uintmax_t size = 0;
  fields >> path >> size >> time;
  BOOST_TEST(size == std::filesystem::file_size(path));
  BOOST_TEST(time.find('.') != std::string::npos);
  BOOST_TEST(lineFor(identity, "libboost").empty());
}

BOOST_AUTO_TEST_CASE(the_identity_is_the_same_for_every_call_of_one_process) {
  BOOST_TEST(compilerBuildIdentity() == compilerBuildIdentity());
}
