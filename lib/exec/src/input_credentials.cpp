#include "gatos/exec/input_credentials.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "gatos/model/encoding.h"
#include "gatos/model/git_input.h"
#include "gatos/model/yaml_tree.h"
#include "gatos/sys/file.h"

namespace gatos {
namespace {

using internal::YamlNode;
using Kind = internal::YamlNode::Kind;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool IsLoopbackHost(std::string_view authority) {
  // authority is lowercase host[:port] or [v6][:port]
  std::string_view host = authority;
  if (host.starts_with("[")) {
    host = host.substr(0, host.find(']') + 1);
  } else if (size_t colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  return host == "localhost" || host == "[::1]" || host.starts_with("127.");
}

// Paths end up in a shell command (git's credential helper, GIT_SSH_COMMAND)
// inside single quotes, so a quote or a newline could change the command.
std::string PathProblem(std::string_view path) {
  if (path.empty() || path[0] != '/') return "must be an absolute path";
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f || c == '\'') {
      return "contains a control character or a single quote; rename the file";
    }
  }
  return "";
}

bool IsUsername(std::string_view s) {
  if (s.empty() || s.size() > 256) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-' || c == '@' || c == '+';
    if (!ok) return false;
  }
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source) {}

  void Add(const YamlNode& at, std::string_view field, std::string_view what) {
    errors_.push_back(source_ + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                      ": " + std::string(field) + ": " + std::string(what));
  }

  bool String(const YamlNode& n, const std::string& field, std::string* out) {
    if (n.kind != Kind::kScalar || (n.plain && (n.value.empty() || n.value == "~" ||
                                                n.value == "null" || n.value == "Null" ||
                                                n.value == "NULL"))) {
      Add(n, field, "expected a string");
      return false;
    }
    *out = n.value;
    return true;
  }

  void Entry(const YamlNode& item, size_t i, std::vector<InputCredential>* out,
             std::map<std::string, int>* seen) {
    const std::string field = "credentials[" + std::to_string(i) + "]";
    if (item.kind != Kind::kMap) {
      Add(item, field, "expected a mapping with prefix and token_file or ssh_key");
      return;
    }
    InputCredential c;
    c.line = item.line;
    std::map<std::string, const YamlNode*> at;
    std::string prefix;
    for (const auto& e : item.entries) {
      const std::string& k = e.key.value;
      const std::string sub = field + "." + k;
      std::string* dst = k == "prefix"        ? &prefix
                         : k == "token_file"  ? &c.token_file
                         : k == "username"    ? &c.username
                         : k == "ssh_key"     ? &c.ssh_key
                         : k == "known_hosts" ? &c.known_hosts
                                              : nullptr;
      if (!dst) {
        Add(e.key, sub,
            "unknown key; expected prefix, token_file, username, ssh_key, known_hosts");
        continue;
      }
      if (String(e.value, sub, dst)) at[k] = &e.value;
    }
    bool ok = true;
    if (!at.count("prefix")) {
      Add(item, field + ".prefix", "missing; expected the URL prefix these credentials are for");
      ok = false;
    } else {
      std::string problem;
      c.prefix = ReduceCredentialPrefix(prefix, &problem);
      if (c.prefix.empty()) {
        Add(*at["prefix"], field + ".prefix", problem);
        ok = false;
      } else if (auto [it, inserted] = seen->emplace(c.prefix, item.line); !inserted) {
        Add(*at["prefix"], field + ".prefix",
            "\"" + c.prefix + "\" is already configured on line " + std::to_string(it->second) +
                "; give each prefix once");
        ok = false;
      }
    }
    const bool token = at.count("token_file") > 0, ssh = at.count("ssh_key") > 0;
    if (token == ssh) {
      Add(item, field,
          token ? "has both token_file and ssh_key; give one (https: token_file, ssh: ssh_key)"
                : "has neither token_file nor ssh_key; give one (https: token_file, ssh: ssh_key)");
      ok = false;
    }
    if (token && at.count("known_hosts")) {
      Add(*at["known_hosts"], field + ".known_hosts", "applies to ssh_key entries only");
      ok = false;
    }
    if (ssh && at.count("username")) {
      Add(*at["username"], field + ".username",
          "applies to token_file entries only (an ssh URL names its user: ssh://git@host/...)");
      ok = false;
    }
    for (const char* k : {"token_file", "ssh_key", "known_hosts"}) {
      if (!at.count(k)) continue;
      const std::string& path = k == std::string("token_file") ? c.token_file
                                : k == std::string("ssh_key")  ? c.ssh_key
                                                               : c.known_hosts;
      if (std::string p = PathProblem(path); !p.empty()) {
        Add(*at[k], field + "." + k, p);
        ok = false;
      }
    }
    if (at.count("username") && !IsUsername(c.username)) {
      Add(*at["username"], field + ".username",
          "expected 1 to 256 characters of A-Z a-z 0-9 . _ - @ +");
      ok = false;
    }
    if (token && c.username.empty()) c.username = "git";
    if (ok && !c.prefix.empty()) {
      const std::string scheme = c.prefix.substr(0, c.prefix.find("://"));
      if (token && scheme != "https" && scheme != "http") {
        Add(*at["prefix"], field + ".prefix",
            "a token_file is for https URLs; " + scheme + " URLs use ssh_key or no credentials");
        ok = false;
      } else if (ssh && scheme != "ssh") {
        Add(*at["prefix"], field + ".prefix", "an ssh_key is for ssh URLs (ssh://host/...)");
        ok = false;
      } else if (token && scheme == "http" &&
                 !IsLoopbackHost(c.prefix.substr(7, c.prefix.find('/', 7) - 7))) {
        Add(*at["prefix"], field + ".prefix",
            "a token over plain http would travel unencrypted; use https (plain http is "
            "accepted only for loopback hosts)");
        ok = false;
      }
    }
    if (ok) out->push_back(std::move(c));
  }

  Result<std::vector<InputCredential>> Parse(std::string_view text) {
    if (text.size() > kMaxCredentialsFileBytes) {
      return InvalidArgumentError(source_ + ":1:1: file: larger than " +
                                  std::to_string(kMaxCredentialsFileBytes) + " bytes");
    }
    // A file of comments only configures nothing (yaml_tree refuses an
    // empty document).
    bool blank = true;
    for (size_t pos = 0; pos < text.size() && blank;) {
      size_t end = text.find('\n', pos);
      std::string_view line = text.substr(pos, end == std::string_view::npos ? end : end - pos);
      size_t first = line.find_first_not_of(" \t\r");
      blank = first == std::string_view::npos || line[first] == '#';
      pos = end == std::string_view::npos ? text.size() : end + 1;
    }
    if (blank) return std::vector<InputCredential>{};
    internal::YamlTreeLimits limits;
    limits.max_nodes = 20000;
    limits.max_depth = 8;
    limits.max_string_bytes = 4096;
    limits.max_total_bytes = kMaxCredentialsFileBytes;
    YamlNode root;
    internal::YamlTreeError err;
    if (!internal::ParseYamlTree(text, limits, &root, &err)) {
      return InvalidArgumentError(source_ + ":" + std::to_string(err.line) + ":" +
                                  std::to_string(err.column) + ": " +
                                  (err.path.empty() ? "file" : err.path) + ": " + err.message);
    }
    std::vector<InputCredential> entries;
    if (root.kind == Kind::kNull) {
      // An empty file: no credentials (public and local repositories only).
    } else if (root.kind != Kind::kMap) {
      Add(root, "file", "expected a mapping with `credentials:`");
    } else {
      for (const auto& e : root.entries) {
        if (e.key.value != "credentials") {
          Add(e.key, e.key.value, "unknown key; expected credentials");
          continue;
        }
        if (e.value.kind == Kind::kNull) continue;
        if (e.value.kind != Kind::kSequence) {
          Add(e.value, "credentials", "expected a list of entries");
          continue;
        }
        if (e.value.items.size() > kMaxCredentialEntries) {
          Add(e.value, "credentials",
              "more than " + std::to_string(kMaxCredentialEntries) + " entries");
          continue;
        }
        std::map<std::string, int> seen;
        for (size_t i = 0; i < e.value.items.size(); ++i) {
          Entry(e.value.items[i], i, &entries, &seen);
        }
      }
    }
    if (!errors_.empty()) {
      std::string joined;
      for (const auto& line : errors_) joined += (joined.empty() ? "" : "\n") + line;
      return InvalidArgumentError(joined);
    }
    return entries;
  }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

