#include "gatos/git/git_object.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gatos/crypto/sshsig.h"
#include "gatos/model/encoding.h"

namespace gatos {

const char* ObjectTypeName(ObjectType t) {
  switch (t) {
    case ObjectType::kCommit: return "commit";
    case ObjectType::kTree: return "tree";
    case ObjectType::kBlob: return "blob";
  }
  return "blob";
}

namespace {
// One digest context per thread, reused: setting one up costs more than
// hashing a small object.
struct Sha1Ctx {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  const EVP_MD* md = EVP_MD_fetch(nullptr, "SHA1", nullptr);
  ~Sha1Ctx() {
    EVP_MD_CTX_free(ctx);
    EVP_MD_free(const_cast<EVP_MD*>(md));
  }
};
}  // namespace

std::string GitObjectId(ObjectType type, std::string_view data) {
  thread_local Sha1Ctx sha;
  char header[32];
  int hn = std::snprintf(header, sizeof header, "%s %zu", ObjectTypeName(type), data.size());
  unsigned char md[20];
  unsigned int len = 0;
  EVP_DigestInit_ex(sha.ctx, sha.md, nullptr);
  EVP_DigestUpdate(sha.ctx, header, static_cast<size_t>(hn) + 1);  // with the NUL
  EVP_DigestUpdate(sha.ctx, data.data(), data.size());
  EVP_DigestFinal_ex(sha.ctx, md, &len);
  return HexEncode(md, sizeof md);
}

GitObject MakeObject(ObjectType type, std::string data) {
  GitObject o;
  o.type = type;
  o.id = GitObjectId(type, data);
  o.data = std::move(data);
  return o;
}

namespace {
int HexVal(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }
}  // namespace

std::string RawOid(std::string_view hex) {
  std::string raw(20, '\0');
  for (size_t i = 0; i < 20 && 2 * i + 1 < hex.size(); ++i) {
    raw[i] = static_cast<char>((HexVal(hex[2 * i]) << 4) | HexVal(hex[2 * i + 1]));
  }
  return raw;
}

std::string HexOid(std::string_view raw20) { return HexEncode(raw20); }

namespace {

// git's tree order: by name, a tree's name compared as if it ended in '/'.
// Names hold no '/', so one character past the common prefix decides.
bool TreeOrderLess(const TreeEntry& a, const TreeEntry& b) {
  const size_t n = std::min(a.name.size(), b.name.size());
  if (int c = std::memcmp(a.name.data(), b.name.data(), n); c != 0) return c < 0;
  auto next = [n](const TreeEntry& e) -> int {
    if (n < e.name.size()) return static_cast<unsigned char>(e.name[n]);
    return e.is_tree() ? '/' : -1;
  };
  return next(a) < next(b);
}

// Appends the 20 raw bytes of a 40-digit lowercase hex id; false if it is not one.
bool AppendRawOid(std::string_view hex, std::string* out) {
  if (hex.size() != 40) return false;
  for (size_t i = 0; i < 40; i += 2) {
    const int hi = LowerHexValue(hex[i]), lo = LowerHexValue(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>((hi << 4) | lo));
  }
  return true;
}

void AppendMode(uint32_t mode, std::string* out) {
  switch (mode) {
    case 0100644: out->append("100644 "); return;
    case 040000: out->append("40000 "); return;
    case 0100755: out->append("100755 "); return;
    case 0120000: out->append("120000 "); return;
    case 0160000: out->append("160000 "); return;
    default: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%o ", mode);
      out->append(buf);
    }
  }
}

}  // namespace

Result<std::string> EncodeTree(const std::vector<TreeEntry>& entries) {
  size_t bytes = 0;
  for (const auto& e : entries) {
    if (e.name.empty() || e.name.find_first_of(std::string_view("/\0", 2)) != std::string::npos) {
      return InvalidArgumentError("tree entry name \"" + e.name.substr(0, 80) + "\" is empty or holds '/' or NUL");
    }
    bytes += e.name.size() + 28;
  }
  // Callers that keep their entries in tree order (the state index) skip the sort.
  std::vector<const TreeEntry*> order;
  order.reserve(entries.size());
  for (const auto& e : entries) order.push_back(&e);
  if (!std::is_sorted(entries.begin(), entries.end(), TreeOrderLess)) {
    std::sort(order.begin(), order.end(), [](const TreeEntry* a, const TreeEntry* b) { return TreeOrderLess(*a, *b); });
  }
  std::string data;
  data.reserve(bytes);
  for (const TreeEntry* e : order) {
    AppendMode(e->mode, &data);
    data += e->name;
    data.push_back('\0');
    if (!AppendRawOid(e->id, &data)) {
      return InvalidArgumentError("tree entry " + e->name.substr(0, 80) + ": bad id");
    }
  }
  return data;
}


