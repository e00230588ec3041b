#include "common/atomic_write.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>

#include "common/config_error.hpp"

namespace common {
namespace {

std::string kind_of(mode_t m) {
  if (S_ISLNK(m)) return "a symbolic link";
  if (S_ISDIR(m)) return "a folder";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "a special file";
}

std::string folder_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

/// Why `path` cannot be written (one phrase), or nothing. `existing_mode` gets the mode of a
/// regular file already there.
std::optional<std::string> problem(const std::string& path, mode_t* existing_mode) {
  if (path.empty()) return "empty file name";
  if (path.back() == '/') return "names a folder, expected a file";
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return fmt::format("exists and is {}, not a regular file; refusing to replace it", kind_of(st.st_mode));
    if (existing_mode) *existing_mode = st.st_mode & 07777;
  } else if (errno != ENOENT) {
    return fmt::format("cannot check it: {}", std::strerror(errno));
  }
  const std::string dir = folder_of(path);
  struct stat ds {};
  if (::stat(dir.c_str(), &ds) != 0) return fmt::format("its folder {} does not exist", dir);
  if (!S_ISDIR(ds.st_mode)) return fmt::format("{} is not a folder", dir);
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return fmt::format("its folder {} is not writable: {}", dir, std::strerror(errno));
  return std::nullopt;
}

}  // namespace

void check_output_path(const std::string& path, const std::string& flag) {
  if (path.empty()) return;
  if (auto why = problem(path, nullptr)) throw ConfigError(flag, "", fmt::format("{}: {}", path, *why));
}

void write_file_atomically(const std::string& path, const std::string& content) {
  mode_t mode = 0;
  if (auto why = problem(path, &mode)) throw ConfigError(path, "", *why);
  // a fresh name in the same folder, created exclusively (never follows or reuses what is there)
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = fmt::format("{}.tmp.{}.{}", path, ::getpid(), counter.fetch_add(1));
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && (errno != EEXIST || attempt > 100)) throw ConfigError(path, "", fmt::format("cannot write: {}", std::strerror(errno)));
  }
  auto fail = [&](const std::string& what) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw ConfigError(path, "", what + ": " + why);
  };
  if (mode != 0 && ::fchmod(fd, mode) != 0) fail("cannot keep the file's mode");
  for (std::size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("write failed");
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) fail("write failed");
  if (::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw ConfigError(path, "", "write failed: " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw ConfigError(path, "", "cannot replace file: " + why);
  }
}

}  // namespace common
