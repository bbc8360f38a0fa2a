// Git repositories for tests, made with the real git: an environment with a
// fixed identity and no system configuration, git run with an assertion
// that it succeeded, and the repositories tests start from.
#ifndef GATOS_TESTS_SUPPORT_GIT_REPO_H_
#define GATOS_TESTS_SUPPORT_GIT_REPO_H_

#include <map>
#include <string>
#include <vector>

namespace gatos::testing {

using GitEnv = std::map<std::string, std::string>;

// HOME=`home`, no system git configuration, author and committer "A".
GitEnv TestGitEnv(const std::string& home);
// `env` (a stack's, say) with TestGitEnv's git settings and identity added.
GitEnv WithTestGitIdentity(GitEnv env);

// Runs `git args...` in `cwd` with `env`; EXPECTs it to succeed (naming the
// subcommand and git's stderr when not). Its stdout without trailing newlines.
std::string Git(const GitEnv& env, const std::vector<std::string>& args, const std::string& cwd = "");

// A work-tree repository at `path` with one commit on main holding
// file.txt = `content`; returns the commit.
std::string MakeWorkRepo(const GitEnv& env, const std::string& path, const std::string& content = "hello\n");

// A bare repository at `path` with one commit on main holding file.txt =
// `content`, its refs packed (packed-refs); returns `path`.
std::string MakeBareRepo(const GitEnv& env, const std::string& path, const std::string& content = "hello\n");

}  // namespace gatos::testing

#endif  // GATOS_TESTS_SUPPORT_GIT_REPO_H_
