#include <git2.h>

#include <memory>

#include "gatos/git/git_commit.h"
#include "gatos/model/encoding.h"

#include "git/git_util.h"
#include "gatos/crypto/sshsig.h"

namespace gatos {
namespace {

template <auto FreeFn>
struct GitDeleter {
  template <typename T>
  void operator()(T* p) const {
    FreeFn(p);
  }
};
using RepoPtr = std::unique_ptr<git_repository, GitDeleter<git_repository_free>>;
using TreePtr = std::unique_ptr<git_tree, GitDeleter<git_tree_free>>;
using CommitPtr = std::unique_ptr<git_commit, GitDeleter<git_commit_free>>;
using SignaturePtr = std::unique_ptr<git_signature, GitDeleter<git_signature_free>>;

// Owns a git_buf.
struct GitBuf {
  git_buf buf = GIT_BUF_INIT;
  GitBuf() = default;
  GitBuf(const GitBuf&) = delete;
  GitBuf& operator=(const GitBuf&) = delete;
  ~GitBuf() { git_buf_dispose(&buf); }
  std::string str() const { return buf.ptr ? std::string(buf.ptr, buf.size) : std::string(); }
};

Result<RepoPtr> OpenRepo(const std::string& path) {
  git::EnsureInit();
  git_repository* raw = nullptr;
  int rc = git_repository_open(&raw, path.c_str());
  if (rc != 0) {
    Status s = git::GitError(rc, "cannot open git repository " + path);
    return rc == GIT_ENOTFOUND ? s : InternalError(s.message());
  }
  return RepoPtr(raw);
}

Result<git_oid> ParseOid(const std::string& hex, const std::string& what) {
  if (!IsLowerHex(hex, GIT_OID_HEXSZ)) {
    return InvalidArgumentError(what + " \"" + hex.substr(0, 64) +
                                "\" is not a 40-character lowercase hex object id");
  }
  git_oid oid;
  if (git_oid_fromstr(&oid, hex.c_str()) != 0) {
    return InvalidArgumentError(what + " \"" + hex + "\" is not a valid object id");
  }
  return oid;
}

// True if the header part of a commit buffer has a gpgsig field.
bool HasSignatureHeader(const std::string& buffer) {
  size_t header_end = buffer.find("\n\n");
  std::string_view header(buffer.data(),
                          header_end == std::string::npos ? buffer.size() : header_end + 1);
  return header.substr(0, 7) == "gpgsig " || header.find("\ngpgsig ") != std::string_view::npos ||
         header.substr(0, 14) == "gpgsig-sha256 " ||
         header.find("\ngpgsig-sha256 ") != std::string_view::npos;
}

// Checks that the tree and parents a raw commit names exist, so that a
// missing object is NotFound with its id rather than a generic libgit2 error.
Status CheckReferencedObjects(git_repository* repo, const std::string& buffer,
                              const std::string& repo_path) {
  size_t header_end = buffer.find("\n\n");
  std::string_view header(buffer.data(), header_end + 1);
  if (header.substr(0, 5) != "tree ") {
    return InvalidArgumentError("commit buffer does not start with a \"tree <id>\" line");
  }
  size_t pos = 0;
  while (pos < header.size()) {
    size_t nl = header.find('\n', pos);
    std::string_view line = header.substr(pos, nl - pos);
    pos = nl + 1;
    bool is_tree = line.substr(0, 5) == "tree ";
    bool is_parent = line.substr(0, 7) == "parent ";
    if (!is_tree && !is_parent) continue;
    std::string hex(line.substr(is_tree ? 5 : 7));
    GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(hex, is_tree ? "commit tree id" : "parent id"));
    git_object* obj = nullptr;
    int rc = git_object_lookup(&obj, repo, &oid, is_tree ? GIT_OBJECT_TREE : GIT_OBJECT_COMMIT);
    if (rc != 0) {
      return git::GitError(rc,
                      std::string(is_tree ? "tree " : "parent commit ") + hex + " in " + repo_path);
    }
    git_object_free(obj);
  }
  return OkStatus();
}

}  // namespace

