// Outputs: only regular files are ever replaced, and output locations are checked before long work.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <filesystem>

#include "common/atomic_write.hpp"
#include "common/config_error.hpp"
#include "tests/hardening/process.hpp"

using namespace hardening;
namespace fs = std::filesystem;

namespace {

}  // namespace

TEST_CASE("write_file_atomically replaces a regular file and refuses anything else at the path") {
  Scratch s;
  // a regular file: replaced whole, its mode kept
  write_text(s / "out.json", "old");
  ::chmod((s / "out.json").c_str(), 0640);
  common::write_file_atomically(s / "out.json", "new");
  CHECK(slurp(s / "out.json") == "new");
  CHECK((fs::status(s / "out.json").permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
  // a symbolic link: refused; before, rename replaced the link with a regular file and left its target stale
  write_text(s / "target.json", "target");
  fs::create_symlink(s / "target.json", s / "link.json");
  CHECK(error_of([&] { common::write_file_atomically(s / "link.json", "x"); }) ==
        (s / "link.json") + ": exists and is a symbolic link, not a regular file; refusing to replace it");
  CHECK(fs::is_symlink(s / "link.json"));
  CHECK(slurp(s / "target.json") == "target");
  // a FIFO: refused, still a FIFO (before: replaced by a regular file)
  REQUIRE(::mkfifo((s / "fifo").c_str(), 0600) == 0);
  CHECK(error_of([&] { common::write_file_atomically(s / "fifo", "x"); }).find("exists and is a FIFO") != std::string::npos);
  CHECK(fs::is_fifo(s / "fifo"));
  // a folder, a missing folder
  fs::create_directory(s / "dir");
  CHECK(error_of([&] { common::write_file_atomically(s / "dir", "x"); }).find("exists and is a folder") != std::string::npos);
  CHECK(error_of([&] { common::write_file_atomically(s / "missing/out.json", "x"); }) ==
        (s / "missing/out.json") + ": its folder " + (s / "missing") + " does not exist");
  // nothing but the files made above is left in the folder (no temporaries)
  int entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(s.dir)) ++entries;
  CHECK(entries == 5);
}

TEST_CASE("a character device at --trace is refused, not replaced (as root: --trace /dev/stdout destroyed it)") {
  if (::geteuid() != 0) {
    MESSAGE("not root: cannot make a device node; skipped");
    return;
  }
  Scratch s;
  // a private copy of /dev/null (char 1:3), so that a regression cannot harm the machine's own
  REQUIRE(::mknod((s / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0);
  const auto r = slicetune({"simulate", "--trace", s / "null"});
  CHECK(r.code == 2);
  CHECK(r.err == "slicetune: error: --trace: " + (s / "null") + ": exists and is a character device, not a regular file; refusing to replace it\n");
  CHECK(r.out.empty());
  CHECK(fs::is_character_file(s / "null"));
}

TEST_CASE("output locations are checked before the work starts") {
  Scratch s;
  const std::string missing = s / "no-such-folder/out";
  write_text(s / "target", "keep");
  fs::create_symlink(s / "target", s / "link.yaml");
  struct Case {
    std::vector<std::string> args;
    std::string expect;
    double limit_s;
  };
  // each refusal comes before the command's own output or progress: stdout empty, one stderr line
  std::vector<Case> cases = {
      {{"tune", "--out", missing + ".yaml"}, "slicetune: error: --out: " + missing + ".yaml: its folder", 5},
      {{"tune", "--out", s / "link.yaml"}, "slicetune: error: --out: " + (s / "link.yaml") + ": exists and is a symbolic link", 5},
      {{"simulate", "--trace", missing + ".json"}, "slicetune: error: --trace: ", 5},
      {{"simulate", "--dot", missing + ".dot"}, "slicetune: error: --dot: ", 5},
      {{"whatif", "--sweep", "nodes=1,2,4,8", "--csv", missing + ".csv"}, "slicetune: error: --csv: ", 5},
      {{"whatif", "--sweep", "nodes=1,2,4,8", "--plot", missing + ".png"}, "slicetune: error: --plot: ", 5},
      {{"accuracy", "--calibration", SLICETUNE_CALIBRATION_DIR, "--out", missing + ".md"}, "slicetune: error: --out: ", 5},
#ifdef SLICETUNE_HAVE_EXECUTOR
      {{"run", "--model", "tiny", "--steps", "50", "--out", missing + ".json"}, "slicetune: error: --out: ", 10},
      {{"run", "--model", "tiny", "--steps", "50", "--trace", s / "link.yaml"}, "slicetune: error: --trace: ", 10},
      {{"validate", "--model", "tiny", "--trace", missing + ".json"}, "slicetune: error: --trace: ", 10},
      {{"profile", "--quick", "--out", missing + ".yaml"}, "slicetune: error: --out: ", 10},
#endif
  };
  for (const auto& c : cases) {
    CAPTURE(c.args[0]);
    CAPTURE(c.args.back());
    const auto r = slicetune(c.args, 60);
    CHECK(r.code == 2);
    CHECK(r.err.rfind(c.expect, 0) == 0);
    CHECK(lines(r.err) == 1);  // no "tuning point" / "step" / "profile:" progress before the error
    CHECK(r.out.empty());
    CHECK(r.seconds < c.limit_s);
  }
  CHECK(slurp(s / "target") == "keep");
}
