#include "gatos/model/nats_cluster.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "gatos/model/encoding.h"
#include "gatos/model/nats_auth.h"

namespace gatos {
namespace {

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> SplitOn(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string Show(std::string_view s) { return "'" + TruncateUtf8(std::string(s), 80) + "'"; }

bool ParsePort(std::string_view s, int* port) {
  if (s.empty() || s.size() > 5) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  if (v < 1 || v > 65535) return false;
  *port = v;
  return true;
}

// A host name or address: letters, digits, '.', '-', ':' inside [..] (IPv6).
bool ValidHost(std::string_view h) {
  if (h.empty() || h.size() > 253) return false;
  if (h.front() == '[') return h.size() > 2 && h.back() == ']' &&
                               std::all_of(h.begin() + 1, h.end() - 1, [](char c) {
                                 return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
                               });
  return std::all_of(h.begin(), h.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

bool ValidName(std::string_view n) {
  return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
  });
}

// "host:port" with an optional [v6] host; the port is required.
bool SplitHostPort(std::string_view hp, std::string* host, int* port) {
  size_t colon = hp.rfind(':');
  if (colon == std::string_view::npos) return false;
  if (hp.front() == '[' && hp.find(']') > colon) return false;
  *host = std::string(hp.substr(0, colon));
  return ValidHost(*host) && ParsePort(hp.substr(colon + 1), port);
}

// Text that can go between double quotes in nats-server's configuration.
bool Quotable(std::string_view s) {
  return std::none_of(s.begin(), s.end(), [](char c) {
    return c == '"' || c == '\\' || c == '$' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
}

std::string Q(const std::string& s) { return "\"" + s + "\""; }

// A user:password@ part of a route URL: RFC 3986 unreserved characters only.
bool UrlSafe(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_' || c == '~';
  });
}

}  // namespace

Result<std::vector<std::string>> SplitNatsUrls(std::string_view urls) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  if (TrimSpaces(urls).empty()) return InvalidArgumentError("NATS URL list is empty");
  for (std::string_view part : SplitOn(urls, ',')) {
    std::string_view u = TrimSpaces(part);
    if (u.empty()) return InvalidArgumentError("NATS URL list " + Show(urls) + " has an empty member");
    std::string_view rest;
    if (u.starts_with("nats://")) {
      rest = u.substr(7);
    } else if (u.starts_with("tls://")) {
      rest = u.substr(6);
    } else {
      return InvalidArgumentError("NATS URL " + Show(u) + " must start with nats:// or tls://");
    }
    if (size_t at = rest.rfind('@'); at != std::string_view::npos) rest = rest.substr(at + 1);
    while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
    std::string host;
    int port = 0;
    if (!SplitHostPort(rest, &host, &port)) {
      return InvalidArgumentError("NATS URL " + Show(u) + " needs HOST:PORT (for example nats://10.0.0.1:4222)");
    }
    if (seen.insert(std::string(u)).second) out.emplace_back(u);
  }
  for (const auto& u : out) {
    if (u.substr(0, 3) != out.front().substr(0, 3)) {
      return InvalidArgumentError("NATS URL list " + Show(urls) +
                                  " mixes nats:// and tls://; every member must be reached the same way");
    }
  }
  return out;
}

Result<std::vector<NatsNode>> ParseNatsNodes(std::string_view spec) {
  std::vector<NatsNode> nodes;
  std::set<std::string> names, routes;
  if (TrimSpaces(spec).empty()) return InvalidArgumentError("--cluster is empty (want NAME=HOST[:PORT[:ROUTE-PORT]],...)");
  for (std::string_view part : SplitOn(spec, ',')) {
    std::string_view m = TrimSpaces(part);
    size_t eq = m.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgumentError("cluster member " + Show(m) + " must be NAME=HOST[:PORT[:ROUTE-PORT]]");
    }
    NatsNode n;
    n.name = std::string(m.substr(0, eq));
    if (!ValidName(n.name)) {
      return InvalidArgumentError("cluster member name " + Show(n.name) + ": use letters, digits, '.', '-', '_'");
    }
    std::string_view addr = m.substr(eq + 1);
    std::string_view ports;
    if (addr.starts_with("[")) {
      size_t close = addr.find(']');
      if (close == std::string_view::npos) return InvalidArgumentError("cluster member " + Show(m) + ": unclosed [");
      ports = addr.substr(close + 1);
      n.host = std::string(addr.substr(0, close + 1));
    } else {
      size_t colon = addr.find(':');
      n.host = std::string(addr.substr(0, colon));
      ports = colon == std::string_view::npos ? std::string_view() : addr.substr(colon);
    }
    if (!ValidHost(n.host)) return InvalidArgumentError("cluster member " + Show(m) + ": bad host");
    if (!ports.empty()) {
      auto p = SplitOn(ports.substr(1), ':');
      if (ports.front() != ':' || p.size() > 2 || !ParsePort(p[0], &n.client_port) ||
          (p.size() == 2 && !ParsePort(p[1], &n.cluster_port))) {
        return InvalidArgumentError("cluster member " + Show(m) + ": ports must be 1..65535 (HOST:PORT:ROUTE-PORT)");
      }
    }
    if (!names.insert(n.name).second) return InvalidArgumentError("cluster member name " + Show(n.name) + " given twice");
    if (!routes.insert(n.host + ":" + std::to_string(n.cluster_port)).second) {
      return InvalidArgumentError("cluster members share the route address " + Show(n.host) + ":" +
                                  std::to_string(n.cluster_port));
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

std::string NatsClientUrls(const std::vector<NatsNode>& nodes, bool tls) {
  std::string out;
  for (const auto& n : nodes) {
    out += (out.empty() ? "" : ",") + std::string(tls ? "tls://" : "nats://") + n.host + ":" +
           std::to_string(n.client_port);
  }
  return out;
}

Result<std::string> NatsServerConfig(const NatsServerConfigOptions& o, const Policy& policy) {
  for (const std::string* s : {&o.store_dir, &o.listen_host, &o.cluster_name, &o.route_user, &o.route_password,
                               &o.tls_cert, &o.tls_key, &o.tls_ca, &o.route_tls_cert, &o.route_tls_key,
                               &o.route_tls_ca, &o.pid_file}) {
    if (!Quotable(*s)) {
      return InvalidArgumentError("nats-server configuration: " + Show(*s) +
                                  " contains a quote, backslash, '$' or control character");
    }
  }
  if (!o.auth_include.empty() &&
      (o.auth_include[0] == '.' || !std::all_of(o.auth_include.begin(), o.auth_include.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
      }))) {
    return InvalidArgumentError("the authorization file must be a plain file name next to the configuration");
  }
  if (o.store_dir.empty()) return InvalidArgumentError("nats-server configuration: the JetStream store directory is empty");
  if (!ValidHost(o.listen_host)) return InvalidArgumentError("listen address " + Show(o.listen_host) + " is not a host");
  if (o.max_payload_bytes < 1024 || o.max_payload_bytes > (64 << 20)) {
    return InvalidArgumentError("max payload must be 1 KiB .. 64 MiB");
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) return InvalidArgumentError("client TLS needs both a certificate and a key");
  if (!o.tls_ca.empty() && o.tls_cert.empty()) return InvalidArgumentError("client TLS CA given without a certificate and key");
  bool route_tls = !o.route_tls_cert.empty() || !o.route_tls_key.empty() || !o.route_tls_ca.empty();
  if (route_tls && (o.route_tls_cert.empty() || o.route_tls_key.empty() || o.route_tls_ca.empty())) {
    return InvalidArgumentError("route TLS needs a certificate, a key and the CA that verifies the other nodes");
  }

  const NatsNode* self = nullptr;
  int client_port = o.client_port;
  std::string name = "gatos";
  if (!o.node.empty()) {
    for (const auto& n : o.nodes) {
      if (n.name == o.node) self = &n;
    }
    if (!self) return InvalidArgumentError("node " + Show(o.node) + " is not a member of the cluster");
    if (o.nodes.size() < 2) return InvalidArgumentError("a cluster needs at least two members (three for JetStream R3)");
    if (!ValidName(o.cluster_name)) return InvalidArgumentError("cluster name " + Show(o.cluster_name) + " is not a name");
    if (o.route_password.empty() && !route_tls) {
      return InvalidArgumentError(
          "cluster routes must authenticate: give a route password (the same on every node) or route TLS "
          "(certificate, key and CA); an open route port lets anyone join the cluster and read every message");
    }
    if (!o.route_password.empty() && (!UrlSafe(o.route_user) || !UrlSafe(o.route_password) || o.route_user.empty())) {
      return InvalidArgumentError("route user and password may hold only letters, digits and -._~");
    }
    if (!o.route_password.empty() && o.route_password.size() < 16) {
      return InvalidArgumentError("route password is shorter than 16 characters");
    }
    client_port = self->client_port;
    name = self->name;
  } else if (client_port < 1 || client_port > 65535) {
    return InvalidArgumentError("client port must be 1..65535");
  }

  std::string out;
  out += "# nats-server configuration for a GATOS ledger";
  out += o.node.empty() ? " (single server)\n" : ", cluster " + o.cluster_name + " node " + name + "\n";
  out += "# Generated by gatos nats-config from the ledger's policy; generate it again\n"
         "# (and reload nats-server with SIGHUP) whenever the policy changes.\n";
  if (!o.route_password.empty()) out += "# Holds the route password: keep this file readable by nats-server only.\n";
  out += "server_name: " + Q(name) + "\n";
  out += "listen: " + Q(o.listen_host + ":" + std::to_string(client_port)) + "\n";
  out += "max_payload: " + std::to_string(o.max_payload_bytes) + "\n";
  if (!o.pid_file.empty()) out += "pid_file: " + Q(o.pid_file) + "\n";
  out += "jetstream {\n  store_dir: " + Q(o.store_dir) + "\n}\n";
  if (!o.tls_cert.empty()) {
    out += "tls {\n  cert_file: " + Q(o.tls_cert) + "\n  key_file: " + Q(o.tls_key) + "\n";
    if (!o.tls_ca.empty()) out += "  ca_file: " + Q(o.tls_ca) + "\n";
    out += "  timeout: 2\n}\n";
  }
  if (self) {
    out += "cluster {\n  name: " + Q(o.cluster_name) + "\n";
    out += "  listen: " + Q(o.listen_host + ":" + std::to_string(self->cluster_port)) + "\n";
    if (!o.route_password.empty()) {
      out += "  authorization {\n    user: " + Q(o.route_user) + "\n    password: " + Q(o.route_password) +
             "\n    timeout: 2\n  }\n";
    }
    if (route_tls) {
      out += "  tls {\n    cert_file: " + Q(o.route_tls_cert) + "\n    key_file: " + Q(o.route_tls_key) +
             "\n    ca_file: " + Q(o.route_tls_ca) + "\n    verify: true\n    timeout: 2\n  }\n";
    }
    out += "  routes: [\n";
    for (const auto& n : o.nodes) {
      if (&n == self) continue;
      std::string cred = o.route_password.empty() ? "" : o.route_user + ":" + o.route_password + "@";
      out += "    " + Q("nats-route://" + cred + n.host + ":" + std::to_string(n.cluster_port)) + "\n";
    }
    out += "  ]\n}\n";
  }
  if (o.auth_include.empty()) {
    out += NatsAuthorizationConfig(policy);
  } else {
    out += "# One NATS user per key of the policy (gatosd --nats-auth-file keeps it in step).\n";
    out += "include " + o.auth_include + "\n";
  }
  return out;
}

}  // namespace gatos
