#include "gatos/model/git_input.h"

#include <filesystem>

namespace gatos {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Characters git accepts in a URL scheme (transport.c is_urlschemechar).
bool IsSchemeChar(char c, bool first) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  if (first) return alpha;
  return alpha || (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
}

bool HasControl(std::string_view s) {
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) return true;
  }
  return false;
}

// A short, single-line rendering of user text for messages.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (++n > 80) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    out += (u < 0x20 || u == 0x7f) ? '?' : c;
  }
  return out + "\"";
}

void StripTrailingSlashes(std::string* s) {
  while (s->size() > 1 && s->back() == '/') s->pop_back();
}

// Path part of a key: no trailing '/', no ".git" suffix.
std::string RemoteKeyPath(std::string path) {
  StripTrailingSlashes(&path);
  if (path.size() > 4 && path.ends_with(".git")) path.resize(path.size() - 4);
  StripTrailingSlashes(&path);
  if (path.empty() || path[0] != '/') path = "/" + path;
  return path;
}

std::string LocalKey(std::string_view path) {
  std::string p = std::filesystem::path(std::string(path)).lexically_normal().generic_string();
  StripTrailingSlashes(&p);
  if (p.size() > 5 && p.ends_with("/.git")) p.resize(p.size() - 5);
  return "file://" + p;
}

// scp-like [user@]host:path: a ':' before any '/', and not an absolute path.
bool SplitScpLike(std::string_view url, std::string_view* user_host, std::string_view* path) {
  const size_t colon = url.find(':');
  const size_t slash = url.find('/');
  if (colon == std::string_view::npos || (slash != std::string_view::npos && slash < colon)) {
    return false;
  }
  *user_host = url.substr(0, colon);
  *path = url.substr(colon + 1);
  return true;
}

std::string SchemeUrlProblem(std::string_view url, size_t scheme_end) {
  const std::string scheme = Lower(url.substr(0, scheme_end));
  const std::string_view rest = url.substr(scheme_end + 3);
  if (scheme == "file") {
    if (!rest.starts_with("/")) {
      return Quote(url) + " is not file:///absolute/path; give the repository's absolute path";
    }
    return "";
  }
  if (scheme != "https" && scheme != "http" && scheme != "ssh" && scheme != "git") {
    return Quote(url.substr(0, scheme_end)) +
           " is not a supported scheme; use https, http, ssh, git, file or an absolute path";
  }
  const size_t path_start = rest.find('/');
  const std::string_view authority = rest.substr(0, path_start);
  const std::string_view path =
      path_start == std::string_view::npos ? std::string_view() : rest.substr(path_start);
  const size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    if (scheme != "ssh") {
      return "carries credentials (user@ in a " + scheme +
             " URL); remove them: the worker adds credentials from its own configuration "
             "(docs/inputs.md)";
    }
    if (userinfo.find(':') != std::string_view::npos) {
      return "carries a password; remove it: the worker adds credentials from its own "
             "configuration (docs/inputs.md)";
    }
    if (userinfo.empty()) return "has an empty user name before '@'";
  }
  const std::string_view host = at == std::string_view::npos ? authority : authority.substr(at + 1);
  if (host.empty() || host[0] == '-') return Quote(url) + " has no valid host";
  if (url.find_first_of("?#") != std::string_view::npos) {
    return "has a query string or fragment; remove it (tokens hide there): the worker adds "
           "credentials from its own configuration (docs/inputs.md)";
  }
  if (path.find_first_not_of('/') == std::string_view::npos) {
    return Quote(url) + " names no repository path";
  }
  return "";
}

}  // namespace

