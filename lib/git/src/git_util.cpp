#include "git/git_util.h"

#include <mutex>

#include "gatos/crypto/sshsig.h"
#include "gatos/model/encoding.h"

namespace gatos::git {

void EnsureInit() {
  static std::once_flag once;
  std::call_once(once, [] { git_libgit2_init(); });
}

Status GitError(const std::string& what) { return GitError(GIT_ERROR, what); }

Status GitError(int code, const std::string& what) {
  const git_error* e = git_error_last();
  std::string msg = what + ": " + (e && e->message ? e->message : "libgit2 error " + std::to_string(code));
  int klass = e ? e->klass : 0;
  git_error_clear();
  switch (code) {
    case GIT_ENOTFOUND: return NotFoundError(msg);
    case GIT_EINVALID:
    case GIT_EINVALIDSPEC: return InvalidArgumentError(msg);
    case GIT_EEXISTS:
    case GIT_EMODIFIED: return AbortedError(msg);
    default: break;
  }
  if (klass == GIT_ERROR_OS) return UnavailableError(msg);
  return InternalError(msg);
}

Result<std::string> WriteSignedCommitBuffer(git_repository* repo, const std::string& buffer,
                                            const Ed25519PrivateKey& key,
                                            const std::string& where) {
  GATOS_ASSIGN_OR_RETURN(std::string armored, SshSigSign(key, buffer, "git"));
  // libgit2 indents every line after a newline; without this the header
  // would end in a line holding a single space, which git never writes.
  while (!armored.empty() && armored.back() == '\n') armored.pop_back();
  git_oid oid;
  int rc = git_commit_create_with_signature(&oid, repo, buffer.c_str(), armored.c_str(), "gpgsig");
  if (rc != 0) return GitError(rc, "writing signed commit into " + where);
  return OidHex(oid);
}

std::string OidHex(const git_oid& oid) {
  char buf[GIT_OID_HEXSZ + 1];
  git_oid_tostr(buf, sizeof buf, &oid);
  return buf;
}

Result<git_oid> ParseOid(const std::string& hex) {
  git_oid oid;
  if (!IsLowerHex(hex, GIT_OID_HEXSZ) || git_oid_fromstr(&oid, hex.c_str()) != 0) {
    git_error_clear();
    return InvalidArgumentError("\"" + hex.substr(0, 64) + "\" is not a 40-hex object id");
  }
  return oid;
}

}  // namespace gatos::git
