// libgit2 glue shared inside lib/src/git: RAII handles, oid text, and error
// translation on the calling thread (libgit2's last error is per thread).
#ifndef GATOS_SRC_GIT_GIT_UTIL_H_
#define GATOS_SRC_GIT_GIT_UTIL_H_

#include <git2.h>

#include <memory>
#include <string>

#include "gatos/crypto/keys.h"
#include "gatos/model/status.h"

namespace gatos::git {

// git_libgit2_init once per process (thread-safe).
void EnsureInit();

// Status from libgit2's last error: "<what>: <libgit2 message>". With the
// call's return code: GIT_ENOTFOUND is NotFound, GIT_EINVALID(SPEC) is
// InvalidArgument, GIT_EEXISTS / GIT_EMODIFIED (a lost CAS) are Aborted.
// Without it (or for other codes): an OS error is Unavailable, else Internal.
Status GitError(const std::string& what);
Status GitError(int code, const std::string& what);

std::string OidHex(const git_oid& oid);
Result<git_oid> ParseOid(const std::string& hex);

struct CommitFree { void operator()(git_commit* c) const { git_commit_free(c); } };
struct TreeFree { void operator()(git_tree* t) const { git_tree_free(t); } };
struct OdbFree { void operator()(git_odb* o) const { git_odb_free(o); } };
using CommitPtr = std::unique_ptr<git_commit, CommitFree>;
using TreePtr = std::unique_ptr<git_tree, TreeFree>;
using OdbPtr = std::unique_ptr<git_odb, OdbFree>;

// Signs a raw commit buffer (git_commit_create_buffer output) in git's SSH
// format, namespace "git", and writes the signed commit. Returns its id.
Result<std::string> WriteSignedCommitBuffer(git_repository* repo, const std::string& buffer,
                                            const Ed25519PrivateKey& key,
                                            const std::string& where);

}  // namespace gatos::git

#endif  // GATOS_SRC_GIT_GIT_UTIL_H_