// Checks one named file without reading more than a token's worth of it.
Status CheckFile(const InputCredential& c, const std::string& path, const char* what,
                 bool token, std::string* warning) {
  const std::string where = "line " + std::to_string(c.line) + ": " + what + " " + path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    return InvalidArgumentError(where + ": cannot open (" + std::strerror(errno) + ")");
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return InvalidArgumentError(where + ": not a regular file");
  }
  if ((st.st_mode & 077) != 0 && std::string(what) != "known_hosts") {
    *warning = where + " can be read by other users (mode " +
               std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
               std::to_string(st.st_mode & 7) + "); chmod 600 it";
  }
  if (!token) return OkStatus();
  // A read that fails is an error, never a shorter token.
  Result<std::string> read = ReadFileToString(path, kMaxTokenBytes + 1, {.secret = true});
  if (!read.ok()) {
    return InvalidArgumentError(where + ": cannot be read (" +
                                (read.status().code() == StatusCode::kInvalidArgument
                                     ? std::string("over ") + std::to_string(kMaxTokenBytes + 1) + " bytes"
                                     : std::string(StatusCodeName(read.status().code()))) +
                                ")");
  }
  std::string data = std::move(*read);
  if (!data.empty() && data.back() == '\n') data.pop_back();
  bool printable = !data.empty() && data.size() <= kMaxTokenBytes;
  for (char ch : data) printable &= ch > 0x20 && ch < 0x7f;
  // Overwrite our copy before it is freed; the message never holds it.
  std::fill(data.begin(), data.end(), '\0');
  if (!printable) {
    return InvalidArgumentError(where +
                                ": expected exactly one line of 1 to 4096 printable ASCII "
                                "characters without spaces (the token)");
  }
  return OkStatus();
}

}  // namespace

