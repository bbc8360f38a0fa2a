#include "git/git_util.h"

#include <mutex>

#include "gatos/encoding.h"

namespace gatos::git {

void EnsureInit() {
  static std::once_flag once;
  std::call_once(once, [] { git_libgit2_init(); });
}

Status GitError(const std::string& what) {
  const git_error* e = git_error_last();
  std::string msg = what + ": " + (e && e->message ? e->message : "unknown libgit2 error");
  int klass = e ? e->klass : 0;
  git_error_clear();
  if (klass == GIT_ERROR_OS) return UnavailableError(msg);
  return InternalError(msg);
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
