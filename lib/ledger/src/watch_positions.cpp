#include "gatos/ledger/watch_positions.h"

#include "gatos/crypto/sshsig.h"
#include "gatos/model/encoding.h"
#include "gatos/model/trailers.h"

namespace gatos {
namespace {

constexpr char kName[] = "gatos ledger";
constexpr char kEmail[] = "ledger@gatos.invalid";

}  // namespace

Result<std::vector<GitObject>> BuildWatchCommit(const std::string& schedule_name,
                                                const WatchPositions& positions,
                                                const std::string& parent,
                                                const Ed25519PrivateKey& key, int64_t time_ms) {
  std::vector<GitObject> objects;
  GATOS_ASSIGN_OR_RETURN(
      std::string tree,
      BuildTreeObjects({{"positions.json", EncodeWatchPositions(positions), false}}, &objects));
  CommitMessage msg;
  msg.body = "gatos: watch " + schedule_name;
  std::vector<std::string> parents;
  if (!parent.empty()) parents.push_back(parent);
  GATOS_ASSIGN_OR_RETURN(GitObject c, BuildCommitObject(tree, parents, FormatCommitMessage(msg),
                                                        kName, kEmail, time_ms, &key));
  objects.insert(objects.begin(), std::move(c));
  return objects;
}

Result<WatchCommit> ParseWatchCommit(const ObjectLookup& lookup, const std::string& commit_id) {
  const std::string id = commit_id.substr(0, 12);
  if (!IsLowerHex(commit_id, 40))
    return InvalidArgumentError("a positions commit is a commit id (40 hex)");
  GATOS_ASSIGN_OR_RETURN(auto obj, lookup(commit_id));
  if (obj.first != ObjectType::kCommit)
    return InvalidArgumentError("positions " + id + " is not a commit");
  GATOS_ASSIGN_OR_RETURN(RawCommit c, ParseRawCommit(obj.second, commit_id));
  if (c.parents.size() > 1)
    return InvalidArgumentError("positions commit " + id + " has more than one parent");
  WatchCommit out;
  out.commit = commit_id;
  out.parent = c.parents.empty() ? "" : c.parents[0];
  GATOS_ASSIGN_OR_RETURN(auto tree, lookup(c.tree));
  if (tree.first != ObjectType::kTree)
    return InvalidArgumentError("positions " + id + ": its tree is not a tree");
  GATOS_ASSIGN_OR_RETURN(auto entries, ParseTree(tree.second, c.tree));
  const TreeEntry* file = nullptr;
  for (const auto& e : entries) {
    if (e.name == "positions.json") file = &e;
  }
  if (!file || file->mode != 0100644)
    return InvalidArgumentError("positions " + id + ": no positions.json");
  GATOS_ASSIGN_OR_RETURN(auto blob, lookup(file->id));
  if (blob.first != ObjectType::kBlob)
    return InvalidArgumentError("positions " + id + ": positions.json is not a blob");
  GATOS_ASSIGN_OR_RETURN(out.positions, ParseWatchPositions(blob.second));
  if (!c.signature.empty()) {
    auto sig = ParseSshSignature(c.signature);
    if (!sig.ok())
      return InvalidArgumentError("positions " + id + ": gpgsig: " + sig.status().message());
    Status v = SshSigVerify(*sig, c.signed_data, kSignerNamespaceGit);
    if (!v.ok())
      return InvalidArgumentError("positions " + id +
                                  ": its signature does not verify: " + v.message());
    out.signer_hex = sig->key.Hex();
  }
  return out;
}

}  // namespace gatos
