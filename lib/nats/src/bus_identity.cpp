#include "gatos/bus_identity.h"

#include <memory>

#include "gatos/nats_auth.h"

namespace gatos {

void SetBusIdentity(BusOptions* options, const Ed25519PrivateKey& key) {
  auto shared = std::make_shared<Ed25519PrivateKey>(key);
  options->nkey_public = NkeyUserPublic(key.public_key());
  options->inbox_prefix = InboxPrefixFor(key.public_key());
  options->sign_nonce = [shared](std::string_view nonce) {
    auto sig = Ed25519Sign(*shared, nonce);
    return std::string(reinterpret_cast<const char*>(sig.data()), sig.size());
  };
}

Result<bool> NatsAcceptsAnonymous(const std::string& url, const std::string& tls_ca_file) {
  BusOptions bo;
  bo.url = url;
  bo.name = "gatos anonymity probe";
  bo.max_reconnect = 0;
  bo.tls_ca_file = tls_ca_file;
  auto bus = Bus::Connect(bo);
  if (bus.ok()) return true;
  const std::string& m = bus.status().message();
  if (m.find("uthorization") != std::string::npos || m.find("NOT_PERMITTED") != std::string::npos ||
      m.find("permission") != std::string::npos) {
    return false;
  }
  return bus.status();
}

}  // namespace gatos
