// fs::AtomicFile: the final name holds every piece after commit(), and nothing at all (nor a
// temporary) when the writer is dropped before it, or when the directory is missing.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "validate/core/fs.hpp"

namespace vfs = validate::fs;
namespace stdfs = std::filesystem;

namespace {

stdfs::path fresh_dir(const std::string& name) {
  const auto d = stdfs::temp_directory_path() / ("validate_atomic_file_" + std::to_string(::getpid()) + "_" + name);
  stdfs::remove_all(d);
  stdfs::create_directories(d);
  return d;
}

std::string slurp(const stdfs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::size_t entries(const stdfs::path& d) {
  return static_cast<std::size_t>(std::distance(stdfs::directory_iterator(d), stdfs::directory_iterator{}));
}

}  // namespace

TEST(AtomicFile, PiecesLandUnderTheFinalNameOnlyAtCommit) {
  const auto d = fresh_dir("commit");
  const std::string path = (d / "x.npy").string();
  auto f = vfs::AtomicFile::open(path);
  ASSERT_TRUE(f) << f.message();
  ASSERT_TRUE(f->write("head", 4));
  ASSERT_TRUE(f->write("", 0));
  ASSERT_TRUE(f->write("-body", 5));
  EXPECT_FALSE(stdfs::exists(path)) << "visible before commit";
  EXPECT_EQ(entries(d), 1u);  // the temporary
  ASSERT_TRUE(f->commit());
  EXPECT_EQ(slurp(path), "head-body");
  EXPECT_EQ(entries(d), 1u);  // the temporary is gone
  EXPECT_FALSE(f->write("more", 4)) << "a committed file takes no more bytes";
  stdfs::remove_all(d);
}

TEST(AtomicFile, DroppedBeforeCommitLeavesNothingAndKeepsAnOlderFile) {
  const auto d = fresh_dir("drop");
  const std::string path = (d / "x.npy").string();
  { std::ofstream(path) << "old"; }
  {
    auto f = vfs::AtomicFile::open(path);
    ASSERT_TRUE(f) << f.message();
    ASSERT_TRUE(f->write("partial", 7));
  }
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(entries(d), 1u) << "a temporary was left behind";
  stdfs::remove_all(d);
}

TEST(AtomicFile, AMissingDirectoryIsAnErrorNamingThePath) {
  const auto d = fresh_dir("missing");
  const std::string path = (d / "no" / "x.npy").string();
  auto f = vfs::AtomicFile::open(path);
  ASSERT_FALSE(f);
  EXPECT_NE(f.message().find(path), std::string::npos) << f.message();
  EXPECT_EQ(entries(d), 0u);
  stdfs::remove_all(d);
}
