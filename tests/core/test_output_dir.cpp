// One writer per --out (output_dir.hpp rule 2) and the refusal's naming of the holder.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "validate/core/lock_holder.hpp"
#include "validate/core/output_dir.hpp"

namespace fs = validate::fs;

namespace {

std::string fresh_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("validate_output_dir_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  return d.string();
}

// A child that claims `dir` (or only opens it, when `lock` is false), tells the parent, and holds
// it until the parent closes the second pipe.
struct Holder {
  pid_t pid = -1;
  int release_fd = -1;
  Holder(const std::string& dir, bool lock) {
    int ready[2], release[2];
    if (::pipe(ready) != 0 || ::pipe(release) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::close(ready[0]);
      ::close(release[1]);
      int fd = -1;
      bool ok;
      auto claimed = lock ? fs::claim_output_dir(dir, {}) : validate::Result<fs::OutputDir>(validate::Error{"-"});
      if (lock) ok = static_cast<bool>(claimed);
      else ok = (fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY)) >= 0;
      char c = ok ? 'y' : 'n';
      (void)!::write(ready[1], &c, 1);
      (void)!::read(release[0], &c, 1);  // returns 0 when the parent closes its end
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(release[0]);
    release_fd = release[1];
    char c = 'n';
    if (::read(ready[0], &c, 1) != 1 || c != 'y') pid = -1;
    ::close(ready[0]);
  }
  ~Holder() {
    if (release_fd >= 0) ::close(release_fd);
    if (pid > 0) ::waitpid(pid, nullptr, 0);
  }
};

}  // namespace

TEST(OutputDir, ASecondWriterIsRefusedNamingTheHoldersPidAndCommandAndGetsInAfterIt) {
  const std::string dir = fresh_dir("second");
  {
    Holder h(dir, true);
    ASSERT_GT(h.pid, 0) << "the child could not claim " << dir;
    auto second = fs::claim_output_dir(dir, {});
    ASSERT_FALSE(second);
    EXPECT_NE(second.message().find("--out " + dir + " is being written by pid " + std::to_string(h.pid) + " ("),
              std::string::npos)
        << second.message();
  }
  auto after = fs::claim_output_dir(dir, {});
  ASSERT_TRUE(after) << after.message();
  EXPECT_TRUE(after->was_empty());
  std::filesystem::remove_all(dir);
}

TEST(OutputDir, ProcLocksLinesAreMatchedByInodeAndTheirDeviceIsReported) {
  const dev_t dev = makedev(0xfd, 0x01);
  std::istringstream locks(
      "1: POSIX  ADVISORY  WRITE 11 fd:01:777 0 EOF\n"       // not an flock
      "2: FLOCK  ADVISORY  WRITE 22 fd:01:778 0 EOF\n"       // another inode
      "3: FLOCK  ADVISORY  WRITE 33 00:2f:777 0 EOF\n"       // same inode, the superblock's own device
      "3: -> FLOCK  ADVISORY  WRITE 44 fd:01:777 0 EOF\n"    // a blocked waiter, not the holder
      "4: FLOCK  ADVISORY  WRITE 55 fd:01:777 0 EOF\n"       // the holder
      "5: FLOCK  ADVISORY  WRITE 0 fd:01:777 0 EOF\n"        // a pid this namespace cannot see
      "garbage\n"
      "6: FLOCK  ADVISORY  WRITE 66 zz:01:777 0 EOF\n");
  const auto lines = fs::flock_lines(locks, dev, 777);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].pid, 33);
  EXPECT_FALSE(lines[0].same_device);
  EXPECT_EQ(lines[1].pid, 55);
  EXPECT_TRUE(lines[1].same_device);
}

TEST(OutputDir, OpenDescriptorsAreFoundThroughProcFdAndOnlyOnTheSameFile) {
  const std::string a = fresh_dir("open_a"), b = fresh_dir("open_b");
  std::filesystem::create_directories(a);
  std::filesystem::create_directories(b);
  struct stat sa {}, sb {};
  ASSERT_EQ(::stat(a.c_str(), &sa), 0);
  ASSERT_EQ(::stat(b.c_str(), &sb), 0);
  {
    Holder h(a, false);
    ASSERT_GT(h.pid, 0);
    EXPECT_TRUE(fs::has_open(h.pid, sa.st_dev, sa.st_ino));
    EXPECT_FALSE(fs::has_open(h.pid, sb.st_dev, sb.st_ino));
    const std::string who = fs::other_openers(sa.st_dev, sa.st_ino);
    EXPECT_NE(who.find("pid " + std::to_string(h.pid) + " ("), std::string::npos) << who;
    EXPECT_NE(who.find("has it open"), std::string::npos) << who;
    EXPECT_FALSE(fs::has_open(::getpid(), sa.st_dev, sa.st_ino));
  }
  // This process is never named, though it has the directory open.
  const int fd = ::open(a.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  EXPECT_TRUE(fs::has_open(::getpid(), sa.st_dev, sa.st_ino));
  EXPECT_EQ(fs::other_openers(sa.st_dev, sa.st_ino), "");
  ::close(fd);
  std::filesystem::remove_all(a);
  std::filesystem::remove_all(b);
}
