// libFuzzer target: ConfigArgs (service configuration files) on arbitrary
// bytes. Invariants: no crash, no exception; what it accepts parses as
// flags with the same specs.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gatos/sys/config_file.h"
#include "gatos/sys/flags.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<gatos::FlagSpec> kSpecs = {
      {"ledger"}, {"nats"}, {"stream-replicas"}, {"no-fsync", 0, false}, {"ro-bind", 0, true, true}, {"config"}};
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto args = gatos::ConfigArgs(bytes, "fuzz.yaml", kSpecs, {});
  if (!args.ok()) return 0;
  gatos::Flags flags;
  if (!flags.Parse(*args, kSpecs)) abort();
  return 0;
}
