// gatos_model is pure rules and codecs (docs/architecture.md): no file, no
// socket, no process. This test reads the library's sources and refuses the
// headers and calls that would do I/O, so the layer cannot drift back into
// it (file reads live in gatos_sys: gatos/sys/file.h, gatos/sys/manifest_file.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace gatos {
namespace {

TEST(ModelPurity, NoFileSocketOrProcessCallsInGatosModel) {
  const std::vector<std::string> forbidden = {
      // headers of the operating system's I/O
      "<fcntl.h>", "<unistd.h>", "<sys/stat.h>", "<sys/socket.h>", "<sys/mman.h>", "<netdb.h>",
      "<arpa/inet.h>", "<netinet/in.h>", "<dirent.h>", "<fstream>", "<sys/wait.h>", "<spawn.h>",
      // calls that touch the file system, the network or processes
      "fopen(", "popen(", "::open(", "::read(", "::write(", "::close(", "socket(", "std::ifstream",
      "std::ofstream", "std::fstream", "fs::exists", "filesystem::exists", "canonical(", "directory_iterator",
      "create_directories", "fs::remove", "filesystem::remove", "fs::rename", "filesystem::rename",
      "is_regular_file", "is_directory(", "file_size(", "getenv(", "system(", "fork(", "execv"};
  const std::string root = testing::SourcePath("lib/model");
  int files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".h") continue;
    ++files;
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    for (const std::string& f : forbidden) {
      EXPECT_EQ(s.find(f), std::string::npos)
          << e.path().string() << " uses " << f << ": gatos_model does no I/O; put it in gatos_sys";
    }
  }
  EXPECT_GT(files, 40);  // the model's sources were found
}

}  // namespace
}  // namespace gatos