std::string ReduceCredentialPrefix(std::string_view prefix, std::string* problem) {
  const size_t scheme_end = prefix.find("://");
  if (scheme_end == std::string_view::npos || scheme_end == 0) {
    *problem = "expected a URL prefix such as https://git.example.com/team or ssh://host "
               "(scp-like inputs match ssh:// prefixes)";
    return "";
  }
  const std::string scheme = Lower(prefix.substr(0, scheme_end));
  if (scheme != "https" && scheme != "http" && scheme != "ssh" && scheme != "git") {
    *problem = "scheme \"" + TruncateUtf8(scheme, 20) +
               "\" takes no credentials; use https, http or ssh";
    return "";
  }
  std::string_view rest = prefix.substr(scheme_end + 3);
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  std::string path = slash == std::string_view::npos ? "" : std::string(rest.substr(slash));
  if (authority.find('@') != std::string_view::npos) {
    *problem = "must not name a user or password (the input's URL names the ssh user; a token's "
               "username is `username:`)";
    return "";
  }
  if (authority.empty() || authority[0] == '-' || authority[0] == ':') {
    *problem = "has no host";
    return "";
  }
  if (prefix.find_first_of("?# \t\r\n") != std::string_view::npos) {
    *problem = "must not contain a query, fragment or whitespace";
    return "";
  }
  // As GitUrlKey's path: trailing '/' and a ".git" suffix go, then any '/'
  // the suffix left ("/.git" is the host's root), so reducing is idempotent.
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.size() > 4 && path.ends_with(".git")) path.resize(path.size() - 4);
  while (!path.empty() && path.back() == '/') path.pop_back();
  // A second ".git" left at the end (".../x.git/.git", "x.git.git"):
  // refused, not reduced again, so that a URL's key (one suffix off)
  // and the prefix agree and the stored prefix reduces to itself.
  if (path.size() > 4 && path.ends_with(".git")) {
    *problem = "ends in \".git\" twice; give the repository's URL or a directory above it";
    return "";
  }
  return scheme + "://" + Lower(authority) + path;
}

const InputCredential* InputCredentials::Match(std::string_view url) const {
  if (!GitUrlProblem(url).empty() || IsLocalGitUrl(url)) return nullptr;
  const std::string key = GitUrlKey(url);
  const InputCredential* best = nullptr;
  for (const InputCredential& c : entries_) {
    const bool hit = key == c.prefix ||
                     (key.size() > c.prefix.size() && key.starts_with(c.prefix) &&
                      key[c.prefix.size()] == '/');
    if (hit && (!best || c.prefix.size() > best->prefix.size())) best = &c;
  }
  return best;
}

Result<InputCredentials> ParseInputCredentials(std::string_view text, std::string_view source) {
  GATOS_ASSIGN_OR_RETURN(std::vector<InputCredential> entries, Parser(source).Parse(text));
  InputCredentials creds;
  creds.entries_ = std::move(entries);
  return creds;
}

Result<InputCredentials> LoadInputCredentialsFile(const std::string& path) {
  Result<std::string> read = ReadFileToString(path, kMaxCredentialsFileBytes);
  if (!read.ok()) return Status(read.status().code(), "--credentials " + read.status().message());
  const std::string& text = *read;
  GATOS_ASSIGN_OR_RETURN(InputCredentials creds, ParseInputCredentials(text, path));
  std::string problems;
  for (const InputCredential& c : creds.entries_) {
    std::string warning;
    Status s = c.is_token() ? CheckFile(c, c.token_file, "token_file", true, &warning)
                            : CheckFile(c, c.ssh_key, "ssh_key", false, &warning);
    if (s.ok() && !c.known_hosts.empty()) {
      std::string ignored;
      s = CheckFile(c, c.known_hosts, "known_hosts", false, &ignored);
    }
    if (!s.ok()) problems += (problems.empty() ? "" : "\n") + path + ": " + s.message();
    if (!warning.empty()) creds.warnings_.push_back(path + ": " + warning);
  }
  if (!problems.empty()) return InvalidArgumentError(problems);
  return creds;
}

}  // namespace gatos