bool IsGitCommitId(std::string_view s) {
  if (s.size() != 40 && s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string GitUrlProblem(std::string_view url) {
  if (url.empty()) return "is empty; expected a repository URL or an absolute path";
  if (url.size() > kMaxGitUrlBytes) {
    return "is " + std::to_string(url.size()) + " bytes, over the limit of " +
           std::to_string(kMaxGitUrlBytes);
  }
  if (HasControl(url)) return "contains a control character; remove it";
  if (url[0] == '-') return Quote(url) + " starts with '-'; git would read it as an option";
  size_t p = 0;
  while (p < url.size() && IsSchemeChar(url[p], p == 0)) ++p;
  if (p > 0 && url.substr(p, 2) == "::") {
    return Quote(url) + " uses git's remote-helper syntax (transport::address); use a " +
           "https, http, ssh, git or file URL";
  }
  if (p > 0 && url.substr(p, 3) == "://") return SchemeUrlProblem(url, p);
  if (url[0] == '/') return "";
  std::string_view user_host, path;
  if (SplitScpLike(url, &user_host, &path)) {
    // "user:password@host:path" parses as host "user", but reads as a
    // password to a person and must not be stored.
    const size_t first_at = url.find('@');
    const size_t first_slash = url.find('/');
    if (first_at != std::string_view::npos &&
        (first_slash == std::string_view::npos || first_at < first_slash) &&
        url.substr(0, first_at).find(':') != std::string_view::npos) {
      return "carries a password; remove it: the worker adds credentials from its own "
             "configuration (docs/inputs.md)";
    }
    const size_t at = user_host.rfind('@');
    const std::string_view user = at == std::string_view::npos ? "" : user_host.substr(0, at);
    const std::string_view host = at == std::string_view::npos ? user_host : user_host.substr(at + 1);
    if (user.find(':') != std::string_view::npos) {
      return "carries a password; remove it: the worker adds credentials from its own "
             "configuration (docs/inputs.md)";
    }
    if (host.empty() || host[0] == '-') return Quote(url) + " has no valid host before ':'";
    if (path.empty() || path.find_first_not_of('/') == std::string_view::npos) {
      return Quote(url) + " names no repository path after ':'";
    }
    return "";
  }
  return Quote(url) +
         " is a relative path; the worker cannot know your directory: give an absolute path "
         "or a file:// URL";
}

std::string GitRefProblem(std::string_view ref) {
  const std::string q = Quote(ref);
  if (ref.empty()) return "is empty; expected a ref such as main, HEAD or refs/heads/main";
  if (ref.size() > kMaxGitRefBytes) {
    return "is " + std::to_string(ref.size()) + " bytes, over the limit of " +
           std::to_string(kMaxGitRefBytes);
  }
  if (ref[0] == '-') return q + " starts with '-'; git would read it as an option";
  if (ref == "@") return q + " is not a ref name";
  for (char c : ref) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == ' ' || c == '~' || c == '^' || c == ':' || c == '\\') {
      return q + " has a character git does not allow in ref names (space, control, ~ ^ : \\)";
    }
    if (c == '?' || c == '*' || c == '[') {
      return q + " is a pattern; an input names one ref (a glob would name many commits)";
    }
  }
  if (ref.find("..") != std::string_view::npos || ref.find("@{") != std::string_view::npos ||
      ref.find("//") != std::string_view::npos) {
    return q + " is not a valid ref name (\"..\", \"@{\" and \"//\" are not allowed)";
  }
  if (ref.front() == '/' || ref.back() == '/' || ref.back() == '.') {
    return q + " is not a valid ref name (it starts or ends with '/', or ends with '.')";
  }
  size_t start = 0;
  while (true) {
    const size_t slash = ref.find('/', start);
    const std::string_view part = ref.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.starts_with(".") || part.ends_with(".lock")) {
      return q + " is not a valid ref name (a component starts with '.' or ends with \".lock\")";
    }
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return "";
}

