// Git objects built and read in memory, without a repository: ids, tree and
// commit serialization, and parsing of raw objects. The formats are git's
// (Documentation/technical: loose object headers, tree entries, commit
// headers). The ledger writes what it builds here into packs (pack_writer.h);
// workers build result commits with it; the auditor reads with it.
//
// Thread-safety: pure functions on value types.
#ifndef GATOS_GIT_OBJECT_H_
#define GATOS_GIT_OBJECT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/crypto/keys.h"
#include "gatos/model/status.h"

namespace gatos {

enum class ObjectType { kCommit, kTree, kBlob };
const char* ObjectTypeName(ObjectType t);  // "commit", "tree", "blob"

struct GitObject {
  ObjectType type = ObjectType::kBlob;
  std::string data;  // the object's content, without git's "<type> <len>\0" header
  std::string id;    // 40-hex SHA-1 git id
};

// The git object id of `data` as an object of `type` (SHA-1 of
// "<type> <len>\0<data>").
std::string GitObjectId(ObjectType type, std::string_view data);
GitObject MakeObject(ObjectType type, std::string data);

// 20 raw bytes of a 40-hex id (which must be valid hex) and back.
std::string RawOid(std::string_view hex);
std::string HexOid(std::string_view raw20);

struct TreeEntry {
  std::string name;
  std::string id;
  uint32_t mode = 0100644;  // 0100644 blob, 0100755 executable, 040000 tree, 0160000 gitlink
  bool is_tree() const { return mode == 040000; }
  bool operator==(const TreeEntry&) const = default;
};

// Tree bytes for `entries` in git's order (by name, a tree's name compared as
// if it ended in '/'). Names must be non-empty and hold no '/' or NUL; ids
// valid hex (checked: InvalidArgument).
Result<std::string> EncodeTree(const std::vector<TreeEntry>& entries);
// Entries of raw tree bytes, in stored order. InvalidArgument when malformed.
Result<std::vector<TreeEntry>> ParseTree(std::string_view data, std::string_view id);

struct RawCommit {
  std::string tree;
  std::vector<std::string> parents;
  std::string committer;
  int64_t commit_time_s = 0;
  std::string signature;    // gpgsig value, continuation spaces removed, ends with '\n'
  std::string signed_data;  // the object without its gpgsig field
  std::string message;
};
// Parses a commit object. InvalidArgument (naming `id`) when malformed.
Result<RawCommit> ParseRawCommit(std::string_view data, std::string_view id);

// A commit object built in memory: author = committer = name <email> at
// time_ms (UTC), message verbatim, signed in git's SSH format (gpgsig,
// SSHSIG, namespace "git") when `key` is given. The objects it names need not
// exist anywhere yet.
Result<GitObject> BuildCommitObject(const std::string& tree, const std::vector<std::string>& parents,
                                    const std::string& message, const std::string& name,
                                    const std::string& email, int64_t time_ms,
                                    const Ed25519PrivateKey* key);

}  // namespace gatos

#endif  // GATOS_GIT_OBJECT_H_
