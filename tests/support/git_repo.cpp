#include "git_repo.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_util.h"

namespace gatos::testing {

GitEnv WithTestGitIdentity(GitEnv env) {
  env["GIT_CONFIG_NOSYSTEM"] = "1";
  env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "A";
  env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "a@example.com";
  return env;
}

GitEnv TestGitEnv(const std::string& home) { return WithTestGitIdentity({{"HOME", home}}); }

std::string Git(const GitEnv& env, const std::vector<std::string>& args, const std::string& cwd) {
  RunOptions ro;
  ro.env = env;
  ro.cwd = cwd;
  std::vector<std::string> argv = {"git"};
  argv.insert(argv.end(), args.begin(), args.end());
  RunResult r = Run(argv, ro);
  EXPECT_EQ(r.exit_code, 0) << "git " << (args.empty() ? "" : args[0]) << ": " << r.err;
  std::string out = r.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string MakeWorkRepo(const GitEnv& env, const std::string& path, const std::string& content) {
  Git(env, {"init", "-q", "-b", "main", path});
  WriteFile(path + "/file.txt", content);
  Git(env, {"add", "."}, path);
  Git(env, {"commit", "-q", "-m", "one"}, path);
  return Git(env, {"rev-parse", "HEAD"}, path);
}

std::string MakeBareRepo(const GitEnv& env, const std::string& path, const std::string& content) {
  const std::string work = path + ".work";
  MakeWorkRepo(env, work, content);
  Git(env, {"clone", "-q", "--bare", "--no-local", work, path});
  Git(env, {"--git-dir=" + path, "pack-refs", "--all"});
  std::filesystem::remove_all(work);
  return path;
}

}  // namespace gatos::testing