std::vector<GitInputProblem> CheckGitInputFields(const std::map<std::string, std::string>& fields) {
  std::vector<GitInputProblem> out;
  const auto get = [&](const char* name) -> const std::string* {
    auto it = fields.find(name);
    return it == fields.end() ? nullptr : &it->second;
  };
  if (const std::string* url = get("url")) {
    if (std::string p = GitUrlProblem(*url); !p.empty()) out.push_back({"url", p});
  } else {
    out.push_back({"url", "missing; expected the repository's URL or absolute path"});
  }
  const std::string* ref = get("ref");
  const std::string* commit = get("commit");
  if (ref) {
    if (std::string p = GitRefProblem(*ref); !p.empty()) out.push_back({"ref", p});
  }
  if (commit && !IsGitCommitId(*commit)) {
    std::string lower = Lower(*commit);
    out.push_back({"commit", IsGitCommitId(lower)
                                 ? Quote(*commit) + " has uppercase hex; write it in lowercase"
                                 : Quote(*commit) + " is not a commit id; expected 40 (SHA-1) " +
                                       "or 64 (SHA-256) lowercase hex digits"});
  }
  if (!ref && !commit) {
    out.push_back({"", "has neither ref nor commit; give commit: <id> to read exactly that "
                       "commit, or ref: <name> (e.g. HEAD) for the worker to resolve"});
  }
  if (const std::string* nonce = get("nonce")) {
    if (nonce->empty() || nonce->size() > kMaxGitNonceBytes) {
      out.push_back({"nonce", "must be 1 to " + std::to_string(kMaxGitNonceBytes) + " bytes"});
    }
  }
  return out;
}

bool IsGitInputJson(const nlohmann::json& entry) {
  if (!entry.is_object()) return false;
  auto it = entry.find("kind");
  return it != entry.end() && it->is_string() && it->get_ref<const std::string&>() == kGitInputKind;
}

Result<std::vector<GitInput>> GitInputsOf(const nlohmann::json& inputs) {
  std::vector<GitInput> out;
  if (!inputs.is_array()) return InvalidArgumentError("inputs: is not a list");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const nlohmann::json& e = inputs[i];
    if (!IsGitInputJson(e)) continue;
    const std::string where = "inputs[" + std::to_string(i) + "]";
    std::map<std::string, std::string> fields;
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key() == "kind") continue;
      if (it.key() != "url" && it.key() != "ref" && it.key() != "commit" && it.key() != "nonce") {
        return InvalidArgumentError(where + "." + it.key() + ": unknown field; expected one of " +
                                    std::string(kGitInputFields));
      }
      if (!it->is_string()) {
        return InvalidArgumentError(where + "." + it.key() + ": expected a string");
      }
      fields[it.key()] = it->get<std::string>();
    }
    std::vector<GitInputProblem> problems = CheckGitInputFields(fields);
    if (!problems.empty()) {
      const GitInputProblem& p = problems.front();
      return InvalidArgumentError(where + (p.field.empty() ? "" : "." + p.field) + ": " + p.what);
    }
    if (out.size() == kMaxGitInputs) {
      return InvalidArgumentError(where + ": more than " + std::to_string(kMaxGitInputs) +
                                  " git inputs");
    }
    GitInput g;
    g.index = i;
    g.url = fields["url"];
    if (fields.count("ref")) g.ref = fields["ref"];
    if (fields.count("commit")) g.commit = fields["commit"];
    if (fields.count("nonce")) g.nonce = fields["nonce"];
    out.push_back(std::move(g));
  }
  return out;
}

std::optional<GitUrlEndpoint> GitUrlEndpointOf(std::string_view url) {
  if (!GitUrlProblem(url).empty() || IsLocalGitUrl(url)) return std::nullopt;
  GitUrlEndpoint e;
  std::string_view authority;
  size_t p = 0;
  while (p < url.size() && IsSchemeChar(url[p], p == 0)) ++p;
  if (p > 0 && url.substr(p, 3) == "://") {
    e.scheme = Lower(url.substr(0, p));
    const std::string_view rest = url.substr(p + 3);
    authority = rest.substr(0, rest.find('/'));
  } else {
    std::string_view user_host, path;
    if (!SplitScpLike(url, &user_host, &path)) return std::nullopt;
    e.scheme = "ssh";
    authority = user_host;
  }
  if (const size_t at = authority.rfind('@'); at != std::string_view::npos) {
    authority = authority.substr(at + 1);
  }
  std::string_view host = authority, port;
  if (authority.starts_with("[")) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = authority.substr(1, close - 1);
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return std::nullopt;
      port = after.substr(1);
    }
  } else if (const size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty()) return std::nullopt;
  // A name or an IPv4 address; an IPv6 address only in brackets. Anything
  // else is no host git could connect to, whatever the URL parser made of it.
  const bool bracketed = authority.starts_with("[");
  for (char c : host) {
    const bool name = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '-' || c == '_';
    if (!name && !(bracketed && c == ':')) return std::nullopt;
  }
  e.host = Lower(host);
  e.port = e.scheme == "https" ? 443 : e.scheme == "http" ? 80 : e.scheme == "git" ? 9418 : 22;
  if (!port.empty()) {
    if (port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos) {
      return std::nullopt;
    }
    e.port = std::stoi(std::string(port));
    if (e.port < 1 || e.port > 65535) return std::nullopt;
  }
  return e;
}

