// libFuzzer target: the ledger writer's write-ahead log files (wal.h), as a
// writer reads them after a crash (DecodeWalFile).
// Invariants: no crash; the records it accepts are exactly the bytes it
// says are valid (they encode back to them) and their sequences follow one
// another.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gatos/ledger/wal.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  gatos::WalFileContents c = gatos::DecodeWalFile(in);
  if (c.valid_bytes > size) abort();
  std::string again;
  for (size_t i = 0; i < c.records.size(); ++i) {
    const gatos::WalRecord& r = c.records[i];
    if (i > 0 && r.seq != c.records[i - 1].seq + 1) abort();
    std::vector<const gatos::GitObject*> ptrs;
    for (const auto& o : r.objects) ptrs.push_back(&o);
    again += gatos::EncodeWalRecord(r.seq, r.log_id, ptrs);
  }
  if (again != in.substr(0, c.valid_bytes)) abort();
  return 0;
}
