#include "gatos/nats/bus_identity.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>
#include <sstream>

#include "gatos/model/nats_auth.h"
#include "gatos/sys/file.h"

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
  const std::string m = bus.status().message();
  if (m.find("uthorization") != std::string::npos || m.find("NOT_PERMITTED") != std::string::npos ||
      m.find("permission") != std::string::npos) {
    return false;
  }
  return bus.status();
}

Result<bool> WriteNatsAuthorizationFile(const std::string& path, const Policy& policy) {
  std::string text = NatsAuthorizationConfig(policy);
  Result<std::string> old = ReadFileToString(path, 64 << 20);
  if (old.ok() && *old == text) return false;
  GATOS_RETURN_IF_ERROR(WriteFileAtomically(path, text, 0644));
  return true;
}

Status ReloadNatsServer(const std::string& pid_file) {
  Result<std::string> text = ReadFileToString(pid_file, 64);
  long pid = text.ok() ? std::strtol(text->c_str(), nullptr, 10) : 0;
  if (pid <= 1) return NotFoundError("no nats-server pid in " + pid_file);
  if (::kill(static_cast<pid_t>(pid), SIGHUP) != 0) {
    return NotFoundError("cannot signal nats-server pid " + std::to_string(pid) + " from " + pid_file + ": " +
                         std::strerror(errno));
  }
  return OkStatus();
}

Result<std::string> SingleNodeNatsConfig(const std::string& host, int port, const std::string& store_dir,
                                         const std::string& pid_file, const std::string& auth_file_name) {
  bool plain = !auth_file_name.empty() && auth_file_name[0] != '.';
  for (char c : auth_file_name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') plain = false;
  }
  if (!plain) {
    return InvalidArgumentError("the authorization file must be a plain file name next to the configuration, not \"" +
                                auth_file_name.substr(0, 64) + "\"");
  }
  auto quote = [](const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') q += '\\';
      q += c;
    }
    return q + "\"";
  };
  std::ostringstream o;
  o << "# nats-server configuration for a GATOS ledger (gatos nats-config).\n"
    << "# Clients authenticate with the ed25519 keys the ledger's policy names;\n"
    << "# gatosd rewrites the included file on every policy change and reloads.\n"
    << "host: " << quote(host) << "\n"
    << "port: " << port << "\n"
    << "pid_file: " << quote(pid_file) << "\n"
    << "max_payload: 8MB\n"
    << "jetstream {\n  store_dir: " << quote(store_dir) << "\n}\n"
    << "include " << auth_file_name << "\n";
  return o.str();
}

}  // namespace gatos
