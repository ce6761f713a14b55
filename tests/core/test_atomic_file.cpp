// fs::AtomicFile: the final name holds every piece after commit(), and nothing at all (nor a
// temporary) when the writer is dropped before it, or when the directory is missing.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "validate/core/fs.hpp"

namespace vfs = validate::fs;
namespace stdfs = std::filesystem;

namespace {

stdfs::path fresh_atomic_dir(const std::string& name) {
  const auto d = stdfs::temp_directory_path() / ("validate_atomic_file_" + std::to_string(::getpid()) + "_" + name);
  stdfs::remove_all(d);
  stdfs::create_directories(d);
  return d;
}

std::string read_whole_file(const stdfs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::size_t entries(const stdfs::path& d) {
  return static_cast<std::size_t>(std::distance(stdfs::directory_iterator(d), stdfs::directory_iterator{}));
}

}  // namespace

TEST(AtomicFile, PiecesLandUnderTheFinalNameOnlyAtCommit) {
  const auto d = fresh_atomic_dir("commit");
  const std::string path = (d / "x.npy").string();
  auto f = vfs::AtomicFile::open(path);
  ASSERT_TRUE(f) << f.message();
  ASSERT_TRUE(f->write("head", 4));
  ASSERT_TRUE(f->write("", 0));
  ASSERT_TRUE(f->write("-body", 5));
  EXPECT_FALSE(stdfs::exists(path)) << "visible before commit";
  EXPECT_EQ(entries(d), 1u);  // the temporary
  ASSERT_TRUE(f->commit());
  EXPECT_EQ(read_whole_file(path), "head-body");
  EXPECT_EQ(entries(d), 1u);  // the temporary is gone
  EXPECT_FALSE(f->write("more", 4)) << "a committed file takes no more bytes";
  stdfs::remove_all(d);
}

TEST(AtomicFile, DroppedBeforeCommitLeavesNothingAndKeepsAnOlderFile) {
  const auto d = fresh_atomic_dir("drop");
  const std::string path = (d / "x.npy").string();
  { std::ofstream(path) << "old"; }
  {
    auto f = vfs::AtomicFile::open(path);
    ASSERT_TRUE(f) << f.message();
    ASSERT_TRUE(f->write("partial", 7));
  }
  EXPECT_EQ(read_whole_file(path), "old");
  EXPECT_EQ(entries(d), 1u) << "a temporary was left behind";
  stdfs::remove_all(d);
}

TEST(AtomicFile, AMissingDirectoryIsAnErrorNamingThePath) {
  const auto d = fresh_atomic_dir("missing");
  const std::string path = (d / "no" / "x.npy").string();
  auto f = vfs::AtomicFile::open(path);
  ASSERT_FALSE(f);
  EXPECT_NE(f.message().find(path), std::string::npos) << f.message();
  EXPECT_EQ(entries(d), 0u);
  stdfs::remove_all(d);
}

// Direct mode (O_DIRECT through a 4 MiB staging buffer, the tail padded and cut back): the file is
// exactly the bytes written, in pieces that straddle the staging buffer and the 4096-byte blocks,
// at lengths around both. Where the filesystem refuses O_DIRECT (tmpfs) the same bytes land the
// ordinary way; /dev/shm, when present, checks that path too.
TEST(AtomicFile, DirectModeWritesExactlyTheBytesAtEveryLength) {
  std::vector<stdfs::path> dirs{fresh_atomic_dir("direct")};
  if (stdfs::is_directory("/dev/shm")) {
    const auto shm = stdfs::path("/dev/shm") / ("validate_atomic_file_" + std::to_string(::getpid()));
    stdfs::remove_all(shm);
    if (stdfs::create_directories(shm)) dirs.push_back(shm);
  }
  const std::size_t stage = std::size_t(4) << 20;
  std::string data(2 * stage + 3 * 4096 + 77, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 2654435761u) >> 13);
  for (const auto& d : dirs) {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{4095}, std::size_t{4096}, std::size_t{4097},
                          stage - 1, stage, stage + 1, data.size()}) {
      const std::string path = (d / ("f" + std::to_string(n))).string();
      auto f = vfs::AtomicFile::open(path, /*direct=*/true);
      ASSERT_TRUE(f) << f.message();
      // A 128-byte header first, then the rest in uneven pieces (as generate writes a .npy).
      std::size_t off = 0;
      for (std::size_t piece : {std::size_t{128}, std::size_t{262144}, std::size_t{1000003}})
        for (; off < n;) {
          const std::size_t k = std::min(piece, n - off);
          ASSERT_TRUE(f->write(data.data() + off, k));
          off += k;
          if (piece == 128) break;
        }
      ASSERT_TRUE(f->commit());
      const std::string got = read_whole_file(path);
      EXPECT_EQ(got.size(), n) << d << " n=" << n;
      EXPECT_TRUE(got == data.substr(0, n)) << d << " n=" << n << " direct=" << f->direct();
    }
    EXPECT_EQ(entries(d), 9u) << "a temporary was left behind in " << d;
    stdfs::remove_all(d);
  }
}
