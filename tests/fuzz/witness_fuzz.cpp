// libFuzzer target: a pushed witness (witness.h) on arbitrary bytes, as the
// ledger's hooks see it: the message parser alone, and CheckWitnessCommit on
// the bytes taken as a commit object.
// Invariants: no crash; an accepted message formats back to the same bytes;
// an accepted commit names the key that signed it.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/git/git_object.h"
#include "gatos/ledger/witness.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto w = gatos::ParseWitnessMessage(text);
  if (w.ok() && gatos::FormatWitnessMessage(*w) != text) abort();
  std::vector<gatos::GitObject> objs = {{gatos::ObjectType::kCommit, text, ""}};
  objs[0].id = gatos::GitObjectId(gatos::ObjectType::kCommit, text);
  auto c = gatos::CheckWitnessCommit(gatos::BatchLookup(&objs, nullptr), objs[0].id);
  if (c.ok() && c->key_hex.size() != 64) abort();
  return 0;
}