Result<std::string> WriteSignedCommit(const std::string& repo_path,
                                      const std::string& commit_buffer,
                                      const Ed25519PrivateKey& key) {
  if (commit_buffer.find('\0') != std::string::npos) {
    return InvalidArgumentError("commit buffer contains a NUL byte at offset " +
                                std::to_string(commit_buffer.find('\0')));
  }
  if (commit_buffer.find("\n\n") == std::string::npos) {
    return InvalidArgumentError(
        "commit buffer has no blank line ending its header; not a commit object");
  }
  if (HasSignatureHeader(commit_buffer)) {
    return InvalidArgumentError("commit buffer already has a gpgsig header");
  }
  GATOS_ASSIGN_OR_RETURN(RepoPtr repo, OpenRepo(repo_path));
  GATOS_RETURN_IF_ERROR(CheckReferencedObjects(repo.get(), commit_buffer, repo_path));
  return git::WriteSignedCommitBuffer(repo.get(), commit_buffer, key, repo_path);
}

Result<std::string> CreateSignedCommit(const std::string& repo_path, const std::string& tree_hex,
                                       const std::vector<std::string>& parent_hexes,
                                       const std::string& name, const std::string& email,
                                       const std::string& message, const Ed25519PrivateKey& key) {
  if (message.find('\0') != std::string::npos) {
    return InvalidArgumentError("commit message contains a NUL byte");
  }
  GATOS_ASSIGN_OR_RETURN(git_oid tree_oid, ParseOid(tree_hex, "tree id"));
  std::vector<git_oid> parent_oids;
  for (const std::string& p : parent_hexes) {
    GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(p, "parent commit id"));
    parent_oids.push_back(oid);
  }
  GATOS_ASSIGN_OR_RETURN(RepoPtr repo, OpenRepo(repo_path));

  git_tree* tree_raw = nullptr;
  int rc = git_tree_lookup(&tree_raw, repo.get(), &tree_oid);
  if (rc != 0) return git::GitError(rc, "tree " + tree_hex + " in " + repo_path);
  TreePtr tree(tree_raw);

  std::vector<CommitPtr> parents;
  std::vector<const git_commit*> parent_ptrs;
  for (size_t i = 0; i < parent_oids.size(); ++i) {
    git_commit* c = nullptr;
    rc = git_commit_lookup(&c, repo.get(), &parent_oids[i]);
    if (rc != 0) return git::GitError(rc, "parent commit " + parent_hexes[i] + " in " + repo_path);
    parents.emplace_back(c);
    parent_ptrs.push_back(c);
  }

  git_signature* sig_raw = nullptr;
  rc = git_signature_now(&sig_raw, name.c_str(), email.c_str());
  if (rc != 0) {
    return InvalidArgumentError(
        git::GitError(rc, "author/committer \"" + name + " <" + email + ">\"").message());
  }
  SignaturePtr sig(sig_raw);

  GitBuf buffer;
  rc =
      git_commit_create_buffer(&buffer.buf, repo.get(), sig.get(), sig.get(), nullptr,
                               message.c_str(), tree.get(), parent_ptrs.size(), parent_ptrs.data());
  if (rc != 0) return git::GitError(rc, "building commit in " + repo_path);
  repo.reset();  // WriteSignedCommit opens its own handle
  return WriteSignedCommit(repo_path, buffer.str(), key);
}

Result<CommitSignature> ExtractCommitSignature(const std::string& repo_path,
                                               const std::string& commit_hex) {
  GATOS_ASSIGN_OR_RETURN(git_oid oid, ParseOid(commit_hex, "commit id"));
  GATOS_ASSIGN_OR_RETURN(RepoPtr repo, OpenRepo(repo_path));
  git_commit* c = nullptr;
  int rc = git_commit_lookup(&c, repo.get(), &oid);
  if (rc != 0) return git::GitError(rc, "commit " + commit_hex + " in " + repo_path);
  CommitPtr commit(c);

  GitBuf signature, signed_data;
  rc = git_commit_extract_signature(&signature.buf, &signed_data.buf, repo.get(), &oid, nullptr);
  if (rc == GIT_ENOTFOUND) {
    return NotFoundError("commit " + commit_hex + " in " + repo_path + " is not signed");
  }
  if (rc != 0) return git::GitError(rc, "reading signature of commit " + commit_hex);
  CommitSignature out{signature.str(), signed_data.str()};
  if (!out.signature.empty() && out.signature.back() != '\n') out.signature.push_back('\n');
  return out;
}

}  // namespace gatos