bool GitUrlHasPrefix(std::string_view url, const std::vector<std::string>& prefixes) {
  for (const std::string& prefix : prefixes) {
    if (prefix.empty() || !url.starts_with(prefix)) continue;
    if (prefix.back() == '/' || prefix.back() == ':' || url.size() == prefix.size()) return true;
    const char next = url[prefix.size()];
    // A prefix that ends inside a host name must end where the host does.
    const size_t scheme_end = prefix.find("://");
    const bool in_authority = scheme_end != std::string::npos &&
                              prefix.find('/', scheme_end + 3) == std::string::npos;
    if (!in_authority || next == '/' || next == ':') return true;
  }
  return false;
}

std::string InputUrlPrefixProblem(std::string_view prefix) {
  if (prefix.empty()) return "an empty prefix would admit every URL; remove it";
  if (prefix.size() > kMaxGitUrlBytes) return "a prefix is over " + std::to_string(kMaxGitUrlBytes) + " bytes";
  if (HasControl(prefix)) return Quote(prefix) + " contains a control character";
  if (prefix[0] == '/') return "";
  const size_t sep = prefix.find("://");
  const std::string scheme = sep == std::string_view::npos ? "" : Lower(prefix.substr(0, sep));
  if (scheme != "https" && scheme != "http" && scheme != "ssh" && scheme != "git" && scheme != "file") {
    return Quote(prefix) + " is not an absolute path or an https, http, ssh, git or file URL prefix";
  }
  const std::string_view rest = prefix.substr(sep + 3);
  if (scheme != "file" && (rest.empty() || rest[0] == '/' || rest[0] == ':')) {
    return Quote(prefix) + " names no host";
  }
  const std::string_view authority = rest.substr(0, rest.find('/'));
  if (authority.find('@') != std::string_view::npos && scheme != "ssh") {
    return Quote(prefix) + " carries credentials; remove them";
  }
  return "";
}

bool IsLocalGitUrl(std::string_view url, std::string* path) {
  std::string_view p;
  if (url.starts_with("/")) {
    p = url;
  } else if (url.size() > 7 && Lower(url.substr(0, 7)) == "file://" && url[7] == '/') {
    p = url.substr(7);
  } else {
    return false;
  }
  if (path) *path = std::string(p);
  return true;
}

std::string GitUrlKey(std::string_view url) {
  std::string local;
  if (IsLocalGitUrl(url, &local)) return LocalKey(local);
  const size_t scheme_end = url.find("://");
  if (scheme_end != std::string_view::npos) {
    const std::string scheme = Lower(url.substr(0, scheme_end));
    const std::string_view rest = url.substr(scheme_end + 3);
    const size_t path_start = rest.find('/');
    std::string_view authority = rest.substr(0, path_start);
    if (size_t at = authority.rfind('@'); at != std::string_view::npos) {
      authority = authority.substr(at + 1);
    }
    const std::string path =
        path_start == std::string_view::npos ? "" : std::string(rest.substr(path_start));
    return scheme + "://" + Lower(authority) + RemoteKeyPath(path);
  }
  std::string_view user_host, path;
  if (!SplitScpLike(url, &user_host, &path)) return std::string(url);  // a relative path
  if (size_t at = user_host.rfind('@'); at != std::string_view::npos) {
    user_host = user_host.substr(at + 1);
  }
  return "ssh://" + Lower(user_host) + RemoteKeyPath(std::string(path));
}

}  // namespace gatos
