// OutputFiles: all outputs or none, nothing but regular files replaced, one
// file never named twice.
#define BOOST_TEST_MODULE output_file
#include <boost/test/unit_test.hpp>

#include "test_support.h"

#include "support/output_file.h"

#include <filesystem>
#include <fstream>
#include <sys/stat.h>

using namespace mlpipe;
using mlpipe::testing::messageOf;
namespace fs = std::filesystem;

namespace {

// A fresh directory under the system's temporary one, removed afterwards.
struct Scratch {
  fs::path root;
  Scratch() {
    root = fs::temp_directory_path() /
           ("mlpipe-output-" + std::to_string(::getpid()) + "-" + std::to_string(mlpipe::testing::rng()()));
    fs::create_directories(root);
  }
  ~Scratch() { fs::remove_all(root); }
  std::string path(const std::string &name) const { return (root / name).string(); }
};

std::string contents(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

} // namespace

BOOST_AUTO_TEST_CASE(writes_every_output_on_commit_and_none_before) {
  Scratch scratch;
  std::ofstream(scratch.path("old")) << "old";
  {
    OutputFiles outputs;
    outputs.write(scratch.path("new"), "fresh");
    outputs.write(scratch.path("old"), "replaced");
    BOOST_TEST(!fs::exists(scratch.path("new")));
    BOOST_TEST(contents(scratch.path("old")) == "old");
    outputs.commit();
  }
  BOOST_TEST(contents(scratch.path("new")) == "fresh");
  BOOST_TEST(contents(scratch.path("old")) == "replaced");
  BOOST_TEST(std::distance(fs::directory_iterator(scratch.root), fs::directory_iterator()) == 2);
}

BOOST_AUTO_TEST_CASE(a_set_not_committed_leaves_nothing) {
  Scratch scratch;
  std::ofstream(scratch.path("old")) << "old";
  {
    OutputFiles outputs;
    outputs.createDirectories(scratch.path("made/deeper"));
    outputs.write(scratch.path("made/deeper/a"), "a");
    outputs.write(scratch.path("old"), "b");
    // A failure before commit, e.g. a path that cannot be written.
    BOOST_TEST(messageOf([&] { outputs.add(scratch.path("missing/c")); }).find("no directory") != std::string::npos);
  }
  BOOST_TEST(!fs::exists(scratch.path("made")));
  BOOST_TEST(contents(scratch.path("old")) == "old");
  BOOST_TEST(std::distance(fs::directory_iterator(scratch.root), fs::directory_iterator()) == 1);
}

BOOST_AUTO_TEST_CASE(refuses_one_file_named_twice) {
  Scratch scratch;
  OutputFiles outputs;
  outputs.add(scratch.path("a"));
  BOOST_TEST(messageOf([&] { outputs.add(scratch.path("a")); }) == scratch.path("a") + " is named as two outputs");
  fs::create_symlink("a", scratch.path("link"));
  BOOST_TEST(messageOf([&] { outputs.add(scratch.path("link")); }).find("are one file, named as two outputs") !=
             std::string::npos);
  BOOST_TEST(messageOf([&] { outputs.add(scratch.root.string() + "/./a"); }).find("are one file") != std::string::npos);
  outputs.add("-");
  BOOST_TEST(messageOf([&] { outputs.add("-"); }) == "- is named as two outputs");
}

BOOST_AUTO_TEST_CASE(follows_links_and_keeps_them) {
  Scratch scratch;
  std::ofstream(scratch.path("target")) << "old";
  ::chmod(scratch.path("target").c_str(), 0640);
  fs::create_symlink("target", scratch.path("link"));
  writeOutput(scratch.path("link"), "new");
  BOOST_TEST(fs::is_symlink(scratch.path("link")));
  BOOST_TEST(contents(scratch.path("target")) == "new");
  struct stat status;
  BOOST_REQUIRE(::stat(scratch.path("target").c_str(), &status) == 0);
  BOOST_TEST((status.st_mode & 07777) == 0640u); // the replaced file's permissions are kept
}

BOOST_AUTO_TEST_CASE(refuses_directories_and_empty_names) {
  Scratch scratch;
  BOOST_TEST(messageOf([&] { writeOutput(scratch.root.string(), "x"); }) ==
             "cannot write " + scratch.root.string() + ": it is a directory");
  BOOST_TEST(messageOf([&] { writeOutput("", "x"); }) == "no output file named: give a path, or - for stdout");
  BOOST_TEST(messageOf([&] { readInput(scratch.root.string()); }) ==
             "cannot read " + scratch.root.string() + ": it is a directory");
}
