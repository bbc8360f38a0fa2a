#include "gatos/scan/git_objects.h"

#include <cstring>

namespace gatos::scan {
namespace {

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // git writes ids in lowercase only
}

}  // namespace

bool NextTreeEntry(std::string_view* rest, TreeEntry* e, bool* bad) {
  if (rest->empty()) return false;
  const size_t space = rest->find(' ');
  if (space == 0 || space == std::string_view::npos || space > 7) return *bad = true, false;
  uint32_t mode = 0;
  for (size_t i = 0; i < space; ++i) {
    const char c = (*rest)[i];
    if (c < '0' || c > '7') return *bad = true, false;
    mode = mode * 8 + static_cast<uint32_t>(c - '0');
  }
  const size_t nul = rest->find('\0', space + 1);
  if (nul == std::string_view::npos || nul == space + 1 || rest->size() - nul - 1 < GIT_OID_RAWSZ) {
    return *bad = true, false;
  }
  e->mode = mode;
  e->name = rest->substr(space + 1, nul - space - 1);
  std::memcpy(e->id.id, rest->data() + nul + 1, GIT_OID_RAWSZ);
  rest->remove_prefix(nul + 1 + GIT_OID_RAWSZ);
  return true;
}

bool CommitTreeId(std::string_view commit, git_oid* tree) {
  constexpr size_t kLine = 5 + 2 * GIT_OID_RAWSZ + 1;  // "tree " + hex + "\n"
  if (commit.size() < kLine || commit.substr(0, 5) != "tree " || commit[kLine - 1] != '\n') {
    return false;
  }
  for (size_t i = 0; i < GIT_OID_RAWSZ; ++i) {
    const int hi = Hex(commit[5 + 2 * i]);
    const int lo = Hex(commit[6 + 2 * i]);
    if (hi < 0 || lo < 0) return false;
    tree->id[i] = static_cast<unsigned char>(hi * 16 + lo);
  }
  return true;
}

}  // namespace gatos::scan
