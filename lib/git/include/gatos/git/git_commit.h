// Git commits signed in git's SSH format: a "gpgsig" header holding an
// armored SSHSIG over the commit object without that header, namespace
// "git". Such commits pass `git verify-commit` with gpg.format=ssh and an
// allowed_signers file, with stock git and OpenSSH.
//
// Thread-safety: each call opens its own repository handle, so calls are
// safe from any thread. Functions never move refs.
#ifndef GATOS_GIT_COMMIT_H_
#define GATOS_GIT_COMMIT_H_

#include <string>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/model/status.h"

namespace gatos {

// The SSHSIG namespace git uses for commit and tag signatures.
inline constexpr std::string_view kGitSignatureNamespace = "git";

// Signs `commit_buffer` (a raw, unsigned commit object, e.g. from
// git_commit_create_buffer) and writes the signed commit object into the
// repository at `repo_path` (bare, or a work tree containing .git).
// Returns the new commit id (40 lowercase hex).
// NotFound: no repository at repo_path, or the tree/parents it names are
// missing. InvalidArgument: the buffer is not a valid commit, contains a NUL
// byte, or is already signed. Internal: other libgit2 failures.
Result<std::string> WriteSignedCommit(const std::string& repo_path,
                                      const std::string& commit_buffer,
                                      const Ed25519PrivateKey& key);

// Builds a commit (tree, parents in order, author = committer = name <email>
// at the current time and local UTC offset, `message` used verbatim) and signs
// it as WriteSignedCommit does. Returns the commit id. Does NOT move any ref.
// InvalidArgument for ids that are not 40 lowercase hex or an unusable
// name/email; NotFound for a missing repository, tree or parent.
Result<std::string> CreateSignedCommit(const std::string& repo_path, const std::string& tree_hex,
                                       const std::vector<std::string>& parent_hexes,
                                       const std::string& name, const std::string& email,
                                       const std::string& message, const Ed25519PrivateKey& key);

struct CommitSignature {
  std::string signature;    // armored SSHSIG (or whatever the gpgsig holds), ends with "\n"
  std::string signed_data;  // the commit object without its gpgsig header
};

// The gpgsig header and signed payload of a commit, for verifiers: pass them
// to ParseSshSignature and SshSigVerify(..., kGitSignatureNamespace).
// NotFound if the repository or commit does not exist, or the commit is
// unsigned (the message says which). InvalidArgument for a malformed id.
Result<CommitSignature> ExtractCommitSignature(const std::string& repo_path,
                                               const std::string& commit_hex);

}  // namespace gatos

#endif  // GATOS_GIT_COMMIT_H_