Result<RawCommit> ParseRawCommit(std::string_view data_view, std::string_view id_view) {
  std::string data(data_view);
  std::string id(id_view);
  RawCommit c;
  size_t header_end = data.find("\n\n");
  if (header_end == std::string::npos) {
    return InvalidArgumentError("commit " + id + " has no blank line after its header");
  }
  c.message = data.substr(header_end + 2);
  std::string_view header(data.data(), header_end + 1);
  size_t pos = 0;
  bool in_sig = false;
  while (pos < header.size()) {
    size_t nl = header.find('\n', pos);
    std::string_view line = header.substr(pos, nl - pos);
    size_t line_start = pos;
    pos = nl + 1;
    if (in_sig && !line.empty() && line[0] == ' ') {
      c.signature += std::string(line.substr(1)) + "\n";
      continue;
    }
    in_sig = false;
    if (line.rfind("gpgsig ", 0) == 0) {
      if (!c.signature.empty()) return InvalidArgumentError("commit " + id + " has two gpgsig headers");
      c.signature = std::string(line.substr(7)) + "\n";
      in_sig = true;
      continue;
    }
    c.signed_data.append(data, line_start, pos - line_start);
    if (line.rfind("tree ", 0) == 0) {
      c.tree = std::string(line.substr(5));
    } else if (line.rfind("parent ", 0) == 0) {
      c.parents.emplace_back(line.substr(7));
    } else if (line.rfind("committer ", 0) == 0) {
      c.committer = std::string(line.substr(10));
      // "... <email> <time> <tz>"
      size_t gt = c.committer.rfind('>');
      if (gt != std::string::npos) c.commit_time_s = std::strtoll(c.committer.c_str() + gt + 1, nullptr, 10);
    }
  }
  c.signed_data += "\n" + c.message;
  if (!IsLowerHex(c.tree, 40)) return InvalidArgumentError("commit " + id + " has no valid tree line");
  return c;
}

Result<std::vector<TreeEntry>> ParseTree(std::string_view data_view, std::string_view id_view) {
  std::string data(data_view);
  std::string id(id_view);
  std::vector<TreeEntry> out;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t sp = data.find(' ', pos);
    size_t nul = data.find('\0', pos);
    if (sp == std::string::npos || nul == std::string::npos || sp > nul || nul + 21 > data.size()) {
      return InvalidArgumentError("tree " + id + " is malformed at byte " + std::to_string(pos));
    }
    TreeEntry e;
    e.mode = static_cast<uint32_t>(std::strtoul(data.substr(pos, sp - pos).c_str(), nullptr, 8));
    e.name = data.substr(sp + 1, nul - sp - 1);
    e.id = HexEncode(std::string_view(data).substr(nul + 1, 20));
    out.push_back(std::move(e));
    pos = nul + 21;
  }
  return out;
}


Result<GitObject> BuildCommitObject(const std::string& tree, const std::vector<std::string>& parents,
                                    const std::string& message, const std::string& name,
                                    const std::string& email, int64_t time_ms,
                                    const Ed25519PrivateKey* key) {
  if (!IsLowerHex(tree, 40)) return InvalidArgumentError("tree id \"" + tree.substr(0, 64) + "\" is not 40 hex");
  for (const auto& p : parents) {
    if (!IsLowerHex(p, 40)) return InvalidArgumentError("parent id \"" + p.substr(0, 64) + "\" is not 40 hex");
  }
  auto bad_ident = [](const std::string& s) { return s.find_first_of("<>\n\0", 0, 4) != std::string::npos; };
  if (bad_ident(name) || bad_ident(email)) return InvalidArgumentError("committer name or email contains <, >, NUL or a newline");
  if (message.find('\0') != std::string::npos) return InvalidArgumentError("commit message contains a NUL byte");
  std::string who = name + " <" + email + "> " + std::to_string(time_ms / 1000) + " +0000";
  std::string header = "tree " + tree + "\n";
  for (const auto& p : parents) header += "parent " + p + "\n";
  header += "author " + who + "\ncommitter " + who + "\n";
  std::string data;
  if (key) {
    GATOS_ASSIGN_OR_RETURN(std::string armored, SshSigSign(*key, header + "\n" + message, "git"));
    while (!armored.empty() && armored.back() == '\n') armored.pop_back();
    std::string sig_field = "gpgsig ";
    for (char ch : armored) {
      sig_field.push_back(ch);
      if (ch == '\n') sig_field.push_back(' ');
    }
    data = header + sig_field + "\n\n" + message;
  } else {
    data = header + "\n" + message;
  }
  GitObject commit{ObjectType::kCommit, data, GitObjectId(ObjectType::kCommit, data)};
  return commit;
}

}  // namespace gatos
