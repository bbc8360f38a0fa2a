// libFuzzer target: the worker's credentials file (ParseInputCredentials) on
// arbitrary bytes. Invariants: no crash, no exception, no stack overflow; an
// accepted file has valid, distinct reduced prefixes, one kind of secret per
// entry, and matching never crashes on the prefixes themselves.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

#include "gatos/exec/input_credentials.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  gatos::Result<gatos::InputCredentials> c = gatos::ParseInputCredentials(bytes, "fuzz");
  if (!c.ok()) {
    if (c.status().message().empty()) abort();
    return 0;
  }
  std::set<std::string> seen;
  for (const gatos::InputCredential& e : c->entries()) {
    std::string problem;
    if (gatos::ReduceCredentialPrefix(e.prefix, &problem) != e.prefix) abort();
    if (!seen.insert(e.prefix).second) abort();
    if (e.token_file.empty() == e.ssh_key.empty()) abort();
    if (e.is_token() && e.username.empty()) abort();
    (void)c->Match(e.prefix + "/repo");
  }
  return 0;
}
