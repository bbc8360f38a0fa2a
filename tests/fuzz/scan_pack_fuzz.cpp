// libFuzzer target: gatos-scan's direct pack reading (lib/scan/src) over a
// pack whose entries come from the input: entry headers, OFS/REF delta
// chains, zlib streams and delta ops are all hostile. Invariants: no crash,
// no unbounded allocation; a read either fails with a status or returns an
// object within the limit, whose size Header agreed on when both succeed.
//
// Input: byte 0 picks the number of objects (1-16), the next 2 bytes per
// object their offsets into the body, the rest is the pack body. The pack
// and a matching version-2 index are written to a scratch directory.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>

#include "gatos/scan/pack_reader.h"
#include "gatos/scan/pack_store.h"

namespace {

void Be32(std::string* out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out->push_back(static_cast<char>((v >> s) & 0xff));
}

const std::string& Dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/scan_pack_fuzz.XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) abort();
    const std::string path = std::string(d) + "/objects/pack";
    if (system(("mkdir -p " + path).c_str()) != 0) abort();
    return std::string(d);
  }();
  return dir;
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint32_t n = (data[0] % 16) + 1;
  if (size < 1 + 2 * n + 1) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1 + 2 * n, size - 1 - 2 * n);
  std::string pack = "PACK";
  Be32(&pack, 2);
  Be32(&pack, n);
  pack += body;
  pack += std::string(20, '\0');
  std::string idx = "\377tOc";
  Be32(&idx, 2);
  for (uint32_t b = 0; b < 256; ++b) Be32(&idx, b < n ? b + 1 : n);  // object i's id starts with i
  for (uint32_t i = 0; i < n; ++i) {
    idx.push_back(static_cast<char>(i));
    idx += std::string(19, '\0');
  }
  idx += std::string(4 * n, '\0');  // CRCs
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t off = (uint32_t{data[1 + 2 * i]} << 8 | data[2 + 2 * i]) % body.size();
    Be32(&idx, 12 + off);
  }
  idx += std::string(40, '\0');
  Write(Dir() + "/objects/pack/pack-f.pack", pack);
  Write(Dir() + "/objects/pack/pack-f.idx", idx);
  std::unique_ptr<gatos::scan::PackStore> store = gatos::scan::PackStore::Open(Dir());
  if (store->pack_count() != 1) return 0;  // e.g. offsets out of order are fine; all in range
  gatos::scan::PackReader reader(*store, 1 << 16);
  constexpr uint64_t kMax = 1 << 20;
  for (uint32_t i = 0; i < n; ++i) {
    unsigned char id[20] = {static_cast<unsigned char>(i)};
    std::optional<gatos::scan::PackLocation> loc = store->Find(id);
    if (!loc) abort();  // every listed object is found
    gatos::scan::ObjectKind kind, kind2;
    uint64_t header_size = 0;
    const bool header_ok = reader.Header(*loc, &kind, &header_size).ok();
    std::shared_ptr<const std::string> object;
    if (reader.Read(*loc, kMax, &kind2, &object).ok()) {
      if (object == nullptr || object->size() > kMax) abort();
      if (header_ok && (header_size != object->size() || kind != kind2)) abort();
    }
  }
  return 0;
}
